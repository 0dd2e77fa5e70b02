"""A rename is one conditional write taking no Redis lock (trips/services/rename.py rename_stage, mcp/tools/edit_stages.py
rename): it must land exactly when the whole guard chain would let it, answer what the whole path answers, and never
land between another edit's read of the trip and that edit's commit (the chain reads the row FOR UPDATE under the
trip's lock; SQLite's BEGIN IMMEDIATE holds every writer). Runs on SQLite and PostgreSQL."""
from __future__ import annotations

import threading
import time
from datetime import date, timedelta

import pytest
import sqlalchemy as sa

from tests.factories import make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.services.test_edit_costs import days
from tests.mcp.test_hot_path import import_gpx_days
from trips import computations
from oauth.kernel.models import User
from trips.core.db import db
from trips.models import Computation, Trip
from trips.services import rename as renaming, stages as stage_ops


@pytest.fixture
def trip(app, ctx, client):
    """(token, trip id, version) of a dated five-day trip."""
    user = make_user("rename-fast@example.org")
    trip = import_gpx_days(user, (date.today() + timedelta(days=3)).isoformat())
    token = mcp_token(app, user)
    return token, trip.id, payload(call(client, token, "get_trip", {"id": trip.id}))["version"]


def rename(client, token, trip_id, version, stage_id, label, **extra):
    return call(client, token, "edit_stages", {"tripId": trip_id, "action": "update", "version": version,
                                               "stageId": stage_id, "label": label, **extra})


def stored(trip_id):
    db.session.rollback()
    return db.session.get(Trip, trip_id)


def test_a_rename_answers_as_the_whole_path_and_moves_the_version_once(client, trip, monkeypatch):
    token, trip_id, version = trip
    day = days(trip_id)[1]
    before = stored(trip_id).updated_at
    fast = rename(client, token, trip_id, version, day.id, "  Col du Rousset  ")
    assert not fast["isError"], fast
    assert payload(fast)["version"] == version + 1
    assert days(trip_id)[1].label == "Col du Rousset"  # stripped, as update_stage stores it
    assert stored(trip_id).version == version + 1 and stored(trip_id).updated_at >= before
    # The same call through the whole path (the fast one switched off) answers the same words
    monkeypatch.setattr(renaming, "rename_stage", lambda *a, **k: None)
    whole = rename(client, token, trip_id, version + 1, day.id, "")
    assert not whole["isError"], whole
    assert payload(whole)["result"] == payload(fast)["result"] and payload(whole)["version"] == version + 2
    assert days(trip_id)[1].label is None  # "" clears it
    monkeypatch.undo()
    assert payload(rename(client, token, trip_id, version + 2, day.id, "Vercors"))["version"] == version + 3
    assert days(trip_id)[1].label == "Vercors"


def refused(client, token, trip_id, version, stage_id, label="Nope"):
    result = rename(client, token, trip_id, version, stage_id, label)
    assert result["isError"], result
    return payload(result)["error"]["code"]


def refusals(app, client, token, trip_id, version, stage_id) -> list[str]:
    stranger = mcp_token(app, make_user(f"stranger-{time.monotonic_ns()}@example.org"))
    owner = db.session.get(User, db.session.get(Trip, trip_id).user_id)
    other = import_gpx_days(owner, None)  # a day of another trip of the same account
    codes = [refused(client, stranger, trip_id, version, stage_id),
             # a stale version with a label the schema refuses: the arguments are judged before the version (MCP)
             refused(client, token, trip_id, version + 1, stage_id, "x" * 300),
             refused(client, token, trip_id, version + 1, stage_id),
             refused(client, token, trip_id, version, "0" * 8 + "-0000-4000-8000-" + "0" * 12),
             refused(client, token, trip_id, version, "not-a-day"),
             refused(client, token, trip_id, version, other.stages[0].id)]
    db.session.rollback()
    db.session.get(Computation, (trip_id, "stages")).status = "running"
    db.session.commit()
    codes.append(refused(client, token, trip_id, version, stage_id))
    db.session.get(Computation, (trip_id, "stages")).status = "done"
    db.session.get(Trip, trip_id).start_date = date.today()  # started: locked, whatever the version
    db.session.commit()
    codes.append(refused(client, token, trip_id, version + 5, stage_id))
    db.session.get(Trip, trip_id).start_date = date.today() + timedelta(days=3)
    db.session.commit()
    return codes


def test_refusals_are_the_whole_paths_and_write_nothing(app, client, trip, monkeypatch):
    token, trip_id, version = trip
    stage_id = days(trip_id)[2].id
    fast = refusals(app, client, token, trip_id, version, stage_id)
    assert fast == ["not_found", "invalid_argument", "stale_version", "not_found", "not_found", "not_found",
                    "conflict", "locked"]
    assert stored(trip_id).version == version and days(trip_id)[2].label is None
    assert computations.status_of(stored(trip_id), "stages") == "done"
    monkeypatch.setattr(renaming, "rename_stage", lambda *a, **k: None)  # the whole path alone
    assert refusals(app, client, token, trip_id, version, stage_id) == fast


def test_a_rename_never_lands_inside_another_edit(app, client, trip, monkeypatch):
    """An edit through the whole path (a move) has read the trip at version v under its lock; a rename of version v
    sent meanwhile must wait for its commit and then be told the trip moved on. Had the rename landed in between,
    both would answer v + 1 and the move's write would hide the rename's version (a lost update)."""
    token, trip_id, version = trip
    first, second = (d.id for d in days(trip_id)[:2])
    inside, release = threading.Event(), threading.Event()
    real_validation = stage_ops.find_stage

    def held_find_stage(trip, stage_id):  # called by the move's validation, under the lock, after the row is read
        stage = real_validation(trip, stage_id)
        if threading.current_thread().name == "move":
            inside.set()
            assert release.wait(20)
        return stage

    monkeypatch.setattr(stage_ops, "find_stage", held_find_stage)
    answers = {}

    def send(name, arguments):
        with app.app_context():
            answers[name] = call(app.test_client(), token, "edit_stages",
                                 {"tripId": trip_id, "version": version, **arguments})

    move = threading.Thread(target=send, name="move", args=("move", {"action": "move", "stageId": first,
                                                                     "toIndex": 1}))
    move.start()
    assert inside.wait(20)
    renamer = threading.Thread(target=send, name="rename", args=("rename", {"action": "update", "stageId": second,
                                                                             "label": "In between"}))
    renamer.start()
    time.sleep(0.5)  # the rename is sent and waits on the row (or the database), not on a Redis lock
    release.set()
    move.join(30)
    renamer.join(30)
    assert not answers["move"]["isError"], answers["move"]
    assert payload(answers["move"])["version"] == version + 1
    assert answers["rename"]["isError"], answers["rename"]
    assert payload(answers["rename"])["error"]["code"] == "stale_version"
    assert stored(trip_id).version == version + 1
    assert [d.label for d in days(trip_id)].count("In between") == 0


def test_many_renames_of_one_version_land_once(app, trip):
    token, trip_id, version = trip
    stage_id = days(trip_id)[3].id
    answers = []
    barrier = threading.Barrier(8)

    def send(i):
        with app.app_context():
            barrier.wait(10)
            answers.append(rename(app.test_client(), token, trip_id, version, stage_id, f"label {i}"))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    landed = [a for a in answers if not a["isError"]]
    assert len(answers) == 8 and len(landed) == 1, answers
    assert sorted(payload(a)["error"]["code"] for a in answers if a["isError"]) == ["stale_version"] * 7
    assert stored(trip_id).version == version + 1
    assert days(trip_id)[3].label.startswith("label ")
    db.session.rollback()
    assert db.session.scalar(sa.select(sa.func.count()).select_from(Trip).where(Trip.id == trip_id)) == 1


def test_a_rename_is_seen_at_once_by_a_kept_get_trip(client, trip):
    """get_trip's answer is kept under the owner's trips epoch (mcp/kept.py): the rename, written outside the ORM,
    must replace it after its commit, or the next read would give the old version."""
    token, trip_id, version = trip
    stage_id = days(trip_id)[0].id
    first = payload(call(client, token, "get_trip", {"id": trip_id}))
    assert payload(call(client, token, "get_trip", {"id": trip_id})) == first  # kept
    assert first["version"] == version
    assert not rename(client, token, trip_id, version, stage_id, "Seen at once")["isError"]
    assert payload(call(client, token, "get_trip", {"id": trip_id}))["version"] == version + 1
    assert payload(call(client, token, "get_stage", {"tripId": trip_id, "stageId": stage_id}))["label"] == "Seen at once"


def test_a_rename_commits_by_itself_and_leaves_no_transaction_open(app, client, trip):
    """On PostgreSQL the rename is one statement in autocommit on a pooled connection (one round trip): it must be
    committed when it answers (seen from a connection of its own) and leave that connection idle, as the pool gives
    every connection back (trips/core/db.py), or the next request on it would run inside a stale transaction."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("the autocommit statement is PostgreSQL's")
    import psycopg

    token, trip_id, version = trip
    stage_id = days(trip_id)[2].id
    db.session.remove()
    db.engine.dispose()  # one connection in the pool: the one the renames take and give back
    assert not rename(client, token, trip_id, version, stage_id, "Committed")["isError"]
    assert rename(client, token, trip_id, version, stage_id, "stale")["isError"]  # a refusal gives it back too
    raw = db.engine.raw_connection()
    try:
        assert raw.driver_connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        raw.close()
    url = db.engine.url.set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False)) as other:
        label, = other.execute("SELECT label FROM stage WHERE id = %s", (stage_id,)).fetchone()
    assert label == "Committed"


def test_a_plain_rename_is_judged_without_jsonschema(client, trip, monkeypatch):
    """The label is new on every call, so check_arguments would run jsonschema on every rename: its plain arguments
    are judged by hand (mcp/arguments.py plain_checked). One whose version is a string still goes through
    check_arguments (parse_version reads it) and lands the same way."""
    from mcp import arguments

    token, trip_id, version = trip
    stage_id = days(trip_id)[3].id
    judged = []
    real = arguments._judge
    monkeypatch.setattr(arguments, "_judge", lambda tool, args: judged.append(tool.name) or real(tool, args))
    assert payload(rename(client, token, trip_id, version, stage_id, "By hand"))["version"] == version + 1
    assert "edit_stages" not in judged
    assert payload(rename(client, token, trip_id, str(version + 1), stage_id, "By jsonschema"))["version"] == version + 2
    assert "edit_stages" in judged
    assert days(trip_id)[3].label == "By jsonschema"
    long = rename(client, token, trip_id, version + 2, stage_id, "x" * 256)  # refused in check_arguments' words
    assert long["isError"] and "label" in long["content"][0]["text"] and stored(trip_id).version == version + 2
