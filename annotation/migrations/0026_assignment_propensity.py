"""Assignment.propensity: the chance with which an active study's claim drew the pair (issue 29).

The claim's functions that write it change in the next migration, copied from annotation/sql/.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0025_prolific_draft"),
    ]

    operations = [
        migrations.AddField(
            model_name="assignment",
            name="propensity",
            field=models.FloatField(blank=True, editable=False, null=True),
        ),
        migrations.AddConstraint(
            model_name="assignment",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("propensity__isnull", True),
                    models.Q(("propensity__gt", 0), ("propensity__lte", 1)),
                    _connector="OR",
                ),
                name="assignment_propensity_0_1",
            ),
        ),
    ]
