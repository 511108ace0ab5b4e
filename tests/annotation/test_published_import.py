"""Published judgments (a benchmark's votes) stored through annotation's own service."""

from __future__ import annotations

import pytest

from annotation.models import HumanJudgment, Pair, Preference, Study, Worker
from annotation.services.published import (
    PublishedImportError,
    PublishedJudgmentsResult,
    PublishedPair,
    PublishedPrompt,
    PublishedVote,
    published_judgments_import,
)

PROMPTS = [
    PublishedPrompt(external_id="81", category="writing", turns=["Write.", "Rewrite."]),
    PublishedPrompt(external_id="101", category="reasoning", turns=["Who?"]),
]
FORWARD = PublishedPair(prompt="81", first="alpaca", second="gpt-4", turn=1)
REVERSED = PublishedPair(prompt="81", first="gpt-4", second="alpaca", turn=1)


def store(
    votes: list[PublishedVote],
    pairs: list[PublishedPair] | None = None,
    turns: tuple[int, ...] = (1, 2),
) -> PublishedJudgmentsResult:
    return published_judgments_import(
        study_slug="bench",
        study_name="Bench",
        notes="Imported from a benchmark.",
        prompts=PROMPTS,
        pairs=pairs or [],
        votes=votes,
        turns=turns,
    )


def test_one_pair_listed_in_both_orders_is_one_row_with_the_winner_in_canonical_terms(
    db: None,
) -> None:
    result = store(
        [
            PublishedVote(pair=FORWARD, rater="expert_1", winner="second"),
            PublishedVote(pair=REVERSED, rater="expert_2", winner="first"),
            PublishedVote(pair=REVERSED, rater="author_1", winner="tie"),
        ]
    )
    pair = Pair.objects.get()
    assert result.pairs.pair_id(FORWARD) == result.pairs.pair_id(REVERSED) == pair.pk
    # alpaca's answer is created first (system names in order), so it is A and gpt-4 is B.
    assert pair.answer_a.system.name == "alpaca" and pair.source == Pair.Source.IMPORTED
    votes = dict(pair.judgments.values_list("worker__external_id", "preference"))
    assert votes == {"expert_1": Preference.B, "expert_2": Preference.B, "author_1": "tie"}
    assert result.pair_count == 1 and result.judgment_count == 3 and result.system_count == 2
    study = Study.objects.get(slug="bench")
    assert study.status == Study.Status.CLOSED and study.categories == ["reasoning", "writing"]
    assert set(Worker.objects.values_list("panel", flat=True)) == {Worker.Panel.IMPORTED}


def test_importing_again_replaces_the_judgments_at_those_turns_and_keeps_the_notes_once(
    db: None,
) -> None:
    store([PublishedVote(pair=FORWARD, rater="expert_1", winner="first")])
    store([PublishedVote(pair=FORWARD, rater="expert_1", winner="second")])
    assert list(HumanJudgment.objects.values_list("preference", flat=True)) == [Preference.B]
    assert Study.objects.get().notes.count("Imported from a benchmark.") == 1


def test_pairs_without_votes_are_stored_for_the_judges_that_voted_on_them(db: None) -> None:
    other = PublishedPair(prompt="101", first="gpt-4", second="claude", turn=1)
    result = store([], pairs=[other])
    assert Pair.objects.get().pk == result.pairs.pair_id(other)
    assert not HumanJudgment.objects.exists()


@pytest.mark.parametrize(
    ("vote", "message"),
    [
        (PublishedVote(pair=FORWARD, rater="e", winner="first"), "not among the turns imported"),
        (
            PublishedVote(pair=PublishedPair("999", "a", "b", 1), rater="e", winner="first"),
            "prompt '999' is not among the prompts",
        ),
        (
            PublishedVote(pair=PublishedPair("101", "a", "b", 2), rater="e", winner="first"),
            "turn 2 is not a turn of the prompt",
        ),
        (
            PublishedVote(pair=PublishedPair("101", "a", "a", 1), rater="e", winner="first"),
            "cannot be compared with itself",
        ),
    ],
)
def test_contradicting_records_are_refused_before_anything_is_written(
    db: None, vote: PublishedVote, message: str
) -> None:
    with pytest.raises(PublishedImportError, match=message):
        store([vote], turns=(2,) if "turns imported" in message else (1, 2))
    assert not Study.objects.exists() and not Pair.objects.exists()
