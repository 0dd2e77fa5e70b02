"""A write's new epochs (trips/core/epochs.py): written through the app's pooled Redis client once the write's
connection is back in the pool, after its commit, before the request answers; one Redis cut off mid-answer is
retried, and the client's next command gets a working connection."""
from datetime import date, timedelta

import pytest
import redis as redis_lib

from tests.factories import make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.mcp.test_hot_path import import_gpx_days
from trips.core import epochs
from trips.core.db import atomic, db
from trips.core.redis_client import get_redis
from trips.models import Stage, Trip


@pytest.fixture
def owner(app, ctx, redis_client):
    user = make_user("replaced@example.org")
    trip = import_gpx_days(user, (date.today() + timedelta(days=3)).isoformat())
    key = epochs.user_key(user.id)
    redis_client.set(key, "before")
    return user, trip.id, key


def rename_trip(trip_id: str, title: str) -> None:
    with atomic():
        db.session.get(Trip, trip_id).title = title


def test_a_requests_write_replaces_the_epoch_before_the_request_ends(app, owner, redis_client):
    user, trip_id, key = owner
    with app.test_request_context("/healthz"):
        app.preprocess_request()
        rename_trip(trip_id, "Renamed in a request")
        assert redis_client.get(key) not in (None, b"before"), "the epoch waited for the request's end"
        app.do_teardown_request()


def test_a_replacement_cut_mid_answer_is_retried_and_the_next_command_answers(app, owner, redis_client,
                                                                              monkeypatch):
    user, trip_id, key = owner
    retried = []
    monkeypatch.setattr(epochs, "_retry_later", lambda redis, keys, max_age_s: retried.append(set(keys)))
    connection_class = get_redis().connection_pool.connection_class

    def cut(self, *args, **kwargs):  # the script was sent; the connection breaks before its answer is read
        raise redis_lib.ConnectionError("Connection closed by server.")

    monkeypatch.setattr(connection_class, "read_response", cut)
    rename_trip(trip_id, "Renamed, then Redis cut")
    assert retried == [{key}]
    monkeypatch.undo()  # the server is back
    assert get_redis().register_script("return 7")() == 7, "the next script did not get a working connection"


def test_an_edit_through_mcp_shows_on_the_next_call(app, client, owner):
    user, trip_id, key = owner
    token = mcp_token(app, user)
    first = payload(call(client, token, "get_trip", {"id": trip_id}))
    stage_id, version = first["stages"][0]["stageId"], first["version"]
    db.session.rollback()
    result = call(client, token, "edit_stages", {"tripId": trip_id, "action": "update", "version": version,
                                                 "stageId": stage_id, "label": "Replaced epochs"})
    assert not result["isError"], result
    db.session.rollback()
    again = payload(call(client, token, "get_trip", {"id": trip_id}))  # the kept digest was made again
    assert again["version"] == version + 1
    assert db.session.get(Stage, stage_id).label == "Replaced epochs"
