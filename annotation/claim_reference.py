"""The claim policy once more, in plain Python: the reference that the SQL claim
(annotation/sql/annotation_claim_pass.sql) is tested against, as the fast statistics are tested
against plain ones (tests/annotation/test_claim_reference.py).

One pass of one claimer, with nobody else claiming at the same time: no lock is ever found taken,
so the outcomes busy and retry never arise and there is nothing to wait for. Pure: rows in, the
pass's decision out; it reads no database and imports no Django. The SQL is what runs; this says
what it decides, in the order it decides it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# annotation.models.PRIORITY_KEY_NONE: the key of a pair with no priority, or of a full one.
PRIORITY_KEY_NONE = -1e15


@dataclass(frozen=True)
class StudyRow:
    status: str
    target_per_worker: int
    qualification_items: int
    gold_share: float
    overlap: int
    time_limit_seconds: int
    selection: str
    uniform_share: float
    priority_pool: int
    priority_total: float


@dataclass(frozen=True)
class PairRow:
    id: int
    is_gold: bool
    shuffle_key: float
    priority: float
    priority_key: float


@dataclass(frozen=True)
class AssignmentRow:
    id: int
    pair_id: int
    worker_id: int
    a_left: bool
    status: str
    expires_at: datetime


@dataclass(frozen=True)
class Rolls:
    """The pass's random draws and window, as the service passes them to the SQL."""

    gold_roll: float
    side_roll: float
    gold_start: float
    open_start: float
    select_roll: float
    window: int


@dataclass(frozen=True)
class Option:
    """A pair the pass may take, with what its reservation records: the propensity, and whether
    it fills an active study's pair, whose priority key then drops to PRIORITY_KEY_NONE."""

    pair: int
    propensity: float | None = None
    closes: bool = False


@dataclass(frozen=True)
class Decision:
    """What the pass decides: outcome (not_live, blocked, none, held or reserved), the worker's
    done and target, the pairs it may take (one, or several whose order the SQL leaves open:
    equal priority keys), the reservation handed back (held) and the new one's shown order."""

    outcome: str
    done: int
    target: int
    options: tuple[Option, ...] = ()
    held: int | None = None
    a_left: bool | None = None


def propensity(study: StudyRow, priority: float) -> float | None:
    """e / k + (1 - e) p / W, the chance that the draw took a pair of priority p (uniform share
    e, pool k, priority total W); 1 / k while no priority is positive; None for a uniform study
    or an empty pool (annotation_claim_propensity)."""
    if study.selection != "active" or study.priority_pool < 1:
        return None
    if study.priority_total <= 0:
        return min(1.0, 1.0 / study.priority_pool)
    share = study.uniform_share
    value = share / study.priority_pool + (1 - share) * max(priority, 0) / study.priority_total
    return min(1.0, max(value, 1e-12))


def claim_pass_reference(
    *,
    study: StudyRow,
    worker_id: int,
    worker_state: str,
    pairs: Sequence[PairRow],
    assignments: Sequence[AssignmentRow],
    now: datetime,
    rolls: Rolls,
) -> Decision:
    """Decide one claim pass of one worker (see the module's notes and the SQL's comments)."""

    def counts_as_taken(a: AssignmentRow) -> bool:
        return a.status == "submitted" or (a.status == "reserved" and a.expires_at > now)

    mine = [a for a in assignments if a.worker_id == worker_id]
    done = sum(a.status == "submitted" for a in mine)
    target = study.target_per_worker
    if study.status != "live":
        return Decision("not_live", done, target)
    if worker_state == "blocked":
        return Decision("blocked", done, target)
    if worker_state in ("done", "returned"):
        return Decision("none", done, target)
    held = sorted(a.id for a in mine if a.status == "reserved" and a.expires_at > now)
    if held:
        pair = next(a.pair_id for a in mine if a.id == held[0])
        return Decision("held", done, target, (Option(pair),), held=held[0])
    if done >= target:
        return Decision("none", done, target)

    shown, left = len(mine), sum(a.a_left for a in mine)
    a_left = left < shown - left if left != shown - left else rolls.side_roll < 0.5
    had = {a.pair_id for a in mine}

    if done < study.qualification_items or rolls.gold_roll < study.gold_share:
        gold = sorted(
            (p for p in pairs if p.is_gold and p.id not in had), key=lambda p: p.shuffle_key
        )
        # From the random key on, wrapping around to the lowest key.
        walk = [p for p in gold if p.shuffle_key >= rolls.gold_start] + gold
        if walk:
            return Decision("reserved", done, target, (Option(walk[0].id),), a_left=a_left)

    taken = {p.id: 0 for p in pairs}
    for a in assignments:
        if counts_as_taken(a):
            taken[a.pair_id] += 1
    open_pairs = [
        p for p in pairs if not p.is_gold and taken[p.id] < study.overlap and p.id not in had
    ]
    by_priority = (
        study.selection == "active"
        and study.priority_total > 0
        and rolls.select_roll >= study.uniform_share
    )
    if not open_pairs:
        return Decision("none", done, target)
    if by_priority:
        # The window is the first `window` pairs by key, highest first, taken in that order: the
        # first is one of highest key (the SQL leaves the order of equal keys open).
        top = max(p.priority_key for p in open_pairs)
        chosen = [p for p in open_pairs if p.priority_key == top]
    else:
        by_key = sorted(open_pairs, key=lambda p: p.shuffle_key)
        # From the random key on, then (when that comes up short) wrapping around; of that
        # window, fewest taken first, then the walk's order.
        halves = [(0, p) for p in by_key if p.shuffle_key >= rolls.open_start][: rolls.window]
        halves += [(1, p) for p in by_key if p.shuffle_key < rolls.open_start][: rolls.window]
        window = halves[: rolls.window]
        _, first = min(window, key=lambda item: (taken[item[1].id], item[0], item[1].shuffle_key))
        chosen = [first]
    options = tuple(
        Option(
            p.id,
            propensity(study, p.priority),
            study.selection == "active"
            and p.priority_key > PRIORITY_KEY_NONE
            and taken[p.id] + 1 >= study.overlap,
        )
        for p in chosen
    )
    return Decision("reserved", done, target, options, a_left=a_left)


def expires_at(study: StudyRow, now: datetime) -> datetime:
    """When a reservation made now runs out."""
    return now + timedelta(seconds=study.time_limit_seconds)
