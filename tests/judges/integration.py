"""Real Celery worker processes for the integration tests, and a private Redis to restart."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
from django.conf import settings
from django.db import connection

from config.celery import app as celery_app
from tests.judges.conftest import KEY_ENV
from tests.judges.fake_openai import API_KEY

ROOT = Path(__file__).resolve().parents[2]

# Short leases and grace times so that lost work comes back within seconds, not minutes.
FAST_ENV = {
    "CONCORD_JUDGE_LEASE_SECONDS": "8",
    "CONCORD_JUDGE_TIMEOUT_SECONDS": "4",
    "CONCORD_JUDGE_PENDING_GRACE_SECONDS": "4",
    "CONCORD_JUDGE_BACKOFF_BASE_SECONDS": "0.2",
    "CONCORD_JUDGE_RECONCILE_SECONDS": "1",
    "CONCORD_JUDGE_RATE_WINDOW_SECONDS": "4",
}


def database_url_for_workers() -> str:
    """The URL of the database this test runs on (pytest-django's test_<name>)."""
    params = connection.settings_dict
    host = params.get("HOST") or "127.0.0.1"
    port = params.get("PORT") or 5432
    user = params.get("USER") or "postgres"
    password = f":{params['PASSWORD']}" if params.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{params['NAME']}"


def process_env(*, broker_url: str | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(FAST_ENV)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings.test",
            "DATABASE_URL": database_url_for_workers(),
            "CELERY_BROKER_URL": broker_url or settings.CELERY_BROKER_URL,
            "REDIS_URL": settings.REDIS_URL,
            KEY_ENV: API_KEY,
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@dataclass
class WorkerProcess:
    process: subprocess.Popen[bytes]
    log: Path
    concurrency: int = 1

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> bool:
        return " ready." in self.text()

    def wait_ready(self, timeout: float = 60) -> None:
        wait_for(self.ready, timeout, lambda: self.text()[-3000:])

    def kill(self) -> None:
        """SIGKILL the worker and everything it started, as an OOM killer or a crash would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def worker_start(
    tmp_path: Path,
    name: str,
    *,
    broker_url: str | None = None,
    beat: bool = False,
    pool: str = "solo",
    concurrency: int = 1,
    env: dict[str, str] | None = None,
    queues: str = "llm_judge,judge_reconcile",
    wait: bool = True,
) -> WorkerProcess:
    """Start `celery -A config worker -Q <queues>` and (unless told not to) wait until ready."""
    log = tmp_path / f"{name}.log"
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "-Q",
        queues,
        f"--pool={pool}",
        f"--concurrency={concurrency}",
        "-n",
        f"{name}@%h",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel=INFO",
    ]
    if beat:
        command += ["--beat", f"--schedule={tmp_path / (name + '-beat')}"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=process_env(broker_url=broker_url, **(env or {})),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = WorkerProcess(process=process, log=log, concurrency=concurrency)
    if wait:
        worker.wait_ready()
    return worker


def wait_for(
    predicate: Callable[[], bool],
    timeout: float,
    explain: Callable[[], str] = lambda: "",
    *,
    every: float = 0.2,
    tick: Callable[[], object] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s\n{explain()}")
        if tick is not None:
            tick()
        time.sleep(every)


def _celery_pools_drop() -> None:
    # Celery keeps its connection pools from their first use. Celery.close() would drop them but
    # also unregister the app, so that shared tasks imported afterwards find no app.
    celery_app._pool = None
    celery_app.amqp._producer_pool = None


@contextmanager
def broker_url_set(url: str) -> Iterator[None]:
    """Make this process's Celery app send to, and check, the broker at `url` for a while.

    Celery derives the read and write URLs from `broker_url` when they are not set, so the
    previous state is restored by dropping the overrides, not by pinning the values read
    (pinned, they would keep a later test that sets only `broker_url` on the old broker).
    """
    conf = celery_app.conf
    keys = ("broker_url", "broker_read_url", "broker_write_url")
    saved = {key: conf.changes[key] for key in keys if key in conf.changes}
    conf.broker_url = conf.broker_read_url = conf.broker_write_url = url
    _celery_pools_drop()
    try:
        yield
    finally:
        for key in keys:
            conf.changes.pop(key, None)
        conf.update(saved)
        _celery_pools_drop()


def broker_purge(url: str, *queues: str) -> None:
    """Drop queued and unacknowledged messages a previous test left on the broker (by default
    in the judge queues)."""
    client = redis.Redis.from_url(url)
    names = queues or ("llm_judge", "judge_reconcile")
    # kombu keeps one more list per priority step (core.broker.queue_length).
    steps = [f"{name}\x06\x16{step}" for name in names for step in (3, 6, 9)]
    client.delete(*names, *steps, "unacked", "unacked_index", "unacked_mutex")
    client.close()


def free_port() -> int:
    """A TCP port nobody listens on now, chosen by the kernel (so parallel test runs differ)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A redis-server of our own, so the test can shut it down without touching shared ones.

    Without a port it takes a free one, so that several test runs on one machine never meet.
    """

    def __init__(self, tmp_path: Path, port: int | None = None):
        self.port = port if port is not None else free_port()
        self.dir = tmp_path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        subprocess.run(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "yes",
                "--dir",
                str(self.dir),
                "--logfile",
                str(self.dir / f"redis-{self.port}.log"),
            ],
            check=True,
        )
        wait_for(self._answers, 10)

    def _answers(self) -> bool:
        try:
            return bool(redis.Redis(port=self.port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def shutdown(self) -> None:
        """`redis-cli SHUTDOWN NOSAVE`: everything queued in it is gone."""
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "SHUTDOWN", "NOSAVE"],
            check=False,
            capture_output=True,
        )
        wait_for(lambda: not self._answers(), 10)


def judge_queue_messages(
    url: str, queue_name: str = "llm_judge", *, timeout: float = 1.0
) -> list[tuple[str, list[int]]]:
    """A queue's messages as (task name, args), popped from Redis as a worker pops them (each
    acknowledged, so the queue is empty afterwards)."""
    from kombu import Connection

    found: list[tuple[str, list[int]]] = []
    with Connection(url) as conn:
        queue = conn.SimpleQueue(queue_name)
        while True:
            try:
                message = queue.get(timeout=timeout)
            except queue.Empty:
                return found
            found.append((message.headers["task"], list(message.payload[0])))
            message.ack()
