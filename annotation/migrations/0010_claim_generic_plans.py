"""The claim's PL/pgSQL functions plan their statements once per connection (generic plans).

PL/pgSQL prepares each statement of a function; under PostgreSQL's default plan_cache_mode it
keeps planning them again for every call while a plan for the call's own values looks cheaper
than the generic one, and for the claim's window (two halves of the pair index, each with a
per-pair count) that planning cost more than running the statements: a claim pass took about
1.6 ms of backend CPU, 0.8 ms with generic plans. Every statement of the claim looks rows up by
key or walks an index from a key (the pair index by study and shuffle key, the assignment
indexes by worker and by pair), so the generic plan is the same walk whatever the values.
"""

from django.db import migrations

PASS = (
    "annotation_claim_pass(bigint, timestamptz, uuid, bigint, double precision, "
    "double precision, double precision, double precision, integer)"
)
RESERVE = (
    "annotation_claim_reserve(bigint, boolean, bigint, bigint, uuid, boolean, timestamptz, "
    "timestamptz, integer)"
)


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0009_row_deletions"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER FUNCTION {function} SET plan_cache_mode = force_generic_plan",
            f"ALTER FUNCTION {function} RESET plan_cache_mode",
        )
        for function in (PASS, RESERVE)
    ]
