"""The SQL statements (transaction control left out) and Redis round trips of each edit_stages action through /mcp, on
a dated five-day trip with every enrichment, its analysis settled and the caches warm (bench/bench_edit_costs.py
times them). A count below its pin is progress: lower the pin. One above is a regression, unless it buys a rule
(say which in the commit)."""
from datetime import date, timedelta

import pytest
import sqlalchemy as sa

from tests.factories import make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.mcp.test_hot_path import counted, import_gpx_days
from tests.trips.readmodels.test_readmodels_enriched import fill, settle
from trips.core.db import db
from trips.models import Stage, Trip


@pytest.fixture
def edited(app, ctx, client):
    """(token, trip id, version) of a dated five-day trip (enriched, settled), the grant's last use stamped."""
    user = make_user("edit-costs@example.org")
    trip = import_gpx_days(user, (date.today() + timedelta(days=3)).isoformat())
    trip_id = trip.id
    fill(trip_id)
    settle(trip_id)
    token = mcp_token(app, user)
    version = payload(call(client, token, "get_trip", {"id": trip_id}))["version"]
    return token, trip_id, version


def days(trip_id: str) -> list[Stage]:
    db.session.rollback()  # a fresh view: the calls committed in their own units of work
    return list(db.session.scalars(sa.select(Stage).where(Stage.trip_id == trip_id).order_by(Stage.position)))


def edit(client, token, trip_id, version, args, monkeypatch=None):
    """One edit_stages call at `version`: (the new version, what it cost or None)."""
    arguments = {"tripId": trip_id, "version": version, **args}
    if monkeypatch is None:
        result = call(client, token, "edit_stages", arguments)
        seen = None
    else:
        with counted(monkeypatch) as seen:
            result = call(client, token, "edit_stages", arguments)
    assert not result["isError"], result
    assert payload(result)["version"] == version + 1
    return version + 1, seen


# action → (warm-up arguments, measured arguments), from the days as they stand before each call
def _rename(d, n):
    return {"action": "update", "stageId": d[2].id, "label": f"Col de Rousset {n}"}


def _cut(d, n):
    return {"action": "update", "stageId": d[1].id, "distance": round(d[1].distance * (0.8 if n == 0 else 0.9), 1)}


def _add(d, n):
    end = {"lat": d[-1].end_lat, "lon": d[-1].end_lon}
    return {"action": "add", "startPoint": end, "endPoint": {"lat": end["lat"] + 0.01, "lon": end["lon"] + 0.01}}


def _delete(d, n):
    return {"action": "delete", "stageId": d[1].id}


def _move(d, n):
    return {"action": "move", "stageId": d[0].id, "toIndex": 1} if n == 0 else \
        {"action": "move", "stageId": d[1].id, "toIndex": 0}


def _rest_day(d, n):
    return {"action": "rest_day", "stageId": d[0].id if n == 0 else d[3].id}


# action → (SQL statements, Redis round trips) of one warm call, on SQLite and PostgreSQL.
# rename (an update with nothing but a label): the admission's read, the trip with its days under the lock, the
# trip's and the day's UPDATEs; Redis: the budgets' script, the lock taken and released, the epochs replaced after
# the commit, the request's counters (a web worker sums those in process).
# The others (bench/bench_edit_costs.py lists them): the admission's read, the trip with its computations and its days
# under the lock, the writes, one SELECT of the trip's computations per dispatch step (trips/computations.py
# read_again), one SELECT of every day's stage.enrichment for the map coverage (trips/enrich/registry.py
# _load_enrichments), the generation's UPDATEs, the map areas' bounds; Redis: the trip's lock taken and released, and
# the enrichment jobs queued after the commit in one pipeline (trips/core/queue.py enqueue_many).
PINS = {
    "rename": (_rename, {"sqlite": (5, 5), "postgresql": (5, 5)}),
    "update_distance": (_cut, {"sqlite": (19, 6), "postgresql": (19, 6)}),
    # add: also whether a ready import holds a routable network for the bicycle router (docs/RULES.md "Bicycle
    # routing"), asked once as the day is drawn (none here: joined straight).
    "add": (_add, {"sqlite": (13, 6), "postgresql": (13, 6)}),
    "delete": (_delete, {"sqlite": (16, 6), "postgresql": (16, 6)}),
    "move": (_move, {"sqlite": (11, 6), "postgresql": (11, 6)}),
    "rest_day": (_rest_day, {"sqlite": (13, 6), "postgresql": (13, 6)}),
}


@pytest.mark.parametrize("action", list(PINS))
def test_one_edit_costs_its_pinned_statements_and_round_trips(client, edited, monkeypatch, action):
    token, trip_id, version = edited
    arguments, pins = PINS[action]
    version, _ = edit(client, token, trip_id, version, arguments(days(trip_id), 0))  # warm
    version, seen = edit(client, token, trip_id, version, arguments(days(trip_id), 1), monkeypatch)
    # A lower number is progress: update the pin (and bench/README.md's table); a higher one needs a reason.
    assert (len(seen["sql"]), seen["redis"]) == pins[db.engine.dialect.name], seen["sql"]


def refused(client, token, arguments, monkeypatch) -> tuple[dict, dict]:
    call(client, token, "edit_stages", arguments)  # warm: the same refusal once
    with counted(monkeypatch) as seen:
        result = call(client, token, "edit_stages", arguments)
    assert result["isError"], result
    return payload(result)["error"], seen


# refusal → (its code, SQL statements, Redis round trips): a stranger and a stale version are answered by the admission and the fail-fast guards (one read; the budgets' round trip and the request's
# counters), before the trip's lock is asked for; an unknown day only under the lock (its read of the trip and days,
# the lock taken and released). Nothing is written. A lower number is progress: update the pin.
REFUSALS = {
    "stale version": ("stale_version", 1, 2),
    "someone else's trip": ("not_found", 1, 2),
    "unknown day": ("not_found", 3, 4),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refused_edit_costs_less_and_writes_nothing(app, client, edited, monkeypatch, case):
    token, trip_id, version = edited
    stage_id = days(trip_id)[2].id
    arguments = {"tripId": trip_id, "version": version, "action": "update", "stageId": stage_id, "label": "Nope"}
    if case == "stale version":
        arguments["version"] = version + 1  # not the trip's: stale (or from the future) alike
    elif case == "someone else's trip":
        token = mcp_token(app, make_user("stranger@example.org"))
    else:
        arguments["stageId"] = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    error, seen = refused(client, token, arguments, monkeypatch)
    code, statements, round_trips = REFUSALS[case]
    assert error["code"] == code, error
    assert (len(seen["sql"]), seen["redis"]) == (statements, round_trips), seen["sql"]
    writes = [s for s in seen["sql"] if s.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE", "WITH"))]
    assert writes == [], writes
    assert days(trip_id)[2].label is None  # nothing written
    assert db.session.get(Trip, trip_id).version == version
