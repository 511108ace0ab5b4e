"""Panels of judges (juries): several judges' verdicts on the same pairs combined into one judge.

Verga et al. (2024), "Replacing Judges with Juries: Evaluating LLM Generations with a Panel of
Diverse Models", pool the verdicts of several judges by voting or by averaging their scores. A
panel here is a judge of kind ``panel`` whose members are other judges of the same study (or an
admin's shared ones), never panels themselves, combined by one of three rules:

- ``majority``: each member's collapsed verdict (A, B or tie) is one vote; the label with more
  votes than every other wins, and when two labels share the most votes (1 A and 1 B, or 2 A,
  2 B and a tie, or 2 A and 2 ties) the panel says tie. A majority panel keeps no Likert score.
- ``mean_likert``: the mean of the members' canonical Likert scores (1-8).
- ``weighted``: their weighted mean with the weights the researcher set (positive).

A mean is rounded to the nearest whole score, and a mean exactly half-way between two scores is
rounded towards the middle of the scale (3.5 to 4, 5.5 to 5, 2.5 to 3, 6.5 to 6; 4.5 to 4, a
tie either way), so a panel split between "slightly A" and "about equal" says about equal. The
verdict is the rounded score collapsed with ties (1-3 A, 4-5 tie, 6-8 B); the exact mean is kept
in the call's request. The arithmetic is in decimals, so a half is exactly a half.

A panel run makes no request: it reads each member's latest done (or imported) run on the study,
refusing to start while any member has none, and a worker (task judges.panel_run_combine) writes
one call per pair and order with the combined verdict, its request naming the member calls it
used, at no cost of its own (the report's cost of a panel is the sum of its members' costs on the
same pairs). Its pairs are the
member runs' pairs; its orders on a pair are those any member was asked in (``ab``, ``ba``; or
``both`` when every member's verdict there came combined from both orders, as published
verdicts do).

A member's vote in an order is its verdict in that order; a member that was not asked in that
order (one order only by its policy, an order-invariant judge whose call is derived in one order,
a published verdict of both orders) votes with its verdict on the pair, its orders combined as
the report combines them (MT-Bench's rule: agreeing orders give the verdict, disagreeing ones a
tie; the Likert is the orders' mean). **A pair a member did not judge**: when any member has no
verdict in an order (it was not given the pair, or its call there failed, was refused or did not
parse; or, under a Likert rule, gave no Likert score), the panel's call in that order has no
verdict, and its parse error names those members, so a panel's verdict always comes from all of
its members and is never a smaller panel's.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import Pair, Study
from core.conventions import likert_collapse
from core.errors import ApplicationError
from judges.kinds import RunPlan
from judges.models import Judge, JudgeCall, JudgeRun, PanelMember

TIE_RULE = (
    "majority: the label with the most votes, a tie when two labels share the most; mean and "
    "weighted mean Likert: rounded to the nearest score, a half towards the middle (3.5 to 4, "
    "5.5 to 5, 4.5 to 4), collapsed 1-3 A, 4-5 tie, 6-8 B"
)
MISSING_RULE = "every member must have a verdict in the order; else the panel gives none"
DONE_STATUSES = (JudgeRun.Status.DONE, JudgeRun.Status.IMPORTED)
LIKERT_RULES = (Judge.PanelRule.MEAN_LIKERT, Judge.PanelRule.WEIGHTED)


def is_panel(judge: Judge) -> bool:
    return judge.kind == Judge.Kind.PANEL


def majority_label(labels: Sequence[str]) -> str:
    """The panel's label from its members' collapsed verdicts: the most votes, tie when shared."""
    counts = Counter(labels).most_common()
    if not counts:
        raise ValueError("a panel needs at least one vote")
    if len(counts) > 1 and counts[0][1] == counts[1][1]:
        return "tie"
    return counts[0][0]


def likert_mean(scores: Sequence[Decimal], weights: Sequence[Decimal]) -> Decimal:
    """The weighted mean sum(w * s) / sum(w) of Likert scores, exact in decimals."""
    if not scores or len(scores) != len(weights):
        raise ValueError("one weight per score, and at least one score")
    return sum((w * s for w, s in zip(weights, scores, strict=True)), Decimal(0)) / sum(
        weights, Decimal(0)
    )


def likert_round(mean: Decimal) -> int:
    """The nearest whole Likert score, a half rounded towards the middle of the scale (4.5)."""
    low = int(mean.to_integral_value(rounding=ROUND_FLOOR))
    if mean - low == Decimal("0.5"):
        # 3.5 -> 4 and 5.5 -> 5 (towards 4.5); 4.5 itself -> 4 (a tie either way).
        return low + 1 if low < 4 else low
    return low + 1 if mean - low > Decimal("0.5") else low


# --- configuration ---------------------------------------------------------------------------


def panel_validate(
    *, study: Study | None, members: Sequence[Judge], weights: Sequence[Decimal], rule: str
) -> None:
    """Raise ValidationError when the panel cannot be made: fewer than two distinct members, a
    member that is a panel or that the study may not use, an unknown rule, or a weight that is
    not positive."""
    from judges.selectors.judges import judge_list_for_study

    errors: dict[str, str] = {}
    if rule not in Judge.PanelRule.values:
        errors["rule"] = f"unknown rule {rule!r}; one of {', '.join(Judge.PanelRule.values)}"
    ids = [m.pk for m in members]
    if len(set(ids)) != len(ids):
        errors["members"] = "each judge can sit on a panel once"
    elif len(ids) < 2:
        errors["members"] = "a panel needs at least two members"
    elif any(is_panel(m) for m in members):
        nested = ", ".join(m.name for m in members if is_panel(m))
        errors["members"] = f"a panel cannot sit on a panel ({nested})"
    else:
        allowed = Judge.objects.filter(pk__in=ids)
        allowed = (
            allowed.filter(study__isnull=True)
            if study is None
            else judge_list_for_study(study=study).filter(pk__in=ids)
        )
        foreign = sorted(set(ids) - set(allowed.values_list("pk", flat=True)))
        if foreign:
            names = ", ".join(m.name for m in members if m.pk in foreign)
            errors["members"] = f"not judges of this study: {names}"
    if len(weights) != len(members):
        errors["weights"] = "one weight per member"
    elif any(not (w > 0) for w in weights):
        errors["weights"] = "every weight must be positive"
    if errors:
        raise ValidationError(errors)


def panel_create(
    *,
    name: str,
    study: Study | None,
    members: Sequence[Judge],
    rule: str,
    weights: Sequence[Decimal] | None = None,
) -> Judge:
    """Create a panel judge of `members` combined by `rule` (weights only count under
    ``weighted``; the others weigh every member 1). `study` makes it that study's own."""
    given = list(weights) if weights is not None else [Decimal(1)] * len(members)
    panel_validate(study=study, members=members, weights=given, rule=rule)
    stored = given if rule == Judge.PanelRule.WEIGHTED else [Decimal(1)] * len(members)
    with transaction.atomic():
        panel = Judge(
            name=name,
            kind=Judge.Kind.PANEL,
            study=study,
            panel_rule=rule,
            params={},
            order_policy=Judge.OrderPolicy.BOTH,
        )
        panel.full_clean()
        panel.save()
        PanelMember.objects.bulk_create(
            PanelMember(panel=panel, member=member, weight=weight, position=i)
            for i, (member, weight) in enumerate(zip(members, stored, strict=True))
        )
    return panel


def panel_readiness(*, judge: Judge) -> str:
    """'' when the panel has members to combine, else what is wrong (for judge_readiness)."""
    if judge.panel_members.count() < 2:
        return "not configured: a panel needs at least two members"
    return ""


# --- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MemberVote:
    label: str
    likert: Decimal | None
    call_ids: tuple[int, ...]


@dataclass(frozen=True)
class MemberCall:
    pk: int
    order: str
    done: bool
    label: str
    likert: int | None


def member_runs_get(*, panel: Judge, study: Study) -> list[tuple[PanelMember, JudgeRun | None]]:
    """Each member with its latest done (or imported) run on the study, None when it has none."""
    out: list[tuple[PanelMember, JudgeRun | None]] = []
    for seat in panel.panel_members.select_related("member").order_by("position", "member_id"):
        run = (
            JudgeRun.objects.filter(judge=seat.member, study=study, status__in=DONE_STATUSES)
            .order_by("-pk")
            .first()
        )
        out.append((seat, run))
    return out


def _member_vote(calls: list[MemberCall], order: str) -> MemberVote | None:
    """A member's vote on one pair in `order` (see the module's docstring), None without one."""
    here = [c for c in calls if c.order == order]
    if here:
        call = here[0]
        if not call.done or not call.label:
            return None
        likert = Decimal(call.likert) if call.likert is not None else None
        return MemberVote(call.label, likert, (call.pk,))
    voted = [c for c in calls if c.done and c.label]
    if not voted:
        return None
    labels = {c.label for c in voted}
    label = voted[0].label if len(labels) == 1 else "tie"
    scores = [Decimal(c.likert) for c in voted if c.likert is not None]
    likert = sum(scores, Decimal(0)) / len(scores) if scores else None
    return MemberVote(label, likert, tuple(c.pk for c in voted))


def panel_call_fields(
    *,
    rule: str,
    seats: Sequence[tuple[str, Decimal]],
    votes: Sequence[MemberVote | None],
    order: str,
) -> dict[str, Any]:
    """The combined call's verdict fields and request for one pair in one order.

    `seats` are the members' (name, weight), `votes` their votes in the same order of seats.
    """
    request: dict[str, Any] = {
        "panel_rule": rule,
        "member_calls": {
            name: list(vote.call_ids) if vote is not None else []
            for (name, _), vote in zip(seats, votes, strict=True)
        },
        "tie_rule": TIE_RULE,
        "missing_rule": MISSING_RULE,
    }
    if rule == Judge.PanelRule.WEIGHTED:
        request["weights"] = {name: str(weight) for name, weight in seats}
    missing = [
        name
        for (name, _), vote in zip(seats, votes, strict=True)
        if vote is None or (rule in LIKERT_RULES and vote.likert is None)
    ]
    fields: dict[str, Any] = {"request": request}
    if missing:
        why = "no Likert score" if rule in LIKERT_RULES else "no verdict"
        fields["parse_error"] = (
            f"{why} from {', '.join(missing)} in this order: the panel gives none ({MISSING_RULE})"
        )
        fields["raw_output"] = fields["parse_error"]
        return fields
    present = [v for v in votes if v is not None]
    if rule == Judge.PanelRule.MAJORITY:
        labels = [v.label for v in present]
        label = majority_label(labels)
        counts = Counter(labels)
        fields["raw_output"] = (
            f"majority of {len(labels)}: "
            + ", ".join(f"{k} {counts[k]}" for k in ("A", "B", "tie") if counts[k])
            + f" -> {label}"
        )
    else:
        scores = [v.likert for v in present if v.likert is not None]
        weights = (
            [w for _, w in seats]
            if rule == Judge.PanelRule.WEIGHTED
            else [Decimal(1)] * len(scores)
        )
        mean = likert_mean(scores, weights)
        likert = likert_round(mean)
        label = likert_collapse(likert)
        request["likert_mean"] = str(mean.normalize())
        fields["likert"] = likert
        # What the panel's score reads in the order shown (9 - score with B first).
        fields["likert_shown"] = 9 - likert if order == JudgeCall.Order.B_FIRST else likert
        fields["raw_output"] = (
            f"{'weighted ' if rule == Judge.PanelRule.WEIGHTED else ''}mean Likert "
            f"{mean.normalize()} -> {likert}"
        )
    fields["preference"] = label
    fields["verdict_label"] = label
    return fields


def _panel_orders(per_member: Iterable[list[MemberCall]]) -> list[str]:
    """The orders the panel judges a pair in: those any member was asked in."""
    asked = {c.order for calls in per_member for c in calls}
    orders = [str(o) for o in (JudgeCall.Order.A_FIRST, JudgeCall.Order.B_FIRST) if o in asked]
    return orders or [str(JudgeCall.Order.BOTH)]


class PanelNotReady(ApplicationError, ValidationError):  # type: ignore[misc]  # code, message: same use
    """A member has no done run on the study; the message names them."""

    http_status = 409


def panel_run_plan(
    *, judge: Judge, study: Study, pairs: Iterable[Pair] | None, seed: int | None
) -> RunPlan:
    """Plan a panel's run (judges.kinds): running on the members' latest done runs, its
    combination queued after commit.

    No request is made: a worker's :func:`panel_run_combine` reads the members' calls and
    writes the panel's (a database read and a bulk insert, kept out of the web request for a
    large study). The run holds a place among the study's active runs until it is combined, as
    every run does (judges.services.limits). Raise ValidationError naming the members without a
    done run on the study, or for pairs of another study.
    """
    from judges.services.runs import TASK_PANEL_COMBINE, _judge_task_send

    seats = member_runs_get(panel=judge, study=study)
    if len(seats) < 2:
        raise ValidationError({"judge": "a panel needs at least two members"})
    without = [seat.member.name for seat, run in seats if run is None]
    if without:
        raise PanelNotReady(
            {
                "judge": f"members without a done run on {study.slug!r}: {', '.join(without)}; "
                "run them first (a panel reuses its members' verdicts, it asks nothing itself)"
            }
        )
    member_runs = [run for _, run in seats if run is not None]
    run_ids = [run.pk for run in member_runs]
    if pairs is None:
        pair_ids = set(
            Pair.objects.filter(judge_runs__in=run_ids).values_list("pk", flat=True)
        ) | set(
            JudgeCall.objects.filter(run_id__in=run_ids, pair__isnull=False).values_list(
                "pair_id", flat=True
            )
        )
    else:
        pair_list = list(pairs)
        foreign = sorted(p.pk for p in pair_list if p.study_id != study.pk)
        if foreign:
            raise ValidationError({"pairs": f"pairs {foreign} do not belong to {study.slug!r}"})
        pair_ids = {p.pk for p in pair_list}
    if not pair_ids:
        raise ValidationError({"pairs": "the members' runs judged no pairs"})
    names = [seat.member.name for seat, _ in seats]
    return RunPlan(
        pairs=sorted(pair_ids),
        status=JudgeRun.Status.RUNNING,
        seed=seed or 0,
        send=lambda run_id: _judge_task_send(TASK_PANEL_COMBINE, args=[run_id]),
        started_at=timezone.now(),
        note="panel of runs "
        + ", ".join(f"{name} #{r.pk}" for name, r in zip(names, member_runs, strict=True)),
        fill=lambda run: run.panel_sources.set(member_runs),
    )


def panel_run_combine(*, run_id: int) -> int:
    """Write a running panel run's calls from its member runs' and mark it done; return how many
    calls were written (0 when the run is not a running panel run: safe to run twice).

    Holds the run's row lock (SELECT ... FOR UPDATE) for the transaction that writes the calls
    and the done status, so two workers given the same message write once.
    """
    with transaction.atomic():
        run = (
            JudgeRun.objects.select_for_update(of=("self",))
            .select_related("judge")
            .filter(pk=run_id, status=JudgeRun.Status.RUNNING, judge__kind=Judge.Kind.PANEL)
            .first()
        )
        if run is None:
            return 0
        by_judge = {r.judge_id: r for r in run.panel_sources.all()}
        seats = list(
            run.judge.panel_members.select_related("member").order_by("position", "member_id")
        )
        sources = [(seat, by_judge.get(seat.member_id)) for seat in seats]
        if any(source is None for _, source in sources):
            JudgeRun.objects.filter(pk=run_id).update(
                status=JudgeRun.Status.FAILED,
                finished_at=timezone.now(),
                note=run.note + "; the panel's members changed after the run started",
            )
            return 0
        run_ids = [source.pk for _, source in sources if source is not None]
        pair_ids = sorted(run.pairs.values_list("pk", flat=True))
        calls: dict[tuple[int, int], list[MemberCall]] = defaultdict(list)
        # A member that judged every turn (Judge.turns "each") votes with its calls at the
        # pair's own turn, as the report reads it (judges.services.turns).
        for pk, member_run_id, pair_id, order, status, preference, likert in (
            JudgeCall.objects.filter(run_id__in=run_ids, pair_id__in=pair_ids, turn=F("pair__turn"))
            .order_by("pk")
            .values_list("pk", "run_id", "pair_id", "order", "status", "preference", "likert")
        ):
            calls[(member_run_id, pair_id)].append(
                MemberCall(pk, order, status == JudgeCall.Status.DONE, preference, likert)
            )
        named = [(seat.member.name, seat.weight) for seat, _ in sources]
        now = timezone.now()
        derived: list[JudgeCall] = []
        for pair_id in pair_ids:
            per_member = [calls.get((member_run_id, pair_id), []) for member_run_id in run_ids]
            for order in _panel_orders(per_member):
                votes = [_member_vote(member_calls, order) for member_calls in per_member]
                fields = panel_call_fields(
                    rule=run.judge.panel_rule, seats=named, votes=votes, order=order
                )
                derived.append(
                    JudgeCall(
                        run_id=run_id,
                        pair_id=pair_id,
                        order=order,
                        status=JudgeCall.Status.DONE,
                        attempts=0,
                        latency_ms=0,
                        finished_at=now,
                        **fields,
                    )
                )
        JudgeCall.objects.bulk_create(derived, batch_size=2000, ignore_conflicts=True)
        JudgeRun.objects.filter(pk=run_id).update(status=JudgeRun.Status.DONE, finished_at=now)
    return len(derived)


def panel_runs_stale(*, before: datetime) -> list[int]:
    """Running panel runs started before `before`: their combination's message was lost."""
    return list(
        JudgeRun.objects.filter(
            status=JudgeRun.Status.RUNNING, judge__kind=Judge.Kind.PANEL, started_at__lt=before
        )
        .order_by("pk")
        .values_list("pk", flat=True)
    )
