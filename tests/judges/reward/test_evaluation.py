"""AdvisorQA's Table 3 on a study's held-out prompts, from the command."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from judges.models import PLTraining
from judges.reward.services import TrainingRequest, pl_training_execute, pl_training_start
from tests.conftest import Cast
from tests.judges.reward.conftest import ranked_study

pytestmark = pytest.mark.django_db


def test_the_table_has_a_row_per_ranker_on_the_held_out_prompts(
    cast: Cast, reward_dirs: Path
) -> None:
    ranked_study(cast.study, human=True)
    request = TrainingRequest(
        name="pl-eval", recipe="pairwise", k="4", sources=("ranked",), epochs=30, hidden=32,
        batch_size=8, holdout=0.25, seed=5,
    )  # fmt: skip
    training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
    pl_training_execute(training_id=training.pk)
    assert PLTraining.objects.get().status == "done"
    out = io.StringIO()
    call_command("evaluate_pl_model", "--study", cast.study.slug, "--json", stdout=out)
    table = json.loads(out.getvalue())
    assert (table["prompts"], table["lists"]) == ("held-out", 4)
    rows = {row["source"]: row for row in table["rows"]}
    assert list(rows) == [
        "random ranker",
        "longer answer",
        "pl-eval (PL pairwise, top 3 + last)",
        "people",
    ]
    pl = rows["pl-eval (PL pairwise, top 3 + last)"]
    assert pl["lists"] == 4 and pl["first_vs_last"] == 1.0 and pl["ndcg_3"] > 0.9
    # The imported person always prefers the better-ranked answer.
    assert (rows["people"]["first_vs_second"], rows["people"]["second_pairs"]) == (1.0, 4)
    # Lists of four answers: NDCG@5 is their NDCG@4 (k cut to the list), not left empty.
    assert rows["people"]["ndcg_5"] is not None
    text = io.StringIO()
    call_command("evaluate_pl_model", "--study", cast.study.slug, stdout=text)
    assert "4 ranked lists on the held-out prompts" in text.getvalue()


def test_a_study_without_a_pl_model_has_no_held_out_prompts(cast: Cast) -> None:
    with pytest.raises(CommandError, match="held-out prompts are those of a PL model"):
        call_command("evaluate_pl_model", "--study", cast.study.slug)
