"""The judges app's functions and triggers from now on copied from judges/sql/ (issue 24).

They were made by hand-written migrations, judges/0007 (deletion
counters). Their files hold each one's
current text as the migrated database gave it back (pg_get_functiondef, pg_get_triggerdef), so
this re-creates the same definitions (functions by CREATE OR REPLACE, triggers dropped and created
in one transaction) and changes no behaviour. It is the first copy `manage.py sqlmigration` reads
(written by it with --adopt: undoing it leaves the objects as they are).
"""

from django.db import migrations

SQL_0_0 = """CREATE OR REPLACE FUNCTION judges_count_deletions()
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
$function$"""

SQL_1_0 = "DROP TRIGGER IF EXISTS judges_answerscore_deletions ON judges_answerscore"

SQL_1_1 = """CREATE TRIGGER judges_answerscore_deletions AFTER DELETE ON judges_answerscore
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION judges_count_deletions()"""

SQL_2_0 = "DROP TRIGGER IF EXISTS judges_judgecall_deletions ON judges_judgecall"

SQL_2_1 = """CREATE TRIGGER judges_judgecall_deletions AFTER DELETE ON judges_judgecall
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION judges_count_deletions()"""


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0012_panels"),
    ]

    operations = [
        migrations.RunSQL(
            [SQL_0_0],
            migrations.RunSQL.noop,
            hints={"database_object": "judges_count_deletions"},
        ),
        migrations.RunSQL(
            [SQL_1_0, SQL_1_1],
            migrations.RunSQL.noop,
            hints={"database_object": "judges_answerscore_deletions"},
        ),
        migrations.RunSQL(
            [SQL_2_0, SQL_2_1],
            migrations.RunSQL.noop,
            hints={"database_object": "judges_judgecall_deletions"},
        ),
    ]
