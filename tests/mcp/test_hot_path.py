"""The MCP hot path (docs/PERFORMANCE.md): get_trip, list_trips and a rename cost a bounded number of SQL statements and
Redis round trips whatever the trip's size, and skip nothing of auth, budgets or the floor: the answers equal the
full read model's, a change behind the server's back is read anew, a revoked token and spent budgets refuse at once."""
import io
import json
from contextlib import contextmanager
from datetime import date, timedelta

import pytest
import redis as redis_lib
import sqlalchemy as sa
from sqlalchemy import event

from mcp.answers import trip_digest
from mcp.kept import DIGESTS, KEPT, LINES, PAGES
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, modern, payload
from tests.trips.readmodels.test_readmodels_enriched import fill, settle
from trips.core.db import atomic, db, utcnow
from trips.core.text import clean_answer
from trips.models import Stage
from trips.services import trip_reads
from trips.services import trips as services

CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT", "ROLLBACK")


@pytest.fixture
def owner(app, ctx):
    """A dated five-day trip whose every day carries every enrichment (alerts with polylines, lodgings,
    forecasts), its analysis settled, and an agent's token."""
    user = make_user("hot-path@example.org")
    start = (date.today() + timedelta(days=3)).isoformat()
    trip = import_gpx_days(user, start)
    fill(trip.id)
    settle(trip.id)
    return user, trip.id, mcp_token(app, user)


def import_gpx_days(user, start):
    trip = services.import_gpx(user, io.BytesIO(gpx_from_points(make_points(4000), name="Hot path")),
                               {"startDate": start})
    assert len(trip.stages) >= 5
    return trip


@contextmanager
def counted(monkeypatch):
    """{"sql": statements other than transaction control, "redis": round trips} while the block runs."""
    seen = {"sql": [], "redis": 0}

    def statement(conn, cursor, text, parameters, context, executemany):
        if not text.lstrip().upper().startswith(CONTROL):
            seen["sql"].append(text)

    sent = redis_lib.connection.AbstractConnection.send_packed_command

    def round_trip(self, command, check_health=True):
        seen["redis"] += 1
        return sent(self, command, check_health)

    monkeypatch.setattr(redis_lib.connection.AbstractConnection, "send_packed_command", round_trip)
    event.listen(db.engine, "before_cursor_execute", statement)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", statement)
        monkeypatch.undo()


def test_get_trip_costs_nothing_kept_one_statement_warm_three_cold_and_two_round_trips(client, owner, monkeypatch):
    _, trip_id, token = owner
    call(client, token, "get_trip", {"id": trip_id})  # the grant's last use (once per five minutes); the token
    LINES.answers.clear()  # is remembered live from now on (oauth/services/live_tokens.py): not looked up while the epoch stands
    DIGESTS.answers.clear()
    answers = []
    fingerprint = 1 if db.engine.dialect.name == "postgresql" else 2  # hashed by the server, or by us from rows
    # cold: loads the trip and renders; warm: known by its rows; kept: its epochs unchanged (trips/core/epochs.py)
    for expected in (2 + fingerprint, fingerprint, 0):
        if expected:
            KEPT.answers.clear()
        with counted(monkeypatch) as seen:
            result = call(client, token, "get_trip", {"id": trip_id})
        assert not result["isError"] and len(result["structuredContent"]["stages"]) >= 5
        answers.append(result["structuredContent"])
        # the fingerprint (PostgreSQL: one statement; SQLite: trip with computations, days, as plain rows); cold
        # only: the trip with its computations and its days into the ORM (no lazy load, none per day)
        assert len(seen["sql"]) == expected, seen["sql"]
        # budgets (address, calls), the token epoch and the trips epochs in one script; the request's counters, the
        # tool's and the grant's window
        assert seen["redis"] == 2
    assert answers[0] == answers[1] == answers[2]


def test_a_known_digest_is_keyed_by_the_readers_language_too(client, owner):
    """The same rows read in another language are another answer (the key also holds today's date: isLocked)."""
    user, trip_id, token = owner
    call(client, token, "get_trip", {"id": trip_id})
    with atomic():
        db.session.merge(user).locale = "fr"  # the reader's language, chosen on /account
    assert payload(call(client, token, "get_trip", {"id": trip_id}))["stages"]
    keys = {key[2] for key in DIGESTS.answers if key[0] == trip_id}
    assert {"en", "fr"} <= keys, keys


def test_list_trips_and_a_rename_are_bounded_too(client, owner, monkeypatch):
    user, trip_id, token = owner
    call(client, token, "list_trips")  # the grant's last use: stamped once per five minutes
    KEPT.answers.clear()  # the page is not kept yet
    with counted(monkeypatch) as seen:
        assert not call(client, token, "list_trips")["isError"]
    # the page and its total, its days' distances and statuses: on PostgreSQL in one statement (arrays aggregated
    # by the server), elsewhere in three; the token is a remembered one
    listed = 1 if db.engine.dialect.name == "postgresql" else 3
    assert len(seen["sql"]) == listed and seen["redis"] == 2, seen
    with counted(monkeypatch) as seen:  # kept under the epochs read before its statement (trips/core/epochs.py):
        assert not call(client, token, "list_trips")["isError"]  # neither changed, the page is given again
    assert seen["sql"] == [] and seen["redis"] == 2, seen  # the budgets with the epochs, the request's counters
    version = payload(call(client, token, "get_trip", {"id": trip_id}))["version"]
    stage_id = db.session.scalar(sa.select(Stage.id).where(Stage.trip_id == trip_id, Stage.position == 2))
    rename = {"tripId": trip_id, "action": "update", "stageId": stage_id, "label": "Col de Rousset"}
    version = payload(call(client, token, "edit_stages", {**rename, "version": version}))["version"]  # warm
    with counted(monkeypatch) as seen:
        result = call(client, token, "edit_stages", {**rename, "version": version, "label": "Col du Rousset"})
    assert payload(result)["version"] == version + 1
    # the path every edit takes (trips/services/stages.py update_stage): the admission's read, the trip with its days
    # under the lock, the trip's and the day's UPDATEs (the token is remembered)
    assert len(seen["sql"]) == 5, seen["sql"]
    # budgets, the trip's lock taken and released, its epochs replaced after the commit, the request's counters
    assert seen["redis"] == 5


def test_a_list_page_is_kept_by_what_it_shows_and_changes_with_it(client, owner):
    """list_trips answers a page it answered before for the same rows without building it again; a title, a day's
    distance or a computation's status changed behind the server's back is another key, so another answer."""
    from trips.models import Computation, Trip

    _, trip_id, token = owner
    PAGES.answers.clear()
    first, again = (call(client, token, "list_trips") for _ in range(2))
    assert first["structuredContent"] == again["structuredContent"] and len(PAGES.answers) == 1
    listed = first["structuredContent"]["member"][0]
    assert json.loads(first["content"][0]["text"]) == first["structuredContent"]
    with atomic():
        db.session.execute(sa.update(Trip).where(Trip.id == trip_id).values(title="Behind\u202e the back"))
    assert payload(call(client, token, "list_trips"))["member"][0]["title"] == "Behind the back"  # floored too
    with atomic():
        db.session.execute(sa.update(Stage).where(Stage.trip_id == trip_id, Stage.position == 0)
                           .values(distance=Stage.distance + 10))
    assert payload(call(client, token, "list_trips"))["member"][0]["totalDistance"] == \
        round(listed["totalDistance"] + 10, 1)
    with atomic():
        db.session.execute(sa.update(Computation).where(Computation.trip_id == trip_id).values(status="failed"))
    assert payload(call(client, token, "list_trips"))["member"][0]["status"] == "failed"
    assert len(PAGES.answers) == 4
    assert payload(call(client, token, "list_trips", {"itemsPerPage": 5}))["itemsPerPage"] == 5


def test_the_answer_is_the_full_read_model_and_its_text_block_the_same_json(client, owner):
    user, trip_id, token = owner
    first = call(client, token, "get_trip", {"id": trip_id})
    again = call(client, token, "get_trip", {"id": trip_id})
    db.session.rollback()
    full = json.loads(json.dumps(clean_answer(trip_digest(trip_reads.get_trip(user, trip_id)))))  # no shortcut
    assert first["structuredContent"] == again["structuredContent"] == full
    assert json.loads(first["content"][0]["text"]) == first["structuredContent"]
    assert any(day["criticalAlerts"] and day.get("weather") for day in full["stages"])  # the lines say things


def test_a_day_changed_behind_the_server_is_read_anew(client, owner):
    _, trip_id, token = owner
    before = payload(call(client, token, "get_trip", {"id": trip_id}))["stages"][1]
    assert before["alertCount"] > 0 and before["accommodation"] and before.get("weather")
    with atomic():  # as a job writes: a bulk UPDATE, no ORM event, the trip row untouched
        db.session.execute(sa.update(Stage).where(Stage.trip_id == trip_id, Stage.position == 1).values(
            alerts_by_group={}, accommodations=[], enrichment={}, start_label="Die\u202e\nGare"))
    after = payload(call(client, token, "get_trip", {"id": trip_id}))["stages"][1]
    assert after["alertCount"] == 0 and after["criticalAlerts"] == [] and after["accommodation"] is None
    assert "weather" not in after
    assert after["startLabel"] == "Die Gare"  # the floor still applies to what the lines carry


def test_a_revoked_token_is_refused_at_once_on_this_instance_and_another(app, client, owner, fresh_app):
    from oauth.kernel.models import AccessToken

    _, trip_id, token = owner
    other = fresh_app().test_client()  # a second instance on the same database and Redis
    assert not call(client, token, "get_trip", {"id": trip_id})["isError"]
    assert not call(other, token, "get_trip", {"id": trip_id})["isError"]
    with atomic():
        db.session.execute(sa.update(AccessToken).values(revoked_at=utcnow()))
    for instance in (client, other):
        response = modern(instance, token, "tools/call", {"name": "get_trip", "arguments": {"id": trip_id}})
        assert response.status_code == 401 and "invalid_token" in response.headers["WWW-Authenticate"]


def test_spent_budgets_still_refuse(app, client, owner, monkeypatch, redis_client):
    _, trip_id, token = owner
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_calls", (2, 60))
    results = [call(client, token, "get_trip", {"id": trip_id}) for _ in range(3)]
    assert [r["isError"] for r in results] == [False, False, True]
    assert payload(results[-1])["error"]["code"] == "rate_limited"
    assert redis_client.zcard("btp:rl:mcp_address:127.0.0.1") == 3  # counted with the budgets, every call


def test_an_address_over_its_limit_is_answered_429_before_anything_else(app, client, owner, monkeypatch,
                                                                        redis_client):
    _, trip_id, token = owner
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_address", (2, 60))
    assert [call(client, token, "get_trip", {"id": trip_id})["isError"] for _ in range(2)] == [False, False]
    counted_calls = redis_client.hgetall("btp:metrics:btp_tool_calls_total")
    refused = modern(client, token, "tools/call", {"name": "get_trip", "arguments": {"id": trip_id}})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert redis_client.hgetall("btp:metrics:btp_tool_calls_total") == counted_calls  # not a tool call's outcome
    # the agent's budget was not spent by the refused request (a refusal stops before the keys after it)
    assert redis_client.zcard(next(iter(redis_client.scan_iter("btp:rl:mcp_calls:*")))) == 2
    garbled = client.post("/mcp", data=b"{not json", headers={"Authorization": f"Bearer {token}",
                                                              "Content-Type": "application/json"})
    assert garbled.status_code == 429
    assert modern(client, "btp_at_unknown", "tools/list").status_code == 429  # before a 401, as before


def test_a_page_carries_the_total_of_every_match_past_the_end_too(client, owner):
    from tests.trips.api.test_trips_api import seed_trip

    user, _, token = owner
    for i in range(3):
        seed_trip(user, title=f"Extra {i}")
    listed = payload(call(client, token, "list_trips", {"itemsPerPage": 2}))
    assert listed["totalItems"] == 4 and len(listed["member"]) == 2
    past = payload(call(client, token, "list_trips", {"itemsPerPage": 2, "page": 5}))
    assert past["totalItems"] == 4 and past["member"] == []
    assert payload(call(client, token, "list_trips", {"title": "extra"}))["totalItems"] == 3
    assert payload(call(client, token, "list_trips", {"title": "nothing like it"}))["totalItems"] == 0


@pytest.mark.parametrize("change", ["a computation's reason", "the trip's title", "a day's enrichment", "nothing"])
def test_the_fingerprint_moves_with_any_stored_value_a_digest_shows(owner, change):
    from trips.models import Computation, Trip
    from trips.services.trip_reads import trip_fingerprint

    user, trip_id, _ = owner
    before = trip_fingerprint(user, trip_id)
    with atomic():  # bulk UPDATEs, as a job or an operator writes: no ORM event, no version moved
        if change == "a computation's reason":
            db.session.execute(sa.update(Computation).where(Computation.trip_id == trip_id,
                                                            Computation.name == "weather").values(reason="x"))
        elif change == "the trip's title":
            db.session.execute(sa.update(Trip).where(Trip.id == trip_id).values(title="Renamed behind"))
        elif change == "a day's enrichment":
            db.session.execute(sa.update(Stage).where(Stage.trip_id == trip_id, Stage.position == 3)
                               .values(enrichment={"moved": 1.5}))
    after = trip_fingerprint(user, trip_id)
    assert (after == before) is (change == "nothing")
    assert after[0] == trip_id


def test_a_tools_call_looks_its_tool_up_once(app, client, owner, monkeypatch):
    from mcp import dispatch

    _user, _trip, token = owner
    asked = []
    real = dispatch.registry
    monkeypatch.setattr(dispatch, "registry", lambda: asked.append(1) or real())
    result = call(client, token, "list_trips")
    assert not result.get("isError")
    # the tool, once for the endpoint's checks, the budgets and the call; once more for the metrics' label set
    assert len(asked) == 2
