"""The routing an account may cause (trips/services/work_budget.py): km of route drawn from places per window, and
at most three of its trips waiting for their drawn route, or being analysed; refused with 429, Retry-After and a reason in the
reader's language, one account never spending another's."""
import io

import pytest

from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.services.test_pipeline import run_jobs
from tests.trips.services.test_trips_from_places import ROAD_KM, along, road_map  # noqa: F401 (a fixture)
from trips.core import i18n
from trips.errors import Invalid, RateLimited
from trips.services import work_budget


def points(km: float) -> list[list[float]]:
    return [[p["lat"], p["lon"]] for p in (along(0), along(km))]


@pytest.fixture
def small_budget(app, fresh_app):
    """An app whose accounts may have 100 km drawn per hour."""
    application = fresh_app(BTP_LIMIT_ROUTE_KM="100/3600")
    with application.app_context():
        yield application


def test_the_km_budget_refuses_what_would_pass_it_with_a_wait_and_a_reason(small_budget):
    rider, other = make_user(), make_user()
    work_budget.charge_route(rider.id, points(60))
    with pytest.raises(RateLimited) as refused:
        work_budget.charge_route(rider.id, points(60))
    assert 1 <= refused.value.retry_after <= 3600 and refused.value.bucket == "route_km"
    english, french = i18n.say(refused.value.text, "en"), i18n.say(refused.value.text, "fr")
    assert "100 km" in english and "60 km" in english and "per hour" in english
    assert "100\u00a0km" in french and "par heure" in french
    work_budget.charge_route(rider.id, points(35))  # what is left of the window still passes
    work_budget.charge_route(other.id, points(60))  # another account spends its own


def test_a_route_longer_than_the_whole_budget_is_refused_by_name(small_budget):
    with pytest.raises(Invalid) as refused:
        work_budget.charge_route(make_user().id, points(150))
    assert list(refused.value.errors) == ["waypoints"]
    assert "150 km" in i18n.say(refused.value.errors["waypoints"], "en")


def test_the_straight_estimate_is_the_distance_through_the_places():
    assert work_budget.estimated_km(points(35)) == pytest.approx(35, rel=0.01)
    assert work_budget.estimated_km([[45.0, 5.0]]) == 0.0


def test_a_fourth_waiting_route_is_refused_until_one_is_drawn(app, client, rider, road_map):  # noqa: F811
    user, headers = rider
    body = {"waypoints": [along(0), along(ROAD_KM)]}
    for _ in range(work_budget.MAX_QUEUED_ROUTES):
        assert client.post("/api/trips", json=body, headers={**headers, **idem()}).status_code == 202
    refused = client.post("/api/trips", json=body, headers={**headers, **idem(), "Accept-Language": "fr"})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) == work_budget.QUEUED_RETRY_S
    assert "3" in refused.get_json()["detail"]
    other = auth(make_token(make_user()))
    assert client.post("/api/trips", json=body, headers={**other, **idem()}).status_code == 202
    run_jobs(app)
    assert client.post("/api/trips", json=body, headers={**headers, **idem()}).status_code == 202


def test_mcp_hears_the_km_budget_as_rate_limited(app, fresh_app, road_map):  # noqa: F811
    application = fresh_app(BTP_LIMIT_ROUTE_KM="100/3600")
    with application.app_context():
        token = mcp_token(application, make_user())
        client = application.test_client()
        first = call(client, token, "create_trip", {"waypoints": [along(0), along(ROAD_KM)]})
        assert not first.get("isError"), first
        again = {"waypoints": [along(1), along(ROAD_KM)]}  # another body: the same one would answer the same trip
        error = payload(call(client, token, "create_trip", again))["error"]
    assert error["code"] == "rate_limited" and error["retryAfter"] >= 1 and "km" in error["message"]


def upload(client, headers) -> str:
    gpx = gpx_from_points(make_points(60))
    answer = client.post("/api/trips/gpx-upload", data={"gpxFile": (io.BytesIO(gpx), "a.gpx")}, headers=headers)
    assert answer.status_code == 201, answer.get_json()
    return answer.get_json()["id"]


def test_a_trip_is_not_analysed_again_while_three_others_are_being_analysed(app, client, rider):
    _, headers = rider
    settled = upload(client, headers)
    run_jobs(app)
    for _ in range(work_budget.MAX_QUEUED_ANALYSES):
        upload(client, headers)  # each one's analysis queued, no worker running
    refused = client.post(f"/api/trips/{settled}/analyze", headers={**headers, "Accept-Language": "fr"})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) == work_budget.QUEUED_RETRY_S
    assert "analyse" in refused.get_json()["detail"]
    other = auth(make_token(make_user()))
    assert client.post(f"/api/trips/{upload(client, other)}/analyze", headers=other).status_code != 429
    run_jobs(app)
    assert client.post(f"/api/trips/{settled}/analyze", headers=headers).status_code == 202
