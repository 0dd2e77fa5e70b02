"""A worker or its work horse killed mid-job: the job is retried; after the retries it is failed, not running.

Real worker processes (`flask worker`, jobs/worker.py) against the run's PostgreSQL database and Redis. Some tests
here expire the dead worker's execution themselves (what maintenance does once it lapses), to reach the next
attempt at once; test_a_worker_killed_mid_job_is_taken_back_within_the_bound waits out the real bounds."""
import os
import signal
import time

import pytest
from rq.registry import StartedJobRegistry

from trips.core.queue import RETRIES, get_queue
from trips.core.redis_client import get_redis
from jobs.reconcile import GRACE_S
from jobs.tasks import INTERNAL_FAILURE, ROUTE_FAILED_STAGES
from jobs.worker import MAINTENANCE_S
from trips.core.queue import LIVENESS_TTL
from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import make_points
from tests.procs import horse_of, kill, start_worker, wait_for, worker_running
from tests.trips.services.test_pipeline import reload, statuses, structural

pytestmark = pytest.mark.slow


def expire_abandoned(app) -> None:
    """What RQ's maintenance does once the dead worker's heartbeat and scheduler lock have expired."""
    with app.app_context():
        queue = get_queue()
        StartedJobRegistry(queue=queue).cleanup(timestamp=time.time() + 86400)
        get_redis().delete(f"rq:scheduler-lock:{queue.name}")


@pytest.fixture
def trip_id(ctx, client, fake_thirdparty):
    fake_thirdparty.add_komoot_tour("31", "Slow tour", make_points(1200))
    headers = auth(make_token(make_user()))
    response = client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/31"},
                           headers={**headers, **idem()})
    return response.get_json()["id"]


def test_killed_worker_job_fails_after_the_retries(app, app_config, trip_id, fake_thirdparty):
    fake_thirdparty.slow("/tour/31", 60, times=None)
    for attempt in range(1, 4):
        worker = start_worker(app_config)
        try:
            wait_for(lambda: fake_thirdparty.requests_to("/tour/31") == attempt)
        finally:
            kill(worker)
        expire_abandoned(app)
    trip = reload(trip_id)
    assert statuses(trip)["route"] == ("failed", INTERNAL_FAILURE)
    assert statuses(trip)["stages"][0] == "failed"


def test_work_horse_killed_on_the_last_attempt_fails_the_computation(app, app_config, trip_id, fake_thirdparty):
    """RQ fails such a job without its failure callback: the worker settles the computations itself."""
    fake_thirdparty.slow("/tour/31", 60, times=None)
    worker = start_worker(app_config)
    try:
        for attempt in range(1, RETRIES + 2):
            wait_for(lambda: fake_thirdparty.requests_to("/tour/31") == attempt)  # retries 1 s and 5 s apart
            wait_for(lambda: horse_of(worker.pid) is not None, timeout=5)
            os.kill(horse_of(worker.pid), signal.SIGKILL)
        # The documented bound (README "When something dies"); the worker settles it at once.
        wait_for(lambda: statuses(reload(trip_id))["route"][0] == "failed", timeout=GRACE_S + MAINTENANCE_S)
        trip = reload(trip_id)
        assert statuses(trip) == {"route": ("failed", INTERNAL_FAILURE), "stages": ("failed", ROUTE_FAILED_STAGES)}
        assert worker.poll() is None  # only the horses died
        assert fake_thirdparty.requests_to("/tour/31") == RETRIES + 1
    finally:
        kill(worker)


def test_work_horse_killed_before_the_last_attempt_is_retried(app, app_config, trip_id, fake_thirdparty):
    fake_thirdparty.slow("/tour/31", 60, times=1)
    worker = start_worker(app_config)
    try:
        wait_for(lambda: fake_thirdparty.requests_to("/tour/31") == 1)
        wait_for(lambda: horse_of(worker.pid) is not None, timeout=5)
        os.kill(horse_of(worker.pid), signal.SIGKILL)
        wait_for(lambda: statuses(reload(trip_id)).get("stages", ("",))[0] == "done")
        assert statuses(reload(trip_id))["route"] == ("done", None)
    finally:
        kill(worker)


def test_a_job_over_its_timeout_on_the_last_attempt_is_failed(app, client, rider, fake_thirdparty, monkeypatch):
    """RQ raises JobTimeoutException in the job (SIGALRM); the failure callback settles the last attempt."""
    from rq import SimpleWorker

    from jobs.tasks import bind_app
    from tests.trips.services.test_pipeline import post

    fake_thirdparty.add_komoot_tour("41", "Timed tour", make_points(300))
    trip_id = post(client, rider[1], {"sourceUrl": "https://www.komoot.com/tour/41"})
    job = get_queue().jobs[0]
    job.timeout, job.retries_left = 1, 0
    job.save()
    monkeypatch.setattr("jobs.tasks.fetch", lambda *args: time.sleep(30))  # the route fetch the job calls
    bind_app(app)
    SimpleWorker([get_queue()], connection=get_redis()).work(burst=True)
    trip = reload(trip_id)
    assert statuses(trip) == {"route": ("failed", INTERNAL_FAILURE), "stages": ("failed", ROUTE_FAILED_STAGES)}


def test_a_stale_scheduler_lock_is_freed_and_a_fresh_one_kept(redis_client):
    from jobs.worker import SCHEDULER_LOCK_TTL, SCHEDULER_STALE_S, free_stale_scheduler_lock

    key = "rq:scheduler-lock:btp"
    redis_client.set(key, "live-scheduler", ex=SCHEDULER_LOCK_TTL - 1)  # refreshed a second ago
    assert free_stale_scheduler_lock(redis_client, "btp") is False and redis_client.get(key) == b"live-scheduler"
    redis_client.set(key, "dead-scheduler", ex=SCHEDULER_LOCK_TTL - SCHEDULER_STALE_S - 1)
    assert free_stale_scheduler_lock(redis_client, "btp") is True and redis_client.get(key) is None
    assert free_stale_scheduler_lock(redis_client, "btp") is False  # no lock: nothing to free


def test_a_worker_killed_mid_job_is_taken_back_within_the_bound(app, app_config, ctx, fake_thirdparty, tmp_path,
                                                                 measured):
    """Served for real, nothing expired by hand: the killed worker (and its scheduler) drops out of /readyz, the
    next worker takes the job back once its execution lapses, the retry runs and the trip is cut into days."""
    from jobs.worker import ABANDON_SLACK_S
    from trips.core.queue import BEAT_S
    from tests.faults.stack import HttpClient
    from tests.live import gunicorn

    fake_thirdparty.add_komoot_tour("71", "Killed tour", make_points(1200))
    fake_thirdparty.slow("/tour/71", 60, times=1)
    headers = auth(make_token(make_user()))
    # The first worker starts while gunicorn does; it is killed mid-job below (and at the end, whatever happens).
    with worker_running(app_config, tmp_path / "worker-1.log") as first, \
            gunicorn(app_config, tmp_path / "gunicorn.log") as live:
        web = HttpClient(live.url)

        def worker_check():
            return web.get("/readyz").get_json()["checks"]["worker"]

        try:
            wait_for(lambda: worker_check() == "ok", timeout=90, what="the first worker to count as live")
            created = web.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/71"},
                               headers={**headers, **idem()})
            assert created.status_code == 202, created.get_json()
            trip_id = created.get_json()["id"]
            wait_for(lambda: fake_thirdparty.requests_to("/tour/71") == 1, timeout=30, what="the job to start")
        finally:
            kill(first)
        killed = time.monotonic()
        assert statuses(reload(trip_id))["route"][0] == "running"
        measured("killed worker no longer counted by /readyz",
                 # RQ's own registration would still count it for worker_ttl + 60 s; the liveness key lapses in
                 # LIVENESS_TTL after the last beat.
                 wait_for(lambda: worker_check() == "missing", timeout=LIVENESS_TTL + 2, what="/readyz to drop it"),
                 f"{LIVENESS_TTL} s")
        not_ready = web.get("/readyz")
        assert not_ready.status_code == 503 and not_ready.get_json()["status"] == "not ready"
        assert statuses(reload(trip_id))["route"][0] == "running"  # only a live worker settles it

        second = start_worker(app_config, tmp_path / "worker-2.log")
        try:
            wait_for(lambda: web.get("/readyz").status_code == 200, timeout=90, what="/readyz with a new worker",
                     logs=(tmp_path / "worker-2.log",))
            # README "When something dies": lapsed BEAT_S + ABANDON_SLACK_S after its last beat, taken back at the
            # next maintenance (MAINTENANCE_S); the retry then waits 1 s and the scheduler's poll. A dead
            # scheduler's lock (61 s) must not hold it longer.
            bound = BEAT_S + ABANDON_SLACK_S + MAINTENANCE_S + 10
            wait_for(lambda: structural(reload(trip_id)) == {"route": ("done", None), "stages": ("done", None)},
                     timeout=bound - (time.monotonic() - killed), what="the job to be retried and done",
                     logs=(tmp_path / "worker-2.log",))
            measured("worker SIGKILLed mid-job → job retried and done (from the kill)", time.monotonic() - killed,
                     f"{bound} s")
            assert second.poll() is None
        finally:
            kill(second)
    assert fake_thirdparty.requests_to("/tour/71") == 2  # the killed attempt and the retry
    assert len(reload(trip_id).stages) == 2
