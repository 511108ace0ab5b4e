"""A paid reply is never thrown away: a late reader keeps the bytes that arrived, and every
attempt's error stays on the call."""

from __future__ import annotations

import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta

import httpcore2
import psycopg
import pytest
import redis
from django.db import OperationalError, connection
from django.urls import reverse
from django.utils import timezone

from judges.llm.client import _DeadlineBackend, chat_client
from judges.models import JudgeCall
from judges.services.calls import judge_call_execute
from judges.services.journal import journal_key
from judges.services.runs import judge_calls_reconcile, judge_run_start
from tests.conftest import PASSWORD
from tests.judges.conftest import make_llm_judge, make_marked_pairs
from tests.judges.fake_openai import Fault
from tests.judges.integration import broker_purge, database_url_for_workers

pytestmark = pytest.mark.django_db

REPLY = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


def server_that_answers_at_once() -> tuple[socket.socket, threading.Thread]:
    """A TCP server on loopback that sends a whole reply as soon as a client connects."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        peer, _ = listener.accept()
        peer.sendall(REPLY)
        time.sleep(2)
        peer.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_a_reader_that_comes_after_the_deadline_still_reads_the_reply_that_arrived_in_time():
    listener, _ = server_that_answers_at_once()
    backend = _DeadlineBackend(time.monotonic() + 0.3)
    stream = backend.connect_tcp("127.0.0.1", listener.getsockname()[1])
    # The reply arrives within the deadline; the reading thread gets the CPU only after it
    # (a starved worker thread, a paused process).
    time.sleep(0.6)
    assert stream.read(65536) == REPLY
    stream.close()
    listener.close()


def test_a_reader_past_the_deadline_with_nothing_waiting_times_out_without_waiting():
    listener = socket.create_server(("127.0.0.1", 0))
    backend = _DeadlineBackend(time.monotonic() + 0.2)
    stream = backend.connect_tcp("127.0.0.1", listener.getsockname()[1])
    peer, _ = listener.accept()
    time.sleep(0.3)
    started = time.monotonic()
    with pytest.raises(httpcore2.ReadTimeout):
        stream.read(65536)
    assert time.monotonic() - started < 0.5
    stream.close()
    peer.close()
    listener.close()


def test_the_lateness_of_a_request_is_when_its_thread_came_back_not_how_long_it_drained():
    listener, _ = server_that_answers_at_once()
    backend = _DeadlineBackend(time.monotonic() + 0.2)
    stream = backend.connect_tcp("127.0.0.1", listener.getsockname()[1])
    assert backend.lateness() == 0.0
    # The thread comes back 0.3 s after the deadline, then drains for a while: it was late by
    # the 0.3 s it could not run, not by the time it spent reading what had arrived.
    time.sleep(0.5)
    assert stream.read(65536) == REPLY
    came_back = backend.lateness()
    time.sleep(0.3)
    assert 0.25 <= backend.lateness() == came_back < 0.5
    stream.close()
    listener.close()


def test_a_timeout_says_how_late_the_worker_came_back_to_its_request(cast, fake, api_key, settings):
    settings.CONCORD_JUDGE_TIMEOUT_SECONDS = 0.5
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    call = run.calls.select_related("pair__prompt").get(order="ab")
    assert call.pair is not None
    fake.inject(Fault("slow", key=f"{call.pair.prompt.external_id}:ab", seconds=3.0))
    assert judge_call_execute(call_id=call.pk).status == "pending"
    call.refresh_from_db()
    (entry,) = call.attempt_errors
    # A thread with CPU to spare comes back within a scheduler's tick of the deadline.
    found = re.search(r"the worker came back to it ([0-9.]+) s after it", entry["error"])
    assert found is not None, entry["error"]
    assert entry["error"].startswith("attempt 1: timeout")
    assert float(found.group(1)) < 0.2


def test_every_attempts_error_stays_on_the_call_and_its_page_after_it_is_done(
    cast, fake, api_key, client, settings
):
    broker_purge(settings.CELERY_BROKER_URL)
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    call = run.calls.get(order="ab")
    assert call.pair is not None
    fake.inject(Fault("500", key=f"{call.pair.prompt.external_id}:ab"))
    fake.inject(Fault("429", key=f"{call.pair.prompt.external_id}:ab", retry_after=1))
    for _ in range(2):
        judge_call_execute(call_id=call.pk)
        JudgeCall.objects.filter(pk=call.pk).update(not_before=timezone.now())
    # The third attempt is claimed and its worker dies; the reconciler takes it back.
    call.refresh_from_db()
    JudgeCall.objects.filter(pk=call.pk).update(
        status="running",
        attempts=call.attempts + 1,
        lease_token="dead",
        lease_expires_at=timezone.now() - timedelta(seconds=1),
    )
    judge_calls_reconcile()
    assert judge_call_execute(call_id=call.pk).status == "done"
    call.refresh_from_db()
    assert call.error == ""
    history = call.attempt_errors
    assert [entry["attempt"] for entry in history] == [1, 2, 3]
    assert history[0]["error"].startswith("attempt 1: HTTP 500")
    assert history[1]["error"].startswith("attempt 2: HTTP 429")
    assert "the lease ran out" in history[2]["error"]
    assert all(entry["at"] for entry in history)
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    page = client.get(reverse("judges:call_detail", args=[cast.study.slug, run.pk, call.pk]))
    text = page.content.decode()
    assert 'id="attempt-errors"' in text
    assert "attempt 1: HTTP 500" in text and "attempt 2: HTTP 429" in text
    assert "the lease ran out" in text


@contextmanager
def database_refusing_connections() -> Iterator[Callable[[], None]]:
    """Yield a function that makes the test database refuse every connection and drop its
    open ones (as a database outage does); connections are allowed again on leaving."""
    name = connection.settings_dict["NAME"]
    admin_url = database_url_for_workers().rsplit("/", 1)[0] + "/postgres"
    admin = psycopg.connect(admin_url, autocommit=True)

    def refuse() -> None:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )

    try:
        yield refuse
    finally:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
        admin.close()
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_reply_whose_database_write_outlived_the_lease_is_recorded_from_the_journal_not_paid_again(  # noqa: E501
    cast, fake, api_key, settings
):
    settings.CONCORD_JUDGE_LEASE_SECONDS = 2
    settings.CONCORD_JUDGE_TIMEOUT_SECONDS = 1
    broker_purge(settings.CELERY_BROKER_URL)
    fake.honour_idempotency = False  # as OpenAI: a request sent again is paid again
    make_marked_pairs(cast.study, 1)
    run = judge_run_start(judge=make_llm_judge(fake), study=cast.study, user=cast.researcher)
    call = run.calls.get(order="ab")
    assert call.pair is not None
    key = f"{call.pair.prompt.external_id}:ab"
    with database_refusing_connections() as refuse:
        # While the request is with the API, the database goes away for longer than the lease.
        fake.inject(Fault("hook", key=key, hook=refuse))
        with pytest.raises(OperationalError):
            judge_call_execute(call_id=call.pk)
    assert fake.generations() == {key: 1}
    # The lease has run out: the reconciler takes the call back and counts it on the ledger.
    time.sleep(settings.CONCORD_JUDGE_LEASE_SECONDS)
    judge_calls_reconcile()
    call.refresh_from_db()
    assert (call.status, call.unrecorded_requests) == ("pending", 1)
    # The next claim finds the reply in the journal: recorded, paid once, off the ledger.
    assert judge_call_execute(call_id=call.pk).status == "done"
    assert fake.generations() == {key: 1}
    call.refresh_from_db()
    run.refresh_from_db()
    assert call.likert == 2 and call.attempts == 2 and call.unrecorded_requests == 0
    assert run.spent_usd == call.cost_usd > 0 and run.exposure_usd == 0
    # Once the database holds it, the journal does not.
    journal = redis.Redis.from_url(settings.REDIS_URL)
    assert not journal.exists(journal_key(f"concord-call-{call.pk}"))


def test_judge_clients_share_one_tls_context_built_once_per_process() -> None:
    # Building a context loads the CA bundle (about 20 ms of CPU); a client is built per call.
    first = chat_client(base_url="https://api.openai.com/v1", api_key="sk-x", timeout=5)
    second = chat_client(base_url="https://api.openai.com/v1", api_key="sk-y", timeout=5)
    contexts = [
        c.client._client._transport._pool._ssl_context  # type: ignore[attr-defined]
        for c in (first, second)
    ]
    assert contexts[0] is contexts[1]
    assert contexts[0].verify_mode == ssl.CERT_REQUIRED and contexts[0].check_hostname
