"""score_run_id (run, id): the report's data fingerprint reads each run's latest answer score in
one backward step (it was a max over every score of the study's runs); it replaces the
single-column index of answerscore.run, which score_unique_run_answer also leads with."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('judges', '0008_call_attempt_errors'),
    ]

    operations = [
        migrations.AlterField(
            model_name='answerscore',
            name='run',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='answer_scores', to='judges.judgerun'),
        ),
        migrations.AddIndex(
            model_name='answerscore',
            index=models.Index(fields=['run', 'id'], name='score_run_id'),
        ),
    ]
