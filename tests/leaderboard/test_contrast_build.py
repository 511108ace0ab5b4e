"""Building a study's contrast set with the real sentence encoder, and its command."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Answer, ContrastSet, Pair, Prompt, Study, System
from leaderboard.services.contrast import ContrastBuildError, contrast_set_build
from tests.annotation.work_helpers import make_worker
from tests.conftest import Cast

# With all-MiniLM-L6-v2 the two bread questions have cosine 0.863 and the two sea questions
# 0.861; every other two of these questions have cosine below 0.71.
QUESTIONS = {
    "bread": "How do I bake bread at home?",
    "sourdough": "How do I bake sourdough bread at home?",
    "poem": "Write a short poem about the sea.",
    "story": "Write a short story about the sea.",
    "capital": "What is the capital of France?",
    "vaccines": "Explain how vaccines work.",
}


@pytest.fixture(scope="module")
def embedding_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(autouse=True)
def private_cache(settings: LazySettings, embedding_cache: Path) -> None:
    settings.CONCORD_REWARD_CACHE_DIR = embedding_cache


def make_study(study: Study, names: list[str]) -> dict[str, tuple[Prompt, Answer, Answer]]:
    top, _ = System.objects.get_or_create(study=study, name="top-bot")
    low, _ = System.objects.get_or_create(study=study, name="low-bot")
    out = {}
    for name in names:
        prompt = Prompt.objects.create(study=study, external_id=name, turns=[QUESTIONS[name]])
        best = Answer.objects.create(prompt=prompt, system=top, turns=[f"{name} best"], rank=1)
        worse = Answer.objects.create(prompt=prompt, system=low, turns=[f"{name} worse"], rank=2)
        out[name] = (prompt, best, worse)
    return out


def stored_pairs(contrast_set: ContrastSet) -> set[frozenset[str]]:
    return {
        frozenset((c.prompt_a.external_id, c.prompt_b.external_id))
        for c in contrast_set.pairs.select_related("prompt_a", "prompt_b")
    }


def test_prompts_with_similar_questions_are_paired_with_their_first_ranked_answers(
    cast: Cast,
) -> None:
    rows = make_study(cast.study, list(QUESTIONS))
    built = contrast_set_build(study=cast.study, seed=0)

    contrast_set = built.stored.contrast_set
    assert stored_pairs(contrast_set) == {
        frozenset(("bread", "sourdough")),
        frozenset(("poem", "story")),
    }
    best = {answer for name, (_, answer, _) in rows.items()}
    for contrast in contrast_set.pairs.all():
        assert {contrast.answer_a, contrast.answer_b} <= best
        assert contrast.answer_a.prompt_id == contrast.prompt_a_id
        assert 0.75 <= contrast.similarity <= 0.9
    assert (contrast_set.low, contrast_set.high, contrast_set.best) == (0.75, 0.9, "first_ranked")
    assert built.message.startswith("Found 2 contrast pair(s) among 6 prompts")


def test_too_few_similar_prompts_say_how_many_pairs_were_found_and_why(cast: Cast) -> None:
    make_study(cast.study, ["bread", "poem", "capital", "vaccines"])
    with pytest.raises(ContrastBuildError) as caught:
        contrast_set_build(study=cast.study)
    message = str(caught.value)
    assert "Found 0 contrast pair(s) among 4 prompts" in message
    assert "of 6 prompt pairs, none has a question cosine in [0.75, 0.9]" in message
    assert "0 are above 0.9 (near duplicates) and 6 below 0.75" in message
    assert not ContrastSet.objects.exists()


def test_prompts_without_a_best_answer_are_left_out_and_counted(cast: Cast) -> None:
    rows = make_study(cast.study, ["bread", "sourdough", "poem", "story"])
    Answer.objects.filter(prompt=rows["poem"][0]).update(rank=None)
    built = contrast_set_build(study=cast.study)
    assert stored_pairs(built.stored.contrast_set) == {frozenset(("bread", "sourdough"))}
    assert "1 of 4 prompts were left out: no answer ranked first on its own" in built.message


def test_the_best_answer_can_be_a_named_systems_or_the_peoples_majority_winner(
    cast: Cast,
) -> None:
    rows = make_study(cast.study, ["bread", "sourdough"])
    low = System.objects.get(study=cast.study, name="low-bot")
    by_system = contrast_set_build(
        study=cast.study, seed=1, best=ContrastSet.Best.SYSTEM, system=low
    ).stored.contrast_set
    assert {c.answer_a.system_id for c in by_system.pairs.all()} == {low.pk}
    assert by_system.system == low

    # People prefer the worse-ranked answer of both prompts: the majority picks it.
    worker = make_worker(cast.study, "majority-voter")
    for prompt, best, worse in rows.values():
        a, b = sorted((best, worse), key=lambda answer: answer.pk)
        pair = Pair.objects.create(study=cast.study, prompt=prompt, answer_a=a, answer_b=b)
        pair.judgments.create(
            study=cast.study,
            worker=worker,
            is_imported=True,
            preference="A" if a == worse else "B",
        )
    by_people = contrast_set_build(
        study=cast.study, seed=2, best=ContrastSet.Best.MAJORITY
    ).stored.contrast_set
    contrast = by_people.pairs.get()
    assert {contrast.answer_a, contrast.answer_b} == {rows["bread"][2], rows["sourdough"][2]}


def test_the_command_builds_the_set_and_its_items(cast: Cast) -> None:
    make_study(cast.study, list(QUESTIONS))
    out = StringIO()
    call_command("build_contrast_set", "--study", cast.study.slug, "--items", stdout=out)
    text = out.getvalue()
    assert "Found 2 contrast pair(s) among 6 prompts" in text
    assert "Contrast items: 4 created" in text
    assert Pair.objects.filter(study=cast.study, source=Pair.Source.CONTRAST).count() == 4

    again = StringIO()
    call_command("build_contrast_set", "--study", cast.study.slug, "--items", stdout=again)
    assert "already stored" in again.getvalue()
    assert "0 created, 4 already present" in again.getvalue()


def test_the_command_names_what_is_wrong(cast: Cast) -> None:
    make_study(cast.study, ["bread", "capital"])
    with pytest.raises(CommandError, match="Found 0 contrast pair"):
        call_command("build_contrast_set", "--study", cast.study.slug)
    with pytest.raises(CommandError, match="Give --system exactly when --best is 'system'"):
        call_command("build_contrast_set", "--study", cast.study.slug, "--best", "system")
    with pytest.raises(CommandError, match="No study with slug 'nope'"):
        call_command("build_contrast_set", "--study", "nope")
