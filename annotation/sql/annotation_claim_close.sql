-- After a claim of an active study: a pair whose slots are all taken now gets the lowest key
-- (annotation.models.PRIORITY_KEY_NONE, -1e15), so the priority walk of annotation_claim_pass
-- does not step over full pairs; the next recompute gives it a key again if it reopened.
--
-- Locks: runs under the pair's row lock, which annotation_claim_pass holds, as a statement of
-- its own after the reservation's INSERT, so its count sees that reservation. Does nothing for
-- a uniform study.

CREATE OR REPLACE FUNCTION annotation_claim_close(
    p_pair bigint,
    p_selection text,
    p_now timestamp with time zone,
    p_overlap integer
)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF p_selection <> 'active' THEN
        RETURN;
    END IF;
    UPDATE annotation_pair SET priority_key = -1e15
    WHERE id = p_pair AND priority_key > -1e15
      AND (SELECT count(*) FROM annotation_assignment a
           WHERE a.pair_id = p_pair
             AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > p_now)))
          >= p_overlap;
END
$function$
