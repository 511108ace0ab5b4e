"""The report's reads: numbers packed by the database come back as the values stored, and the
reads on connections of their own give the frames the one-connection reads give."""

from __future__ import annotations

import pandas as pd
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from annotation.models import HumanJudgment, Pair, Worker
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.selectors.frames import VoteFilters, study_pairs_frame, study_votes_get
from leaderboard.selectors.packed import frame_read_coded
from leaderboard.selectors.section_reads import imported_inconsistency_get, report_lengths_get
from leaderboard.stats.mtbench import calls_sort, judge_votes_combine
from tests.conftest import Cast
from tests.factories import make_assignment, make_pair, make_prompt_with_answers


def rate(
    pair: Pair, worker: Worker, *, preference: str, likert: int | None, a_left: bool | None
) -> HumanJudgment:
    return HumanJudgment.objects.create(
        study=pair.study,
        pair=pair,
        worker=worker,
        assignment=make_assignment(pair, worker, a_left=bool(a_left)),
        a_left=a_left,
        likert_shown=None if likert is None else (likert if a_left else 9 - likert),
        likert=likert,
        preference=preference,
    )


def test_choices_flags_and_small_numbers_come_back_as_stored_with_nulls(cast: Cast) -> None:
    first, second = make_pair(cast.study, "p1"), make_pair(cast.study, "p2")
    rate(first, cast.worker_one, preference="B", likert=7, a_left=False)
    rate(first, cast.worker_two, preference="tie", likert=None, a_left=None)
    rate(second, cast.worker_one, preference="A", likert=1, a_left=True)
    qs = HumanJudgment.objects.filter(study=cast.study).order_by("pk")

    frame = frame_read_coded(
        qs,
        ("id", "pair_id", "preference", "likert", "a_left"),
        ["id", "pair_id", "label", "likert", "a_left"],
        choices={"label": ("A", "B", "tie")},
        flags=("a_left",),
        small={"likert": 8},
    ).sort_values("id")

    expected = list(qs.values_list("id", "pair_id", "preference", "likert", "a_left"))
    got = [
        (i, p, label, None if pd.isna(likert) else int(likert), flag)
        for i, p, label, likert, flag in frame.itertuples(index=False)
    ]
    assert got == expected
    assert isinstance(frame["label"].dtype, pd.CategoricalDtype)
    assert list(frame["label"].cat.categories) == ["A", "B", "tie"]


def test_a_value_outside_its_list_is_an_error_naming_the_column_and_the_value(
    cast: Cast,
) -> None:
    rate(make_pair(cast.study, "p1"), cast.worker_one, preference="A", likert=2, a_left=True)
    qs = HumanJudgment.objects.filter(study=cast.study)

    with pytest.raises(ValueError, match=r"column 'label' holds 'A', not one of \['B', 'tie'\]"):
        frame_read_coded(qs, ("preference",), ["label"], choices={"label": ("B", "tie")})
    with pytest.raises(ValueError, match="column 'likert' holds 2, not from 0 to 1"):
        frame_read_coded(qs, ("likert",), ["likert"], small={"likert": 1})


def test_an_empty_read_has_the_columns(cast: Cast) -> None:
    frame = frame_read_coded(
        HumanJudgment.objects.filter(study=cast.study),
        ("id", "preference"),
        ["id", "label"],
        choices={"label": ("A", "B", "tie")},
    )
    assert list(frame.columns) == ["id", "label"] and frame.empty


def _votes_as_records(cast: Cast) -> dict[str, list[tuple[object, ...]]]:
    votes = study_votes_get(study=cast.study, filters=VoteFilters())
    return {
        name: [tuple(map(str, row)) for row in frame.itertuples(index=False)]
        for name, frame in (
            ("pairs", votes.pairs),
            ("human", votes.human),
            ("judges", votes.judges),
            ("calls", votes.calls),
        )
    }


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("judges", [2, 5])
def test_reads_on_their_own_connections_give_the_frames_of_one_connection(
    cast: Cast, judges: int
) -> None:
    # Committed rows (no test transaction), so that the reading threads' connections see them.
    # Judge runs whose calls are read in parts of their own: one run per part, or (five runs in
    # four parts) two runs in one part.
    runs = [
        JudgeRun.objects.create(
            judge=Judge.objects.create(name=f"judge {chr(ord('e') - n)}", kind=Judge.Kind.LLM),
            study=cast.study,
            status=JudgeRun.Status.DONE,
        )
        for n in range(judges)
    ]
    for n in range(6):
        pair = make_pair(cast.study, f"p{n}")
        odd = n % 2 == 1
        rate(
            pair,
            cast.worker_one,
            preference="A" if odd else "B",
            likert=2 if odd else 7,
            a_left=True,
        )
        for run in runs:
            for order in ("ab", "ba"):
                JudgeCall.objects.create(
                    run=run,
                    pair=pair,
                    order=order,
                    status=JudgeCall.Status.DONE,
                    likert_shown=3,
                    likert=3 if order == "ab" else 6,
                    preference="A" if order == "ab" else "B",
                )
    assert not connection.in_atomic_block

    concurrent = _votes_as_records(cast)
    with transaction.atomic():
        one_connection = _votes_as_records(cast)

    assert concurrent == one_connection
    assert len(concurrent["human"]) == 6 and len(concurrent["calls"]) == 12 * judges
    assert len(concurrent["judges"]) == 6 * judges
    # Each part sorted and combined on its own gives what sorting and combining all calls gives.
    votes = study_votes_get(study=cast.study, filters=VoteFilters())
    shuffled = votes.calls.sample(frac=1.0, random_state=0)
    pd.testing.assert_frame_equal(votes.calls, calls_sort(shuffled))
    combined = judge_votes_combine(shuffled)
    assert votes.judges[["run_id", "pair_id"]].values.tolist() == sorted(
        combined[["run_id", "pair_id"]].values.tolist()
    )


def test_lengths_are_each_answers_characters_at_the_pairs_turn_nan_where_it_has_none(
    cast: Cast,
) -> None:
    prompt, (short, long) = make_prompt_with_answers(cast.study, "q1")
    short.turns = ["abc", "de"]
    long.turns = ["abcdefgh"]  # no second turn
    short.save()
    long.save()
    first = Pair.objects.create(study=cast.study, prompt=prompt, answer_a=short, answer_b=long)
    second = Pair.objects.create(
        study=cast.study, prompt=prompt, answer_a=short, answer_b=long, turn=2
    )
    # Another study's answers and pairs stay out.
    make_pair(cast.other_study, "elsewhere")

    lengths = report_lengths_get(study=cast.study, filters=VoteFilters())
    only_second = report_lengths_get(study=cast.study, filters=VoteFilters(turn=2))

    rows = [
        (p, a, b, la, None if pd.isna(lb) else lb)
        for p, a, b, la, lb in lengths.itertuples(index=False)
    ]
    assert rows == [
        (first.pk, short.pk, long.pk, 3.0, 8.0),
        (second.pk, short.pk, long.pk, 2.0, None),
    ]
    assert only_second["pair_id"].tolist() == [second.pk]
    assert only_second["len_a"].tolist() == [2.0]


def test_pairs_carry_their_answers_systems_and_prompts(cast: Cast) -> None:
    pair = make_pair(cast.study, "q7")

    frame = study_pairs_frame(study=cast.study, filters=VoteFilters())

    assert frame[["pair_id", "prompt_external_id", "system_a", "system_b"]].values.tolist() == [
        [pair.pk, "q7", pair.answer_a.system.name, pair.answer_b.system.name]
    ]


def test_a_column_on_top_of_the_packed_number_comes_back_as_read_alone(cast: Cast) -> None:
    rate(make_pair(cast.study, "p1"), cast.worker_one, preference="B", likert=7, a_left=False)
    rate(make_pair(cast.study, "p2"), cast.worker_two, preference="tie", likert=None, a_left=None)
    qs = HumanJudgment.objects.filter(study=cast.study)
    fields, columns = (
        ("id", "pair_id", "preference", "a_left"),
        ["id", "pair_id", "label", "a_left"],
    )
    options = {"choices": {"label": ("A", "B", "tie")}, "flags": ("a_left",)}

    alone = frame_read_coded(qs, fields, columns, **options).sort_values("id")  # type: ignore[arg-type]
    on_top = frame_read_coded(qs, fields, columns, top="pair_id", **options).sort_values("id")  # type: ignore[arg-type]

    pd.testing.assert_frame_equal(on_top, alone)
    assert on_top["pair_id"].dtype == "int64"


def test_null_on_top_of_the_packed_number_is_an_error_naming_the_column(cast: Cast) -> None:
    rate(make_pair(cast.study, "p1"), cast.worker_one, preference="B", likert=None, a_left=True)
    qs = HumanJudgment.objects.filter(study=cast.study)

    with pytest.raises(ValueError, match="column 'likert' holds NULL or a negative number"):
        frame_read_coded(
            qs,
            ("likert", "preference"),
            ["likert", "label"],
            choices={"label": ("A", "B", "tie")},
            top="likert",
        )


def test_a_pair_pointing_at_another_studys_answer_is_an_error_naming_it(cast: Cast) -> None:
    prompt, _ = make_prompt_with_answers(cast.study, "q1")
    _, (first, second) = make_prompt_with_answers(cast.other_study, "elsewhere")
    Pair.objects.create(study=cast.study, prompt=prompt, answer_a=first, answer_b=second)

    with pytest.raises(ValueError, match=f"answer {first.pk} is not one of the study's answers"):
        study_pairs_frame(study=cast.study, filters=VoteFilters())
    with pytest.raises(ValueError, match=f"answer {first.pk} is not one of the study's answers"):
        report_lengths_get(study=cast.study, filters=VoteFilters())


def test_inconsistent_verdicts_are_counted_for_imported_runs_only(cast: Cast) -> None:
    # A verdict label is what a published source says of a call; an LLM run's calls are not
    # read for it at all.
    pair = make_pair(cast.study, "p1")
    runs = {
        kind: JudgeRun.objects.create(
            judge=Judge.objects.create(name=f"judge {kind}", kind=kind), study=cast.study
        )
        for kind in (Judge.Kind.IMPORTED, Judge.Kind.LLM)
    }
    for run in runs.values():
        for order, label in (("ab", "tie (inconsistent)"), ("ba", "model_a")):
            JudgeCall.objects.create(
                run=run, pair=pair, order=order, status=JudgeCall.Status.DONE, verdict_label=label
            )
    filters = VoteFilters()

    both = imported_inconsistency_get(filters=filters, run_ids=[r.pk for r in runs.values()])
    with CaptureQueriesContext(connection) as queries:
        llm_only = imported_inconsistency_get(filters=filters, run_ids=[runs[Judge.Kind.LLM].pk])

    assert both.values.tolist() == [[runs[Judge.Kind.IMPORTED].pk, 2, 1]]
    assert llm_only.empty and list(llm_only.columns) == ["run_id", "labelled", "inconsistent"]
    assert len(queries) == 1  # the runs table only
