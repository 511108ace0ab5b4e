"""Fewer, better-led indexes on the claim's and submit's tables.

- annotation_assignment loses three indexes that others already lead with or that nothing
  reads: pair_id alone (assignment_pair_status starts with it), worker_id alone
  (assignment_worker_pair), and status with its LIKE twin (every claim and submit wrote both;
  the reads by status go with a worker or a pair). Each claim inserts and each submit updates a
  row whose status changes, so each index costs two entries per cycle.
- assignment_worker_reserved: open reservations only, for "does this worker hold one" and the
  expiry sweep, a handful of rows whatever the study's size.
- assignment_one_open_per_worker_pair leads with the pair: on a new study whose statistics were
  taken while the table was empty, the claim's window counted each pair's slots by walking the
  whole (worker, pair) index (tests/annotation/test_assignments.py).
- annotation_humanjudgment.study_id alone (judgment_study_pair starts with it) and
  annotation_payentry.judgment_id alone (pay_once_per_judgment starts with it) go too.

Rebuilding the unique index takes a lock on annotation_assignment for the time it takes to
build (seconds at a million rows): run it outside a study's busy hours.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0011_claim_custom_plans'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='assignment',
            name='assignment_one_open_per_worker_pair',
        ),
        migrations.AlterField(
            model_name='assignment',
            name='pair',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='assignments', to='annotation.pair'),
        ),
        migrations.AlterField(
            model_name='assignment',
            name='status',
            field=models.CharField(choices=[('reserved', 'Reserved'), ('submitted', 'Submitted'), ('expired', 'Expired'), ('returned', 'Returned')], default='reserved', max_length=10),
        ),
        migrations.AlterField(
            model_name='assignment',
            name='worker',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='assignments', to='annotation.worker'),
        ),
        migrations.AlterField(
            model_name='humanjudgment',
            name='study',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='judgments', to='annotation.study'),
        ),
        migrations.AlterField(
            model_name='payentry',
            name='judgment',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='pay_entries', to='annotation.humanjudgment'),
        ),
        migrations.AddIndex(
            model_name='assignment',
            index=models.Index(condition=models.Q(('status', 'reserved')), fields=['worker', 'expires_at'], name='assignment_worker_reserved'),
        ),
        migrations.AddConstraint(
            model_name='assignment',
            constraint=models.UniqueConstraint(condition=models.Q(('status__in', ['reserved', 'submitted'])), fields=('pair', 'worker'), name='assignment_one_open_per_worker_pair'),
        ),
    ]
