"""Active pair selection in the claim: an active study's draws follow the pairs' priority keys,
with the uniform share drawn as before, and every reservation records its propensity."""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal

import pytest

from annotation.models import PRIORITY_KEY_NONE, Assignment, Pair, Study
from annotation.services.assignments import assignment_claim_next
from annotation.services.priority import pair_priorities_store
from tests.annotation.work_helpers import make_pairs, make_worker
from tests.conftest import Cast

pytestmark = pytest.mark.django_db


def active_study(study: Study, *, share: str, overlap: int = 1) -> Study:
    study.selection = Study.Selection.ACTIVE
    study.uniform_share = Decimal(share)
    study.gold_share = Decimal(0)
    study.overlap = overlap
    study.status = Study.Status.LIVE
    study.save()
    return study


def test_an_active_study_hands_out_its_pairs_in_priority_key_order(cast: Cast) -> None:
    study = active_study(cast.study, share="0.001")
    pairs = make_pairs(study, 5)
    priorities = dict(zip([p.pk for p in pairs], [0.9, 0.5, 0.1, 0.3, 0.2], strict=True))
    pair_priorities_store(study=study, priorities=priorities, seed=11)
    order = list(
        Pair.objects.filter(study=study).order_by("-priority_key").values_list("pk", flat=True)
    )
    random.seed(5)  # every select roll of these five claims is above the 0.001 share
    workers = [make_worker(study, f"w{i}") for i in range(5)]
    claimed = []
    for worker in workers:
        assignment = assignment_claim_next(worker=worker)
        assert assignment is not None
        claimed.append(assignment.pair_id)
    assert claimed == order
    # Each records e / k + (1 - e) p / W with k = 5 open pairs and W = 2.0 at the recompute.
    rows = Assignment.objects.filter(study=study).values_list("pair_id", "propensity")
    for pair_id, propensity in rows:
        assert propensity == pytest.approx(0.001 / 5 + 0.999 * priorities[pair_id] / 2.0)
    # Full pairs (overlap 1) went to the bottom of the priority walk.
    keys = set(Pair.objects.filter(study=study).values_list("priority_key", flat=True))
    assert keys == {PRIORITY_KEY_NONE}


def test_active_draws_take_each_pair_as_often_as_its_recorded_propensity_says(
    cast: Cast,
) -> None:
    """Four pairs with priorities 0.6, 0.3, 0.1 and 0 and a uniform share of 0.2: each draw
    re-keys them (a recompute), one worker claims once and gives the pair back. The uniform walk
    starts at a random shuffle key, so evenly spaced keys make it exactly uniform."""
    study = active_study(cast.study, share="0.2")
    pairs = make_pairs(study, 4)
    for i, pair in enumerate(pairs):
        Pair.objects.filter(pk=pair.pk).update(shuffle_key=(i + 0.5) / 4)
    priorities = dict(zip([p.pk for p in pairs], [0.6, 0.3, 0.1, 0.0], strict=True))
    worker = make_worker(study, "w")
    random.seed(2)
    draws = 500
    taken: Counter[int] = Counter()
    recorded: dict[int, float] = {}
    for draw in range(draws):
        pair_priorities_store(study=study, priorities=priorities, seed=draw)
        assignment = assignment_claim_next(worker=worker)
        assert assignment is not None
        taken[assignment.pair_id] += 1
        row = Assignment.objects.get(pk=assignment.pk)
        assert row.propensity is not None
        recorded[assignment.pair_id] = row.propensity
        row.delete()
    expected = {pk: 0.2 / 4 + 0.8 * p / 1.0 for pk, p in priorities.items()}
    assert recorded == pytest.approx(expected)
    # Binomial sd at q = 0.53 over 500 draws is 0.022: 0.09 is four of them.
    for pk, q in expected.items():
        assert taken[pk] / draws == pytest.approx(q, abs=0.09)
    assert taken[pairs[3].pk] > 0  # a zero priority is still drawn, by the uniform share


def test_uniform_studies_and_gold_pairs_record_no_propensity(cast: Cast) -> None:
    study = cast.study
    study.status = Study.Status.LIVE
    study.gold_share = Decimal(0)
    study.save()
    make_pairs(study, 2)
    assert assignment_claim_next(worker=cast.worker_one) is not None
    active = active_study(cast.other_study, share="0.2")
    active.qualification_items = 1
    active.save()
    make_pairs(active, 2, gold=1, prefix="o")
    pair_priorities_store(study=active, priorities={}, seed=1)
    worker = make_worker(active, "g")
    gold = assignment_claim_next(worker=worker)
    assert gold is not None and gold.pair.is_gold
    assert list(Assignment.objects.values_list("propensity", "priorities_at")) == [(None, None)] * 2


def test_an_active_study_before_any_priority_is_served_uniformly(cast: Cast) -> None:
    study = active_study(cast.study, share="0.2")
    make_pairs(study, 3)
    assert assignment_claim_next(worker=cast.worker_one) is not None
    assert Assignment.objects.values_list("propensity", "priorities_at").get() == (None, None)


def test_each_reservation_records_the_recompute_its_propensity_came_from(cast: Cast) -> None:
    """A claim between two recomputes records the first one's time and e / k + (1 - e) p / W
    from the first one's pool; a claim after the second records the second's, though the first
    assignment's pair changed priority meanwhile: each vote keeps the propensity of its draw."""
    study = active_study(cast.study, share="0.5", overlap=2)
    pairs = make_pairs(study, 2)
    first, second = ({p.pk: v for p, v in zip(pairs, values, strict=True)} for values in
                     ([0.8, 0.2], [0.1, 0.9]))  # fmt: skip
    random.seed(0)
    pair_priorities_store(study=study, priorities=first, seed=1)
    study.refresh_from_db()
    at_first = study.priorities_at
    early = assignment_claim_next(worker=cast.worker_one)
    assert early is not None
    pair_priorities_store(study=study, priorities=second, seed=2)
    study.refresh_from_db()
    at_second = study.priorities_at
    assert at_first is not None and at_second is not None and at_second > at_first
    late = assignment_claim_next(worker=make_worker(study, "late"))
    assert late is not None
    rows = dict(
        (pk, (q, at))
        for pk, q, at in Assignment.objects.values_list("pk", "propensity", "priorities_at")
    )
    # Both recomputes saw both pairs open (k = 2) with W = 1.0.
    assert rows[early.pk] == (pytest.approx(0.5 / 2 + 0.5 * first[early.pair_id]), at_first)
    assert rows[late.pk] == (pytest.approx(0.5 / 2 + 0.5 * second[late.pair_id]), at_second)
