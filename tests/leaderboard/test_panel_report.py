"""A panel (jury) in the report: its votes read as any judge's, its agreement with people beside
each member's, and its cost the sum of its members' in the agreement-per-dollar table."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, HumanJudgment, Pair, Prompt, Study, System, Worker
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.panels import panel_create
from leaderboard.selectors.frames import VoteFilters
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.judges.conftest import panel_run
from tests.leaderboard.conftest import get_computed

pytestmark = pytest.mark.django_db


FAST = ReportParams(ci_rounds=50, elo_rounds=3, bt_rounds=3)
LIKERT = {"A": 2, "B": 7, "tie": 4}
PRICE = {"m1": Decimal("0.001"), "m2": Decimal("0.003"), "m3": Decimal("0.010")}


def majority(labels: list[str]) -> str:
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


@dataclass
class World:
    study: Study
    people: dict[int, list[str]]
    members: dict[str, dict[int, str]]  # member -> pair id -> label (both orders alike)
    runs: dict[str, JudgeRun]
    categories: dict[int, str]


@pytest.fixture
def world(cast: Cast) -> World:
    rng = random.Random(11)
    study = cast.study
    workers = [cast.worker_one, cast.worker_two]
    workers.append(Worker.objects.create(study=study, panel="invite", external_id="third"))
    s1, s2 = (System.objects.create(study=study, name=n) for n in ("s1", "s2"))
    runs = {
        name: JudgeRun.objects.create(
            judge=Judge.objects.create(name=name, kind=kind, study=study),
            study=study,
            status="done",
        )
        for name, kind in (("m1", "llm"), ("m2", "llm"), ("m3", "llm"), ("pl", "pl"))
    }
    people: dict[int, list[str]] = {}
    members: dict[str, dict[int, str]] = {name: {} for name in runs}
    categories: dict[int, str] = {}
    for p in range(16):
        category = "math" if p % 2 else "writing"
        prompt = Prompt.objects.create(
            study=study, external_id=f"q{p}", turns=["?"], category=category
        )
        a = Answer.objects.create(prompt=prompt, system=s1, turns=["x"])
        b = Answer.objects.create(prompt=prompt, system=s2, turns=["y"])
        pair = Pair.objects.create(study=study, prompt=prompt, answer_a=a, answer_b=b)
        categories[pair.pk] = category
        truth = rng.choice(["A", "B"])
        people[pair.pk] = []
        for worker in workers:
            label = truth if rng.random() < 0.8 else rng.choice(["A", "B", "tie"])
            HumanJudgment.objects.create(
                study=study,
                pair=pair,
                worker=worker,
                assignment=make_assignment(pair, worker),
                a_left=True,
                likert_shown=LIKERT[label],
                likert=LIKERT[label],
                preference=label,
            )
            people[pair.pk].append(label)
        for name, run in runs.items():
            label = truth if rng.random() < 0.65 else rng.choice(["A", "B", "tie"])
            members[name][pair.pk] = label
            for order in ("ab", "ba"):
                JudgeCall.objects.create(
                    run=run,
                    pair=pair,
                    order=order,
                    status="done",
                    likert=LIKERT[label],
                    likert_shown=LIKERT[label] if order == "ab" else 9 - LIKERT[label],
                    preference=label,
                    cost_usd=PRICE.get(name, Decimal(0)),
                )
        for run in runs.values():
            run.pairs.add(pair)
    return World(study, people, members, runs, categories)


def jury(world: World, cast: Cast, names: tuple[str, ...] = ("m1", "m2", "m3")) -> JudgeRun:
    panel = panel_create(
        name="jury",
        study=world.study,
        members=[world.runs[n].judge for n in names],
        rule="majority",
    )
    return panel_run(judge=panel, study=world.study, user=cast.researcher)


def test_the_panel_has_its_agreement_and_summed_cost_beside_its_members(
    world: World, cast: Cast
) -> None:
    jury(world, cast)
    payload = agreement_report_build(study=world.study, params=FAST)
    rows = {r["source"]: r for r in payload["agreement_cost"]["rows"]}
    assert {"jury", "m1", "m2", "m3"} <= set(rows)
    assert rows["jury"]["kind"] == "panel"
    panel_votes = {
        pair: majority([world.members[m][pair] for m in ("m1", "m2", "m3")])
        for pair in world.people
    }
    truth = {pair: majority(labels) for pair, labels in world.people.items()}
    hits = sum(panel_votes[p] == truth[p] for p in world.people)
    assert (rows["jury"]["agreement"]["count"], rows["jury"]["agreement"]["total"]) == (hits, 16)
    for name in ("m1", "m2", "m3"):
        own = sum(world.members[name][p] == truth[p] for p in world.people)
        assert rows[name]["agreement"]["count"] == own
    # Two calls a pair at each member's price: 2 x (0.001 + 0.003 + 0.010) = $0.028 a pair.
    assert rows["jury"]["cost_per_1000"] == pytest.approx(28.0)
    assert rows["jury"]["cost_per_1000"] == pytest.approx(
        sum(rows[m]["cost_per_1000"] for m in ("m1", "m2", "m3"))
    )
    assert rows["jury"]["priced_by"] == "members' ledgers"
    assert rows["jury"]["agreement_per_dollar"] == pytest.approx(
        rows["jury"]["agreement"]["share"] / 28.0
    )
    # The panel is a judge in every section: its agreement with people and its win rates.
    assert "jury" in payload["judges"] and "m1" in payload["judges"]
    rates = payload["win_rates"]["sources"]["jury"]
    s1_wins = sum(v == "A" for v in panel_votes.values()) + 0.5 * sum(
        v == "tie" for v in panel_votes.values()
    )
    i, j = rates["models"].index("s1"), rates["models"].index("s2")
    assert rates["rates"][i][j] == pytest.approx(s1_wins / 16)


def test_the_panels_cost_follows_the_reports_filters_and_its_runs_alone(
    world: World, cast: Cast
) -> None:
    run = jury(world, cast)
    # Only the panel's run selected, on the math prompts: the members' calls there still count.
    filters = VoteFilters(category="math", judge_run_ids=(run.pk,))
    payload = agreement_report_build(study=world.study, filters=filters, params=FAST)
    rows = {r["source"]: r for r in payload["agreement_cost"]["rows"]}
    assert set(rows) == {"human", "jury"}
    assert rows["jury"]["agreement"]["total"] == 8
    assert rows["jury"]["cost_per_1000"] == pytest.approx(28.0)


def test_a_panel_with_a_pl_member_is_priced_with_the_rate_or_not_at_all(
    world: World, cast: Cast
) -> None:
    jury(world, cast, names=("m1", "pl"))
    rows = {
        r["source"]: r
        for r in agreement_report_build(study=world.study, params=FAST)["agreement_cost"]["rows"]
    }
    assert rows["jury"]["cost_per_1000"] is None and rows["jury"]["priced_by"] == ""
    priced = ReportParams(ci_rounds=50, elo_rounds=3, bt_rounds=3, pl_usd_per_1000=0.5)
    rows = {
        r["source"]: r
        for r in agreement_report_build(study=world.study, params=priced)["agreement_cost"]["rows"]
    }
    # m1: two calls a pair at $0.001 = $2 per 1,000 pairs, and the PL member's rate.
    assert rows["jury"]["cost_per_1000"] == pytest.approx(2.5)
    assert rows["jury"]["priced_by"] == "members' ledgers and rate"


def test_the_analysis_page_lists_the_panel_in_the_cost_table(
    world: World, cast: Cast, client: Client
) -> None:
    jury(world, cast)
    client.force_login(cast.researcher)
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[world.study.slug]))
    html = page.content.decode()
    table = html[html.index('data-table="agreement-per-dollar"') :]
    table = table[: table.index("</table>")]
    assert ">jury<" in table and "members&#x27; ledgers" in table
