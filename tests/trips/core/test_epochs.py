"""The trips epochs (trips/core/epochs.py) and list_trips' kept pages (mcp/kept.py): a page is given again only while
both epochs it was read under stand, and every way its rows change replaces one after the commit, so a change shows
on the next call on any process. Redis down, the cache off and the age limit are the fall-backs."""
import time
from datetime import date, timedelta

import pytest
import redis as redis_lib
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from mcp.kept import KEPT
from tests.factories import make_user
from tests.mcp_helpers import call, mcp_token, payload
from trips import computations
from tests.live import free_port
from trips.core import epochs
from trips.core.redis_client import get_redis
from trips.core.db import atomic, db
from trips.models import Computation, Stage, Trip
from trips.services import trip_reads as reads
from trips.services import trips as services
from tests.mcp.test_hot_path import import_gpx_days


@pytest.fixture
def lister(app, ctx):
    user = make_user("lister@example.org")
    trip = import_gpx_days(user, (date.today() + timedelta(days=3)).isoformat())
    return user, trip.id, mcp_token(app, user)


@pytest.fixture
def trip_reads():
    """The statements reading the trip table while the test runs (a list page's statement reads it)."""
    seen = []

    def statement(conn, cursor, text, parameters, context, executemany):
        if text.lstrip().upper().startswith("SELECT") and "FROM trip" in text:
            seen.append(text)

    event.listen(Engine, "before_cursor_execute", statement)
    yield seen
    event.remove(Engine, "before_cursor_execute", statement)


def listed(client, token, arguments=None) -> dict:
    db.session.rollback()  # a request of its own: the test client's requests share the test's app context
    result = call(client, token, "list_trips", arguments)
    assert not result["isError"], result
    return payload(result)


def kept(client, token, trip_reads, arguments=None) -> dict:
    """List once (the page is kept under the epochs read before its statement); returns the page, asserting a
    second call read nothing from the database."""
    listed(client, token, arguments)
    before = len(trip_reads)
    page = listed(client, token, arguments)
    assert len(trip_reads) == before, "a kept page read the database"
    return page


def epoch_values(redis_client, *keys) -> list:
    return [redis_client.get(k) for k in keys]


def test_a_kept_page_is_given_again_without_its_statement_and_equals_a_fresh_read(client, lister, trip_reads):
    user, trip_id, token = lister
    page = kept(client, token, trip_reads)
    assert [t["id"] for t in page["member"]] == [trip_id] and page["totalItems"] == 1
    KEPT.answers.clear()
    assert listed(client, token) == page  # what the statement reads now


def test_an_edit_through_the_orm_replaces_only_its_owners_epoch(app, client, lister, trip_reads, redis_client):
    user, trip_id, token = lister
    other = make_user("not-the-owner@example.org")
    other_token = mcp_token(app, other)
    kept(client, token, trip_reads)
    kept(client, other_token, trip_reads)
    keys = (epochs.TRIPS_KEY, epochs.user_key(user.id), epochs.user_key(other.id))
    before = epoch_values(redis_client, *keys)
    assert all(before)
    with atomic():
        db.session.get(Trip, trip_id).title = "Renamed through the ORM"
    after = epoch_values(redis_client, *keys)
    assert after[0] == before[0], "every trip's epoch was replaced for a write that said its owner"
    assert after[1] != before[1] and after[2] == before[2]
    assert listed(client, token)["member"][0]["title"] == "Renamed through the ORM"
    kept(client, other_token, trip_reads)  # someone else's page is still the one kept


def test_a_day_written_through_the_orm_shows_on_the_next_call(client, lister, trip_reads, redis_client):
    user, trip_id, token = lister
    page = kept(client, token, trip_reads)
    every, account = epoch_values(redis_client, epochs.TRIPS_KEY, epochs.user_key(user.id))
    db.session.expunge_all()  # the day alone in the session: its trip's owner is read, not found beside it
    with atomic():
        stage = db.session.scalar(sa.select(Stage).where(Stage.trip_id == trip_id, Stage.position == 0))
        stage.distance += 10
    after_every, after_account = epoch_values(redis_client, epochs.TRIPS_KEY, epochs.user_key(user.id))
    assert after_every == every, "every trip's epoch was replaced for a day whose owner was known"
    assert after_account != account
    again = listed(client, token)
    assert again["member"][0]["totalDistance"] == round(page["member"][0]["totalDistance"] + 10, 1)


def test_a_statement_that_does_not_say_its_trip_replaces_every_trips_epoch(client, lister, trip_reads,
                                                                           redis_client):
    user, trip_id, token = lister
    kept(client, token, trip_reads)
    before = redis_client.get(epochs.TRIPS_KEY)
    with atomic():  # Core, through the session: no ORM object says whose it is
        db.session.execute(sa.update(Trip).where(Trip.id == trip_id).values(title="Behind the ORM"))
    assert redis_client.get(epochs.TRIPS_KEY) != before
    assert listed(client, token)["member"][0]["title"] == "Behind the ORM"
    with db.engine.begin() as conn:  # not even a session
        conn.execute(sa.update(Trip).where(Trip.id == trip_id).values(title="On the engine"))
    assert listed(client, token)["member"][0]["title"] == "On the engine"


def test_a_jobs_transition_replaces_its_owners_epoch_and_the_status_shows(client, lister, trip_reads, redis_client):
    user, trip_id, token = lister
    with atomic():
        trip = db.session.get(Trip, trip_id)
        for row in trip.computations:
            row.status = "done"
        computations.initialize(trip, ["stages"], trip.generation)
    page = kept(client, token, trip_reads)
    assert page["member"][0]["status"] == "analyzing"
    every, mine = redis_client.get(epochs.TRIPS_KEY), redis_client.get(epochs.user_key(user.id))
    generation = db.session.get(Trip, trip_id).generation
    db.session.expunge_all()  # as in a job: the trip is not in the session, its owner is read
    with atomic():
        assert computations.transition(trip_id, "stages", generation, "done")
    assert redis_client.get(epochs.TRIPS_KEY) == every and redis_client.get(epochs.user_key(user.id)) != mine
    assert listed(client, token)["member"][0]["status"] == "analyzed"


def test_a_new_trip_or_a_deleted_one_changes_the_page_at_once(client, lister, trip_reads):
    user, trip_id, token = lister
    kept(client, token, trip_reads)
    second = import_gpx_days(user, (date.today() + timedelta(days=30)).isoformat())
    page = listed(client, token)
    assert page["totalItems"] == 2 and {t["id"] for t in page["member"]} == {trip_id, second.id}
    kept(client, token, trip_reads)
    services.delete_trip(user, second.id)
    page = listed(client, token)
    assert page["totalItems"] == 1 and [t["id"] for t in page["member"]] == [trip_id]


def test_each_set_of_arguments_and_each_account_has_its_own_page(app, client, lister, trip_reads):
    user, trip_id, token = lister
    kept(client, token, trip_reads)
    assert kept(client, token, trip_reads, {"title": "nothing like it"})["totalItems"] == 0
    assert listed(client, token)["totalItems"] == 1
    other = make_user("someone-else@example.org")
    assert listed(client, mcp_token(app, other))["totalItems"] == 0  # never someone else's page


def test_a_write_between_the_epochs_read_and_the_statement_is_not_kept_under_the_new_values(
        client, lister, trip_reads, monkeypatch):
    """The page read after a write that committed once its epochs were read is answered, but kept under the old
    values: the next call, reading the new ones, reads the database again."""
    user, trip_id, token = lister
    kept(client, token, trip_reads)
    read_page = reads.list_trips

    def written_meanwhile(actor, query):
        with db.engine.begin() as conn:  # another request's write, committed after this one read its epochs
            conn.execute(sa.update(Trip).where(Trip.id == trip_id).values(title="Meanwhile"))
        return read_page(actor, query)

    monkeypatch.setattr(reads, "list_trips", written_meanwhile)
    KEPT.answers.clear()
    listed(client, token)  # read under the epochs before the write, the write meanwhile: kept under those
    monkeypatch.setattr(reads, "list_trips", read_page)
    before = len(trip_reads)
    assert listed(client, token)["member"][0]["title"] == "Meanwhile"
    assert len(trip_reads) == before + 1, "kept under values read after the write"


def test_with_redis_down_every_page_is_read(fresh_app, lister, trip_reads):
    user, trip_id, token = lister
    down = fresh_app(REDIS_URL="redis://127.0.0.1:9/0")  # nothing listens there
    client = down.test_client()
    with down.app_context():
        before = len(trip_reads)
        pages = [listed(client, token) for _ in range(3)]
        assert len(trip_reads) == before + 3 and pages[0] == pages[2]
        with atomic():
            db.session.get(Trip, trip_id).title = "While Redis is away"
        assert listed(client, token)["member"][0]["title"] == "While Redis is away"


def test_the_cache_off_or_past_its_age_reads_the_page(app, client, lister, trip_reads, monkeypatch):
    user, trip_id, token = lister
    monkeypatch.setitem(app.config, "BTP_READ_CACHE_S", 0)
    before = len(trip_reads)
    for _ in range(3):
        listed(client, token)
    assert len(trip_reads) == before + 3
    monkeypatch.setitem(app.config, "BTP_READ_CACHE_S", 0.3)
    kept(client, token, trip_reads)
    time.sleep(0.4)  # a change made outside BTP is shown after the age limit at the latest
    before = len(trip_reads)
    listed(client, token)
    assert len(trip_reads) == before + 1


def test_odd_arguments_are_refused_and_never_kept(client, lister):
    user, trip_id, token = lister
    KEPT.answers.clear()
    result = call(client, token, "list_trips", {"title": "x" * 600})
    assert result["isError"] and not KEPT.answers
    result = call(client, token, "list_trips", {"page": [1]})
    assert result["isError"] and not KEPT.answers


@pytest.mark.parametrize("statement, family", [
    ("UPDATE trip SET title=%(title)s WHERE trip.id = %(id)s", "trips"),
    ('INSERT INTO "stage" (id) VALUES (?)', "trips"),
    ("DELETE FROM computation WHERE computation.trip_id = ?", "trips"),
    ("\n  update Trip set title = 'x'", "trips"),
    ("INSERT INTO trip_route (trip_id) VALUES (?)", ""),  # not shown by a list page
    ("UPDATE stage_note SET x = 1", ""),
    ("SELECT * FROM trip", ""),
    ("UPDATE access_token SET revoked_at = ?", "auth"),
    ('DELETE FROM "user_account" WHERE id = ?', "auth"),
    ("INSERT INTO access_token (id) VALUES (?)", ""),  # issuing a token changes nothing kept
])
def test_which_statements_replace_which_epochs(statement, family):
    assert epochs._family(statement) == family


def test_epochs_that_could_not_be_replaced_are_replaced_later(ctx, monkeypatch):
    """The app's real Redis, unreachable for the first two tries (the sending fails as a cut connection does)."""
    redis = get_redis()
    real_script, tries = redis.register_script(epochs._REPLACE_LUA), []

    def flaky_script(keys, args):
        tries.append(1)
        if len(tries) < 3:
            raise redis_lib.ConnectionError("Connection closed by server.")  # as an answer cut mid-read
        return real_script(keys=keys, args=args)

    keys = {epochs.TOKEN_KEY, epochs.user_key("u1")}
    monkeypatch.setattr(epochs, "_scripts", {redis: flaky_script})
    monkeypatch.setattr(epochs, "_retry", {})
    monkeypatch.setattr(epochs, "_retrier", None)
    before = {key: redis.get(key) for key in keys}
    assert not epochs._replace(redis, keys)
    assert {key: redis.get(key) for key in keys} == before  # nothing written while it was down
    epochs._retry_later(redis, keys, 60)
    epochs._retrier.join(5)
    assert not epochs._retrier.is_alive() and not epochs._retry
    assert len(tries) == 3
    for key in keys:  # a new value each, never one it had, kept a day
        assert redis.get(key) not in (None, before[key])
        assert epochs.READ_KEY_TTL_S - 5 <= redis.ttl(key) <= epochs.READ_KEY_TTL_S


def test_retrying_stops_once_nothing_kept_before_the_write_can_be_believed(monkeypatch):
    # nothing listens there; the app's client settings (trips/core/redis_client.py: one retry, short timeouts)
    down = redis_lib.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1, socket_timeout=1,
                           retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1,
                                       supported_errors=(redis_lib.exceptions.ConnectionError,)))
    real_replace, tries = epochs._replace, []

    def counted_replace(redis, keys):
        if redis is down:  # (not another test's writes, replaced on the app's Redis meanwhile)
            tries.append(redis)
        return real_replace(redis, keys)

    monkeypatch.setattr(epochs, "_replace", counted_replace)
    monkeypatch.setattr(epochs, "_retry", {})
    monkeypatch.setattr(epochs, "_retrier", None)
    epochs._retry_later(down, {epochs.TRIPS_KEY}, 1.2)
    epochs._retrier.join(5)
    assert not epochs._retrier.is_alive() and not epochs._retry
    assert 1 <= len(tries) <= 4


def test_a_flush_says_whose_rows_it_writes(app, ctx, lister):
    user, trip_id, _ = lister
    with atomic():
        stage = db.session.scalar(sa.select(Stage).where(Stage.trip_id == trip_id, Stage.position == 1))
        stage.label = "Named"
        db.session.flush()
        written = db.session.connection().info[epochs._WRITTEN]
        assert written == {epochs.user_key(user.id)}
        db.session.add(Computation(trip_id=trip_id, name="zz_test", status="pending", generation=1))
        db.session.get(Trip, trip_id).title = "Both"
        db.session.flush()
        assert written == {epochs.user_key(user.id)}
        db.session.execute(sa.update(Stage).where(Stage.trip_id == trip_id).values(label="Core"))
        assert written == {epochs.user_key(user.id), epochs.TRIPS_KEY}  # nobody said whose: every trip's


def test_a_kept_digest_is_given_again_and_an_edit_through_the_tools_shows_at_once(app, client, lister, trip_reads):
    user, trip_id, token = lister
    first = payload(call(client, token, "get_trip", {"id": trip_id}))
    db.session.rollback()
    before = len(trip_reads)
    assert payload(call(client, token, "get_trip", {"id": trip_id})) == first
    assert len(trip_reads) == before, "a kept digest read the database"
    stage = first["stages"][1]
    renamed = call(client, token, "edit_stages", {"tripId": trip_id, "action": "update", "stageId": stage["stageId"],
                                                  "label": "Col de Rousset", "version": first["version"]})
    assert not renamed["isError"], renamed
    db.session.rollback()
    after = payload(call(client, token, "get_trip", {"id": trip_id}))
    assert after["version"] == first["version"] + 1
    other = make_user("prying@example.org")  # someone else asking for it: refused, never given the kept one
    refused = call(client, mcp_token(app, other), "get_trip", {"id": trip_id})
    assert refused["isError"] and payload(refused)["error"]["code"] == "not_found"
