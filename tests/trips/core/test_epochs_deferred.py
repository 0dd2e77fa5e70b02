"""A request's new epochs (trips/core/epochs.py `defer`, `settle`): sent as the write's connection returns to the pool,
their answer read in Flask's teardown before the server is handed the answer, at once outside a request; an answer
that cannot be read is retried, and the thread's Redis connection is free again."""
from datetime import date, timedelta

import pytest
import redis as redis_lib

from tests.factories import make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.mcp.test_hot_path import import_gpx_days
from trips.core import epochs, redisline
from trips.core.db import atomic, db
from trips.core.redis_client import get_redis
from trips.models import Stage, Trip


@pytest.fixture
def owner(app, ctx, redis_client):
    user = make_user("deferred@example.org")
    trip = import_gpx_days(user, (date.today() + timedelta(days=3)).isoformat())
    key = epochs.user_key(user.id)
    redis_client.set(key, "before")
    return user, trip.id, key


def cut(*args, **kwargs):
    raise redis_lib.ConnectionError("Connection closed by server.")


def rename_trip(trip_id: str, title: str) -> None:
    with atomic():
        db.session.get(Trip, trip_id).title = title


def test_a_requests_replacement_is_sent_at_the_write_and_read_as_the_request_ends(app, owner, redis_client):
    user, trip_id, key = owner
    line = redisline.line_of(get_redis())
    with app.test_request_context("/healthz"):
        app.preprocess_request()
        rename_trip(trip_id, "Renamed in a request")
        pending = epochs._deferred.get()
        assert [sorted(entry[1]) for entry in pending] == [[key]], pending
        assert line.busy, "the replacement's answer was read before the request ended"
        app.do_teardown_request()
        assert epochs._deferred.get() is None
    assert not line.busy, "the thread's Redis connection was left waiting for an answer"
    assert redis_client.get(key) not in (None, b"before")


def test_outside_a_request_the_replacement_is_read_at_once(app, owner, redis_client):
    user, trip_id, key = owner
    assert epochs._deferred.get() is None
    rename_trip(trip_id, "Renamed by a job")
    assert redis_client.get(key) not in (None, b"before")
    assert not redisline.line_of(get_redis()).busy


def test_a_replacement_whose_answer_is_cut_is_retried_and_the_line_made_again(app, owner, redis_client,
                                                                              monkeypatch):
    user, trip_id, key = owner
    retried = []
    monkeypatch.setattr(epochs, "_retry_later", lambda redis, keys, max_age_s: retried.append(set(keys)))
    line = redisline.line_of(get_redis())
    with app.test_request_context("/healthz"):
        app.preprocess_request()
        rename_trip(trip_id, "Renamed, then Redis cut")
        conn = line.conn
        # The connection breaks before the answer is read. (Shutting its socket down is no such cut: an answer Redis
        # sent already stays readable on a Unix socket, and then the epoch was written and nothing is to retry.)
        monkeypatch.setattr(conn, "read_response", cut)
        app.do_teardown_request(RuntimeError("the request failed too"))  # teardown runs after an error as well
    assert retried == [{key}]
    assert not line.busy
    assert conn._sock is None, "a connection cut mid-answer was kept for the next script"
    monkeypatch.delattr(conn, "read_response")  # the server is back
    pending = redisline.send(get_redis(), get_redis().register_script("return 7"), [], [])
    assert pending.reply() == 7, "the next script did not get a working connection"


def test_an_edit_through_mcp_shows_on_the_next_call(app, client, owner):
    user, trip_id, key = owner
    token = mcp_token(app, user)
    first = payload(call(client, token, "get_trip", {"id": trip_id}))
    stage_id, version = first["stages"][0]["stageId"], first["version"]
    db.session.rollback()
    result = call(client, token, "edit_stages", {"tripId": trip_id, "action": "update", "version": version,
                                                 "stageId": stage_id, "label": "Deferred epochs"})
    assert not result["isError"], result
    assert not redisline.line_of(get_redis()).busy
    db.session.rollback()
    again = payload(call(client, token, "get_trip", {"id": trip_id}))  # the kept digest was made again
    assert again["version"] == version + 1
    assert db.session.get(Stage, stage_id).label == "Deferred epochs"
