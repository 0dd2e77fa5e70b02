"""The fault suite (`make test-faults`): BTP's real processes (gunicorn, `flask worker`) against a PostgreSQL database
and a redis-server of the run's own, and faults done to them. It runs only when asked for by path (`pytest
tests/faults`); every test is bounded in time (BOUND_S, SIGALRM) besides its own waits' deadlines."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.faults.stack import RedisServer, own_database

HERE = Path(__file__).resolve().parent
BOUND_S = 150  # no fault test may take longer than this, whatever it waits on


def _asked_for(config) -> bool:
    """True when the run's arguments name this directory or something in it."""
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config, items):
    ours = [item for item in items if HERE in Path(item.fspath).parents]
    if not ours:
        return
    if not _asked_for(config):
        config.hook.pytest_deselected(items=ours)
        items[:] = [item for item in items if item not in ours]
    elif len(ours) != len(items):
        raise pytest.UsageError("run tests/faults on its own (make test-faults): its session database and Redis "
                                "are not the rest of the suite's")


@pytest.fixture(scope="session")
def database_url():
    """This run's own PostgreSQL database (the app fixture migrates it), dropped at the end."""
    with own_database() as url:
        yield url


@pytest.fixture(scope="session")
def session_redis(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server(session_redis):
    return session_redis.url


@pytest.fixture
def private_redis(tmp_path):
    """A redis-server of this test's own, to stop, pause and start again."""
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


class Overrun(Exception):
    pass


@pytest.fixture(autouse=True)
def _bounded():
    """Fail a test still running after BOUND_S seconds (its fixtures then stop what it started)."""
    def overrun(signum, frame):
        raise Overrun(f"the test ran over its bound of {BOUND_S} s")

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.setitimer(signal.ITIMER_REAL, BOUND_S)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


_MEASURED: list[tuple[str, float, str]] = []


@pytest.fixture
def measured():
    """Record a figure (what, seconds, bound) for the run's summary: the recovery times docs/RELIABILITY.md quotes."""
    def record(what: str, seconds: float, bound: str = "") -> float:
        _MEASURED.append((what, seconds, bound))
        return seconds

    return record


def pytest_terminal_summary(terminalreporter):
    if not _MEASURED:
        return
    terminalreporter.section("fault recovery, measured")
    for what, seconds, bound in _MEASURED:
        terminalreporter.write_line(f"{seconds:7.2f} s  {what}" + (f"  (bound {bound})" if bound else ""))
