-- The propensity of an active study's draw (Assignment.propensity): NULL when the study is
-- uniform or has no stored priorities yet (a uniform draw), else e / k + (1 - e) p / W with the
-- uniform share e, the pair's priority p and the open pool k and priority total W of the last
-- recompute (annotation.services.priority), at most 1 and above 0. Reads nothing; no locks.

CREATE OR REPLACE FUNCTION annotation_claim_propensity(
    p_selection text,
    p_uniform_share numeric,
    p_pool integer,
    p_total double precision,
    p_priority double precision
)
 RETURNS double precision
 LANGUAGE sql
 IMMUTABLE
AS $function$
    SELECT CASE
        WHEN p_selection <> 'active' OR p_pool < 1 THEN NULL
        WHEN p_total <= 0 THEN LEAST(1.0, 1.0 / p_pool)
        ELSE LEAST(1.0, GREATEST(
            p_uniform_share::double precision / p_pool
            + (1 - p_uniform_share::double precision) * GREATEST(p_priority, 0) / p_total,
            1e-12))
    END
$function$
