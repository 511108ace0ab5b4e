"""Indexes for the report's data fingerprint (each run's latest and latest finished call) and
deletion counters on the judges' tables it reads; see annotation/migrations/0009_row_deletions.py
for why the fingerprint counts deletions instead of rows."""

from django.db import migrations, models

CREATE = """
CREATE TABLE judges_rowdeletions (
    table_name text PRIMARY KEY,
    deletions bigint NOT NULL DEFAULT 0 CHECK (deletions >= 0)
);
CREATE FUNCTION judges_count_deletions() RETURNS trigger
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    -- A statement that deleted no row leaves the counter alone.
    IF EXISTS (SELECT 1 FROM old_rows) THEN
        INSERT INTO judges_rowdeletions AS d (table_name, deletions) VALUES (TG_TABLE_NAME, 1)
        ON CONFLICT (table_name) DO UPDATE SET deletions = d.deletions + 1;
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER judges_judgecall_deletions AFTER DELETE ON judges_judgecall
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION judges_count_deletions();
CREATE TRIGGER judges_answerscore_deletions AFTER DELETE ON judges_answerscore
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION judges_count_deletions();
"""

DROP = """DROP TRIGGER IF EXISTS judges_judgecall_deletions ON judges_judgecall;
DROP TRIGGER IF EXISTS judges_answerscore_deletions ON judges_answerscore;
DROP FUNCTION IF EXISTS judges_count_deletions();
DROP TABLE IF EXISTS judges_rowdeletions;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0009_row_deletions"),
        ("judges", "0006_pltraining_held_out_prompts"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="judgecall",
            index=models.Index(fields=["run", "finished_at"], name="call_run_finished"),
        ),
        migrations.AddIndex(
            model_name="judgecall",
            index=models.Index(fields=["run", "id"], name="call_run_id"),
        ),
        migrations.RunSQL(CREATE, DROP),
    ]
