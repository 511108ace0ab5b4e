-- Insert the reservation when the pair may still be taken (p_capped false, gold pairs: always),
-- the worker never had it and holds no other open reservation; return its id, or NULL when it
-- may not be taken.
--
-- Locks: none of its own; a capped pair must be locked (FOR UPDATE) by the caller,
-- annotation_claim_pass, before this is called. It runs as a statement of its own under that
-- lock, so its snapshot sees every claim on the pair committed before the lock was ours (the
-- statement that locked the pair may have started reading before such a claim committed): the
-- slots counted here are the ones that decide. The INSERT takes the assignment table's row locks
-- on what it writes only.
-- p_propensity is written into the reservation's row as it is (NULL: a uniform draw), and with
-- it p_priorities_at, the recompute the propensity came from (NULL with a NULL propensity).

CREATE OR REPLACE FUNCTION annotation_claim_reserve(
    p_pair bigint,
    p_capped boolean,
    p_worker bigint,
    p_study bigint,
    p_public_id uuid,
    p_a_left boolean,
    p_now timestamp with time zone,
    p_expires timestamp with time zone,
    p_overlap integer,
    p_propensity double precision,
    p_priorities_at timestamp with time zone
)
 RETURNS bigint
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_id bigint;
BEGIN
    IF p_capped THEN
        -- Stale reservations of the pair get their stored status brought in line.
        UPDATE annotation_assignment SET status = 'expired'
        WHERE pair_id = p_pair AND status = 'reserved' AND expires_at <= p_now;
    END IF;
    INSERT INTO annotation_assignment
        (public_id, study_id, pair_id, worker_id, a_left, status, reserved_at, expires_at,
         propensity, priorities_at)
    SELECT p_public_id, p_study, p_pair, p_worker, p_a_left, 'reserved', p_now, p_expires,
           p_propensity, CASE WHEN p_propensity IS NULL THEN NULL ELSE p_priorities_at END
    WHERE (NOT p_capped
           OR (SELECT count(*) FROM annotation_assignment a
               WHERE a.pair_id = p_pair
                 AND (a.status = 'submitted'
                      OR (a.status = 'reserved' AND a.expires_at > p_now))) < p_overlap)
      AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                      WHERE m.pair_id = p_pair AND m.worker_id = p_worker)
      AND NOT EXISTS (SELECT 1 FROM annotation_assignment r
                      WHERE r.worker_id = p_worker AND r.status = 'reserved'
                        AND r.expires_at > p_now)
    RETURNING id INTO v_id;
    RETURN v_id;
END
$function$
