"""The production stack of the fault tests, all on 127.0.0.1: a redis-server of the test's own, a PostgreSQL
database of the run's own (created, then dropped), and an HTTP client the MCP test helpers can drive."""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import redis
import requests
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from tests.live import free_port, gunicorn

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


class RedisServer:
    """`redis-server --port N --save '' --appendonly no` in `directory`: stopped, it comes back empty, on the same
    port (as a Redis without persistence restarts)."""

    def __init__(self, directory: Path):
        binary = shutil.which("redis-server")
        assert binary, "the fault tests need redis-server on PATH (Debian: apt-get install redis-server)"
        self.binary, self.directory, self.port = binary, directory, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self.start()

    def start(self) -> None:
        assert self.proc is None, "already running"
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), "--logfile", str(self.directory / "redis.log")],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                if client.ping():
                    break
            except redis.RedisError:
                pass
            assert self.proc.poll() is None and time.monotonic() < deadline, \
                f"redis-server did not start on port {self.port}"
            time.sleep(0.02)
        client.close()

    def stop(self) -> None:
        """SIGTERM and wait: every connection is closed, the port refuses."""
        if self.proc is None:
            return
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: connections are accepted by the kernel but nothing answers (a hung Redis)."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)


def admin_url() -> str:
    """The PostgreSQL server the fault tests make their database on: BTP_FAULTS_PG_URL, else DATABASE_URL's server
    when it is PostgreSQL, else the local one; always through its `postgres` database."""
    url = os.environ.get("BTP_FAULTS_PG_URL") or os.environ.get("DATABASE_URL") or DEFAULT_PG
    if not url.startswith("postgresql"):
        url = DEFAULT_PG
    return make_url(url).set(database="postgres").render_as_string(hide_password=False)


def _admin() -> sa.Engine:
    return sa.create_engine(admin_url(), execution_options={"isolation_level": "AUTOCOMMIT"}, poolclass=sa.NullPool)


PREFIX = "btp_faults_"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _drop_orphans(conn) -> None:
    """Drop the databases of earlier runs that died before dropping theirs (their pid is gone)."""
    for (name,) in conn.execute(sa.text("SELECT datname FROM pg_database WHERE datname LIKE :p"),
                                {"p": PREFIX + "%"}).all():
        pid = name[len(PREFIX):].split("_", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def own_database():
    """A database of this run's own (`btp_faults_<pid>_<hex>`), dropped afterwards; yields its URL."""
    name = f"{PREFIX}{os.getpid()}_{secrets.token_hex(3)}"
    engine = _admin()
    try:
        with engine.connect() as conn:
            _drop_orphans(conn)
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sa.exc.OperationalError as exc:
        raise AssertionError(f"the fault tests need PostgreSQL at {make_url(admin_url()).host}: {exc}") from None
    try:
        yield make_url(admin_url()).set(database=name).render_as_string(hide_password=False)
    finally:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()


def terminate_backends(database_url: str) -> int:
    """pg_terminate_backend every connection to that database (and only to it), each waited for until its backend
    has exited (as after a restart or a failover); returns how many."""
    name = make_url(database_url).database
    engine = _admin()
    try:
        with engine.connect() as conn:
            return len(conn.execute(sa.text(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = :name AND pid <> pg_backend_pid()"), {"name": name}).all())
    finally:
        engine.dispose()


def backends(database_url: str) -> int:
    """How many connections that database has now."""
    engine = _admin()
    try:
        with engine.connect() as conn:
            return conn.scalar(sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = :name"),
                               {"name": make_url(database_url).database})
    finally:
        engine.dispose()


class Answer:
    """A requests response with the Flask test-response methods the test helpers read."""

    def __init__(self, response: requests.Response, seconds: float):
        self.response, self.seconds = response, seconds
        self.status_code, self.headers = response.status_code, response.headers
        self.mimetype = response.headers.get("Content-Type", "").split(";")[0].strip()

    def get_json(self):
        try:
            return self.response.json()
        except ValueError:
            return None

    def get_data(self, as_text: bool = False):
        return self.response.text if as_text else self.response.content


class HttpClient:
    """Drive a served BTP like the Flask test client (tests/mcp_helpers.py works on it); every request is bounded
    by `timeout` seconds and timed (Answer.seconds)."""

    def __init__(self, base_url: str, timeout: float = 10.0):
        self.base_url, self.timeout = base_url, timeout
        self.session = requests.Session()

    def open(self, method: str, path: str, *, data=None, json_body=None, headers=None, **_) -> Answer:
        start = time.monotonic()
        response = self.session.request(method, self.base_url + path, data=data, json=json_body, headers=headers,
                                        timeout=self.timeout, allow_redirects=False)
        return Answer(response, time.monotonic() - start)

    def get(self, path, **kw):
        return self.open("GET", path, **kw)

    def post(self, path, data=None, json=None, **kw):
        return self.open("POST", path, data=data, json_body=json, **kw)

    def patch(self, path, json=None, **kw):
        return self.open("PATCH", path, json_body=json, **kw)

    def delete(self, path, **kw):
        return self.open("DELETE", path, **kw)


@contextmanager
def nodes(settings: dict, folder: Path, names: tuple[str, ...], workers: int = 2):
    """Several gunicorn instances of one configuration (database, Redis, secret, public URL) on ports of their
    own, started at once, each logging to `folder/<name>.log`; yields their Live (all stopped at the end, also
    when another did not start)."""
    servers = [gunicorn(settings, folder / f"{name}.log", workers=workers) for name in names]
    with ExitStack() as stack, ThreadPoolExecutor(len(servers)) as pool:
        started = [pool.submit(server.__enter__) for server in servers]
        for server, future in zip(servers, started):
            if future.exception() is None:
                stack.push(server)
        yield [future.result() for future in started]
