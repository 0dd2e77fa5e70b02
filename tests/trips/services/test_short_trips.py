"""A one-day dated trip is a trip (startDate = endDate) over REST, MCP and a GPX upload; every refusal of pacing or
dates names a change that fixes it, and following it succeeds; a trip whose days could not be cut says its routed km
and why no day exists (docs/RULES.md "Pacing", "Trip settings")."""
import io
from datetime import date, timedelta

import pytest

from tests.factories import idem
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.osm_maps import MapBuilder, line_east, map_support_or_skip
from tests.trips.services.test_pipeline import reload, run_jobs
from trips.core.db import db
from trips.osm.importer import import_file
from trips.route.pacing import MAX_TRIP_DAYS, PacingSettings, TooLarge, day_count

START = "2031-06-01"
NEXT = "2031-06-02"
SHORT = gpx_from_points(make_points(16, step_m=100.0), name="Short")  # 1.5 km
DAY = gpx_from_points(make_points(301, step_m=100.0), name="A day")  # 30 km


def upload(client, headers, gpx: bytes, **form):
    data = {"gpxFile": (io.BytesIO(gpx), "ride.gpx"), **form}
    return client.post("/api/trips/gpx-upload", data=data, headers=headers, content_type="multipart/form-data")


@pytest.fixture
def road_map(ctx, tmp_path):
    """A 10 km road east from (45.0, 5.0), imported."""
    map_support_or_skip(db.engine)
    m = MapBuilder(bounds=(44.95, 4.95, 45.05, 5.2))
    m.way(line_east(45.0, 5.0, 10.0, step_m=100.0), {"highway": "tertiary"})
    import_file(db.engine, m.write(tmp_path / "road.osm.pbf"))


def east(km: float) -> dict:
    return {"lat": 45.0, "lon": round(5.0 + km / 78.85, 6)}


def test_a_one_day_dated_trip_is_a_trip_by_upload(client, rider):
    _, headers = rider
    response = upload(client, headers, DAY, startDate=START, endDate=START)
    assert response.status_code == 201, response.get_json()
    trip = response.get_json()
    assert (trip["startDate"], trip["endDate"]) == (START, START)
    assert len(trip["stages"]) == 1 and trip["status"] == "ready"
    assert trip["totalDistance"] == pytest.approx(30.0, abs=0.1)


def test_a_one_day_dated_trip_is_a_trip_over_rest_and_mcp(app, client, rider, road_map):
    user, headers = rider
    body = {"waypoints": [east(0), east(8)], "startDate": START, "endDate": START}
    created = client.post("/api/trips", json=body, headers={**headers, **idem()})
    assert created.status_code == 202, created.get_json()
    token = mcp_token(app, user)
    made = call(client, token, "create_trip", {**body, "title": "Tour du lac"})
    assert not made.get("isError"), payload(made)
    run_jobs(app)
    db.session.rollback()
    for trip_id in (created.get_json()["id"], payload(made)["id"]):
        trip = reload(trip_id)
        assert len(trip.stages) == 1 and trip.status == "ready" and trip.end_date == date(2031, 6, 1)
    digest = payload(call(client, token, "get_trip", {"id": payload(made)["id"]}))
    assert digest["stageCount"] == 1 and digest["status"] == "ready" and digest["nextAction"] is None


def test_an_end_before_the_start_is_refused_naming_a_date_that_works(client, rider):
    _, headers = rider
    refused = upload(client, headers, DAY, startDate=NEXT, endDate=START)
    assert refused.status_code == 422
    advice = refused.get_json()["errors"]["endDate"]
    assert NEXT in advice, advice
    assert upload(client, headers, DAY, startDate=NEXT, endDate=NEXT).status_code == 201


def test_dates_over_ninety_days_name_the_last_end_date_that_fits(client, rider):
    _, headers = rider
    start = date(2031, 6, 1)
    refused = upload(client, headers, DAY, startDate=START,
                     endDate=(start + timedelta(days=MAX_TRIP_DAYS + 5)).isoformat())
    assert refused.status_code == 422
    latest = (start + timedelta(days=MAX_TRIP_DAYS - 1)).isoformat()
    assert latest in refused.get_json()["errors"]["endDate"]


def test_a_short_route_over_two_dates_is_refused_with_advice_that_can_be_followed(client, rider):
    _, headers = rider
    refused = upload(client, headers, SHORT, startDate=START, endDate=NEXT)
    assert refused.status_code == 422
    advice = refused.get_json()["errors"]["endDate"]
    assert f"endDate to {START}" in advice and "closer" not in advice, advice
    followed = upload(client, headers, SHORT, startDate=START, endDate=START)
    assert followed.status_code == 201 and len(followed.get_json()["stages"]) == 1
    # the same through a settings change, and in French for a French reader
    trip = followed.get_json()
    french = client.patch(f"/api/trips/{trip['id']}", json={"endDate": NEXT},
                          headers={**headers, "If-Match": '"1"', "Accept-Language": "fr"})
    assert french.status_code == 422 and "Mettez endDate au 2031-06-01" in french.get_json()["errors"]["endDate"]


@pytest.mark.parametrize("km", [2_701.0, 9_000.0, 26_999.0])
def test_a_paced_route_over_ninety_days_names_a_daily_distance_that_fits(km):
    with pytest.raises(TooLarge) as refused:
        day_count(km, PacingSettings(max_distance_per_day=30.0))
    fits = float(str(refused.value.message).split("at least ")[1].split(" km")[0])  # the English text
    assert refused.value.field == "maxDistancePerDay" and 30 <= fits <= 300
    assert day_count(km, PacingSettings(max_distance_per_day=fits)) <= MAX_TRIP_DAYS


def test_a_trip_whose_days_could_not_be_cut_says_its_km_and_why_then_is_cut_once_fixed(app, client, rider, road_map):
    user, headers = rider
    body = {"waypoints": [east(0), east(0.3), east(1.1)], "startDate": START, "endDate": NEXT}  # 1.1 km, two days
    created = client.post("/api/trips", json=body, headers={**headers, **idem()}).get_json()
    run_jobs(app)
    db.session.rollback()
    detail = client.get(f"/api/trips/{created['id']}", headers=headers).get_json()
    assert detail["stages"] == [] and [leg["km"] for leg in detail["routing"]] == [0.3, 0.8]
    assert detail["totalDistance"] == pytest.approx(1.1, abs=0.05)  # the routed km, not 0
    assert "could not be cut" in detail["nextAction"] and f"endDate to {START}" in detail["nextAction"]
    assert "update_trip_settings" in detail["nextAction"]
    digest = payload(call(client, mcp_token(app, user), "get_trip", {"id": created["id"]}))
    assert digest["totalDistance"] == pytest.approx(1.1, abs=0.05) and digest["nextAction"] == detail["nextAction"]
    fixed = client.patch(f"/api/trips/{created['id']}", json={"endDate": START},
                         headers={**headers, "If-Match": f'"{detail["version"]}"'})
    assert fixed.status_code == 200, fixed.get_json()
    run_jobs(app)
    db.session.rollback()
    trip = reload(created["id"])
    assert len(trip.stages) == 1 and trip.status == "ready"
    assert trip.stages[0].distance == pytest.approx(1.1, abs=0.05)
