"""Published verdicts (a benchmark's judge labels) stored through judges' own service."""

from __future__ import annotations

import pytest

from annotation.models import Pair, Preference, Study
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.published import (
    PublishedVerdict,
    PublishedVerdictsError,
    PublishedVerdictsResult,
    published_verdicts_import,
)
from tests.factories import make_pair


def store(study: Study, verdicts: list[PublishedVerdict]) -> PublishedVerdictsResult:
    return published_verdicts_import(
        study=study,
        judge_name="bench judge, imported",
        model_name="gpt-4",
        order_policy=Judge.OrderPolicy.BOTH,
        call_order=JudgeCall.Order.BOTH,
        run_note="Published with the benchmark.",
        turns=(1,),
        verdicts=verdicts,
    )


def verdict(pair: Pair, label: str = "model_a") -> PublishedVerdict:
    return PublishedVerdict(
        pair_id=pair.pk, preference=Preference.A, label=label, record={"winner": label}
    )


@pytest.fixture
def study(db: None) -> Study:
    return Study.objects.create(slug="bench", name="Bench")


def test_verdicts_become_done_calls_of_one_imported_run_that_a_second_import_reuses(
    study: Study,
) -> None:
    first, second = make_pair(study, "p1"), make_pair(study, "p2")
    result = store(study, [verdict(first), verdict(second, "tie (inconsistent)")])
    assert result.call_count == 2 and result.run.status == JudgeRun.Status.IMPORTED
    assert result.run.judge.kind == Judge.Kind.IMPORTED
    call = JudgeCall.objects.get(pair=second)
    assert call.status == JudgeCall.Status.DONE and call.order == JudgeCall.Order.BOTH
    assert call.verdict_label == "tie (inconsistent)" and call.request == {
        "winner": "tie (inconsistent)"
    }
    again = store(study, [verdict(first, "model_b")])
    assert again.run.pk == result.run.pk
    assert list(JudgeCall.objects.values_list("verdict_label", flat=True)) == ["model_b"]
    assert set(result.run.pairs.values_list("pk", flat=True)) == {first.pk, second.pk}


def test_a_pair_of_another_study_is_refused_before_anything_is_written(study: Study) -> None:
    elsewhere = make_pair(Study.objects.create(slug="elsewhere", name="Elsewhere"))
    with pytest.raises(PublishedVerdictsError, match="not pairs of study 'bench' at turns"):
        store(study, [verdict(elsewhere)])
    assert not Judge.objects.exists() and not JudgeCall.objects.exists()


def test_a_pair_given_two_verdicts_is_refused(study: Study) -> None:
    pair = make_pair(study)
    with pytest.raises(PublishedVerdictsError, match=f"pairs \\[{pair.pk}\\] have more than one"):
        store(study, [verdict(pair), verdict(pair, "model_b")])
    assert not JudgeCall.objects.exists()


def test_a_configured_judge_of_the_same_name_is_not_filled_with_published_verdicts(
    study: Study,
) -> None:
    Judge.objects.create(name="bench judge, imported", kind=Judge.Kind.RANDOM)
    with pytest.raises(PublishedVerdictsError, match="not an imported one"):
        store(study, [verdict(make_pair(study))])
    assert not JudgeRun.objects.exists()
