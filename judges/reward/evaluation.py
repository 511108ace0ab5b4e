"""AdvisorQA's Table 3 for a study: every ranker on the held-out prompts with ranked answers.

Rows (computed by :func:`rankeval.listwise.advisorqa_table`): the random ranker, the
longer-answer ranker, each PL model (recipe and K named; the judge's stored answer scores, or
the model's scores of the answers it has not scored), every other judge with verdicts on pairs
within those lists (ranked by wins), and people (their judgments, ranked by wins). By default
the prompts are the first PL model's held-out prompts, so no model is measured on prompts it was
trained on (models trained with the same seed and held-out share hold out the same prompts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from annotation.models import Answer, HumanJudgment, Study
from judges.models import AnswerScore, Judge, JudgeCall, JudgeRun
from judges.reward.artifacts import artifact_load, artifact_metadata
from judges.reward.data import TrainingInputError, question_text, ranked_lists
from judges.reward.losses import recipe_name
from rankeval.listwise import TableRow, advisorqa_table

SHARE_OF_B = {"A": 0.0, "B": 1.0, "tie": 0.5}
PEOPLE = "people"


@dataclass(frozen=True)
class Evaluation:
    prompts: str
    lists: int
    rows: list[TableRow]


def pl_label(judge: Judge) -> str:
    """A PL judge's row name, with its recipe and K."""
    return (
        f"{judge.name} ({recipe_name(str(judge.params.get('recipe', '?')), judge.params.get('k'))})"
    )


def _model_scores(judge: Judge, answer_ids: list[int]) -> dict[int, float]:
    stored = dict(
        AnswerScore.objects.filter(run__judge=judge, answer_id__in=answer_ids).values_list(
            "answer_id", "score"
        )
    )
    missing = [a for a in answer_ids if a not in stored]
    if missing:
        rows = list(
            Answer.objects.filter(pk__in=missing).values_list("pk", "prompt__turns", "turns")
        )
        model = artifact_load(str(judge.params["artifact"]))
        values = model.score(
            [question_text(turns) for _, turns, _ in rows],
            ["\n\n".join(turns or []) for _, _, turns in rows],
        )
        stored.update({pk: float(v) for (pk, _, _), v in zip(rows, values, strict=True)})
    return stored


def evaluation_table(
    *,
    study: Study,
    pl_judges: Sequence[Judge],
    prompts: str = "held-out",
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """The table for a study; raise TrainingInputError when there are no lists to rank."""
    lists = ranked_lists(study=study)
    if prompts == "held-out":
        if not pl_judges:
            raise TrainingInputError("held-out prompts are those of a PL model: name one")
        held = set(artifact_metadata(str(pl_judges[0].params["artifact"]))["held_out_prompts"])
        lists = {p: ids for p, ids in lists.items() if p in held}
    elif prompts != "all":
        raise TrainingInputError(f"prompts must be 'held-out' or 'all', not {prompts!r}")
    if not lists:
        raise TrainingInputError(
            f"study {study.slug!r} has no ranked lists on the {prompts} prompts to evaluate on"
        )
    gold = [list(ids) for _, ids in sorted(lists.items())]
    answer_ids = sorted({a for ids in gold for a in ids})
    lengths = {
        pk: float(len("\n\n".join(turns or [])))
        for pk, turns in Answer.objects.filter(pk__in=answer_ids).values_list("pk", "turns")
    }
    scores = {}
    for judge in pl_judges:
        if progress:
            progress(judge.name)
        scores[pl_label(judge)] = _model_scores(judge, answer_ids)
    verdicts: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    calls = (
        JudgeCall.objects.filter(
            run__study=study,
            run__status__in=[JudgeRun.Status.DONE, JudgeRun.Status.IMPORTED],
            status=JudgeCall.Status.DONE,
            pair__answer_a_id__in=answer_ids,
        )
        .exclude(run__judge__kind=Judge.Kind.PL)
        .exclude(preference="")
        .values_list("run__judge__name", "pair__answer_a_id", "pair__answer_b_id", "preference")
    )
    for name, a, b, preference in calls:
        verdicts[name].append((a, b, SHARE_OF_B[preference]))
    people = (
        HumanJudgment.objects.filter(study=study, pair__answer_a_id__in=answer_ids)
        .exclude(preference="")
        .values_list("pair__answer_a_id", "pair__answer_b_id", "preference")
    )
    for a, b, preference in people:
        verdicts[PEOPLE].append((a, b, SHARE_OF_B[preference]))
    rows = advisorqa_table(gold, scores=scores, verdicts=verdicts, lengths=lengths, seed=seed)
    return Evaluation(prompts=prompts, lists=len(gold), rows=rows)
