"""The launch checklist: what a study needs before workers are let in, each item with counts.

Other apps add their own items (the judges app says which judges are ready) by appending a
function to CHECKLIST_EXTRA from their AppConfig.ready(), so this app does not import them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count, Q

from annotation.models import Answer, Pair, Prompt, Study, System


@dataclass(frozen=True)
class ChecklistItem:
    """One line of the checklist. `blocking` items must be ok before launch; others advise."""

    key: str
    label: str
    ok: bool
    detail: str
    blocking: bool = True
    link: str = ""  # a URL name under `annotation:` or `judges:` that fixes the item


@dataclass(frozen=True)
class Checklist:
    items: tuple[ChecklistItem, ...]

    @property
    def blocking(self) -> tuple[ChecklistItem, ...]:
        return tuple(item for item in self.items if item.blocking and not item.ok)

    @property
    def ready(self) -> bool:
        return not self.blocking


CHECKLIST_EXTRA: list[Callable[[Study], ChecklistItem]] = []


def dollars(cents: int | Decimal) -> str:
    """Cents as a dollar amount with two decimals, e.g. 1200 -> '$12.00'."""
    amount = (Decimal(cents) / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"${amount}"


@dataclass(frozen=True)
class PayPlan:
    """What one worker's session is expected to take and pay, from the study's own settings."""

    seconds_per_judgment: int
    judgments: int
    minutes: int
    session_cents: int
    hourly_cents: Decimal
    floor_cents: int

    @property
    def meets_floor(self) -> bool:
        return self.hourly_cents >= self.floor_cents


def study_pay_plan(*, study: Study) -> PayPlan:
    """Expected minutes and pay of one full session, and the hourly rate they make.

    hourly = pay per judgment x 3600 / expected seconds per judgment; minutes are rounded up,
    as Prolific's estimated completion time should be.
    """
    seconds = max(1, study.expected_seconds_per_judgment)
    judgments = study.target_per_worker
    total_seconds = seconds * judgments
    return PayPlan(
        seconds_per_judgment=seconds,
        judgments=judgments,
        minutes=-(-total_seconds // 60),
        session_cents=study.pay_per_judgment_cents * judgments,
        hourly_cents=Decimal(study.pay_per_judgment_cents * 3600) / seconds,
        floor_cents=study.hourly_floor_cents,
    )


def _leaks_item(reviews: dict[str, int]) -> ChecklistItem:
    """The leak item from the count of flagged answers per remedy ("" for not yet reviewed).

    Ready when every flag is reviewed; the detail never calls the answers clean once the scan
    flagged any, and says how many keep a name that workers will read.
    """
    pending = reviews.get("", 0)
    if not reviews:
        detail = "the leak scan flagged no answer"
    elif pending:
        detail = (
            f"{pending} answers name a model and wait for review (they stay out of pairs until "
            "reviewed)"
        )
    else:
        parts = [
            f"{reviews[remedy]} {label}"
            for remedy, label in (
                (Answer.LeakRemedy.CLEARED, "cleared as not giving a system away"),
                (Answer.LeakRemedy.EXCLUDED, "left out of pairs"),
                (Answer.LeakRemedy.EDITED, "edited"),
                (Answer.LeakRemedy.NOTED, "kept with a note: workers will read the name"),
            )
            if reviews.get(remedy)
        ]
        detail = f"{sum(reviews.values())} flagged answers reviewed: " + ", ".join(parts)
    return ChecklistItem(
        key="leaks",
        label="Leak flags reviewed",
        ok=pending == 0,
        detail=detail,
        link="annotation:flagged_answers",
    )


def study_checklist(*, study: Study) -> Checklist:
    """Every launch item of the study with its counts; about ten small queries."""
    prompts = Prompt.objects.filter(study=study).count()
    answers = Answer.objects.filter(prompt__study=study).count()
    systems = System.objects.filter(study=study).count()
    pairs = Pair.objects.filter(study=study).aggregate(
        total=Count("pk"), gold=Count("pk", filter=Q(is_gold=True))
    )
    reviews = {
        row["leak_remedy"]: row["n"]
        for row in Answer.objects.filter(prompt__study=study, leak_flagged=True)
        .values("leak_remedy")
        .annotate(n=Count("pk"))
        .order_by()
    }
    regular = pairs["total"] - pairs["gold"]
    items = [
        ChecklistItem(
            key="data",
            label="Data imported",
            ok=prompts > 0 and answers > 0,
            detail=f"{prompts} prompts, {answers} answers from {systems} systems",
            link="annotation:study_import",
        ),
        _pairs_item(study, regular=regular, gold=pairs["gold"]),
        _leaks_item(reviews),
        ChecklistItem(
            key="preview",
            label="Forms previewed as a worker sees them",
            ok=study.previewed_at is not None,
            detail=(
                f"previewed {study.previewed_at:%Y-%m-%d %H:%M} UTC"
                if study.previewed_at
                else "not since the forms or instructions last changed: open the preview"
            ),
            link="annotation:study_preview",
        ),
        _pay_item(study),
        _panel_item(study),
        _verification_item(study),
    ]
    items.extend(extra(study) for extra in CHECKLIST_EXTRA)
    return Checklist(items=tuple(items))


def _workers_for(study: Study, *, regular: int) -> int:
    """Workers the regular pairs need at the study's overlap and target, rounded up."""
    judgments = regular * study.overlap
    return -(-judgments // study.target_per_worker) if study.target_per_worker else 0


def study_workers_needed(*, study: Study) -> int:
    """About how many workers the study needs (the checklist's pairs line): places to ask for."""
    regular = Pair.objects.filter(study=study, is_gold=False).count()
    return _workers_for(study, regular=regular)


def _pairs_item(study: Study, *, regular: int, gold: int) -> ChecklistItem:
    judgments = regular * study.overlap
    workers = _workers_for(study, regular=regular)
    detail = (
        f"{regular} pairs and {gold} gold pairs; at overlap {study.overlap} that is {judgments} "
        f"judgments, about {workers} workers at {study.target_per_worker} each"
    )
    ok = regular > 0
    if study.gold_share > 0 and gold == 0:
        ok = False
        detail += f"; the gold share is {study.gold_share} but there are no gold pairs"
    return ChecklistItem(
        key="pairs", label="Pairs generated", ok=ok, detail=detail, link="annotation:study_pairs"
    )


def _pay_item(study: Study) -> ChecklistItem:
    plan = study_pay_plan(study=study)
    detail = (
        f"{plan.judgments} judgments at {plan.seconds_per_judgment} s each take about "
        f"{plan.minutes} minutes and pay {dollars(plan.session_cents)}: "
        f"{dollars(plan.hourly_cents)} an hour against the floor of {dollars(plan.floor_cents)}"
    )
    if not plan.meets_floor:
        detail += "; raise the pay per judgment or lower the target"
    return ChecklistItem(
        key="pay",
        label="Pay checked against the expected minutes",
        ok=plan.meets_floor,
        detail=detail,
        link="annotation:study_settings",
    )


def _verification_item(study: Study) -> ChecklistItem:
    if study.prolific_token_encrypted:
        detail = (
            "a Prolific token is stored: each new entrant's SESSION_ID is checked with Prolific "
            f"before any item; up to {study.prolific_unverified_max} may enter unverified while "
            "Prolific cannot answer (checked again later)"
        )
    else:
        detail = (
            "no Prolific token: participants are unverified. Anyone who sees the study's link "
            "(every participant does) can make up participants who hold pairs, use up places "
            "and earn codes, and a made-up SESSION_ID can lock a real participant out. Paste a "
            "token on the Prolific connection page"
        )
    return ChecklistItem(
        key="verified",
        label="Participants verified with Prolific",
        ok=bool(study.prolific_token_encrypted),
        detail=detail,
        blocking=False,
        link="annotation:study_prolific",
    )


def _prolific_state(study: Study) -> str:
    """Where the linked Prolific study stands, as Concord last read it: linked, draft,
    published (and recruiting, paused) or stopped."""
    status = study.prolific_study_status
    if not status:
        return " (linked)"
    if status == "UNPUBLISHED":
        return " (draft on Prolific, not published: publish it from the Prolific connection page)"
    if status in ("ACTIVE", "SCHEDULED", "PUBLISHING"):
        return f" (published on Prolific: {status})"
    if status == "PAUSED":
        return " (published on Prolific, paused)"
    return f" (stopped on Prolific: {status})"


def _panel_item(study: Study) -> ChecklistItem:
    fields = (
        ("Prolific study id", study.prolific_study_id),
        ("completion code", study.completion_code),
    )
    missing = [label for label, value in fields if not value]
    if missing:
        detail = "missing: " + ", ".join(missing)
    else:
        detail = f"study id {study.prolific_study_id}{_prolific_state(study)}, full code " + (
            study.completion_code
        )
    if study.partial_completion_code:
        detail += f", partial code {study.partial_completion_code}"
    else:
        detail += "; no partial code: a worker who stops early gets no code"
    if study.screened_out_code:
        detail += f", screened-out code {study.screened_out_code}"
    else:
        detail += "; no screened-out code: a blocked worker gets only the link back"
    return ChecklistItem(
        key="prolific",
        label="Prolific fields filled",
        ok=not missing,
        detail=detail,
        link="annotation:study_settings",
    )


PROLIFIC_PARAMETERS = (
    "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
)


def prolific_entry_url(*, study_url: str, signature: str = "") -> str:
    """The study URL to paste into Prolific, with Prolific's own placeholders appended.

    `study_url` is the absolute URL of the study's Prolific entry page; Prolific replaces each
    `{{%NAME%}}` with the participant's id, its study id and the session id. A study that
    requires a signed link gets its `sig` too.
    """
    url = f"{study_url}?{PROLIFIC_PARAMETERS}"
    return f"{url}&sig={signature}" if signature else url


def study_preview_pair(*, study: Study) -> Pair | None:
    """A pair to preview the forms on: the first regular pair, else the first gold one."""
    pairs = Pair.objects.filter(study=study).select_related(
        "prompt", "answer_a", "answer_b", "study"
    )
    return pairs.filter(is_gold=False).order_by("pk").first() or pairs.order_by("pk").first()
