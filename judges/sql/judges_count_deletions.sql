-- Count the DELETE statements that removed rows of a judges table the report's data fingerprint
-- reads (leaderboard/selectors/snapshots.py), as annotation/sql/annotation_count_deletions.sql
-- does for the annotation tables; one counter row per table in judges_rowdeletions
-- (judges.models.RowDeletions). The triggers judges_*_deletions call it.
--
-- Locks: the upsert takes the row lock of the table's counter row until the deleting
-- transaction ends, so two transactions that delete rows of the same table wait for each other
-- there. A statement that deleted no row takes no lock and leaves the counter alone.

CREATE OR REPLACE FUNCTION judges_count_deletions()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- A statement that deleted no row leaves the counter alone.
    IF EXISTS (SELECT 1 FROM old_rows) THEN
        INSERT INTO judges_rowdeletions AS d (table_name, deletions) VALUES (TG_TABLE_NAME, 1)
        ON CONFLICT (table_name) DO UPDATE SET deletions = d.deletions + 1;
    END IF;
    RETURN NULL;
END;
$function$
