"""What every fuzz module shares: the CI profile, the per-case watchdog and case counter, the database
fingerprint that proves a refused call wrote nothing, and the world of real users, tokens and trips.

The profile is fixed (derandomized, no example database): the same cases every run, so a red CI run is
reproducible on a laptop. `BTP_FUZZ_SCALE=10` multiplies every test's max_examples for a longer local run.
"""
from __future__ import annotations

import collections
import hashlib
import io
import os
import signal
import sqlite3
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from hypothesis import HealthCheck, settings
from sqlalchemy import text

from tests.fakes.thirdparty import gpx_from_points, make_points

DEADLINE = timedelta(seconds=5)  # hypothesis fails a case slower than this (it re-runs it first to be sure)
HARD_LIMIT_S = 20  # the watchdog: SIGALRM interrupts a case that runs longer (a hang, not a slow case)
SCALE = float(os.environ.get("BTP_FUZZ_SCALE") or 1)
CASES: collections.Counter = collections.Counter()
SLOWEST: dict[str, float] = {}
OUTCOMES: collections.Counter = collections.Counter()  # (kind, outcome): how deep the cases went
_STARTED = time.monotonic()


def fuzz_settings(max_examples: int) -> settings:
    """The CI profile for one test: `max_examples` cases (times BTP_FUZZ_SCALE), the same ones every run."""
    return settings(max_examples=max(1, int(max_examples * SCALE)), deadline=DEADLINE, derandomize=True,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                           HealthCheck.large_base_example])


class CaseHung(Exception):
    """A fuzz case ran past HARD_LIMIT_S: BTP hung on it."""


@contextmanager
def bounded_case(kind: str, limit: float = HARD_LIMIT_S, count: bool = True):
    """Run one case under a SIGALRM watchdog (the main thread, where pytest runs) and count it under `kind`."""
    def _alarm(signum, frame):
        raise CaseHung(f"a {kind} fuzz case ran longer than {limit} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        elapsed = time.monotonic() - start
        if count:
            CASES[kind] += 1
            SLOWEST[kind] = max(SLOWEST.get(kind, 0.0), elapsed)
    assert elapsed < limit, f"a {kind} fuzz case took {elapsed:.1f} s"


def summary() -> str | None:
    """The line the session ends with: how many cases ran, of each kind, and the slowest of each."""
    if not CASES:
        return None
    total = sum(CASES.values())
    kinds = ", ".join(f"{kind} {n} (slowest {SLOWEST[kind] * 1000:.0f} ms)" for kind, n in sorted(CASES.items()))
    outcomes = ", ".join(f"{kind} {outcome} {n}" for (kind, outcome), n in sorted(OUTCOMES.items()))
    return f"fuzz: {total} cases in {time.monotonic() - _STARTED:.0f} s — {kinds}" + (
        f"; outcomes: {outcomes}" if outcomes else "")


# ------------------------------------------------------------------ the database fingerprint

# Tables whose every column is compared (a refused call must not touch a row); the others by row count.
CONTENT_TABLES = ("trip", "stage", "computation", "trip_share", "idempotency_record", "user_account",
                  "oauth_grant", "access_token")


def fingerprint() -> tuple:
    """(row count of every table, a hash of every row of CONTENT_TABLES), read on a connection of its own:
    what is committed, whatever the request's session holds."""
    from trips.core.db import db

    tables = db.metadata.sorted_tables
    with db.engine.connect() as conn:
        counts = tuple(conn.execute(text("SELECT " + ", ".join(
            f"(SELECT count(*) FROM {t.name})" for t in tables))).one())
        digest = hashlib.blake2b(digest_size=16)
        for t in tables:
            if t.name not in CONTENT_TABLES:
                continue
            order = ", ".join(c.name for c in t.primary_key.columns)
            for row in conn.execute(text(f"SELECT * FROM {t.name} ORDER BY {order}")):
                digest.update(repr(tuple(row)).encode())
    return dict(zip((t.name for t in tables), counts)), digest.hexdigest()


def assert_unchanged(before: tuple, after: tuple, what: str) -> None:
    counts, digest = before
    if after != before:
        moved = {name: (counts[name], n) for name, n in after[0].items() if counts[name] != n}
        raise AssertionError(f"a refused {what} committed a write to the database: counts {moved or 'same'}, "
                             f"rows {'changed' if digest != after[1] else 'same'}")


class Ledger:
    """Whether anything was committed between two looks, cheaply. On SQLite, `PRAGMA data_version` read on a
    connection of its own moves whenever another connection commits a change (one round-trip, exact); on any
    other engine, the fingerprint above."""

    def __init__(self):
        from trips.core.db import db

        url = db.engine.url
        self._sqlite = None
        if url.get_backend_name() == "sqlite" and url.database:
            self._sqlite = sqlite3.connect(url.database, isolation_level=None, check_same_thread=False)

    def look(self):
        if self._sqlite is not None:
            return self._sqlite.execute("PRAGMA data_version").fetchone()[0]
        return fingerprint()

    def assert_unchanged(self, before, what: str) -> None:
        after = self.look()
        if self._sqlite is not None:
            assert after == before, f"a refused {what} committed a write to the database"
        else:
            assert_unchanged(before, after, what)

    def close(self) -> None:
        if self._sqlite is not None:
            self._sqlite.close()


# ------------------------------------------------------------------ the world the cases run in

LONG = "Z" + "".join(chr(0x41 + (i * 7) % 26) for i in range(9_999))  # 10 000 characters, not a repetition
LONG_PROBE = LONG[100:160]  # no refusal may quote this much of it


def assert_bounded_message(text: str, what: str) -> None:
    assert LONG_PROBE not in text, f"{what} echoes an unbounded value: {text[:200]}"


@dataclass
class World:
    owner: object
    other: object
    trip: object            # the owner's, three days, undated
    dated: object           # the owner's, dated in the future
    locked: object          # the owner's, started (today): every lock-carrying tool refuses it
    foreign: object         # the other user's
    token: str              # MCP, both scopes
    read_token: str         # MCP, trips:read only
    rest: dict              # REST headers, both scopes

    def trip_ids(self) -> list[str]:
        return [self.trip.id, self.dated.id, self.locked.id, self.foreign.id]


def make_trip(user, name: str, points: int = 2400, **settings):
    from trips.services.trips import import_gpx

    return import_gpx(user, io.BytesIO(gpx_from_points(make_points(points), name=name)), settings)


