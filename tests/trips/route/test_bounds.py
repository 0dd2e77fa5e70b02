"""A trip has a bounded size: at most 90 days, no jump between consecutive points longer than the longest
day (300 km), at most 27 000 km, and a bounded line per day and per trip, on every path that makes days
(upload, fetched link, settings change, day edits), with an error that names the fix."""
import io
import json
import math

import numpy as np
import pytest

from tests.fakes.thirdparty import gpx_from_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.api.test_gpx_upload import count_trips, upload
from tests.trips.services.test_pipeline import post, reload, run_jobs, statuses
from trips.core.stored_texts import said_stored
from trips.route import pacing
from trips.models import Stage
from trips.route.pacing import MAX_STAGE_POINTS, MAX_STEP_KM, MAX_TRIP_DAYS, PacingSettings, TooLarge
from trips.services.trips import import_gpx
from trips.services.stages import set_geometry

KM_PER_DEG = 111.32  # along the equator, near enough to lay out test routes


def along_equator(km: float, step_km: float = 1.0, lon0: float = -30.0) -> list[tuple[float, float, float]]:
    """A route of about `km` km heading east along the equator, a point every `step_km`."""
    n = int(km / step_km) + 1
    return [(0.0, round(lon0 + i * step_km / KM_PER_DEG, 7), 0.0) for i in range(n)]


def zigzag(n: int, spacing_m: float = 30.0, swing_m: float = 25.0) -> np.ndarray:
    """Every point 25 m off the line on alternate sides: Douglas–Peucker at 20 m keeps them all."""
    y = np.arange(n) * spacing_m
    x = np.where(np.arange(n) % 2 == 0, swing_m, -swing_m)
    return np.column_stack((45.0 + y / 111_132.0, 5.0 + x / 78_700.0, np.zeros(n)))


POLAR = gpx_from_points([(89.9, 0.0, 0.0) if i % 2 == 0 else (-89.9, 0.0, 0.0) for i in range(500)])
THREE = gpx_from_points([(90.0, 0.0, 0.0), (-90.0, 0.0, 0.0), (90.0, 0.0, 0.0)])
TOO_LONG = gpx_from_points(along_equator(7300), name="Around")  # ceil(7300 / 80) = 92 days
LONG = gpx_from_points(along_equator(7100), name="Long way")  # 89 days at the default 80 km


# ------------------------------------------------------------------ the engine


@pytest.mark.parametrize("points,words", [
    ([(89.9, 0, 0), (-89.9, 0, 0)] * 250, "Track points 1 and 2 are 19,982 km apart"),
    ([(90, 0, 0), (-90, 0, 0), (90, 0, 0)], "Track points 1 and 2 are 20,004 km apart"),
    ([(0, 0, 0), (0, 1, 0), (0, 4, 0)], "Track points 2 and 3 are 334 km apart"),
])
def test_a_jump_between_consecutive_points_is_refused_before_any_cutting(points, words):
    with pytest.raises(TooLarge) as caught:
        pacing.plan_stages(np.array(points, dtype=float))
    message = str(caught.value.message)  # the English words
    assert words in message and f"at most {MAX_STEP_KM:g} km" in message
    assert caught.value.field is None


def test_a_sparse_route_with_long_straight_steps_is_accepted():
    # A route sketched with straight lines between clicks: steps of about 250 km.
    route = np.array([(0.0, i * 250 / KM_PER_DEG, 0.0) for i in range(5)])
    stages = pacing.plan_stages(route, PacingSettings(max_distance_per_day=300))
    assert len(stages) == 4 and abs(sum(s.distance_km for s in stages) - 1000) < 2


def test_more_than_90_paced_days_is_refused_naming_the_setting_and_the_value_that_fits():
    route = np.array(along_equator(7300, step_km=5.0))
    with pytest.raises(TooLarge) as caught:
        pacing.plan_stages(route)
    message = str(caught.value.message)  # the English words
    assert message.startswith("This route would make 92 days; BTP plans at most 90.")
    assert "Raise maxDistancePerDay to at least 82 km" in message and caught.value.field == "maxDistancePerDay"
    assert len(pacing.plan_stages(route, PacingSettings(max_distance_per_day=82))) <= MAX_TRIP_DAYS


def test_a_route_longer_than_90_days_of_300_km_is_refused_even_with_dates():
    from datetime import date

    route = np.array(along_equator(27_100, step_km=100.0, lon0=-120.0))
    dated = PacingSettings(start_date=date(2031, 6, 1), end_date=date(2031, 6, 10))
    with pytest.raises(TooLarge, match="This route is 27,1[0-9]{2} km long; BTP plans at most 27,000 km"):
        pacing.plan_stages(route, dated)


def test_a_collection_of_more_than_90_tours_is_refused():
    tour = np.array(along_equator(40, step_km=1.0))
    assert len(pacing.plan_collection([tour] * 90)) == 90
    with pytest.raises(TooLarge, match="91 tours; BTP plans at most 90 days"):
        pacing.plan_collection([tour] * 91)


def test_each_day_keeps_a_bounded_line_and_the_trip_a_bounded_total(monkeypatch):
    route = zigzag(6_000)  # 350 km of 58 m steps: two days of ~3 000 points that all survive 20 m
    assert len(pacing.fit_points(route, 6_000)) == 6_000  # the shape is as hostile as it gets
    monkeypatch.setattr(pacing, "MAX_STAGE_POINTS", 1_000)  # the same rule as 5 000, on a smaller route
    stages = pacing.plan_stages(route, PacingSettings(max_distance_per_day=300))
    assert len(stages) == math.ceil(pacing.geo.total_distance_km(route) / 300) == 2
    for stage in stages:
        assert 2 <= len(stage.geometry) <= 1_000
        assert tuple(stage.geometry[0]) == stage.start and tuple(stage.geometry[-1]) == stage.end
    assert abs(sum(s.distance_km for s in stages) - pacing.geo.total_distance_km(route)) < 1e-6
    monkeypatch.setattr(pacing, "MAX_TRIP_POINTS", 300)
    stages = pacing.plan_stages(route, PacingSettings(max_distance_per_day=300))
    assert sum(len(s.geometry) for s in stages) <= 300


def test_fit_points_keeps_the_ends_and_falls_back_to_even_spacing():
    rng = np.random.default_rng(7)  # points scattered over 1 000 km: no tolerance up to 20 km thins them
    line = np.column_stack((rng.uniform(40, 50, 400), rng.uniform(0, 10, 400), np.zeros(400)))
    kept = pacing.fit_points(line, 100)
    assert len(kept) == 100 and (kept[0] == line[0]).all() and (kept[-1] == line[-1]).all()


def test_many_lines_fitted_at_once_keep_what_each_keeps_alone():
    rng = np.random.default_rng(11)
    scattered = np.column_stack((rng.uniform(40, 50, 400), rng.uniform(0, 10, 400), np.zeros(400)))
    lines = [zigzag(3_000), zigzag(800)[::-1], scattered, zigzag(2)[:2], zigzag(5_000)[:1_200]]
    together = pacing.fit_points_each(lines, 150)
    assert len(together) == len(lines)
    for line, kept in zip(lines, together):
        assert np.array_equal(kept, pacing.fit_points(line, 150))


def test_a_stored_day_keeps_at_most_its_budget_of_points_but_its_full_length(ctx):
    line = zigzag(12_000)
    stage = Stage(accommodations=[])
    set_geometry(stage, line)
    assert len(stage.geometry) <= MAX_STAGE_POINTS
    assert stage.distance == pytest.approx(pacing.geo.total_distance_km(np.round(line, 6)))
    assert stage.geometry[0] == [stage.start_lat, stage.start_lon, stage.start_ele]


# ------------------------------------------------------------------ uploads


@pytest.mark.parametrize("data,words", [(POLAR, "19,982 km apart"), (THREE, "20,004 km apart")])
def test_an_upload_with_a_jump_is_refused_and_nothing_is_kept(client, rider, data, words):
    _, headers = rider
    response = upload(client, headers, data)
    assert response.status_code == 422
    assert words in response.get_json()["errors"]["gpxFile"]
    assert count_trips() == 0


def test_an_upload_of_more_than_90_days_is_refused_naming_max_distance_per_day(client, rider):
    _, headers = rider
    response = upload(client, headers, TOO_LONG)
    assert response.status_code == 422
    assert response.get_json()["errors"] == {"maxDistancePerDay": (
        "This route would make 92 days; BTP plans at most 90. Raise maxDistancePerDay to at least 82 km, or "
        "split the route.")}
    assert count_trips() == 0
    assert upload(client, headers, TOO_LONG, maxDistancePerDay="82").status_code == 201


def test_a_legitimate_long_trip_is_accepted_and_its_answers_stay_proportionate(client, rider):
    _, headers = rider
    response = upload(client, headers, LONG)
    assert response.status_code == 201
    body = response.get_json()
    assert len(body["stages"]) == 89 and body["status"] == "ready"
    trip_id = body["id"]
    sizes = {path: len(client.get(path, headers=headers).data)
             for path in (f"/api/trips/{trip_id}", f"/api/trips/{trip_id}/route", f"/api/trips/{trip_id}.gpx")}
    assert all(size < 2_000_000 for size in sizes.values()), sizes


# ------------------------------------------------------------------ edits and settings


@pytest.fixture
def ninety_days(rider):
    trip = import_gpx(rider[0], io.BytesIO(gpx_from_points(along_equator(7190))), {})
    assert len(trip.stages) == MAX_TRIP_DAYS
    return trip


def _edit(client, method, url, headers, version, body=None):
    return getattr(client, method)(url, json=body, headers={**headers, "If-Match": f'"{version}"'})


def test_no_edit_takes_a_trip_past_90_days(client, rider, ninety_days):
    _, headers = rider
    trip = ninety_days
    base = f"/api/trips/{trip.id}/stages"
    last = trip.stages[-1]
    cut = _edit(client, "patch", f"{base}/{last.id}", headers, trip.version, {"distance": 10})
    assert cut.status_code == 422 and "at most 90 days" in cut.get_json()["errors"]["distance"]
    add = _edit(client, "post", base, headers, trip.version,
                {"startPoint": {"lat": 0, "lon": 35}, "endPoint": {"lat": 0, "lon": 35.1}})
    assert add.status_code == 422 and "at most 90 days" in add.get_json()["errors"]["position"]
    rest = _edit(client, "post", f"{base}/{trip.stages[3].id}/rest-day", headers, trip.version)
    assert rest.status_code == 422
    assert len(reload(trip.id).stages) == MAX_TRIP_DAYS and reload(trip.id).version == trip.version


def test_a_settings_change_that_would_make_more_than_90_days_is_refused(app, client, rider, ninety_days):
    user, headers = rider
    trip = ninety_days
    response = _edit(client, "patch", f"/api/trips/{trip.id}", headers, trip.version, {"maxDistancePerDay": 30})
    assert response.status_code == 422
    assert response.get_json()["errors"]["maxDistancePerDay"].startswith(
        "This route would make 240 days; BTP plans at most 90. Raise maxDistancePerDay to at least 80 km")
    result = call(client, mcp_token(app, user), "update_trip_settings",
                  {"id": trip.id, "version": trip.version, "maxDistancePerDay": 30})
    assert result["isError"] and "240 days" in payload(result)["error"]["fields"]["maxDistancePerDay"]
    assert reload(trip.id).max_distance_per_day == 80 and reload(trip.id).version == trip.version
    ok = _edit(client, "patch", f"/api/trips/{trip.id}", headers, trip.version, {"maxDistancePerDay": 100})
    assert ok.status_code == 200


@pytest.mark.parametrize("end,words", [({"lat": 0, "lon": 10}, "is 1,113 km from the start point"),
                                       ({"lat": -45, "lon": 0}, "is 4,985 km from the start point")])
def test_a_day_drawn_as_a_jump_is_refused(client, rider, end, words):
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(along_equator(200))), {})
    base = f"/api/trips/{trip.id}/stages"
    add = _edit(client, "post", base, headers, trip.version, {"startPoint": {"lat": 0, "lon": 0}, "endPoint": end})
    assert add.status_code == 422 and words in add.get_json()["errors"]["endPoint"]
    moved = _edit(client, "patch", f"{base}/{trip.stages[0].id}", headers, trip.version, {"endPoint": end})
    assert moved.status_code == 422 and "km from the start point" in moved.get_json()["errors"]["endPoint"]
    assert reload(trip.id).version == trip.version


# ------------------------------------------------------------------ fetched links


def test_a_fetched_route_with_a_jump_fails_its_computation_with_the_reason(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("90", "Pole to pole", [(90.0, 0.0, 0.0), (-90.0, 0.0, 0.0), (90.0, 0.0, 0.0)])
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/90"})
    run_jobs(app)
    trip = reload(trip_id)
    status, reason = statuses(trip)["route"]
    assert status == "failed" and "Track points 1 and 2 are 20,004 km apart" in said_stored(reason, "en")
    assert statuses(trip)["stages"][0] == "failed" and trip.stages == []


def test_a_fetched_route_of_more_than_90_days_fails_its_cutting_with_the_reason(app, client, rider,
                                                                                fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("91", "Around", along_equator(7300, step_km=2.0))
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/91"})
    run_jobs(app)
    trip = reload(trip_id)
    assert statuses(trip)["route"] == ("done", None)
    status, reason = statuses(trip)["stages"]
    assert status == "failed" and said_stored(reason, "en").startswith("This route would make 92 days; BTP plans at most 90.")
    detail = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()
    assert json.dumps(detail).count("92 days") >= 1  # the reason reaches the reader
    fixed = client.patch(f"/api/trips/{trip_id}", json={"maxDistancePerDay": 90},
                         headers={**headers, "If-Match": f'"{trip.version}"'})
    assert fixed.status_code == 200
    run_jobs(app)
    assert statuses(reload(trip_id))["stages"] == ("done", None)
    assert len(reload(trip_id).stages) == math.ceil(7300 / 90)
