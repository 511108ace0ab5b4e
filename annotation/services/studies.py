"""Writes to a study's own settings: creation, configuration, preview mark, launch and status."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.text import slugify

from annotation.models import Study, StudyMembership
from annotation.selectors.checklist import study_checklist
from core.errors import ApplicationError

# Which statuses a study may move to from which: a closed study stays closed, because its
# pay and reports are final.
STATUS_FROM: dict[str, tuple[str, ...]] = {
    Study.Status.LIVE: (Study.Status.DRAFT, Study.Status.PAUSED),
    Study.Status.PAUSED: (Study.Status.LIVE,),
    Study.Status.CLOSED: (Study.Status.DRAFT, Study.Status.LIVE, Study.Status.PAUSED),
}

# What a worker is shown: a change to any of these clears the preview mark, so the checklist
# asks for a new look at the forms as a worker sees them.
FORM_FIELDS: tuple[str, ...] = (
    "instructions",
    "form_likert",
    "form_values",
    "values_required",
    "form_rationale_only",
    "form_acceptability",
    "form_axes",
    "form_comment",
    "links_as_text",
)
# Every field a researcher sets on the settings page.
SETTINGS_FIELDS: tuple[str, ...] = (
    "name",
    "description",
    "notes",
    *FORM_FIELDS,
    "overlap",
    "target_per_worker",
    "time_limit_seconds",
    "expected_seconds_per_judgment",
    "gold_share",
    "gold_warn_accuracy",
    "gold_block_accuracy",
    "gold_min_items",
    "qualification_items",
    "categories",
    "selection",
    "uniform_share",
    "pay_per_judgment_cents",
    "prolific_reward_cents",
    "hourly_floor_cents",
    "completion_code",
    "partial_completion_code",
    "screened_out_code",
    "completion_url",
    "prolific_study_id",
    "prolific_auto_approve",
    "prolific_unverified_max",
    "entry_link_required",
    "entry_attempts_per_minute",
    "invite_valid_days",
)

# Study URLs live beside these pages (/studies/new/), so no study may take their names.
RESERVED_SLUGS: frozenset[str] = frozenset({"new"})


class StudyLaunchBlocked(ApplicationError):
    """The launch checklist has open items; `problems` names each."""

    http_status = 409

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


def studies_status_set(*, studies: QuerySet[Study], status: Study.Status) -> int:
    """Move the given studies to `status` where the move is allowed; return how many moved.

    One conditional UPDATE (`WHERE status IN allowed`), so a study changed meanwhile by someone
    else is left alone rather than overwritten.
    """
    allowed = STATUS_FROM.get(status)
    if allowed is None:
        raise ValueError(f"Studies cannot be moved back to {status!r}.")
    return studies.filter(status__in=allowed).update(status=status, updated_at=timezone.now())


def study_settings_problems(values: Mapping[str, Any]) -> dict[str, str]:
    """Rules between settings that no single field can check; field name to message.

    Used by the settings form (to show each message by its field) and by the update service.
    """
    problems: dict[str, str] = {}
    forms_on = [
        name
        for name in ("form_likert", "form_rationale_only", "form_acceptability", "form_axes")
        if values.get(name)
    ]
    if not forms_on:
        problems["form_likert"] = (
            "Show at least one form: the Likert rating, rationale-only, acceptability or the axes."
        )
    if values.get("form_likert") and values.get("form_rationale_only"):
        problems["form_rationale_only"] = (
            "Rationale-only shows the better answer and asks why: it replaces the Likert "
            "rating, so switch one of them off."
        )
    warn, block = values.get("gold_warn_accuracy"), values.get("gold_block_accuracy")
    if isinstance(warn, Decimal) and isinstance(block, Decimal) and block > warn:
        problems["gold_block_accuracy"] = (
            f"The block threshold ({block}) must not be above the warn threshold ({warn}): a "
            "worker is warned before being blocked."
        )
    uniform = values.get("uniform_share")
    if isinstance(uniform, Decimal) and not Decimal(0) < uniform <= Decimal(1):
        problems["uniform_share"] = (
            f"The uniform share ({uniform}) must be above 0 and at most 1: a pair that active "
            "selection could never draw cannot be weighted back into the estimates."
        )
    share = values.get("gold_share")
    minimum, target = values.get("gold_min_items"), values.get("target_per_worker")
    if isinstance(share, Decimal) and share > 0 and minimum == 0:
        problems["gold_min_items"] = (
            "With gold pairs, at least 1 gold judgment must come before the thresholds apply."
        )
    if isinstance(share, Decimal) and isinstance(minimum, int) and isinstance(target, int):
        expected_gold = share * target
        if share > 0 and minimum > expected_gold:
            problems["gold_min_items"] = (
                f"A worker sees about {expected_gold:.1f} gold pairs in {target} judgments "
                f"(gold share {share}), fewer than the minimum of {minimum}: gold accuracy would "
                "never count, no worker would be warned or blocked and every gold bonus would "
                "be 0. Lower the minimum, or raise the gold share or the target."
            )
    qualification = values.get("qualification_items")
    if isinstance(qualification, int) and isinstance(target, int) and qualification > target:
        problems["qualification_items"] = (
            f"The qualification block ({qualification} items) is longer than the whole session "
            f"({target} judgments per worker)."
        )
    return problems


@transaction.atomic
def study_create(*, name: str, slug: str = "", user: User) -> Study:
    """Create a draft study with the defaults and make its creator a member of it."""
    name = name.strip()
    if not name:
        raise ValidationError({"name": "Give the study a name."})
    slug = slugify(slug or name)[:80]
    if not slug:
        raise ValidationError({"slug": "The short name needs letters or digits."})
    if slug in RESERVED_SLUGS:
        raise ValidationError({"slug": f"{slug!r} is taken by a page; choose another short name."})
    if Study.objects.filter(slug=slug).exists():
        raise ValidationError(
            {"slug": f"A study called {slug!r} exists already; choose another short name."}
        )
    try:
        with transaction.atomic():
            study = Study(name=name, slug=slug)
            # The model's default minimum (3) is more gold than a default session shows (20
            # judgments at share 0.1 show 2): a new study starts with one its sessions reach.
            study.gold_min_items = max(
                1, min(study.gold_min_items, int(study.gold_share * study.target_per_worker))
            )
            study.save()
    except IntegrityError as exc:  # created meanwhile by someone else
        raise ValidationError(
            {"slug": f"A study called {slug!r} exists already; choose another short name."}
        ) from exc
    StudyMembership.objects.create(study=study, user=user)
    return study


@transaction.atomic
def study_settings_update(*, study: Study, values: Mapping[str, Any]) -> Study:
    """Save the settings a researcher changed; a change to the forms clears the preview mark.

    Locks the study row, so two researchers saving at once apply one after the other.
    """
    unknown = sorted(set(values) - set(SETTINGS_FIELDS))
    if unknown:
        raise ValueError(f"not settings a researcher changes: {', '.join(unknown)}")
    locked = Study.objects.select_for_update().get(pk=study.pk)
    merged = {name: getattr(locked, name) for name in SETTINGS_FIELDS} | dict(values)
    problems = study_settings_problems(merged)
    if problems:
        raise ValidationError(problems)
    changed = {name for name, value in values.items() if getattr(locked, name) != value}
    for name in changed:
        setattr(locked, name, values[name])
    if changed & set(FORM_FIELDS):
        locked.previewed_at = None
    locked.full_clean()
    locked.save()
    return locked


def study_preview_mark(*, study: Study) -> None:
    """Note that a researcher has looked at the forms as a worker sees them."""
    now = timezone.now()
    Study.objects.filter(pk=study.pk).update(previewed_at=now)
    study.previewed_at = now


def study_launch(*, study: Study) -> Study:
    """Switch a draft or paused study live once its launch checklist has no open item.

    Raises StudyLaunchBlocked naming each open item. The switch is one conditional UPDATE, so a
    study closed meanwhile is not reopened.
    """
    checklist = study_checklist(study=study)
    if checklist.blocking:
        raise StudyLaunchBlocked([f"{item.label}: {item.detail}" for item in checklist.blocking])
    moved = studies_status_set(studies=Study.objects.filter(pk=study.pk), status=Study.Status.LIVE)
    study.refresh_from_db()
    if not moved and study.status != Study.Status.LIVE:
        raise StudyLaunchBlocked([f"the study is {study.get_status_display().lower()}"])
    return study
