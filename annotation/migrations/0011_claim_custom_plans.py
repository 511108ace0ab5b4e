"""The claim's PL/pgSQL functions back on PostgreSQL's default plan mode (undoing 0010).

Generic plans halved the claim's planning cost on a 100,000-pair study, but a generic plan is
made without the call's values, and on a study of 1,000,000 pairs it walked the window more
dearly than the plans PostgreSQL makes for each call's own values: 8 annotators over HTTP, 30 s
each on a fresh study, 94.5 and 96.4 cycles/s (PostgreSQL 8.3 and 7.9 ms of CPU per cycle) with
generic plans against 107.9 and 105.6 without, runs alternated on a quiet machine; in one whole
`make bench`, 98.5 cycles/s at 1M pairs against 127.7 at 100k. The claim must not slow down
with the study's size, so the default mode stays.
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
        ("annotation", "0010_claim_generic_plans"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER FUNCTION {function} RESET plan_cache_mode",
            f"ALTER FUNCTION {function} SET plan_cache_mode = force_generic_plan",
        )
        for function in (PASS, RESERVE)
    ]
