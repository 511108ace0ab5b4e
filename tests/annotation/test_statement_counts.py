"""The annotator's requests run a fixed, small number of SQL statements (pinned here), and a GET
writes nothing beyond the documented claim."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Worker
from annotation.services.entry import LAST_SEEN_EVERY_SECONDS
from tests.annotation.work_helpers import enter_and_consent, make_pairs
from tests.conftest import Cast

# The statements of a request (in a test, the transaction's savepoint and its release count
# too); change these on purpose only. next: the session, the user, the worker with its study, the
# claim (its worker lock, its candidate window, its insert), the progress count, the item with
# its pair, prompt, answers and study in one query;
# submit: session, user, worker, the idempotency read, the locked assignment, the judgment, the
# assignment update, the pay entry, the progress count.
NEXT_STATEMENTS = 10
SUBMIT_STATEMENTS = 12


@pytest.fixture
def entered(cast: Cast, client: Client) -> tuple[Client, Worker]:
    study = cast.study
    study.gold_share = Decimal(0)
    study.save()
    make_pairs(study, 5)
    worker = enter_and_consent(client, study, "pid-counted")
    return client, worker


def post(client: Client, worker: Worker, path: str, body: dict[str, object] | None = None) -> Any:
    return client.post(
        f"/work/{worker.study.slug}/api/{path}", body or {}, content_type="application/json"
    )


# A statement that writes, also inside a WITH (not SELECT ... FOR UPDATE).
WRITE = re.compile(r"\b(INSERT INTO|UPDATE\s+\"?\w+\"?\s+SET|DELETE FROM)\b", re.IGNORECASE)


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if WRITE.search(q["sql"])]


def cycle(client: Client, worker: Worker, queries: Any) -> None:
    with queries(NEXT_STATEMENTS):
        response = post(client, worker, "next/")
    assert response.status_code == 200 and response.json()["status"] == "item"
    item = response.json()["item"]["id"]
    with queries(SUBMIT_STATEMENTS):
        saved = post(
            client,
            worker,
            f"items/{item}/submit/",
            {"submission_id": str(uuid.uuid4()), "likert": 3},
        )
    assert saved.status_code == 201


def test_next_and_submit_run_a_pinned_number_of_statements(
    entered: tuple[Client, Worker], django_assert_num_queries: Any
) -> None:
    client, worker = entered
    # The process's first request reads the study once more (a per-process cache fills).
    cycle(client, worker, lambda n: CaptureQueriesContext(connection))
    for _ in range(3):
        cycle(client, worker, django_assert_num_queries)


def test_last_seen_is_written_at_most_every_30_seconds(entered: tuple[Client, Worker]) -> None:
    client, worker = entered
    seen = Worker.objects.get(pk=worker.pk).last_seen_at
    assert seen is not None
    response = client.get(f"/work/{worker.study.slug}/api/progress/")
    assert response.status_code == 200
    assert Worker.objects.get(pk=worker.pk).last_seen_at == seen  # recent: not written again
    stale = timezone.now() - timedelta(seconds=LAST_SEEN_EVERY_SECONDS + 1)
    Worker.objects.filter(pk=worker.pk).update(last_seen_at=stale)
    client.get(f"/work/{worker.study.slug}/api/progress/")
    written = Worker.objects.get(pk=worker.pk).last_seen_at
    assert written is not None and written > stale + timedelta(seconds=1)


def test_a_get_writes_nothing_but_the_documented_claim(entered: tuple[Client, Worker]) -> None:
    client, worker = entered
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"/work/{worker.study.slug}/api/progress/").status_code == 200
    assert writes(queries) == []
    # The work page's GET claims the next item (documented): its only writes are the claim's.
    with CaptureQueriesContext(connection) as queries:
        page = client.get(f"/work/{worker.study.slug}/")
    assert page.status_code == 302 and "/item/" in page["Location"]
    written = writes(queries)
    assert written and all("annotation_assignment" in sql for sql in written), written
