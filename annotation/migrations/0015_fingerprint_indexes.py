"""Indexes that let the report's data fingerprint find a study's latest rows in index steps that
do not depend on what other studies hold (issue 27, part 5).

A max(id) of a study's pairs or judgments was planned as a backward walk of the primary key that
filtered every later study's rows (50 000 pairs and 100 000 judgments read to find one, at five
small studies after it), and the latest answer was a hash join over every answer. Now:
pair_study_id and judgment_study_id (study, id); answer_system_id (system, id), one step per
system of the study; worker_study_excluded (study, excluded, excluded_at). The single-column
indexes these replace (pair.study, answer.system, worker.study) are dropped: each new index
leads with the same column, so their lookups and cascades still use an index. So is the index of
worker.excluded alone, which nothing reads by itself and which the fingerprint's plan chose over
the study's, filtering every study's excluded workers.

Building them locks the tables against writes for the time it takes (seconds at a million rows).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0014_screened_out_code'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name='answer',
            name='system',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='answers', to='annotation.system'),
        ),
        migrations.AlterField(
            model_name='pair',
            name='study',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='pairs', to='annotation.study'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='study',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='workers', to='annotation.study'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='excluded',
            field=models.BooleanField(default=False, help_text='Excluded from analysis and pay (with all their judgments).'),
        ),
        migrations.AddIndex(
            model_name='answer',
            index=models.Index(fields=['system', 'id'], name='answer_system_id'),
        ),
        migrations.AddIndex(
            model_name='humanjudgment',
            index=models.Index(fields=['study', 'id'], name='judgment_study_id'),
        ),
        migrations.AddIndex(
            model_name='pair',
            index=models.Index(fields=['study', 'id'], name='pair_study_id'),
        ),
        migrations.AddIndex(
            model_name='worker',
            index=models.Index(fields=['study', 'excluded', 'excluded_at'], name='worker_study_excluded'),
        ),
    ]
