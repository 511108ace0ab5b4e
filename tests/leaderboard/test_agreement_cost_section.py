"""The "Agreement with people per dollar" section on a small study whose two LLM judges cost
different amounts, a PL reward model priced at the researcher's rate, and people paid through
the pay ledger: each row against a plain Python count, the Pareto flags, the page and plot."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Answer, HumanJudgment, Pair, PayEntry, Prompt, Study, System, Worker
from judges.models import Judge, JudgeCall, JudgeRun
from leaderboard.services.reports import ReportParams, agreement_report_build
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.leaderboard.conftest import get_computed

FAST = ReportParams(ci_rounds=50, elo_rounds=3, bt_rounds=3)
LIKERT = {"A": 2, "B": 7, "tie": 4}


@dataclass
class World:
    study: Study
    people: dict[int, list[str]]  # pair id -> labels
    judges: dict[str, dict[int, str]]  # judge -> pair id -> label
    cost: dict[str, Decimal]  # judge -> summed cost of its calls
    paid_cents: int
    paid_judgments: int


def majority(labels: list[str]) -> str:
    counts = Counter(labels).most_common()
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


@pytest.fixture
def world(cast: Cast) -> World:
    rng = random.Random(3)
    study = cast.study
    workers = [cast.worker_one, cast.worker_two]
    workers.append(Worker.objects.create(study=study, panel="invite", external_id="third"))
    s1, s2 = (System.objects.create(study=study, name=n) for n in ("s1", "s2"))
    runs = {
        name: JudgeRun.objects.create(
            judge=Judge.objects.create(name=name, kind=kind), study=study, status="done"
        )
        for name, kind in (("cheap", "llm"), ("dear", "llm"), ("pl", "pl"))
    }
    price = {"cheap": Decimal("0.001"), "dear": Decimal("0.02"), "pl": Decimal(0)}
    people: dict[int, list[str]] = {}
    judges: dict[str, dict[int, str]] = {name: {} for name in runs}
    cost = dict.fromkeys(runs, Decimal(0))
    paid_cents = paid_judgments = 0
    for p in range(20):
        prompt = Prompt.objects.create(study=study, external_id=f"q{p}", turns=["?"])
        a = Answer.objects.create(prompt=prompt, system=s1, turns=["x"])
        b = Answer.objects.create(prompt=prompt, system=s2, turns=["y"])
        pair = Pair.objects.create(study=study, prompt=prompt, answer_a=a, answer_b=b)
        truth = rng.choice(["A", "B"])
        people[pair.pk] = []
        for i, worker in enumerate(workers):
            label = truth if rng.random() < 0.75 else rng.choice(["A", "B", "tie"])
            judgment = HumanJudgment.objects.create(
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
            rejected = i == 2 and p % 5 == 0
            PayEntry.objects.create(
                study=study,
                worker=worker,
                judgment=judgment,
                kind="judgment",
                amount_cents=20,
                status="rejected" if rejected else "approved",
            )
            if not rejected:
                paid_cents, paid_judgments = paid_cents + 20, paid_judgments + 1
        for name, run in runs.items():
            skill = {"cheap": 0.6, "dear": 0.9, "pl": 0.7}[name]
            label = truth if rng.random() < skill else ("B" if truth == "A" else "A")
            JudgeCall.objects.create(
                run=run,
                pair=pair,
                order="ab",
                status="done",
                likert_shown=LIKERT[label],
                likert=LIKERT[label],
                preference=label,
                cost_usd=price[name],
            )
            judges[name][pair.pk] = label
            cost[name] += price[name]
    return World(study, people, judges, cost, paid_cents, paid_judgments)


def test_each_source_has_its_agreement_cost_and_agreement_per_dollar(world: World) -> None:
    params = ReportParams(ci_rounds=50, elo_rounds=3, bt_rounds=3, pl_usd_per_1000=0.5)
    rows = {
        r["source"]: r
        for r in agreement_report_build(study=world.study, params=params)["agreement_cost"]["rows"]
    }
    assert set(rows) == {"human", "cheap", "dear", "pl"}
    majority_of = {pair: majority(labels) for pair, labels in world.people.items()}
    for name in ("cheap", "dear", "pl"):
        hits = sum(label == majority_of[p] for p, label in world.judges[name].items())
        row = rows[name]
        assert (row["agreement"]["count"], row["agreement"]["total"]) == (hits, 20)
        assert row["agreement"]["resampled"] == "prompt" and row["agreement"]["clusters"] == 20
    assert rows["cheap"]["cost_per_1000"] == pytest.approx(1.0)  # $0.001 a pair
    assert rows["dear"]["cost_per_1000"] == pytest.approx(20.0)
    assert (rows["pl"]["cost_per_1000"], rows["pl"]["priced_by"]) == (0.5, "rate")
    for name in ("cheap", "dear", "pl"):
        row = rows[name]
        expected = row["agreement"]["share"] / row["cost_per_1000"]
        assert row["agreement_per_dollar"] == pytest.approx(expected)
    # The crowd: each vote against the other two votes' majority; one vote per pair at the
    # mean judgment pay of the pay ledger (rejected entries left out).
    held_out = 0
    for labels in world.people.values():
        for i, label in enumerate(labels):
            held_out += label == majority(labels[:i] + labels[i + 1 :])
    crowd = rows["human"]
    assert (crowd["agreement"]["count"], crowd["agreement"]["total"]) == (held_out, 60)
    assert crowd["cost_per_1000"] == pytest.approx(
        world.paid_cents / 100 / world.paid_judgments * 1000
    )
    assert crowd["priced_by"] == "pay ledger"
    # Pareto: a source is on the front unless another costs no more and agrees no less.
    points = {n: (r["cost_per_1000"], r["agreement"]["share"]) for n, r in rows.items()}
    for name, (cost, share) in points.items():
        beaten = any(
            c <= cost and s >= share and (c < cost or s > share)
            for other, (c, s) in points.items()
            if other != name
        )
        assert rows[name]["pareto"] is (not beaten)


def test_a_pl_model_without_a_rate_is_not_priced(world: World) -> None:
    rows = agreement_report_build(study=world.study, params=FAST)["agreement_cost"]["rows"]
    pl = next(r for r in rows if r["source"] == "pl")
    assert pl["cost_per_1000"] is None and pl["agreement_per_dollar"] is None
    assert pl["priced_by"] == "" and pl["pareto"] is False


def test_the_page_shows_the_table_and_the_pareto_plot(
    world: World, client: Client, cast: Cast
) -> None:
    client.force_login(cast.researcher)
    page = get_computed(client, reverse("leaderboard:study_analysis", args=[world.study.slug]))
    html = page.content.decode()
    assert 'id="agreement-cost"' in html and 'data-table="agreement-per-dollar"' in html
    assert "plots/agreement-cost.svg" in html
    url = reverse("leaderboard:study_analysis_plot", args=[world.study.slug, "agreement-cost"])
    svg = get_computed(client, url).content.decode()
    assert svg.startswith("<svg") and ">cheap</text>" in svg and ">human</text>" in svg
