"""Changing a study's report settings (ReportSettings)."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser, User
from django.core.exceptions import ValidationError

from annotation.models import Study
from leaderboard.models import ReportSettings
from leaderboard.selectors.settings import report_baseline_choices


def report_settings_update(
    *,
    study: Study,
    user: AbstractBaseUser | AnonymousUser,
    baseline: str,
    pl_usd_per_1000: Decimal,
) -> ReportSettings:
    """Store the study's baseline and PL price. The baseline must be one of the study's systems
    (or "" for the system in the most pairs), the price at least 0; a ValidationError names the
    field. The next page view computes the report of the new settings (a new key)."""
    baseline = baseline.strip()
    if baseline and baseline not in report_baseline_choices(study=study):
        raise ValidationError(
            {"baseline": f"{baseline!r} is not a system of the study {study.slug!r}."}
        )
    if pl_usd_per_1000 < 0:
        raise ValidationError({"pl_usd_per_1000": "The price cannot be negative."})
    found, _ = ReportSettings.objects.update_or_create(
        study=study,
        defaults={
            "baseline": baseline,
            "pl_usd_per_1000": pl_usd_per_1000,
            "updated_by": user if isinstance(user, User) else None,
        },
    )
    return found
