"""One entry per judge kind: what differs between kinds, in one place.

As the report keeps one ordered registry of its sections (leaderboard/report/registry.py), the
judges app keeps one entry per `Judge.Kind` here, and code that asked "which kind of judge is
this" looks the answer up instead: what the kind needs before a run (`readiness`), how a run of
it is planned (`plan`: its pairs, its first status and the rows written with it, and the task
queued after commit; judges.services.runs.judge_run_create writes every plan the same way), how
a stopped run goes on (`resume`), whether its requests are paid (`paid`), whether its verdict
can depend on the order shown (`order_invariant`) and what a researcher reads once a run is
queued (`queued`). A kind with no plan is not run: its verdicts come from
elsewhere (imported files). tests/judges/test_kinds.py checks that every kind has exactly one
entry.

The functions an entry names live with the kind's own code (calls: judges.services.runs; the
PL model: judges.reward.scoring; panels: judges.services.panels) and are imported when called,
so the registry loads no worker library into a page and no service module into the models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Protocol

from annotation.models import Pair, Study
from judges.models import Judge, JudgeRun, Turns


@dataclass(frozen=True)
class RunPlan:
    """A run about to be written: what one kind brings to the shared start.

    `pairs` are the run's pairs (rows or ids) in id order; `fill` writes the kind's rows of the
    new run inside its transaction (its calls, a panel's sources); `send` queues the run's first
    task, given the run's id, after commit. `lock_judge` takes the judge's row lock first, as a
    template edit does (judges.services.templates), for kinds whose calls read its templates.
    `columns` are the kind's own columns of the run (a PL run's `score_queued_at`).
    """

    pairs: Sequence[Pair] | Sequence[int]
    status: str
    seed: int
    send: Callable[[int], None]
    budget_usd: Decimal | None = None
    turns: str = Turns.PAIR
    started_at: datetime | None = None
    note: str = ""
    lock_judge: bool = False
    fill: Callable[[JudgeRun], None] | None = None
    columns: Mapping[str, Any] = field(default_factory=dict)


class Planner(Protocol):
    def __call__(
        self,
        *,
        judge: Judge,
        study: Study,
        pairs: Iterable[Pair] | None,
        seed: int | None,
        budget_usd: Decimal | None,
    ) -> RunPlan: ...


class Resumer(Protocol):
    def __call__(self, *, run: JudgeRun, budget_usd: Decimal | None) -> JudgeRun: ...


@dataclass(frozen=True)
class JudgeKind:
    """What one kind of judge does differently (see the module's docstring)."""

    kind: str
    readiness: Callable[[Judge], str]
    plan: Planner | None
    resume: Resumer | None
    queued: Callable[[JudgeRun], str]
    paid: bool = False
    # A verdict that cannot depend on the order shown: a score model scores each answer alone,
    # "prefer the longer answer" compares lengths. The report's swap invariance takes such a
    # judge as invariant by construction (leaderboard/report/consistency.py).
    order_invariant: bool = False

    @property
    def runnable(self) -> bool:
        return self.plan is not None


# The kinds' own functions, imported when called (see the module's docstring).


def _llm_readiness(judge: Judge) -> str:
    from judges.services.judges import llm_judge_readiness

    return llm_judge_readiness(judge=judge)


def _pl_readiness(judge: Judge) -> str:
    from judges.reward.scoring import pl_judge_readiness

    return pl_judge_readiness(judge=judge)


def _panel_readiness(judge: Judge) -> str:
    from judges.services.panels import panel_readiness

    return panel_readiness(judge=judge)


def _always_ready(judge: Judge) -> str:
    return ""


def _not_run(judge: Judge) -> str:
    return f"not runnable: {judge.get_kind_display()} judges are not run as calls"


def _calls_plan(
    *,
    judge: Judge,
    study: Study,
    pairs: Iterable[Pair] | None,
    seed: int | None,
    budget_usd: Decimal | None,
) -> RunPlan:
    from judges.services.runs import calls_run_plan

    return calls_run_plan(judge=judge, study=study, pairs=pairs, seed=seed, budget_usd=budget_usd)


def _pl_plan(
    *,
    judge: Judge,
    study: Study,
    pairs: Iterable[Pair] | None,
    seed: int | None,
    budget_usd: Decimal | None,
) -> RunPlan:
    from judges.reward.scoring import pl_run_plan

    return pl_run_plan(study=study, pairs=pairs, seed=seed)


def _panel_plan(
    *,
    judge: Judge,
    study: Study,
    pairs: Iterable[Pair] | None,
    seed: int | None,
    budget_usd: Decimal | None,
) -> RunPlan:
    from judges.services.panels import panel_run_plan

    return panel_run_plan(judge=judge, study=study, pairs=pairs, seed=seed)


def _calls_resume(*, run: JudgeRun, budget_usd: Decimal | None) -> JudgeRun:
    from judges.services.runs import calls_run_resume

    return calls_run_resume(run=run, budget_usd=budget_usd)


def _pl_resume(*, run: JudgeRun, budget_usd: Decimal | None) -> JudgeRun:
    from judges.reward.scoring import pl_run_resume

    return pl_run_resume(run=run)


def _calls_queued(run: JudgeRun) -> str:
    return f"Run {run.pk} started: {run.calls.count()} calls queued."


def _pl_queued(run: JudgeRun) -> str:
    return (
        f"Run {run.pk} queued: a reward_model worker scores each answer once, then writes one "
        "call per pair."
    )


def _panel_queued(run: JudgeRun) -> str:
    return f"Run {run.pk} queued: a worker combines its members' calls (no request is made)."


# One line per Judge.Kind, in the order of its choices.
KINDS: tuple[JudgeKind, ...] = (
    JudgeKind(
        kind=Judge.Kind.LLM,
        readiness=_llm_readiness,
        paid=True,
        plan=_calls_plan,
        resume=_calls_resume,
        queued=_calls_queued,
    ),
    JudgeKind(
        kind=Judge.Kind.PL,
        order_invariant=True,
        readiness=_pl_readiness,
        plan=_pl_plan,
        resume=_pl_resume,
        queued=_pl_queued,
    ),
    JudgeKind(
        kind=Judge.Kind.RANDOM,
        readiness=_always_ready,
        plan=_calls_plan,
        resume=_calls_resume,
        queued=_calls_queued,
    ),
    JudgeKind(
        kind=Judge.Kind.LONGER,
        order_invariant=True,
        readiness=_always_ready,
        plan=_calls_plan,
        resume=_calls_resume,
        queued=_calls_queued,
    ),
    JudgeKind(
        kind=Judge.Kind.IMPORTED, readiness=_not_run, plan=None, resume=None, queued=_calls_queued
    ),
    # A panel's stopped run resumes as a run of calls does (it has no pending call to fan out);
    # running again, its combination is queued by the reconciler (panels.panel_runs_stale).
    JudgeKind(
        kind=Judge.Kind.PANEL,
        readiness=_panel_readiness,
        plan=_panel_plan,
        resume=_calls_resume,
        queued=_panel_queued,
    ),
)
_BY_KIND = {entry.kind: entry for entry in KINDS}

# The kinds a researcher starts runs of (the run page's and the form's judges).
RUNNABLE_KINDS: tuple[str, ...] = tuple(entry.kind for entry in KINDS if entry.runnable)


def judge_kind(kind: str) -> JudgeKind:
    """The registry's entry for a `Judge.Kind` value."""
    return _BY_KIND[kind]
