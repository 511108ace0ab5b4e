"""Active selection's pair priorities: the four-term score of the replay on hand-made pairs, the
live Neyman priority the analysis worker stores, its draw keys, and the worker's triggers (after
a judge run, and beat's refresh)."""

from __future__ import annotations

import base64
import json
import math
import random

import numpy as np
import pytest
import redis
from django.conf import settings

from annotation.models import PRIORITY_KEY_NONE, HumanJudgment, Pair, Study, Worker
from annotation.services.priority import pair_priorities_store, priority_key_draw
from judges.models import Judge, JudgeCall, JudgeRun
from judges.services.calls import run_finish_if_complete
from leaderboard.services.priority import pair_priorities_recompute, pair_priorities_refresh
from leaderboard.stats.active import PriorityWeights, pair_priority, priority_terms
from tests.annotation.work_helpers import make_pairs, make_worker
from tests.conftest import Cast
from tests.factories import make_assignment
from tests.judges.integration import broker_purge


def test_the_four_terms_of_hand_made_pairs_are_the_documented_shares() -> None:
    terms = priority_terms(
        # Judges: split three ways (1), unanimous (0), 3 of 4 (0.25 / 0.5 = 0.5).
        judge_counts=[[1, 1, 1], [2, 0, 0], [3, 0, 1]],
        # People: none, split 1-1 (1), 2 of 3 ((1/3) / (2/3) = 0.5).
        human_counts=[[0, 0, 0], [1, 0, 1], [2, 1, 0]],
        # Intervals: [0, 2] vs [1, 3] (1 of 2), disjoint, one without an interval.
        lower_a=[0.0, 0.0, np.nan],
        upper_a=[2.0, 1.0, np.nan],
        lower_b=[1.0, 5.0, 0.0],
        upper_b=[3.0, 6.0, 1.0],
        # 5 votes over 3 pairs: r = 5/3; "x" has 0 per pair (1), "y" 2.5 (0).
        categories=np.array(["x", "y", "y"], dtype=object),
    )
    assert terms["judge_disagreement"].tolist() == pytest.approx([1.0, 0.0, 0.5])
    assert terms["human_disagreement"].tolist() == pytest.approx([0.0, 1.0, 0.5])
    assert terms["interval_overlap"].tolist() == pytest.approx([0.5, 0.0, 1.0])
    assert terms["under_coverage"].tolist() == pytest.approx([1.0, 0.0, 0.0])
    priority = pair_priority(terms, PriorityWeights())
    assert priority.tolist() == pytest.approx([2.5 / 4, 1.0 / 4, 2.0 / 4])


def test_a_weighted_key_order_draws_the_first_pair_in_proportion_to_priority() -> None:
    rng = random.Random(7)
    weights = [0.1, 0.2, 0.3, 0.4, 0.0]
    firsts = np.zeros(len(weights))
    draws = 20_000
    for _ in range(draws):
        keys = [priority_key_draw(w, rng) for w in weights]
        firsts[int(np.argmax(keys))] += 1
    # Binomial sd at p = 0.4 over 20,000 draws is 0.0035: 0.015 is four of them.
    assert (firsts / draws).tolist() == pytest.approx(weights, abs=0.015)
    # A zero priority is below every positive one, and an unscored pair below that.
    assert max(priority_key_draw(0.0, rng) for _ in range(1000)) < min(
        priority_key_draw(1e-9, rng) for _ in range(1000)
    )
    assert min(priority_key_draw(0.0, rng) for _ in range(1000)) > PRIORITY_KEY_NONE


def vote_record(pair: Pair, worker: Worker, preference: str) -> HumanJudgment:
    return HumanJudgment.objects.create(
        study=pair.study,
        pair=pair,
        worker=worker,
        assignment=make_assignment(pair, worker),
        a_left=True,
        preference=preference,
    )


def hand_made_study(cast: Cast) -> tuple[Study, list[Pair], Pair]:
    """Three regular pairs and a gold one of the cast's study, with known judge calls and votes:
    pair 1 (advice): judges A, B, tie; people A, A. Pair 2 (advice): judges A, A; people A, A, B.
    Pair 3 (coding): nothing yet."""
    study = cast.study
    study.overlap = 3
    study.save(update_fields=["overlap"])
    *pairs, gold = make_pairs(study, 3, gold=1)
    pairs[2].prompt.category = "coding"
    pairs[2].prompt.save(update_fields=["category"])
    runs = [
        JudgeRun.objects.create(
            judge=Judge.objects.create(name=f"j{i}", kind=Judge.Kind.LLM),
            study=study,
            status=JudgeRun.Status.DONE,
        )
        for i in range(3)
    ]
    for pair, verdicts in ((pairs[0], "A B tie"), (pairs[1], "A A"), (gold, "B A B")):
        for run, verdict in zip(runs, verdicts.split(), strict=False):
            JudgeCall.objects.create(
                run=run, pair=pair, order="ab", status="done", preference=verdict
            )
    workers = [make_worker(study, f"w{i}") for i in range(3)]
    for pair, votes in ((pairs[0], "A A"), (pairs[1], "A A B"), (gold, "B")):
        for worker, vote in zip(workers, votes.split(), strict=False):
            vote_record(pair, worker, vote)
    return study, pairs, gold


@pytest.mark.django_db
def test_the_recomputed_priorities_of_hand_made_pairs_are_stored_on_the_pairs(cast: Cast) -> None:
    study, pairs, gold = hand_made_study(cast)
    gold_key = Pair.objects.get(pk=gold.pk).priority_key
    done = pair_priorities_recompute(study_id=study.pk, seed=3)
    # Neyman's allocation over the judges' strata. Pair 1: calls A, B, tie (disputed, not a
    # tie: stratum 1); its votes A, A agree by 1/3 each, so pbar = (2/3 + 1) / (2 + 2) = 5/12.
    # Pair 2: calls A, A (stratum 0); votes A, A, B agree by 1, 1, 0: pbar = (2 + 1) / 5.
    # Pair 3: no call, so no agreement: the floor 0.1. Each over 1/2.
    expected = [
        math.sqrt(5 / 12 * 7 / 12) / 0.5,
        math.sqrt(3 / 5 * 2 / 5) / 0.5,
        0.1 / 0.5,
    ]
    stored = {p.pk: p for p in Pair.objects.filter(study=study)}
    assert [stored[p.pk].priority for p in pairs] == pytest.approx(expected)
    assert stored[gold.pk].priority == 0 and stored[gold.pk].priority_key == gold_key
    assert all(PRIORITY_KEY_NONE < stored[p.pk].priority_key < 0 for p in pairs)
    # Pair 2 holds 3 assignments of an overlap of 3: the open pool is pairs 1 and 3 (k = 2) and
    # W their priorities' sum.
    study.refresh_from_db()
    assert (study.priority_pool, done.pool) == (2, 2)
    assert study.priority_total == pytest.approx(expected[0] + expected[2]) == done.total
    assert study.priorities_at is not None


@pytest.mark.django_db
def test_a_stratum_whose_votes_side_with_the_judges_is_drawn_less_than_a_split_one(
    cast: Cast,
) -> None:
    """Eight pairs the judges call A unanimously: on four people always say A (agreement 1),
    on the other four they split A / B (agreement 1/2). Both are stratum 0 to start with; a
    disputed call on the split ones moves them to stratum 1, which then keeps Neyman's larger
    share, while an excluded worker's votes count for nothing."""
    study = cast.study
    study.overlap = 5
    study.save(update_fields=["overlap"])
    pairs = make_pairs(study, 8)
    run = JudgeRun.objects.create(
        judge=Judge.objects.create(name="j", kind=Judge.Kind.LLM), study=study, status="done"
    )
    for pair in pairs:
        for order in ("ab", "ba"):
            verdict = "B" if pair in pairs[4:] and order == "ba" else "A"
            JudgeCall.objects.create(
                run=run, pair=pair, order=order, status="done", preference=verdict
            )
    workers = [make_worker(study, f"w{i}") for i in range(3)]
    for pair in pairs:
        votes = ("A", "A") if pair in pairs[:4] else ("A", "B")
        for worker, vote in zip(workers, votes, strict=False):
            vote_record(pair, worker, vote)
        # The excluded worker disagrees everywhere: left out, it changes nothing.
        excluded = vote_record(pair, workers[2], "B")
        HumanJudgment.objects.filter(pk=excluded.pk).update(excluded=True)
    pair_priorities_recompute(study_id=study.pk, seed=1)
    stored = dict(Pair.objects.filter(study=study).values_list("pk", "priority"))
    # Stratum 0: 8 votes all agreeing, pbar = 9 / 10, S = 0.3. Stratum 1 (calls A and B): each
    # vote agrees by 1/2, 8 votes, pbar = (4 + 1) / 10 = 1/2, S = 1/2.
    assert [stored[p.pk] for p in pairs] == pytest.approx([0.6] * 4 + [1.0] * 4)
    # The non-uniform part of the draw: stratum 1 gets 4 * 1 / (4 * 0.6 + 4 * 1) = 5/8.
    study.refresh_from_db()
    assert study.priority_total == pytest.approx(6.4)


@pytest.mark.django_db
def test_a_stored_priority_outside_0_to_1_is_refused_and_nothing_changes(cast: Cast) -> None:
    (pair,) = make_pairs(cast.study, 1)
    with pytest.raises(ValueError, match="must lie in"):
        pair_priorities_store(study=cast.study, priorities={pair.pk: 1.5})
    assert Pair.objects.get(pk=pair.pk).priority == 0


@pytest.mark.django_db
def test_beat_refreshes_live_active_studies_only(cast: Cast) -> None:
    study, pairs, _ = hand_made_study(cast)
    Study.objects.filter(pk=study.pk).update(status="live", selection="uniform")
    assert pair_priorities_refresh() == 0
    assert Pair.objects.get(pk=pairs[0].pk).priority == 0
    Study.objects.filter(pk=study.pk).update(selection="active")
    assert pair_priorities_refresh() == 1
    assert Pair.objects.get(pk=pairs[0].pk).priority == pytest.approx(math.sqrt(35) / 6)


def analysis_tasks(url: str) -> list[tuple[str, list[int]]]:
    """The (task name, args) of the messages waiting on the analysis queue, oldest first."""
    client = redis.Redis.from_url(url)
    found = []
    for raw in reversed(client.lrange("analysis", 0, -1)):
        message = json.loads(raw)
        args = json.loads(base64.b64decode(message["body"]))[0]
        found.append((message["headers"]["task"], args))
    client.close()
    return found


@pytest.mark.django_db
def test_a_finished_judge_run_of_an_active_study_asks_for_its_priorities(
    cast: Cast, django_capture_on_commit_callbacks: pytest.FixtureRequest
) -> None:
    broker_purge(settings.CELERY_BROKER_URL, "analysis")
    study, pairs, _ = hand_made_study(cast)
    judge = Judge.objects.create(name="k", kind=Judge.Kind.LLM)
    runs = {}
    for selection in ("uniform", "active"):
        Study.objects.filter(pk=study.pk).update(selection=selection)
        runs[selection] = run = JudgeRun.objects.create(
            judge=judge, study=study, status=JudgeRun.Status.RUNNING
        )
        with django_capture_on_commit_callbacks(execute=True):  # type: ignore[operator]
            assert run_finish_if_complete(run_id=run.pk)
    assert analysis_tasks(settings.CELERY_BROKER_URL) == [
        ("leaderboard.pair_priorities_recompute", [study.pk])
    ]
    broker_purge(settings.CELERY_BROKER_URL, "analysis")
