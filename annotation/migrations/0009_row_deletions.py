"""Deletion counters for the report's data fingerprint.

The fingerprint (leaderboard/selectors/snapshots.py) must change when a row a report read is
deleted. Counting the study's rows says so, but a count is linear in the rows even through an
index (1.4 s at 1M judgments + 2M calls), and the page reads the fingerprint on every request.
Instead, a statement-level trigger counts the DELETE statements that removed rows of each table
the report reads: the fingerprint reads one small row per table. The counters are global, not per
study, so a deletion anywhere marks every study's report as changed (deletions are rare: an
admin's or a cascade's), and the reports are recomputed when next viewed.
"""

from django.db import migrations

CREATE = """
CREATE TABLE annotation_rowdeletions (
    table_name text PRIMARY KEY,
    deletions bigint NOT NULL DEFAULT 0 CHECK (deletions >= 0)
);
CREATE FUNCTION annotation_count_deletions() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    -- A statement that deleted no row leaves the counter alone.
    IF EXISTS (SELECT 1 FROM old_rows) THEN
        INSERT INTO annotation_rowdeletions AS d (table_name, deletions) VALUES (TG_TABLE_NAME, 1)
        ON CONFLICT (table_name) DO UPDATE SET deletions = d.deletions + 1;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER annotation_pair_deletions AFTER DELETE ON annotation_pair
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION annotation_count_deletions();
CREATE TRIGGER annotation_answer_deletions AFTER DELETE ON annotation_answer
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION annotation_count_deletions();
CREATE TRIGGER annotation_humanjudgment_deletions AFTER DELETE ON annotation_humanjudgment
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION annotation_count_deletions();
"""

DROP = """DROP TRIGGER IF EXISTS annotation_pair_deletions ON annotation_pair;
DROP TRIGGER IF EXISTS annotation_answer_deletions ON annotation_answer;
DROP TRIGGER IF EXISTS annotation_humanjudgment_deletions ON annotation_humanjudgment;
DROP FUNCTION IF EXISTS annotation_count_deletions();
DROP TABLE IF EXISTS annotation_rowdeletions;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0008_claim_function"),
    ]

    operations = [
        migrations.RunSQL(CREATE, DROP),
    ]
