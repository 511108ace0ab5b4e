"""Pair generation: all pairs, baseline, samples, turns, flagged answers, gold pairs."""

from __future__ import annotations

import threading
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from annotation.models import Answer, Pair, Prompt, Study, System
from annotation.services.pairs import (
    PairsGenerationError,
    gold_pairs_generate,
    gold_target,
    pairs_generate,
)
from tests.conftest import Cast

FOUR = ("alpha", "beta", "gamma", "delta")


def make_prompts(
    study: Study,
    count: int,
    systems: tuple[str, ...] = FOUR,
    turns: int = 1,
    prefix: str = "p",
) -> list[Prompt]:
    """Create `count` prompts, each answered by every system, with `turns` user turns."""
    made = []
    for index in range(count):
        prompt = Prompt.objects.create(
            study=study,
            external_id=f"{prefix}{index:03d}",
            category="writing" if index % 2 else "coding",
            turns=[f"question {index} turn {t}" for t in range(1, turns + 1)],
        )
        for name in systems:
            system, _ = System.objects.get_or_create(study=study, name=name, version="1")
            Answer.objects.create(
                prompt=prompt, system=system, turns=[f"{name} says {t}" for t in range(turns)]
            )
        made.append(prompt)
    return made


def system_pairs(study: Study) -> set[tuple[str, str, str]]:
    """The study's pairs as (prompt external id, system of A, system of B)."""
    return {
        (pair.prompt.external_id, pair.answer_a.system.name, pair.answer_b.system.name)
        for pair in Pair.objects.filter(study=study).select_related(
            "prompt", "answer_a__system", "answer_b__system"
        )
    }


def rank_answers(prompt: Prompt, ranks: dict[str, int | None], field: str = "rank") -> None:
    for answer in prompt.answers.select_related("system"):
        setattr(answer, field, ranks.get(answer.system.name))
        answer.save(update_fields=[field])


def test_all_pairs_gives_every_unordered_pair_of_four_systems(cast: Cast) -> None:
    make_prompts(cast.study, 3)
    result = pairs_generate(study=cast.study, strategy="all")
    assert result.created == 3 * 6
    assert result.already_present == 0
    for prompt in Prompt.objects.filter(study=cast.study):
        pairs = list(Pair.objects.filter(prompt=prompt))
        assert len(pairs) == 6
        assert all(pair.answer_a_id < pair.answer_b_id for pair in pairs)
        assert all(pair.source == Pair.Source.ALL_PAIRS and not pair.is_gold for pair in pairs)
        assert len({(pair.answer_a_id, pair.answer_b_id) for pair in pairs}) == 6


def test_rerunning_creates_nothing_and_reports_what_was_there(cast: Cast) -> None:
    make_prompts(cast.study, 2)
    pairs_generate(study=cast.study, strategy="all")
    again = pairs_generate(study=cast.study, strategy="all")
    assert (again.created, again.already_present) == (0, 12)
    assert Pair.objects.filter(study=cast.study).count() == 12


def test_baseline_pairs_each_other_system_with_the_baseline(cast: Cast) -> None:
    make_prompts(cast.study, 2)
    baseline = System.objects.get(study=cast.study, name="alpha")
    result = pairs_generate(study=cast.study, strategy="baseline", baseline_system=baseline)
    assert result.created == 2 * 3
    for pair in Pair.objects.filter(study=cast.study).select_related("answer_a", "answer_b"):
        assert baseline.pk in (pair.answer_a.system_id, pair.answer_b.system_id)
        assert pair.source == Pair.Source.BASELINE


def test_baseline_prompts_without_a_usable_baseline_answer_are_counted(cast: Cast) -> None:
    prompts = make_prompts(cast.study, 2)
    baseline = System.objects.get(study=cast.study, name="alpha")
    Answer.objects.filter(prompt=prompts[0], system=baseline).update(leak_flagged=True)
    result = pairs_generate(study=cast.study, strategy="baseline", baseline_system=baseline)
    assert result.created == 3
    assert result.prompts_without_baseline == 1
    assert result.skipped_answers == 1


def test_baseline_from_another_study_is_refused(cast: Cast) -> None:
    make_prompts(cast.study, 1)
    foreign = System.objects.create(study=cast.other_study, name="alpha", version="1")
    with pytest.raises(PairsGenerationError, match="does not belong"):
        pairs_generate(study=cast.study, strategy="baseline", baseline_system=foreign)


def test_sample_gives_exactly_k_pairs_per_prompt(cast: Cast) -> None:
    make_prompts(cast.study, 5)
    result = pairs_generate(study=cast.study, strategy="sample", k=2, seed=7)
    assert result.created == 5 * 2
    for prompt in Prompt.objects.filter(study=cast.study):
        assert Pair.objects.filter(prompt=prompt, source=Pair.Source.SAMPLE).count() == 2


def test_sample_is_the_same_for_the_same_seed_and_differs_for_another(cast: Cast) -> None:
    copies = [
        Study.objects.create(slug=f"copy-{index}", name=f"Copy {index}") for index in range(3)
    ]
    for study in copies:
        make_prompts(study, 6)
    pairs_generate(study=copies[0], strategy="sample", k=2, seed=1)
    pairs_generate(study=copies[1], strategy="sample", k=2, seed=1)
    pairs_generate(study=copies[2], strategy="sample", k=2, seed=2)
    assert system_pairs(copies[0]) == system_pairs(copies[1])
    assert system_pairs(copies[0]) != system_pairs(copies[2])
    assert len(system_pairs(copies[2])) == 12


def test_sample_rerun_with_another_seed_does_not_grow_past_k(cast: Cast) -> None:
    make_prompts(cast.study, 3)
    pairs_generate(study=cast.study, strategy="sample", k=2, seed=1)
    again = pairs_generate(study=cast.study, strategy="sample", k=2, seed=99)
    assert (again.created, again.already_present) == (0, 6)
    assert Pair.objects.filter(study=cast.study).count() == 6


def test_sample_with_more_k_than_pairs_takes_all_of_them(cast: Cast) -> None:
    make_prompts(cast.study, 1, systems=("alpha", "beta", "gamma"))
    assert pairs_generate(study=cast.study, strategy="sample", k=10).created == 3


def test_sample_without_k_is_refused(cast: Cast) -> None:
    with pytest.raises(PairsGenerationError, match="needs k"):
        pairs_generate(study=cast.study, strategy="sample")


def test_multi_turn_prompts_get_one_pair_per_turn(cast: Cast) -> None:
    make_prompts(cast.study, 1, turns=2, prefix="two")
    make_prompts(cast.study, 1, turns=1, prefix="one")
    result = pairs_generate(study=cast.study, strategy="all")
    assert result.created == 6 * 2 + 6
    two = Prompt.objects.get(external_id="two000")
    assert sorted(set(Pair.objects.filter(prompt=two).values_list("turn", flat=True))) == [1, 2]


def test_last_turn_only_gives_the_final_turn(cast: Cast) -> None:
    make_prompts(cast.study, 1, turns=2)
    result = pairs_generate(study=cast.study, strategy="all", turns="last")
    assert result.created == 6
    assert set(Pair.objects.filter(study=cast.study).values_list("turn", flat=True)) == {2}


def test_a_list_of_turns_skips_turns_a_prompt_does_not_have(cast: Cast) -> None:
    make_prompts(cast.study, 1, turns=2, prefix="two")
    make_prompts(cast.study, 1, turns=1, prefix="one")
    result = pairs_generate(study=cast.study, strategy="all", turns=[2])
    assert result.created == 6
    with pytest.raises(PairsGenerationError, match="start at 1"):
        pairs_generate(study=cast.study, strategy="all", turns=[0])


def test_flagged_answers_stay_out_until_cleared(cast: Cast) -> None:
    (prompt,) = make_prompts(cast.study, 1)
    flagged = Answer.objects.get(prompt=prompt, system__name="delta")
    flagged.leak_flagged = True
    flagged.leak_matches = ["As an AI model made by Delta"]
    flagged.save()

    first = pairs_generate(study=cast.study, strategy="all")
    assert (first.created, first.skipped_answers) == (3, 1)
    assert not Pair.objects.filter(answer_a=flagged).exists()
    assert not Pair.objects.filter(answer_b=flagged).exists()

    flagged.leak_cleared_at = timezone.now()
    flagged.leak_cleared_by = cast.researcher
    flagged.leak_remedy = Answer.LeakRemedy.CLEARED
    flagged.save()
    second = pairs_generate(study=cast.study, strategy="all")
    assert (second.created, second.already_present, second.skipped_answers) == (3, 3, 0)
    assert Pair.objects.filter(prompt=prompt).count() == 6


def make_ranked(
    study: Study, count: int, ranks: dict[str, int | None], field: str = "rank"
) -> None:
    for prompt in make_prompts(study, count, prefix="ranked"):
        rank_answers(prompt, ranks, field)


def test_gold_pairs_compare_first_and_last_ranked_with_the_right_side(cast: Cast) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    # Answers are created in system order, so alpha has the smallest id: when alpha is ranked
    # first the better answer is A; when delta (largest id) is first it is B.
    make_ranked(cast.study, 1, {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4})
    for prompt in make_prompts(cast.study, 1, prefix="reversed"):
        rank_answers(prompt, {"alpha": 4, "beta": 3, "gamma": 2, "delta": 1})

    result = gold_pairs_generate(study=cast.study, kind="first_vs_last")
    assert result.created == 2
    gold = {
        pair.prompt.external_id: pair
        for pair in Pair.objects.filter(is_gold=True).select_related(
            "prompt", "answer_a__system", "answer_b__system"
        )
    }
    forward, backward = gold["ranked000"], gold["reversed000"]
    assert (forward.answer_a.system.name, forward.answer_b.system.name) == ("alpha", "delta")
    assert forward.gold_side == "A"
    assert (backward.answer_a.system.name, backward.answer_b.system.name) == ("alpha", "delta")
    assert backward.gold_side == "B"
    assert {forward.source, forward.gold_kind} == {Pair.Source.GOLD, "first_vs_last"}


def test_first_vs_second_pairs_the_two_best_answers(cast: Cast) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    make_ranked(cast.study, 1, {"alpha": 3, "beta": 2, "gamma": 1, "delta": 4})
    gold_pairs_generate(study=cast.study, kind="first_vs_second")
    pair = Pair.objects.select_related("answer_a__system", "answer_b__system").get(is_gold=True)
    assert (pair.answer_a.system.name, pair.answer_b.system.name) == ("beta", "gamma")
    assert pair.gold_side == "B"
    assert pair.gold_kind == "first_vs_second"


def test_upvotes_stand_in_for_a_missing_rank(cast: Cast) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    make_ranked(cast.study, 1, {"alpha": 2, "beta": 40, "gamma": 7, "delta": 0}, field="upvotes")
    gold_pairs_generate(study=cast.study, kind="first_vs_last")
    pair = Pair.objects.select_related("answer_a__system", "answer_b__system").get(is_gold=True)
    assert (pair.answer_a.system.name, pair.answer_b.system.name) == ("beta", "delta")
    assert pair.gold_side == "A"


def test_tied_answers_give_no_gold_pair(cast: Cast) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    make_ranked(cast.study, 1, {"alpha": 5, "beta": 5, "gamma": 1}, field="upvotes")
    assert gold_pairs_generate(study=cast.study, kind="first_vs_second").created == 0


def test_gold_share_sets_how_many_gold_pairs_are_added(cast: Cast) -> None:
    # 18 regular pairs on unranked prompts; share 0.25 wants round(0.25 * 18 / 0.75) = 6 gold.
    make_prompts(cast.study, 3, prefix="plain")
    pairs_generate(study=cast.study, strategy="all")
    make_ranked(cast.study, 10, {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4})
    cast.study.gold_share = Decimal("0.25")
    cast.study.save()

    result = gold_pairs_generate(study=cast.study, kind="first_vs_last", seed=3)
    assert result.created == 6
    gold = Pair.objects.filter(study=cast.study, is_gold=True).count()
    regular = Pair.objects.filter(study=cast.study, is_gold=False).count()
    assert gold / (gold + regular) == pytest.approx(0.25)
    again = gold_pairs_generate(study=cast.study, kind="first_vs_last", seed=3)
    assert again.created == 0


def test_gold_share_is_capped_by_the_ranked_prompts_available(cast: Cast) -> None:
    make_prompts(cast.study, 5, prefix="plain")
    pairs_generate(study=cast.study, strategy="all")
    make_ranked(cast.study, 2, {"alpha": 1, "delta": 2})
    cast.study.gold_share = Decimal("0.5")
    cast.study.save()
    assert gold_pairs_generate(study=cast.study).created == 2


def test_the_seed_chooses_which_ranked_prompts_become_gold(cast: Cast) -> None:
    chosen = []
    for seed in (1, 2):
        study = Study.objects.create(
            slug=f"gold-{seed}", name=f"Gold {seed}", gold_share=Decimal("0.1")
        )
        make_prompts(study, 3, prefix="plain")
        pairs_generate(study=study, strategy="all")
        make_ranked(study, 12, {"alpha": 1, "beta": 2})
        gold_pairs_generate(study=study, seed=seed)
        chosen.append(
            set(Pair.objects.filter(study=study, is_gold=True).values_list("prompt__external_id"))
        )
    assert len(chosen[0]) == len(chosen[1]) == 2
    assert chosen[0] != chosen[1]


def test_an_existing_regular_pair_is_marked_gold_instead_of_duplicated(cast: Cast) -> None:
    make_ranked(cast.study, 2, {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4})
    pairs_generate(study=cast.study, strategy="all")
    cast.study.gold_share = Decimal("1")
    cast.study.save()

    result = gold_pairs_generate(study=cast.study, kind="first_vs_last")
    assert (result.created, result.marked_gold) == (0, 2)
    assert Pair.objects.filter(study=cast.study).count() == 12
    marked = Pair.objects.filter(study=cast.study, is_gold=True)
    assert {(pair.source, pair.gold_side) for pair in marked} == {(Pair.Source.ALL_PAIRS, "A")}


def test_gold_skips_flagged_answers(cast: Cast) -> None:
    cast.study.gold_share = Decimal("1")
    cast.study.save()
    make_ranked(cast.study, 1, {"alpha": 1, "beta": 2, "gamma": 3, "delta": 4})
    Answer.objects.filter(system__name="delta").update(leak_flagged=True)
    result = gold_pairs_generate(study=cast.study)
    assert result.skipped_answers == 1
    pair = Pair.objects.select_related("answer_b__system").get(is_gold=True)
    assert pair.answer_b.system.name == "gamma"


@pytest.mark.parametrize(
    ("share", "regular", "expected"),
    [
        ("0", 100, 0),
        ("0.1", 90, 10),
        ("0.1", 94, 10),
        ("0.1", 95, 11),
        ("0.5", 3, 3),
        ("1", 5, None),
    ],
)
def test_gold_target_rounds_half_up(share: str, regular: int, expected: int | None) -> None:
    assert gold_target(gold_share=Decimal(share), regular=regular) == expected


def test_command_generates_and_prints_counts(cast: Cast) -> None:
    make_prompts(cast.study, 2)
    out = StringIO()
    call_command(
        "generate_pairs", "--study", cast.study.slug, "--strategy", "baseline",
        "--baseline", "alpha:1", stdout=out,
    )  # fmt: skip
    assert "baseline pairs: 6 created, 0 already present" in out.getvalue()
    out = StringIO()
    call_command("generate_pairs", "--study", cast.study.slug, "--strategy", "all", stdout=out)
    assert "all pairs: 6 created, 6 already present" in out.getvalue()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--study", "nope", "--strategy", "all"], "No study with slug 'nope'"),
        (["--study", "main-study", "--strategy", "baseline", "--baseline", "zeta"], "zeta"),
        (["--study", "main-study", "--strategy", "baseline"], "needs --baseline"),
        (["--study", "main-study", "--strategy", "sample"], "needs --k"),
        (["--study", "main-study"], "--strategy, --gold or both"),
    ],
)
def test_command_explains_bad_arguments(cast: Cast, arguments: list[str], message: str) -> None:
    make_prompts(cast.study, 1)
    with pytest.raises(CommandError, match=message):
        call_command("generate_pairs", *arguments)


@pytest.mark.django_db(transaction=True)
def test_two_generations_at_once_neither_fail_nor_duplicate() -> None:
    study = Study.objects.create(slug="busy", name="Busy")
    make_prompts(study, 20)
    results: list[int] = []
    errors: list[BaseException] = []

    def generate() -> None:
        try:
            results.append(pairs_generate(study=study, strategy="all").created)
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=generate) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(results) == [0, 120]
    assert Pair.objects.filter(study=study).count() == 120
