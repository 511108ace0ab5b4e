-- After each DELETE statement on judges_answerscore that removed rows, count it through
-- judges_count_deletions, for the report's data fingerprint (see judges_count_deletions).
--
-- Locks: none of its own; judges_count_deletions's (the table's counter row, until the deleting
-- transaction ends).

CREATE TRIGGER judges_answerscore_deletions AFTER DELETE ON judges_answerscore
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION judges_count_deletions()
