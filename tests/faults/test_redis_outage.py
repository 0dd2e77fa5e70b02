"""Redis away: writes answer 503 (REST, OAuth) or a tool refusal (MCP), nothing hangs, and BTP recovers by itself.

The Redis here is the test's own (a redis-server on a free port, tests/faults/stack.py), stopped and started again
by the test; BTP is one app object kept across the outage, or (the last test) gunicorn and a worker served for real
across a 10 s outage.
"""
import threading
import time

import pytest

from trips.core.redis_client import RETRY_AFTER_S
from jobs.worker import RECONNECT_MAX_S
from trips.core.queue import LIVENESS_TTL
from tests.factories import auth, idem, make_token, make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.faults.stack import HttpClient
from tests.fakes.thirdparty import make_points
from tests.live import gunicorn
from tests.procs import kill, start_worker, wait_for, worker_running
from tests.trips.services.test_pipeline import reload, structural
from tests.trips.api.test_trips_api import seed_trip

pytestmark = pytest.mark.slow
BRIEFLY = "BTP is briefly unavailable, try again in a few seconds."
OUTAGE_S = 10
ANSWER_S = 3.0  # every answer during the outage comes within this (each Redis call gives up within 1 s)


@pytest.fixture
def btp(app, fresh_app, private_redis):
    """The test app's database, the private Redis."""
    application = fresh_app(REDIS_URL=private_redis.url)
    with application.app_context():
        yield application


def problem_503(response) -> dict:
    assert response.status_code == 503, response.get_data(as_text=True)
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["status"] == 503 and body["detail"] == BRIEFLY
    return body


def refused(result: dict) -> dict:
    assert result["isError"] is True, result
    return payload(result)["error"]


def test_writes_answer_503_while_redis_is_away_and_work_again_when_it_is_back(btp, private_redis):
    client = btp.test_client()
    user = make_user()
    headers = auth(make_token(user))
    token = mcp_token(btp, user)
    trip = seed_trip(user)
    private_redis.stop()

    problem_503(client.patch(f"/api/trips/{trip.id}", json={"title": "Away"}, headers={**headers, "If-Match": '"1"'}))
    problem_503(client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                            headers={**headers, **idem()}))
    oauth = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x" * 43,
                                              "client_id": "c"})
    assert oauth.status_code == 503 and oauth.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert oauth.get_json() == {"error": "temporarily_unavailable", "error_description": BRIEFLY}
    rename = {"tripId": trip.id, "action": "update", "version": 1, "stageId": trip.stages[0].id, "label": "Away"}
    for tool, arguments in (("share_trip", {"tripId": trip.id}), ("delete_trip", {"id": trip.id}),
                            ("edit_stages", rename)):  # a rename too, though it takes no trip lock (one statement)
        assert refused(call(client, token, tool, arguments)) == {"code": "unavailable", "message": BRIEFLY}
    kept = reload(trip.id)
    assert kept is not None and kept.version == 1 and kept.stages[0].label is None  # nothing written
    assert client.get("/readyz").get_json()["checks"]["redis"] == "unavailable"

    private_redis.start()  # the same app object: its connection pool makes new connections
    answer = client.patch(f"/api/trips/{trip.id}", json={"title": "Back"}, headers={**headers, "If-Match": '"1"'})
    assert answer.status_code == 200 and answer.get_json()["title"] == "Back"
    assert client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                       headers={**headers, **idem()}).status_code == 202
    assert client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x" * 43,
                                             "client_id": "c"}).get_json()["error"] != "temporarily_unavailable"
    shared = call(client, token, "share_trip", {"tripId": trip.id})
    assert shared["isError"] is False and payload(shared)["shortCode"]


def test_nothing_was_written_by_a_refused_write(btp, private_redis):
    client = btp.test_client()
    user = make_user()
    headers = auth(make_token(user))
    trip = seed_trip(user)
    private_redis.stop()
    problem_503(client.patch(f"/api/trips/{trip.id}", json={"title": "Away"}, headers={**headers, "If-Match": '"1"'}))
    private_redis.start()
    body = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    assert body["title"] == "Seeded" and body["version"] == 1


def test_a_hung_redis_is_answered_503_not_waited_for(btp, private_redis):
    """SIGSTOP: connections open but nothing answers. The client's read timeout ends the wait."""
    client = btp.test_client()
    user = make_user()
    headers = auth(make_token(user))
    trip = seed_trip(user)
    answers = []
    private_redis.pause()
    try:
        def patch():
            with btp.app_context():
                answers.append(client.patch(f"/api/trips/{trip.id}", json={"title": "Hung"},
                                            headers={**headers, "If-Match": '"1"'}))

        thread = threading.Thread(target=patch, daemon=True)
        thread.start()
        thread.join(timeout=60)  # a bound for the test, far above the client's (1 s reads, a timeout not retried)
        assert not thread.is_alive(), "the request waited on the hung Redis"
    finally:
        private_redis.resume()
    problem_503(answers[0])


def test_readiness_follows_a_worker_through_a_redis_restarted_empty(btp, app_config, private_redis, tmp_path):
    client = btp.test_client()
    log = tmp_path / "worker.log"
    worker = start_worker(app_config, log, REDIS_URL=private_redis.url)
    try:
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=90,  # a worker starting on a busy machine
                 what="a live worker", logs=(log,))
        private_redis.stop()  # no persistence: it comes back empty
        assert client.get("/readyz").status_code == 503
        private_redis.start()
        # The worker reconnects (at most RECONNECT_MAX_S apart) and its next beat registers it again.
        _live_again(client, worker, log, "the worker live again")
    finally:
        kill(worker)


def _live_again(client, worker, log, what: str) -> None:
    """/readyz counts the worker again within a reconnection and a liveness window, and it never exited."""
    wait_for(lambda: client.get("/readyz").status_code == 200, timeout=RECONNECT_MAX_S + LIVENESS_TTL, what=what,
             logs=(log,))
    assert worker.poll() is None


def test_a_worker_started_while_redis_is_away_waits_for_it(btp, app_config, private_redis, tmp_path):
    """RQ runs a worker's start-up (registration, its command channel, the scheduler) outside the loop that waits
    for Redis: started while Redis is away or restarting, a worker used to exit at once. Now it waits, and counts
    as live for /readyz once Redis is back and it listens."""
    client = btp.test_client()
    log = tmp_path / "worker.log"
    private_redis.stop()
    worker = start_worker(app_config, log, REDIS_URL=private_redis.url)
    try:
        time.sleep(3 * RECONNECT_MAX_S)  # long enough to start on a busy machine, and to exit if it were going to
        assert worker.poll() is None, "the worker exited while Redis was away"
        assert "Redis unreachable while starting" in log.read_text(), "the worker did not meet the outage starting"
        private_redis.start()
        _live_again(client, worker, log, "the worker live once Redis is back")
    finally:
        kill(worker)


def test_a_worker_whose_redis_restarts_midway_through_its_start_up_goes_on(private_redis, monkeypatch):
    """The window CI once hit: Redis stopped after the worker registered and before it listened (its command
    channel, its state, the scheduler). RQ ends the worker there; BTP's waits and registers again at its first beat."""
    from redis import Redis
    from rq import Queue, Worker

    from jobs.worker import BTPWorker
    from trips.core.queue import live_workers

    connection = Redis.from_url(private_redis.url)
    worker = BTPWorker([Queue("startup", connection=connection)], connection=connection)
    subscribe, restarts = Worker.subscribe, []

    def subscribe_as_redis_restarts(self):
        if not restarts:
            private_redis.stop()  # comes back empty: the registration just written is gone
            restarts.append(threading.Timer(1.5, private_redis.start))
            restarts[0].start()
        return subscribe(self)

    monkeypatch.setattr(Worker, "subscribe", subscribe_as_redis_restarts)
    try:
        worker.bootstrap()
        worker.start_scheduler(burst=True)
        assert restarts and not live_workers(connection)  # not live before it beats
        worker.heartbeat()
        assert live_workers(connection) == [worker.name]
        assert worker.name in {w.name for w in Worker.all(connection=connection)}
    finally:
        if restarts:
            restarts[0].join()
        worker.unsubscribe()
        connection.close()


def test_a_ten_second_outage_of_a_served_btp(app, app_config, ctx, fake_thirdparty, private_redis, tmp_path,
                                             measured):
    """gunicorn and a worker on a redis-server stopped for OUTAGE_S and started again empty on the same port:
    writes are refused with 503 (a tool refusal on MCP), reads and probes still answer, nothing hangs and
    nothing is half-written; then everything works again, BTP never restarted."""
    config = {**app_config, "REDIS_URL": private_redis.url}
    user = make_user()
    headers = auth(make_token(user))
    token = mcp_token(app, user)
    seeded = seed_trip(user)
    fake_thirdparty.add_komoot_tour("81", "Before the outage", make_points(600))
    fake_thirdparty.add_komoot_tour("82", "After the outage", make_points(600))
    with worker_running(config, tmp_path / "worker.log") as worker, gunicorn(config, tmp_path / "gunicorn.log") as live:
        web = HttpClient(live.url, timeout=10)
        wait_for(lambda: web.get("/readyz").status_code == 200, timeout=90, what="a live worker")
        created = web.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/81"},
                           headers={**headers, **idem()})
        assert created.status_code == 202, created.get_json()
        before_id = created.get_json()["id"]
        wait_for(lambda: structural(reload(before_id)) == {"route": ("done", None), "stages": ("done", None)},
                 timeout=30, what="the trip made before the outage")
        before = web.get(f"/api/trips/{before_id}", headers=headers).get_json()
        trips_before = len(web.get("/api/trips", headers=headers).get_json()["member"])

        private_redis.stop()
        down, rounds, answers = time.monotonic(), 0, []
        while time.monotonic() - down < OUTAGE_S:
            rounds += 1
            for name, send, check in _outage_probes(web, headers, token, seeded.id, before_id):
                answer = send()
                answers.append((name, answer.status_code, answer.seconds))
                assert answer.status_code != 500, (name, answer.get_data(as_text=True))
                assert answer.seconds < ANSWER_S, f"{name} took {answer.seconds:.1f} s while Redis was away"
                check(answer)
        slowest = max(seconds for _, _, seconds in answers)
        assert rounds >= 2 and all(status in (200, 503) for _, status, _ in answers), answers
        measured(f"slowest answer while Redis was away ({len(answers)} requests)", slowest, f"{ANSWER_S} s")

        untouched = reload(seeded.id)  # every rename and create refused during the outage left nothing
        assert (untouched.title, untouched.version) == ("Seeded", 1)

        private_redis.start()  # same port, empty (no persistence)
        up = time.monotonic()
        renamed = []
        measured("Redis back → first REST write answered 200", wait_for(
            lambda: renamed.append(_rename(web, headers, seeded.id, "Back")) or renamed[-1].status_code == 200,
            timeout=10, what="a write once Redis is back"))
        shared = call(web, token, "share_trip", {"tripId": seeded.id})
        assert shared["isError"] is False and payload(shared)["shortCode"]
        again = web.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/82"},
                         headers={**headers, **idem()})
        assert again.status_code == 202, again.get_json()
        after_id = again.get_json()["id"]
        # The worker waits out the outage (at most RECONNECT_MAX_S between attempts) and runs the new job.
        wait_for(lambda: structural(reload(after_id)) == {"route": ("done", None), "stages": ("done", None)},
                 timeout=RECONNECT_MAX_S + 30, what="a job enqueued after the outage")
        measured("Redis back → a job enqueued after it done", time.monotonic() - up)
        wait_for(lambda: web.get("/readyz").status_code == 200, timeout=RECONNECT_MAX_S + LIVENESS_TTL,
                 what="/readyz once Redis is back")
        assert worker.poll() is None, "the worker quit during the outage"

        # Nothing lost, nothing half-written: the trip made before is as it was, the refused writes left nothing.
        after = web.get(f"/api/trips/{before_id}", headers=headers).get_json()
        assert _kept(after) == _kept(before)
        assert structural(reload(before_id)) == {"route": ("done", None), "stages": ("done", None)}
        fresh = reload(seeded.id)
        assert (fresh.title, fresh.version) == ("Back", renamed[-1].get_json()["version"])
        assert len(web.get("/api/trips", headers=headers).get_json()["member"]) == trips_before + 1


def _kept(trip: dict) -> dict:
    """What the rider made: the trip and its days (their analysis may still be settling meanwhile)."""
    days = [{k: day[k] for k in ("stageId", "dayNumber", "distance", "elevation", "label", "isRestDay")}
            for day in trip["stages"]]
    return {"id": trip["id"], "title": trip["title"], "version": trip["version"], "days": days}


def _rename(web, headers, trip_id, title):
    return web.patch(f"/api/trips/{trip_id}", json={"title": title}, headers={**headers, "If-Match": '"1"'})


def _outage_probes(web, headers, token, seeded_id, before_id):
    """(name, send, check) of the requests made while Redis is away."""
    def mcp_refused(answer):
        assert answer.status_code == 200
        result = answer.get_json()["result"]
        assert refused(result) == {"code": "unavailable", "message": BRIEFLY}

    def mcp_read(answer):
        assert answer.status_code == 200 and answer.get_json()["result"]["isError"] is False, payload(answer.get_json()["result"])

    def oauth_503(answer):
        assert answer.status_code == 503 and answer.headers["Retry-After"] == str(RETRY_AFTER_S)
        assert answer.get_json() == {"error": "temporarily_unavailable", "error_description": BRIEFLY}

    def ok(answer):
        assert answer.status_code == 200, answer.get_data(as_text=True)

    def not_ready(answer):
        assert answer.status_code == 503 and answer.get_json()["checks"]["redis"] == "unavailable"

    def mcp(tool, arguments):
        from tests.mcp_helpers import modern

        return lambda: modern(web, token, "tools/call", {"name": tool, "arguments": arguments})

    return [
        ("REST rename", lambda: _rename(web, headers, seeded_id, "Away"), problem_503),
        ("REST create", lambda: web.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/82"},
                                         headers={**headers, **idem()}), problem_503),
        ("MCP share_trip", mcp("share_trip", {"tripId": seeded_id}), mcp_refused),
        ("OAuth token", lambda: web.post("/oauth/token", data={"grant_type": "refresh_token",
                                                               "refresh_token": "x" * 43, "client_id": "c"}),
         oauth_503),
        ("REST read", lambda: web.get(f"/api/trips/{before_id}", headers=headers), ok),
        ("MCP get_trip", mcp("get_trip", {"id": before_id}), mcp_read),
        ("/healthz", lambda: web.get("/healthz"), ok),
        ("/readyz", lambda: web.get("/readyz"), not_ready),
    ]
