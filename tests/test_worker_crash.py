"""A worker or its work horse killed mid-job: the job is retried; after the retries it is failed, not running.

Real worker processes (`flask worker`, jobs/worker.py) against the test database and Redis."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rq.registry import StartedJobRegistry

from jobs import RETRIES, get_queue, get_redis
from jobs.reconcile import GRACE_S
from jobs.tasks import INTERNAL_FAILURE, ROUTE_FAILED_STAGES
from jobs.worker import LIVENESS_TTL, MAINTENANCE_S
from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import make_points
from tests.test_pipeline import reload, run_jobs, statuses, structural

pytestmark = pytest.mark.slow
FLASK = str(Path(sys.executable).parent / "flask")


def start_worker(app_config) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTP_")}
    env.update({k: str(v) for k, v in app_config.items() if k.startswith(("BTP_", "DATABASE_URL", "REDIS_URL"))})
    return subprocess.Popen([FLASK, "--app", "app", "worker"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(predicate, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _stats() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, process group) of every process."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    return out


def descendants(pid: int) -> list[int]:
    """Child processes, recursively (the work horse runs in a process group of its own, so killpg misses it)."""
    stats = _stats()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, (ppid, _) in stats.items() if ppid == parent]
        found += children
        frontier += children
    return found


def horse_of(worker_pid: int) -> int | None:
    """The worker's work horse: the child RQ forked and moved into a process group of its own (os.setpgrp);
    the scheduler process stays in the worker's group."""
    return next((p for p, (ppid, pgid) in _stats().items() if ppid == worker_pid and pgid == p), None)


def kill(worker: subprocess.Popen) -> None:
    """SIGKILL the worker and its work horse, mid-job: nothing gets to clean up."""
    for pid in [worker.pid, *descendants(worker.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.wait()


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


def test_killed_worker_job_is_retried(app, app_config, trip_id, fake_thirdparty):
    fake_thirdparty.slow("/tour/31", 60, times=1)
    worker = start_worker(app_config)
    try:
        wait_for(lambda: fake_thirdparty.requests_to("/tour/31") == 1)
    finally:
        kill(worker)
    assert statuses(reload(trip_id))["route"][0] == "running"
    expire_abandoned(app)
    time.sleep(1.2)  # the first retry is scheduled one second later
    run_jobs(app)
    trip = reload(trip_id)
    assert structural(trip) == {"route": ("done", None), "stages": ("done", None)}
    assert len(trip.stages) == 2


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


def test_a_killed_worker_stops_counting_as_live_within_one_heartbeat(app, app_config, client):
    worker = start_worker(app_config)
    try:
        wait_for(lambda: client.get("/readyz").status_code == 200, timeout=90)  # a worker starting on a busy machine
    finally:
        kill(worker)
    # RQ's own registration would still count it for worker_ttl + 60 s; the liveness key lapses in LIVENESS_TTL.
    wait_for(lambda: client.get("/readyz").get_json()["checks"]["worker"] == "missing", timeout=LIVENESS_TTL + 2)


def test_a_job_over_its_timeout_on_the_last_attempt_is_failed(app, client, rider, fake_thirdparty, monkeypatch):
    """RQ raises JobTimeoutException in the job (SIGALRM); the failure callback settles the last attempt."""
    from rq import SimpleWorker

    from jobs.tasks import bind_app
    from tests.test_pipeline import post

    fake_thirdparty.add_komoot_tour("41", "Timed tour", make_points(300))
    trip_id = post(client, rider[1], {"sourceUrl": "https://www.komoot.com/tour/41"})
    job = get_queue().jobs[0]
    job.timeout, job.retries_left = 1, 0
    job.save()
    monkeypatch.setattr("trips.providers.routes.fetch_route", lambda *args: time.sleep(30))
    bind_app(app)
    SimpleWorker([get_queue()], connection=get_redis()).work(burst=True)
    trip = reload(trip_id)
    assert statuses(trip) == {"route": ("failed", INTERNAL_FAILURE), "stages": ("failed", ROUTE_FAILED_STAGES)}
