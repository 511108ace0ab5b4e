-- After each DELETE statement on annotation_humanjudgment that removed rows, count it through
-- annotation_count_deletions, for the report's data fingerprint (see annotation_count_deletions).
--
-- Locks: none of its own; annotation_count_deletions's (the table's counter row, until the
-- deleting transaction ends).

CREATE TRIGGER annotation_humanjudgment_deletions AFTER DELETE ON annotation_humanjudgment
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION annotation_count_deletions()
