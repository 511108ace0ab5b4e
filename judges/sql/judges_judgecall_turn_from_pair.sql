-- Before each row inserted into judges_judgecall, fill in a pair call's missing turn from its
-- pair (see judges_call_turn_from_pair).
--
-- Locks: none of its own.

CREATE TRIGGER judges_judgecall_turn_from_pair BEFORE INSERT ON judges_judgecall
    FOR EACH ROW EXECUTE FUNCTION judges_call_turn_from_pair()
