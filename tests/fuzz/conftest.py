"""Fixtures of the fuzz modules (helpers in tests/fuzz/support.py) and the session's closing line
"fuzz: N cases …"."""
from __future__ import annotations

from datetime import date, timedelta

import pytest

from tests.factories import auth, make_token, make_user
from tests.fuzz.support import Ledger, World, make_trip, summary
from tests.mcp_helpers import mcp_token


def pytest_terminal_summary(terminalreporter):
    line = summary()
    if line:
        terminalreporter.write_line(line)


@pytest.fixture
def world(app, ctx) -> World:
    from trips.core.db import atomic, db
    from trips.models import Trip

    owner, other = make_user("fuzz-owner@example.org"), make_user("fuzz-other@example.org")
    start = date.today() + timedelta(days=400)
    trip = make_trip(owner, "Vercors")
    dated = make_trip(owner, "Dated", startDate=start.isoformat(), endDate=(start + timedelta(days=2)).isoformat())
    locked = make_trip(owner, "Started", points=900)
    with atomic():
        db.session.get(Trip, locked.id).start_date = date.today()
    foreign = make_trip(other, "Not yours", points=900)
    return World(owner=owner, other=other, trip=trip, dated=dated, locked=locked, foreign=foreign,
                 token=mcp_token(app, owner), read_token=mcp_token(app, owner, scope="trips:read"),
                 rest=auth(make_token(owner)))


@pytest.fixture
def unlimited(app):
    """Every rate limit and budget lifted for the run (the guards still run, as a benchmark lifts them)."""
    saved = app.config.get("BTP_LIMITS")
    from trips.core.limits import DEFAULTS

    app.config["BTP_LIMITS"] = {bucket: (10 ** 9, window) for bucket, (_, window) in DEFAULTS.items()}
    yield
    app.config["BTP_LIMITS"] = saved


@pytest.fixture
def ledger(app, ctx):
    keeper = Ledger()
    yield keeper
    keeper.close()


@pytest.fixture
def gazetteer(ctx):
    """The offline gazetteer built (once per instance folder, in a child process) before place searches are
    fuzzed: a worker's first start, not a case."""
    from trips.places.gazetteer import get_gazetteer

    get_gazetteer()
