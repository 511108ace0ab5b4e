"""The "Rankings that control for style" section on a small study whose people prefer the longer,
bolder answers and whose judge does not: the counts PostgreSQL reads against Python's regular
expressions, the section's numbers against the statistics called on the votes assembled here
(one row per vote, where the section counts a pair's equal votes once), the baseline rule, the
page, its CSV and plots."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System, Worker
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.selectors.frames import VoteFilters
from leaderboard.selectors.section_reads import report_styles_get
from leaderboard.services.reports import ReportParams, agreement_report_build
from leaderboard.stats.style_control import (
    STYLE_FEATURES,
    contextual_bradley_terry,
    length_controlled_win_rate,
    style_differences,
)
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.leaderboard.conftest import get_computed

FAST = ReportParams(ci_rounds=50, elo_rounds=3, bt_rounds=3)
OUTCOME = {"A": 1.0, "B": 0.0, "tie": 0.5}


def python_counts(text: str) -> dict[str, int]:
    """FastChat's count_markdown_elements, written again with Python's re."""
    text = re.sub(r"```[^`]*```", "", text)
    return {
        "tokens": len(text.split()),
        "headers": len(re.findall(r"^#{1,6}\s", text, re.MULTILINE)),
        "lists": len(re.findall(r"^\s*\d+\.\s", text, re.MULTILINE))
        + len(re.findall(r"^\s*[-*+]\s", text, re.MULTILINE)),
        "bold": len(re.findall(r"\*\*[^*\n]+\*\*", text)) + len(re.findall(r"__[^_\n]+__", text)),
    }


def answer_text(rng: random.Random, words: int, bold: int, items: int) -> str:
    body = " ".join(rng.choice(["alpha", "beta", "gamma"]) for _ in range(words))
    parts = ["# Answer" if items else "", body]
    parts += [f"- point {i}" for i in range(items)]
    parts += [f"**key {i}**" for i in range(bold)]
    parts.append("```\n# code\n- not a list\n```" if rng.random() < 0.3 else "")
    return "\n".join(p for p in parts if p)


@dataclass
class Vote:
    source: str
    pair: Pair
    label: str


@dataclass
class World:
    study: Study
    texts: dict[int, str]  # answer id -> text
    systems: dict[int, str]  # answer id -> system name
    votes: list[Vote]


@pytest.fixture
def world(cast: Cast) -> World:
    return style_world_build(cast)


def style_world_build(cast: Cast) -> World:
    """30 prompts of three systems (base in the most pairs), three raters who prefer the longer
    answer four times in five, and a judge that ignores length."""
    rng = random.Random(5)
    study = cast.study
    workers = [cast.worker_one, cast.worker_two]
    workers.append(Worker.objects.create(study=study, panel="invite", external_id="third"))
    systems = {
        name: System.objects.create(study=study, name=name) for name in ("base", "long", "short")
    }
    run = JudgeRun.objects.create(
        judge=Judge.objects.create(name="judge", kind=Judge.Kind.LLM), study=study, status="done"
    )
    texts: dict[int, str] = {}
    names: dict[int, str] = {}
    votes: list[Vote] = []
    for p in range(30):
        prompt = Prompt.objects.create(study=study, external_id=f"q{p}", turns=["?"])
        answers = []
        for name, system in systems.items():
            # Lengths vary within a system (so that length is told apart from the system),
            # and long's are longer on average.
            words = rng.randint(5, 100) + {"base": 0, "long": 60, "short": 0}[name]
            text = answer_text(rng, words, rng.randint(0, 3), rng.randint(0, 4))
            answer = Answer.objects.create(prompt=prompt, system=system, turns=[text])
            texts[answer.pk], names[answer.pk] = text, name
            answers.append(answer)
        # Every pair with the baseline, and long against short on even prompts: base is in
        # the most pairs.
        combos = [(answers[0], answers[1]), (answers[0], answers[2])]
        if p % 2 == 0:
            combos.append((answers[1], answers[2]))
        for first, second in combos:
            pair = Pair.objects.create(study=study, prompt=prompt, answer_a=first, answer_b=second)
            gap = len(texts[second.pk]) - len(texts[first.pk])
            for worker in workers:
                # People prefer the longer answer four times in five.
                longer = "B" if gap > 0 else "A"
                label = longer if rng.random() < 0.8 else rng.choice(["A", "B", "tie"])
                HumanJudgment.objects.create(
                    study=study,
                    pair=pair,
                    worker=worker,
                    assignment=make_assignment(pair, worker),
                    a_left=True,
                    likert_shown={"A": 2, "B": 7, "tie": 4}[label],
                    likert={"A": 2, "B": 7, "tie": 4}[label],
                    preference=label,
                )
                votes.append(Vote("human", pair, label))
            label = rng.choice(["A", "B", "A", "B", "tie"])  # the judge ignores length
            JudgeCall.objects.create(
                run=run,
                pair=pair,
                order="ab",
                status="done",
                likert_shown={"A": 2, "B": 7, "tie": 4}[label],
                likert={"A": 2, "B": 7, "tie": 4}[label],
                preference=label,
            )
            votes.append(Vote("judge", pair, label))
    return World(study, texts, names, votes)


def test_style_counts_read_by_postgresql_match_python_regular_expressions(world: World) -> None:
    styles = report_styles_get(study=world.study, filters=VoteFilters()).set_index("pair_id")
    pairs = Pair.objects.filter(study=world.study)
    assert len(styles) == pairs.count()
    for pair in pairs:
        for side, answer_id in (("a", pair.answer_a_id), ("b", pair.answer_b_id)):
            expected = python_counts(world.texts[answer_id])
            got = {f: int(styles[f"{f}_{side}"].loc[pair.pk]) for f in STYLE_FEATURES}
            assert got == expected
    assert python_counts("# T\n- a\n  2. b\n**x** __y__\n```\n# no\n```")["headers"] == 1


def _lc_inputs(world: World, source: str, model: str) -> tuple[np.ndarray, ...]:
    outcome, mine, theirs, prompts = [], [], [], []
    for vote in (v for v in world.votes if v.source == source):
        a, b = vote.pair.answer_a_id, vote.pair.answer_b_id
        pair_systems = (world.systems[a], world.systems[b])
        if sorted(pair_systems) != sorted(("base", model)):
            continue
        model_is_a = pair_systems[0] == model
        score = OUTCOME[vote.label] if model_is_a else 1 - OUTCOME[vote.label]
        outcome.append(score)
        mine.append(len(world.texts[a if model_is_a else b]))
        theirs.append(len(world.texts[b if model_is_a else a]))
        prompts.append(vote.pair.prompt_id)
    return tuple(np.array(x) for x in (outcome, mine, theirs, prompts))


def test_length_controlled_win_rates_are_the_glm_on_each_sources_votes_with_the_baseline(
    world: World,
) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["style_control"]
    assert section["has_answer_texts"] is True
    assert (section["baseline"], section["baseline_source"]) == ("base", "most pairs")
    for source in ("human", "judge"):
        rows = {r["model"]: r for r in section["length_controlled"][source]["models"]}
        assert set(rows) == {"long", "short"}
        for model, row in rows.items():
            outcome, mine, theirs, prompts = _lc_inputs(world, source, model)
            expected = length_controlled_win_rate(outcome, mine, theirs, prompts, rounds=50, seed=0)
            assert row["votes"] == len(outcome) and row["prompts"] == 30
            assert row["win_rate"]["value"] == pytest.approx(outcome.mean(), abs=1e-9)
            for key in ("value", "lower", "upper"):
                assert row["length_controlled"][key] == pytest.approx(
                    getattr(expected.length_controlled, key), abs=1e-8
                )
                assert row["length_coefficient"][key] == pytest.approx(
                    getattr(expected.length_coefficient, key), abs=1e-8
                )
    people = section["length_controlled"]["human"]["models"]
    # People's raw win rates follow length; the control pulls long down and short up.
    long, short = (next(r for r in people if r["model"] == m) for m in ("long", "short"))
    assert long["win_rate"]["value"] > 0.7
    assert long["length_controlled"]["value"] < long["win_rate"]["value"]
    assert long["length_coefficient"]["lower"] > 0


def test_a_baseline_the_researcher_picks_is_used_and_an_unknown_one_named(world: World) -> None:
    params = ReportParams(ci_rounds=20, elo_rounds=3, bt_rounds=3, baseline="short")
    section = agreement_report_build(study=world.study, params=params)["style_control"]
    assert (section["baseline"], section["baseline_source"]) == ("short", "parameter")
    rows = section["length_controlled"]["human"]["models"]
    assert {r["model"] for r in rows} == {"base", "long"}
    params = ReportParams(ci_rounds=20, elo_rounds=3, bt_rounds=3, baseline="nobody")
    section = agreement_report_build(study=world.study, params=params)["style_control"]
    assert section["baseline"] is None
    assert section["status"] == "baseline 'nobody' is in no pair of this selection"
    assert section["length_controlled"]["human"] is None
    assert section["style"]["human"] is not None  # the style board needs no baseline


def test_style_board_is_the_contextual_fit_on_every_vote_with_prompt_clusters(
    world: World,
) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["style_control"]
    for source in ("human", "judge"):
        mine = [v for v in world.votes if v.source == source]
        counts = {
            side: np.array(
                [
                    [
                        python_counts(world.texts[getattr(v.pair, f"answer_{side}_id")])[f]
                        for f in STYLE_FEATURES
                    ]
                    for v in mine
                ]
            )
            for side in "ab"
        }
        expected = contextual_bradley_terry(
            [world.systems[v.pair.answer_a_id] for v in mine],
            [world.systems[v.pair.answer_b_id] for v in mine],
            [OUTCOME[v.label] for v in mine],
            style_differences(counts["a"], counts["b"]),
            feature_names=STYLE_FEATURES,
            clusters=[v.pair.prompt_id for v in mine],
        )
        board = section["style"][source]
        assert board["battles"] == len(mine) and board["clusters"] == 30
        for feature in STYLE_FEATURES:
            for key in ("value", "lower", "upper"):
                assert board["coefficients"][feature][key] == pytest.approx(
                    getattr(expected.coefficients[feature], key), abs=1e-6
                )
        for model in ("base", "long", "short"):
            assert board["controlled"][model]["value"] == pytest.approx(
                expected.ratings[model].value, abs=1e-4
            )
    # People's preference is for length, the judge's is not.
    people = section["style"]["human"]["coefficients"]["tokens"]
    judge = section["style"]["judge"]["coefficients"]["tokens"]
    assert people["lower"] > 0 and judge["lower"] < 0 < judge["upper"]
    # With length controlled, people's ratings of long and short come closer.
    plain, controlled = section["style"]["human"]["plain"], section["style"]["human"]["controlled"]
    assert (
        controlled["long"]["value"] - controlled["short"]["value"]
        < plain["long"]["value"] - plain["short"]["value"]
    )


def test_without_answer_texts_the_section_says_so(world: World) -> None:
    Answer.objects.filter(prompt__study=world.study).update(turns=[])
    section = agreement_report_build(study=world.study, params=FAST)["style_control"]
    assert section["has_answer_texts"] is False and section["status"] == "no answer texts"
    assert all(v is None for v in section["style"].values())
    assert all(v is None for v in section["length_controlled"].values())


def test_the_page_shows_the_tables_and_plots_and_the_coefficients_download_as_csv(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[world.study.slug]))
    html = page.content.decode()
    assert 'id="style-control"' in html
    for name in ("length-controlled", "style-controlled", "style-coefficients"):
        assert f'data-table="{name}"' in html
    for plot in ("length-controlled-human", "length-controlled-judge", "style-coefficients"):
        assert f"plots/{plot}.svg" in html
    url = reverse("leaderboard:study_analysis_table", args=[world.study.slug, "style-coefficients"])
    rows = get_computed(client, url).content.decode().splitlines()
    assert rows[0].startswith("source,feature,coefficient,lower,upper")
    human_tokens = next(r for r in rows if r.startswith("human,tokens,"))
    assert human_tokens.split(",")[6] == "1.0"  # people's over people's
    assert len([r for r in rows if r.startswith("judge,")]) == len(STYLE_FEATURES)
