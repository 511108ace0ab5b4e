"""The report's per-answer ratings section, checked against plain Python and the `krippendorff`
package on a small study, with its page, plots and drill-down to the items."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from dataclasses import dataclass

import krippendorff
import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import (
    FINE_GRAINED_AXES,
    Answer,
    HumanJudgment,
    Pair,
    Prompt,
    Study,
    System,
    Worker,
)
from leaderboard.report.base import ReportParams
from leaderboard.services.reports import agreement_report_build
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.leaderboard.conftest import get_computed

FAST = ReportParams(ci_rounds=200, elo_rounds=3, bt_rounds=3)
ACCEPT = ("accept", "reject", "unsure")
LEVELS = ("no", "partial", "yes")
ORDER = {"no": 0, "partial": 1, "yes": 2}


@dataclass
class Rating:
    pair: Pair
    rater: str
    preference: str
    acceptability: dict[str, str]  # side -> level
    axes: dict[str, dict[str, str]]  # side -> axis -> level


@dataclass
class World:
    study: Study
    ratings: list[Rating]
    systems: dict[int, str]  # answer id -> system


@pytest.fixture
def world(cast: Cast) -> World:
    rng = random.Random(5)
    study = cast.study
    Study.objects.filter(pk=study.pk).update(form_acceptability=True, form_axes=True)
    workers = [cast.worker_one, cast.worker_two]
    workers.append(Worker.objects.create(study=study, panel="invite", external_id="third"))
    systems = [System.objects.create(study=study, name=name) for name in ("good", "fair", "poor")]
    # A system's answers are accepted with these odds, so the shares differ between systems.
    accept_odds = {"good": 0.8, "fair": 0.5, "poor": 0.2}
    ratings: list[Rating] = []
    system_of: dict[int, str] = {}
    for p in range(5):
        prompt = Prompt.objects.create(study=study, external_id=f"q{p}", turns=["?"])
        answers = [Answer.objects.create(prompt=prompt, system=s, turns=["x"]) for s in systems]
        system_of |= {a.pk: a.system.name for a in answers}
        for first, second in itertools.combinations(answers, 2):
            pair = Pair.objects.create(study=study, prompt=prompt, answer_a=first, answer_b=second)
            for worker in workers:
                acceptability, axes = {}, {}
                for side, answer in (("a", first), ("b", second)):
                    odds = accept_odds[answer.system.name]
                    roll = rng.random()
                    acceptability[side] = (
                        "accept" if roll < odds else "unsure" if roll < odds + 0.1 else "reject"
                    )
                    axes[side] = {axis: rng.choice(LEVELS) for axis in FINE_GRAINED_AXES}
                likert = rng.randint(1, 8)
                preference = "A" if likert <= 3 else "B" if likert >= 6 else "tie"
                HumanJudgment.objects.create(
                    study=study,
                    pair=pair,
                    worker=worker,
                    assignment=make_assignment(pair, worker),
                    a_left=True,
                    likert_shown=likert,
                    likert=likert,
                    preference=preference,
                    acceptability_a=acceptability["a"],
                    acceptability_b=acceptability["b"],
                    axes=axes,
                )
                ratings.append(Rating(pair, f"w{worker.pk}", preference, acceptability, axes))
    return World(study, ratings, system_of)


def _level(r: Rating, side: str, rating: str) -> str:
    return r.acceptability[side] if rating == "acceptability" else r.axes[side][rating]


def _answer(r: Rating, side: str) -> int:
    return r.pair.answer_a_id if side == "a" else r.pair.answer_b_id


def test_each_systems_shares_are_its_answers_ratings_at_each_level(world: World) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["answer_ratings"]
    assert section["asked"] == ["acceptability", *FINE_GRAINED_AXES]
    assert section["judgments"] == len(world.ratings)
    by_system = {s["system"]: s for s in section["systems"]}
    assert sorted(by_system) == ["fair", "good", "poor"]
    for name, entry in by_system.items():
        for rating in ("acceptability", *FINE_GRAINED_AXES):
            given = Counter(
                _level(r, side, rating)
                for r in world.ratings
                for side in ("a", "b")
                if world.systems[_answer(r, side)] == name
            )
            total = sum(given.values())
            assert entry["ratings"] == total
            shares = entry["shares"][rating]
            assert shares["total"] == total and shares["resampled"] == "prompt"
            assert shares["clusters"] == 5 and shares["rounds"] == FAST.ci_rounds
            levels = ACCEPT if rating == "acceptability" else LEVELS
            assert [s["level"] for s in shares["levels"]] == list(levels)
            for share in shares["levels"]:
                count = given.get(share["level"], 0)
                assert (share["count"], share["total"]) == (count, total)
                assert share["share"] == pytest.approx(count / total)
                assert share["lower"] <= share["share"] <= share["upper"]
    accepted = {n: by_system[n]["shares"]["acceptability"]["levels"][0]["share"] for n in by_system}
    assert accepted["good"] > accepted["fair"] > accepted["poor"]


def test_agreement_per_rating_is_krippendorffs_alpha_among_the_raters_of_each_answer(
    world: World,
) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["answer_ratings"]
    raters = sorted({r.rater for r in world.ratings})
    units = sorted({(r.pair.pk, side) for r in world.ratings for side in ("a", "b")})
    got = {a["rating"]: a for a in section["agreement"]}
    for rating in ("acceptability", *FINE_GRAINED_AXES):
        nominal = rating == "acceptability"
        table = np.full((len(raters), len(units)), np.nan)
        for r in world.ratings:
            for side in ("a", "b"):
                level = _level(r, side, rating)
                code = ACCEPT.index(level) if nominal else ORDER[level]
                table[raters.index(r.rater), units.index((r.pair.pk, side))] = code
        expected = krippendorff.alpha(
            reliability_data=table, level_of_measurement="nominal" if nominal else "ordinal"
        )
        entry = got[rating]
        assert entry["level"] == ("nominal" if nominal else "ordinal")
        assert entry["alpha"] == pytest.approx(expected, abs=1e-9)
        assert entry["ratings"] == 2 * len(world.ratings) and entry["units"] == len(units)
        assert entry["ci"]["lower"] <= entry["alpha"] <= entry["ci"]["upper"]
        assert entry["ci"]["resample"] == "prompt" and entry["ci"]["drawn"] == 5


def test_the_preference_link_counts_how_often_the_preferred_answer_is_rated_higher(
    world: World,
) -> None:
    section = agreement_report_build(study=world.study, params=FAST)["answer_ratings"]
    got = {link["rating"]: link for link in section["preference"]}
    assert got["acceptability"]["question"] == "the preferred answer is the accepted one"
    assert got["factuality"]["question"] == "the preferred answer is the more factual one"
    for rating in ("acceptability", *FINE_GRAINED_AXES):
        higher = lower = 0
        preferring = 0
        for r in world.ratings:
            if r.preference == "tie":
                continue
            preferring += 1
            won, lost = ("a", "b") if r.preference == "A" else ("b", "a")
            if rating == "acceptability":
                mine, theirs = (int(r.acceptability[s] == "accept") for s in (won, lost))
            else:
                mine, theirs = (ORDER[r.axes[s][rating]] for s in (won, lost))
            higher += mine > theirs
            lower += mine < theirs
        link = got[rating]
        assert link["preferring"] == preferring
        shares = {s["level"]: s for s in link["shares"]["levels"]}
        assert (shares["higher"]["count"], shares["lower"]["count"]) == (higher, lower)
        assert shares["higher"]["share"] == pytest.approx(higher / (higher + lower))


def test_a_study_without_per_answer_ratings_has_an_empty_section(cast: Cast) -> None:
    section = agreement_report_build(study=cast.study, params=FAST)["answer_ratings"]
    assert section["asked"] == [] and section["systems"] == [] and section["judgments"] == 0


def test_the_page_shows_the_tables_plots_and_links_to_the_rated_units(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[world.study.slug]))
    html = page.content.decode()
    assert 'id="answer-ratings"' in html
    for name in ("answer-ratings", "answer-ratings-agreement", "answer-ratings-preference"):
        assert f'data-table="{name}"' in html
    assert "plots/answer-acceptability.svg" in html and "plots/answer-axes.svg" in html
    units = reverse("leaderboard:study_units", args=[world.study.slug])
    link = f"{units}?system=poor&amp;rating=acceptability&amp;level=reject"
    assert link in html
    # The units behind the link: the pairs where some rater rejected poor's answer.
    expected = {
        r.pair.pk
        for r in world.ratings
        for side in ("a", "b")
        if world.systems[_answer(r, side)] == "poor" and r.acceptability[side] == "reject"
    }
    listed = get_computed(client, f"{units}?system=poor&rating=acceptability&level=reject")
    assert listed.status_code == 200
    shown = {row.pair_id for row in listed.context["rows"]}
    assert shown == expected and expected
    # One unit's page shows every rater's ratings of both answers.
    pair_id = min(expected)
    detail = client.get(reverse("leaderboard:study_unit", args=[world.study.slug, pair_id]))
    body = detail.content.decode()
    assert 'data-table="answer-ratings"' in body
    judgment = HumanJudgment.objects.filter(pair_id=pair_id).order_by("pk").first()
    assert judgment is not None
    assert f"<td>{judgment.acceptability_a}</td><td>{judgment.axes['a']['relevance']}</td>" in body


def test_a_drill_down_to_a_rating_that_does_not_exist_is_refused_naming_it(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    units = reverse("leaderboard:study_units", args=[world.study.slug])
    response = client.get(f"{units}?system=poor&rating=factuality&level=maybe")
    assert response.status_code == 400
    assert "not &#x27;maybe&#x27;" in response.content.decode()
    client.force_login(cast.outsider)
    assert client.get(f"{units}?system=poor&rating=factuality&level=no").status_code == 404
