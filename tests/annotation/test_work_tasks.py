"""The periodic expiry task and the invite-link command."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from annotation.models import Assignment
from annotation.services.assignments import assignment_claim_next
from annotation.tasks import assignments_expire_task
from tests.annotation.work_helpers import make_pairs
from tests.conftest import Cast


def test_the_expiry_task_marks_stale_reservations_expired(cast: Cast) -> None:
    cast.study.gold_share = Decimal(0)
    cast.study.save()
    make_pairs(cast.study, 1)
    held = assignment_claim_next(worker=cast.worker_one)
    assert held is not None
    Assignment.objects.filter(pk=held.pk).update(
        reserved_at=timezone.now() - timedelta(hours=2),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    assert assignments_expire_task.apply().get() == 1
    held.refresh_from_db()
    assert held.status == Assignment.Status.EXPIRED


def test_invite_links_printed_by_the_command_let_one_person_in_each(cast: Cast) -> None:
    cache.clear()
    out = StringIO()
    call_command("invite_links", cast.study.slug, "-n", "2", "--base-url", "http://x", stdout=out)
    links = out.getvalue().split()
    assert len(links) == 2 and len(set(links)) == 2
    for link in links:
        assert Client().get(link.removeprefix("http://x")).status_code == 302
    with pytest.raises(CommandError, match="No study"):
        call_command("invite_links", "nope")
