"""Copy what changed in judges/sql/ (functions and triggers).

judges/sql/: judges_call_turn_from_pair, judges_judgecall_turn_from_pair.

Why: every call says which turn it judged (judges/0015 made JudgeCall.turn NOT NULL); a pair
call inserted without its turn (the imports, the reward model's and panels' derived calls, SQL
that predates multi-turn judging) gets its pair's turn, before the NOT NULL check.

Written by `manage.py sqlmigration`: each RunSQL's last statement is the object's
definition as its file held it (see docs/database-objects.md).
"""

from django.db import migrations

SQL_0_0 = """CREATE OR REPLACE FUNCTION judges_call_turn_from_pair()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF NEW.turn IS NULL AND NEW.pair_id IS NOT NULL THEN
        SELECT p.turn INTO NEW.turn FROM annotation_pair p WHERE p.id = NEW.pair_id;
    END IF;
    RETURN NEW;
END;
$function$"""

REVERSE_0_0 = "DROP FUNCTION IF EXISTS judges_call_turn_from_pair()"

SQL_1_0 = "DROP TRIGGER IF EXISTS judges_judgecall_turn_from_pair ON judges_judgecall"

SQL_1_1 = """CREATE TRIGGER judges_judgecall_turn_from_pair BEFORE INSERT ON judges_judgecall
    FOR EACH ROW EXECUTE FUNCTION judges_call_turn_from_pair()"""

REVERSE_1_0 = "DROP TRIGGER IF EXISTS judges_judgecall_turn_from_pair ON judges_judgecall"


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0015_call_turn_everywhere_multi_turn"),
    ]

    operations = [
        migrations.RunSQL(
            [SQL_0_0],
            [REVERSE_0_0],
            hints={"database_object": "judges_call_turn_from_pair"},
        ),
        migrations.RunSQL(
            [SQL_1_0, SQL_1_1],
            [REVERSE_1_0],
            hints={"database_object": "judges_judgecall_turn_from_pair"},
        ),
    ]
