"""Concurrent edits of one version against the running app (gunicorn, several workers, the real database):
exactly one lands, the others are told the trip moved on, and nothing is lost."""
import io
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.factories import make_token, make_user
from tests.live import gunicorn
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.trips.services.test_pipeline import reload
from trips.services.trips import import_gpx

THREADS = 20


@pytest.fixture(scope="module")
def server(app_config, tmp_path_factory):
    with gunicorn(app_config, tmp_path_factory.mktemp("race") / "gunicorn.log", workers=4) as live:
        yield live.url


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
