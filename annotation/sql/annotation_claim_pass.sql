-- One pass of the claim (annotation/services/assignments.py calls it once per pass and keeps the
-- retry loop). o_outcome says what happened:
--   missing   no such worker
--   not_live  the study takes no judgments now            blocked  the worker is blocked
--   none      no work for this worker (finished, at the target, or nothing open is left)
--   held      the worker's open reservation, handed back  reserved a new reservation
--   busy      every open pair the worker could take is being claimed: wait for o_wait_for
--   retry     a concurrent claim filled the chosen pair in between: try again
-- o_done and o_target are the worker's submitted judgments and the study's target per worker,
-- counted under the worker's lock, so the caller needs no count of its own for progress.
--
-- Locks, taken in this order and held until the caller's transaction commits (each statement
-- reads a fresh snapshot: READ COMMITTED, VOLATILE):
--   1. FOR UPDATE on the worker's row (annotation_worker): one worker's claims run one at a time.
--      The worker's own assignments are counted by the next statement, after the lock, so a
--      second request of the same worker (double click) sees the first one's reservation and
--      gets it back.
--   2. FOR UPDATE SKIP LOCKED on at most one open pair row (annotation_pair) of a window of
--      p_window open pairs the worker never had: two claimers never count the same pair's slots
--      at once, and never wait on each other. Only when every pair in the window is locked does
--      the pass answer busy, and the next pass (p_wait_for) waits with a plain FOR UPDATE for the
--      first of them.
-- Gold pairs have no overlap cap and are not locked. The slots of the locked pair are counted
-- again by annotation_claim_reserve's INSERT, a later statement (see there). Stale reservations
-- of the worker (past expires_at, still marked reserved) get their stored status set to expired
-- on the way; they stopped counting at expires_at already.
--
-- Planned for each call's own values (PostgreSQL's default plan_cache_mode): generic plans, tried
-- in migration annotation/0010, made the claim slower on a study of a million pairs and were
-- undone by 0011.
--
-- Active selection (Study.selection, issue 29, docs/active.md): for an active study with stored
-- priorities (Study.priority_total > 0), a roll p_select_roll at or above the study's uniform
-- share makes the window the first p_window open pairs the worker never had in
-- Pair.priority_key order, highest first (a walk of pair_study_gold_priority, no sort of the
-- pool), taken in that order: with Efraimidis-Spirakis keys the pair at the top is a draw in
-- proportion to priority. Below the share the shuffle-key walk runs as for a uniform study. The
-- reservation records its propensity (annotation_claim_propensity) and the recompute it came
-- from (Study.priorities_at, read with k and W under lock 1), and a claim that fills a
-- pair moves its key to the bottom (annotation_claim_close). Same locks, in the same order.

CREATE OR REPLACE FUNCTION annotation_claim_pass(
    p_worker bigint,
    p_now timestamp with time zone,
    p_public_id uuid,
    p_wait_for bigint,
    p_gold_roll double precision,
    p_side_roll double precision,
    p_gold_start double precision,
    p_open_start double precision,
    p_window integer,
    p_select_roll double precision,
    OUT o_outcome text,
    OUT o_id bigint,
    OUT o_public_id uuid,
    OUT o_pair bigint,
    OUT o_a_left boolean,
    OUT o_reserved_at timestamp with time zone,
    OUT o_expires_at timestamp with time zone,
    OUT o_wait_for bigint,
    OUT o_done integer,
    OUT o_target integer,
    OUT o_study bigint
)
 RETURNS record
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_state text;
    v_status text;
    v_qualification integer;
    v_gold_share numeric;
    v_overlap integer;
    v_time_limit integer;
    v_shown integer;
    v_left integer;
    v_held integer;
    v_stale integer;
    v_a_left boolean;
    v_pair bigint;
    v_candidates bigint[];
    v_try bigint;
    v_expires timestamptz;
    v_selection text;
    v_uniform_share numeric;
    v_pool integer;
    v_total double precision;
    v_priorities_at timestamptz;
    v_priority double precision;
    v_by_priority boolean;
    v_propensity double precision;
BEGIN
    -- Lock 1: the worker's row, so that one worker's claims run one at a time.
    SELECT w.state, w.study_id, s.status, s.target_per_worker, s.qualification_items,
           s.gold_share, s.overlap, s.time_limit_seconds, s.selection, s.uniform_share,
           s.priority_pool, s.priority_total, s.priorities_at
    INTO v_state, o_study, v_status, o_target, v_qualification, v_gold_share, v_overlap,
         v_time_limit, v_selection, v_uniform_share, v_pool, v_total, v_priorities_at
    FROM annotation_worker w JOIN annotation_study s ON s.id = w.study_id
    WHERE w.id = p_worker
    FOR UPDATE OF w;
    IF NOT FOUND THEN
        o_outcome := 'missing';
        RETURN;
    END IF;
    -- Counted in a statement after the lock: it sees every claim of this worker that committed
    -- before the lock was ours.
    SELECT count(*) FILTER (WHERE a.status = 'submitted'), count(*),
           count(*) FILTER (WHERE a.a_left),
           count(*) FILTER (WHERE a.status = 'reserved' AND a.expires_at > p_now),
           count(*) FILTER (WHERE a.status = 'reserved' AND a.expires_at <= p_now)
    INTO o_done, v_shown, v_left, v_held, v_stale
    FROM annotation_assignment a WHERE a.worker_id = p_worker;

    IF v_status <> 'live' THEN
        o_outcome := 'not_live';
        RETURN;
    END IF;
    IF v_state = 'blocked' THEN
        o_outcome := 'blocked';
        RETURN;
    END IF;
    IF v_state IN ('done', 'returned') THEN
        o_outcome := 'none';
        RETURN;
    END IF;
    IF v_stale > 0 THEN
        UPDATE annotation_assignment SET status = 'expired'
        WHERE worker_id = p_worker AND status = 'reserved' AND expires_at <= p_now;
    END IF;
    IF v_held > 0 THEN
        SELECT a.id, a.public_id, a.pair_id, a.a_left, a.reserved_at, a.expires_at
        INTO o_id, o_public_id, o_pair, o_a_left, o_reserved_at, o_expires_at
        FROM annotation_assignment a
        WHERE a.worker_id = p_worker AND a.status = 'reserved' AND a.expires_at > p_now
        ORDER BY a.id LIMIT 1;
        IF FOUND THEN
            o_outcome := 'held';
            RETURN;
        END IF;
    END IF;
    IF o_done >= o_target THEN
        o_outcome := 'none';
        RETURN;
    END IF;

    -- Counterbalance the shown order per worker: whichever side is behind, random when even.
    IF v_left <> v_shown - v_left THEN
        v_a_left := v_left < v_shown - v_left;
    ELSE
        v_a_left := p_side_roll < 0.5;
    END IF;
    v_expires := p_now + make_interval(secs => v_time_limit);

    -- A gold pair at the study's gold share (always during the qualification block): the first
    -- one the worker never had from a random key on, wrapping around. Gold has no overlap cap
    -- and is not locked.
    IF o_done < v_qualification OR p_gold_roll < v_gold_share THEN
        SELECT walked.id INTO v_pair FROM (
            (SELECT p.id FROM annotation_pair p
             WHERE p.study_id = o_study AND p.is_gold AND p.shuffle_key >= p_gold_start
               AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                               WHERE m.pair_id = p.id AND m.worker_id = p_worker)
             ORDER BY p.shuffle_key LIMIT 1)
            UNION ALL
            (SELECT p.id FROM annotation_pair p
             WHERE p.study_id = o_study AND p.is_gold AND p.shuffle_key < p_gold_start
               AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                               WHERE m.pair_id = p.id AND m.worker_id = p_worker)
             ORDER BY p.shuffle_key LIMIT 1)
        ) walked
        LIMIT 1;
        IF v_pair IS NOT NULL THEN
            o_id := annotation_claim_reserve(v_pair, false, p_worker, o_study, p_public_id,
                                             v_a_left, p_now, v_expires, v_overlap, NULL,
                                             NULL);
            o_outcome := CASE WHEN o_id IS NULL THEN 'retry' ELSE 'reserved' END;
            IF o_id IS NOT NULL THEN
                o_public_id := p_public_id; o_pair := v_pair; o_a_left := v_a_left;
                o_reserved_at := p_now; o_expires_at := v_expires;
            END IF;
            RETURN;
        END IF;
    END IF;

    -- The previous pass found every open pair busy: wait for the first of them (claims are
    -- short), then take it if it still has a free slot.
    IF p_wait_for IS NOT NULL THEN
        SELECT priority INTO v_priority FROM annotation_pair WHERE id = p_wait_for FOR UPDATE;
        IF FOUND THEN
            o_id := annotation_claim_reserve(p_wait_for, true, p_worker, o_study, p_public_id,
                                             v_a_left, p_now, v_expires, v_overlap,
                                             annotation_claim_propensity(v_selection,
                                                 v_uniform_share, v_pool, v_total, v_priority),
                                             v_priorities_at);
            IF o_id IS NOT NULL THEN
                PERFORM annotation_claim_close(p_wait_for, v_selection, p_now, v_overlap);
                o_outcome := 'reserved';
                o_public_id := p_public_id; o_pair := p_wait_for; o_a_left := v_a_left;
                o_reserved_at := p_now; o_expires_at := v_expires;
                RETURN;
            END IF;
        END IF;
    END IF;

    -- Lock 2: the window. Up to p_window open pairs the worker never had, walked in shuffle-key
    -- order from a random key and wrapping around (the second half runs only when the first
    -- comes up short), fewest-taken first; then lock the first of them nobody else holds, by
    -- primary key (SKIP LOCKED: two claimers never count the same pair's slots at once, and
    -- never wait on each other). When all are held, say which one was first, so that the next
    -- pass can wait for it.
    -- An active study with priorities draws by them unless the roll falls in its uniform share:
    -- the window is then the first p_window open pairs the worker never had by priority key,
    -- highest first (one walk of pair_study_gold_priority), taken in key order.
    v_by_priority := v_selection = 'active' AND v_total > 0 AND p_select_roll >= v_uniform_share;
    IF v_by_priority THEN
        SELECT array_agg(walked.id ORDER BY walked.priority_key DESC)
        INTO v_candidates
        FROM (
SELECT p.id, p.priority_key
FROM annotation_pair p
WHERE p.study_id = o_study AND NOT p.is_gold
  AND (SELECT count(*) FROM annotation_assignment a
       WHERE a.pair_id = p.id
         AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > p_now)))
      < v_overlap
  AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                  WHERE m.pair_id = p.id AND m.worker_id = p_worker)
ORDER BY p.priority_key DESC
LIMIT p_window
) walked;
    ELSE
        SELECT array_agg(walked.id ORDER BY walked.taken, walked.part, walked.shuffle_key)
        INTO v_candidates
        FROM (
            SELECT id, shuffle_key, part, taken FROM (
                (
SELECT p.id, p.shuffle_key, 0 AS part, t.taken
FROM annotation_pair p
CROSS JOIN LATERAL (
    SELECT count(*) AS taken FROM annotation_assignment a
    WHERE a.pair_id = p.id
      AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > p_now))
) t
WHERE p.study_id = o_study AND NOT p.is_gold AND p.shuffle_key >= p_open_start
  AND t.taken < v_overlap
  AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                  WHERE m.pair_id = p.id AND m.worker_id = p_worker)
ORDER BY p.shuffle_key
LIMIT p_window
)
                UNION ALL
                (
SELECT p.id, p.shuffle_key, 1 AS part, t.taken
FROM annotation_pair p
CROSS JOIN LATERAL (
    SELECT count(*) AS taken FROM annotation_assignment a
    WHERE a.pair_id = p.id
      AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > p_now))
) t
WHERE p.study_id = o_study AND NOT p.is_gold AND p.shuffle_key < p_open_start
  AND t.taken < v_overlap
  AND NOT EXISTS (SELECT 1 FROM annotation_assignment m
                  WHERE m.pair_id = p.id AND m.worker_id = p_worker)
ORDER BY p.shuffle_key
LIMIT p_window
)
            ) halves
            LIMIT p_window
        ) walked;
    END IF;
    IF v_candidates IS NULL THEN
        -- Nothing open: the worker is done.
        o_outcome := 'none';
        RETURN;
    END IF;
    FOREACH v_try IN ARRAY v_candidates LOOP
        SELECT id, priority INTO v_pair, v_priority
        FROM annotation_pair WHERE id = v_try FOR UPDATE SKIP LOCKED;
        EXIT WHEN v_pair IS NOT NULL;
    END LOOP;
    IF v_pair IS NULL THEN
        -- Every open pair in the window is being claimed.
        o_outcome := 'busy';
        o_wait_for := v_candidates[1];
        RETURN;
    END IF;
    o_id := annotation_claim_reserve(v_pair, true, p_worker, o_study, p_public_id, v_a_left,
                                     p_now, v_expires, v_overlap,
                                     annotation_claim_propensity(v_selection, v_uniform_share,
                                                                 v_pool, v_total, v_priority),
                                     v_priorities_at);
    IF o_id IS NULL THEN
        o_outcome := 'retry';
        RETURN;
    END IF;
    PERFORM annotation_claim_close(v_pair, v_selection, p_now, v_overlap);
    o_outcome := 'reserved';
    o_public_id := p_public_id; o_pair := v_pair; o_a_left := v_a_left;
    o_reserved_at := p_now; o_expires_at := v_expires;
END
$function$
