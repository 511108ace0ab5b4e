"""The annotator's requests run a fixed, small number of SQL statements (pinned here), and a GET
writes nothing beyond the documented claim."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.models import Assignment, Worker
from annotation.services.entry import LAST_SEEN_EVERY_SECONDS
from tests.annotation.work_helpers import enter_and_consent, make_pairs
from tests.conftest import Cast

# The statements of a request; change these on purpose only.
# next (outside a transaction in production, and in a test too: the claim opens none):
#   1. the session, 2. the user (the session's auth), 3. the worker with its study (one join),
#   4. the claim: one call of annotation_claim_pass, which also counts the worker's judgments
#      for the progress shown, 5. the item: pair, prompt and both answers in one join (its study
#      is the one read with the worker).
NEXT_STATEMENTS = 5
# submit:
#   1. the session, 2. the user, 3. the worker with its study,
#   4. the idempotency read (a replayed submission_id answers from here),
#   5. the savepoint of judgment_submit's transaction (BEGIN in production),
#   6. the assignment under its row lock, with its pair, answers and study,
#   7. the judgment this assignment may already have (read under the lock: a double click),
#   8. the three writes in one statement: the judgment's INSERT, the assignment's conditional
#      UPDATE (which also returns the worker's submitted count for the progress shown) and the
#      pay entry's INSERT,
#   9. the savepoint's release (COMMIT in production).
SUBMIT_STATEMENTS = 9
# The browser's item page (GET /work/<study>/item/<id>/, where the work page's claim redirects):
#   1. the session, 2. the user, 3. the worker with its study, 4. the assignment with its pair,
#   prompt, both answers and study, and the worker's submitted count for the progress shown.
ITEM_PAGE_STATEMENTS = 4


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


def rows_written() -> dict[str, int]:
    """Rows this transaction has inserted, updated or deleted, per table (PostgreSQL's
    per-transaction statistics: they count what functions write too)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_xact_user_tables"
        )
        return {name: count for name, count in cursor.fetchall() if count}


def written_by(request: Callable[..., Any], *args: Any) -> tuple[Any, dict[str, int]]:
    """Run one request; return its response and the rows it wrote, per table."""
    before = rows_written()
    response = request(*args)
    after = rows_written()
    changed = {name: count - before.get(name, 0) for name, count in after.items()}
    return response, {name: count for name, count in changed.items() if count}


def cycle(client: Client, worker: Worker, queries: Any) -> None:
    with queries(NEXT_STATEMENTS):
        response = post(client, worker, "next/")
    assert response.status_code == 200 and response.json()["status"] == "item"
    # The progress the claim counted is the worker's real count, before and after the submit.
    assert response.json()["progress"]["done"] == submitted(worker)
    item = response.json()["item"]["id"]
    with queries(SUBMIT_STATEMENTS):
        saved = submit(client, worker, item)
    assert saved.json()["progress"]["done"] == submitted(worker)


def submit(client: Client, worker: Worker, item: str) -> Any:
    """Submit a Likert score for one of the worker's items through the API; it is saved."""
    saved = post(
        client, worker, f"items/{item}/submit/", {"submission_id": str(uuid.uuid4()), "likert": 3}
    )
    assert saved.status_code == 201
    return saved


def submitted(worker: Worker) -> int:
    return Assignment.objects.filter(worker=worker, status=Assignment.Status.SUBMITTED).count()


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
    slug = worker.study.slug
    response, written = written_by(lambda: client.get(f"/work/{slug}/api/progress/"))
    assert response.status_code == 200 and written == {}
    # The work page's GET claims the next item (documented): one reservation, nothing else.
    page, written = written_by(lambda: client.get(f"/work/{slug}/"))
    assert page.status_code == 302 and "/item/" in page["Location"]
    assert written == {"annotation_assignment": 1}
    # Showing the item, coming back to the work page (the same reservation) and the pause page
    # write nothing.
    for path in (page["Location"], f"/work/{slug}/", f"/work/{slug}/pause/"):
        response, written = written_by(client.get, path)
        assert response.status_code in (200, 302) and written == {}, (path, written)


def test_the_work_page_out_of_work_ends_the_session_and_writes_nothing_else(
    entered: tuple[Client, Worker],
) -> None:
    client, worker = entered
    slug = worker.study.slug
    for _ in range(5):
        cycle(client, worker, lambda n: nullcontext())
    # No pair is left for this worker: the GET ends the session with the full code (the one
    # write the claim documents beside reservations), then the completion page writes nothing.
    page, written = written_by(lambda: client.get(f"/work/{slug}/"))
    assert page.status_code == 302 and page["Location"].endswith("/done/")
    assert written == {"annotation_worker": 1}
    done, written = written_by(lambda: client.get(page["Location"]))
    assert done.status_code == 200 and written == {}


def test_the_item_page_shows_the_progress_read_with_its_item_in_pinned_statements(
    entered: tuple[Client, Worker], django_assert_num_queries: Any
) -> None:
    client, worker = entered
    slug = worker.study.slug
    for round in range(3):
        page = client.get(f"/work/{slug}/")
        assert page.status_code == 302 and "/item/" in page["Location"]
        # The process's first request reads the study once more (a per-process cache fills).
        counted = (
            CaptureQueriesContext(connection)
            if round == 0
            else django_assert_num_queries(ITEM_PAGE_STATEMENTS)
        )
        with counted:
            item = client.get(page["Location"])
        assert item.status_code == 200
        done = submitted(worker)
        assert item.context["progress"].done == done == round
        assert f"Item {done + 1} of {worker.study.target_per_worker}" in item.content.decode()
        submit(client, worker, page["Location"].rstrip("/").rsplit("/", 1)[1])
