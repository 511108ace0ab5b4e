"""The SQL claim decides as the plain Python reference does (annotation/claim_reference.py) on
random small studies, seeded: at every step of each scenario the reference reads the rows the
database holds, the SQL's annotation_claim_pass makes its pass with the same time and rolls, and
both must agree on the outcome, the pair (one of the pairs the reference allows), the shown order,
the propensity recorded and whether an active study's filled pair leaves the priority walk."""

from __future__ import annotations

import ast
import math
import random
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from annotation import claim_reference
from annotation.claim_reference import (
    PRIORITY_KEY_NONE,
    AssignmentRow,
    Decision,
    PairRow,
    Rolls,
    StudyRow,
    claim_pass_reference,
)
from annotation.models import Answer, Assignment, Pair, Prompt, Study, System, Worker

pytestmark = pytest.mark.django_db

SCENARIOS = 40
STEPS = 12


def _scenario(rng: random.Random, index: int) -> tuple[Study, list[Worker]]:
    active = rng.random() < 0.5
    study = Study.objects.create(
        slug=f"reference-{index}",
        name=f"Reference {index}",
        status=Study.Status.LIVE,
        overlap=rng.randint(1, 3),
        target_per_worker=rng.randint(1, 6),
        qualification_items=rng.choice([0, 0, 1, 2]),
        gold_share=rng.choice(["0", "0.2", "0.5"]),
        time_limit_seconds=60,
        selection="active" if active else "uniform",
        uniform_share=rng.choice(["0.2", "0.5", "1"]),
    )
    prompt = Prompt.objects.create(study=study, external_id="p", turns=["q"])
    answers = [
        Answer.objects.create(
            prompt=prompt,
            system=System.objects.create(study=study, name=f"s{k}", version="1"),
            turns=[f"a{k}"],
        )
        for k in range(5)
    ]
    combos = [(a, b) for i, a in enumerate(answers) for b in answers[i + 1 :]]
    pool, total = 0, 0.0
    for a, b in rng.sample(combos, rng.randint(1, len(combos))):
        gold = rng.random() < 0.25
        # Some pairs never scored (priority 0, the lowest key: ties the SQL may break either way).
        priority = rng.choice([0.0, rng.random()]) if active and not gold else 0.0
        key = math.log(rng.random()) / priority if priority > 0 else PRIORITY_KEY_NONE
        Pair.objects.create(
            study=study,
            prompt=prompt,
            answer_a=a,
            answer_b=b,
            is_gold=gold,
            gold_side="A" if gold else "",
            gold_kind="first_vs_last" if gold else "",
            priority=priority,
            priority_key=key,
        )
        if not gold:
            pool += 1
            total += priority
    if active and rng.random() < 0.8:
        Study.objects.filter(pk=study.pk).update(priority_pool=pool, priority_total=total)
    workers = [
        Worker.objects.create(study=study, panel=Worker.Panel.INVITE, external_id=f"w{k}")
        for k in range(rng.randint(1, 4))
    ]
    return study, workers


def _rows(study: Study) -> tuple[StudyRow, list[PairRow], list[AssignmentRow]]:
    study.refresh_from_db()
    study_row = StudyRow(
        status=study.status,
        target_per_worker=study.target_per_worker,
        qualification_items=study.qualification_items,
        gold_share=float(study.gold_share),
        overlap=study.overlap,
        time_limit_seconds=study.time_limit_seconds,
        selection=study.selection,
        uniform_share=float(study.uniform_share),
        priority_pool=study.priority_pool,
        priority_total=study.priority_total,
    )
    pairs = [
        PairRow(p.pk, p.is_gold, p.shuffle_key, p.priority, p.priority_key)
        for p in Pair.objects.filter(study=study)
    ]
    assignments = [
        AssignmentRow(a.pk, a.pair_id, a.worker_id, a.a_left, a.status, a.expires_at)
        for a in Assignment.objects.filter(study=study)
    ]
    return study_row, pairs, assignments


def _sql_pass(worker: Worker, now: datetime, rolls: Rolls) -> tuple[str, int | None, bool | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT o_outcome, o_pair, o_a_left FROM annotation_claim_pass(%s, %s, %s, NULL, "
            "%s, %s, %s, %s, %s, %s)",
            [
                worker.pk,
                now,
                uuid.uuid4(),
                rolls.gold_roll,
                rolls.side_roll,
                rolls.gold_start,
                rolls.open_start,
                rolls.window,
                rolls.select_roll,
            ],
        )
        outcome, pair, a_left = cursor.fetchone()
    return outcome, pair, a_left


def _act(rng: random.Random, study: Study, workers: list[Worker], now: datetime) -> None:
    """What people do between claims: submit or return a reservation, get blocked, finish."""
    worker = rng.choice(workers)
    held = Assignment.objects.filter(worker=worker, status="reserved", expires_at__gt=now)
    roll = rng.random()
    if roll < 0.45:
        held.update(status="submitted", submitted_at=now)
    elif roll < 0.55:
        held.update(status="returned")
    elif roll < 0.58:
        Worker.objects.filter(pk=worker.pk).update(state=rng.choice(["blocked", "done"]))
    elif roll < 0.6:
        Study.objects.filter(pk=study.pk).update(status=rng.choice(["paused", "live"]))


def _agree(decision: Decision, outcome: str, pair: int | None, a_left: bool | None) -> None:
    assert outcome == decision.outcome
    if outcome in ("held", "reserved"):
        assert pair in {option.pair for option in decision.options}
        if outcome == "reserved":
            assert a_left == decision.a_left
        else:
            assert decision.held is not None
            assert pair == Assignment.objects.get(pk=decision.held).pair_id


@pytest.mark.parametrize("seed", [20261203])
def test_the_sql_claim_decides_as_the_python_reference(seed: int) -> None:
    rng = random.Random(seed)
    outcomes: dict[str, int] = {}
    for index in range(SCENARIOS):
        study, workers = _scenario(rng, index)
        now = timezone.now()
        for _ in range(STEPS):
            now += timedelta(seconds=rng.choice([0, 5, 30, 61]))
            _act(rng, study, workers, now)
            worker = rng.choice(workers)
            worker.refresh_from_db()
            rolls = Rolls(
                gold_roll=rng.random(),
                side_roll=rng.random(),
                gold_start=rng.random(),
                open_start=rng.random(),
                select_roll=rng.random(),
                window=rng.randint(1, 4),
            )
            study_row, pairs, assignments = _rows(study)
            decision = claim_pass_reference(
                study=study_row,
                worker_id=worker.pk,
                worker_state=worker.state,
                pairs=pairs,
                assignments=assignments,
                now=now,
                rolls=rolls,
            )
            outcome, pair, a_left = _sql_pass(worker, now, rolls)
            context = f"scenario {index}, worker {worker.pk}: {decision} / {outcome} {pair}"
            try:
                _agree(decision, outcome, pair, a_left)
            except AssertionError as error:
                raise AssertionError(context) from error
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome != "reserved":
                continue
            option = next(option for option in decision.options if option.pair == pair)
            made = Assignment.objects.get(worker=worker, status="reserved", expires_at__gt=now)
            assert made.pair_id == pair, context
            if option.propensity is None:
                assert made.propensity is None, context
            else:
                assert made.propensity == pytest.approx(option.propensity, rel=1e-9), context
            key = Pair.objects.get(pk=pair).priority_key
            assert (key == PRIORITY_KEY_NONE) == (
                option.closes
                or dict((p.id, p.priority_key) for p in pairs)[pair] == PRIORITY_KEY_NONE
            ), context
    # The scenarios reach every outcome a lone claimer can meet.
    assert set(outcomes) == {"reserved", "held", "none", "blocked", "not_live"}, outcomes
    assert outcomes["reserved"] > 100, outcomes


def test_the_reference_is_plain_python() -> None:
    tree = ast.parse(Path(claim_reference.__file__).read_text())
    imported = {
        alias.name if isinstance(node, ast.Import) else str(node.module)
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"__future__", "collections.abc", "dataclasses", "datetime"}, imported
