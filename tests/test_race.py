"""Concurrent edits of one version against the running app (gunicorn, several workers, the real database):
exactly one lands, the others are told the trip moved on, and nothing is lost."""
import io
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from tests.factories import make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.test_pipeline import reload
from trips.services import import_gpx

GUNICORN = str(Path(sys.executable).parent / "gunicorn")
THREADS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(app_config):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTP_")}
    env.update({k: str(v) for k, v in app_config.items() if k.startswith(("BTP_", "DATABASE_URL", "REDIS_URL"))})
    proc = subprocess.Popen([GUNICORN, "--workers", "4", "--bind", f"127.0.0.1:{port}", "wsgi:app"], env=env,
                            cwd=Path(__file__).parent.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if requests.get(base + "/healthz", timeout=5).status_code == 200:
                break
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline and proc.poll() is None, "gunicorn did not start"
        time.sleep(0.1)
    yield base
    proc.terminate()
    proc.wait(timeout=15)


@pytest.fixture
def trip_and_headers(ctx):
    user = make_user()
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Race")), {})
    return trip, {"Authorization": f"Bearer {make_token(user)}", "If-Match": '"1"'}


def storm(requests_to_send):
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        return list(pool.map(lambda send: send(), requests_to_send))


def test_same_edit_same_version_lands_once(server, trip_and_headers):
    trip, headers = trip_and_headers
    url = f"{server}/api/trips/{trip.id}/stages/{trip.stages[0].id}/rest-day"
    answers = storm([lambda: requests.post(url, headers=headers, timeout=30)] * THREADS)
    codes = sorted(a.status_code for a in answers)
    assert codes == [200] + [412] * (THREADS - 1), codes
    fresh = reload(trip.id)
    assert fresh.version == 2 and [s.is_rest_day for s in fresh.stages] == [False, True, False, False]


def test_different_edits_of_one_version_keep_exactly_the_winner(server, trip_and_headers):
    trip, headers = trip_and_headers
    url = f"{server}/api/trips/{trip.id}/stages/{trip.stages[1].id}"

    def send(i):
        return lambda: requests.patch(url, json={"label": f"label {i}"}, headers=headers, timeout=30)

    answers = storm([send(i) for i in range(THREADS)])
    winners = [a for a in answers if a.status_code == 200]
    assert len(winners) == 1 and sorted(a.status_code for a in answers if a not in winners) == [412] * (THREADS - 1)
    fresh = reload(trip.id)
    assert fresh.version == 2 and fresh.stages[1].label == winners[0].json()["stages"][1]["label"]
