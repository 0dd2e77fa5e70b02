"""A worker killed mid-job: RQ's abandoned-job handling retries it; after the retries it is failed, not running."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rq.registry import StartedJobRegistry

from jobs import get_queue, get_redis
from jobs.tasks import INTERNAL_FAILURE
from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import make_points
from tests.test_pipeline import reload, run_jobs, statuses

pytestmark = pytest.mark.slow
FLASK = str(Path(sys.executable).parent / "flask")


def start_worker(app_config) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTP_")}
    env.update({k: str(v) for k, v in app_config.items() if k.startswith(("BTP_", "DATABASE_URL", "REDIS_URL"))})
    return subprocess.Popen([FLASK, "--app", "app", "worker"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def descendants(pid: int) -> list[int]:
    """Child processes, recursively (the work horse runs in a session of its own, so killpg misses it)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            child = int(stat.parent.name)
            children += [child, *descendants(child)]
    return children


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
    assert statuses(trip) == {"route": ("done", None), "stages": ("done", None)}
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
