-- Give a pair call inserted without its turn the turn of its pair, so that every call says which
-- turn it judged (judges.models.JudgeCall.turn, NOT NULL). The imports, the reward model's and
-- the panels' derived calls and SQL that predates multi-turn judging name no turn; a call that
-- names its turn (a grade call, a judge of every turn, judges.services.turns) keeps it. Runs
-- before the NOT NULL check, from the trigger judges_judgecall_turn_from_pair.
--
-- Locks: none; it reads the pair's row.

CREATE OR REPLACE FUNCTION judges_call_turn_from_pair()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.turn IS NULL AND NEW.pair_id IS NOT NULL THEN
        SELECT p.turn INTO NEW.turn FROM annotation_pair p WHERE p.id = NEW.pair_id;
    END IF;
    RETURN NEW;
END;
$function$
