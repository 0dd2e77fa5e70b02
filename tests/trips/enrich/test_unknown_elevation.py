"""Unknown is never zero (docs/RULES.md "Elevation"): a GPX without <ele> has unknown climbing, gradient and profile,
never 0 m. A category or a dependent never passes a failure, or a forecast stored for another date, for done
(docs/RULES.md "Enrichments", "Weather")."""
import io
import math
import re
from datetime import date

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from mcp.tools import TOOLS

from tests.enrich_helpers import stage as snap_stage
from tests.enrich_helpers import trip as snap_trip
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.enrich.test_enrich_dispatch import settle
from tests.trips.services.test_pipeline import reload, run_jobs
from trips.computations import block_status
from trips.core.db import atomic, db
from trips.enrich import registry, terrain, wind
from trips.enrich.alerts import terrain as terrain_alerts
from oauth.kernel.models import User
from trips.models import Computation, Stage, Trip
from trips.core import i18n
from trips.route.gpx import ParsedRoute, parse_gpx
from trips.route.pacing import plan_stages, rider_time
from trips.route.source_formats import checked
from trips.services import pipeline
from trips.services.trips import import_gpx

REASON = "this route carries no elevation"
POINTS = make_points(2400, step_m=100.0, climb_m=900.0)  # 240 km with 900 m up and down: three days


def bare_gpx(points, keep=lambda i: False) -> bytes:
    """A GPX of `points` where only the points whose index `keep` accepts carry an <ele>."""
    pts = "\n".join(f'<trkpt lat="{lat}" lon="{lon}">' + (f"<ele>{ele}</ele>" if keep(i) else "") + "</trkpt>"
                    for i, (lat, lon, ele) in enumerate(points))
    return ('<?xml version="1.0" encoding="UTF-8"?><gpx version="1.1" xmlns="http://www.topografix.com/GPX/1/1">'
            f"<trk><name>Coast</name><trkseg>{pts}</trkseg></trk></gpx>").encode()


def test_a_gpx_without_elevation_parses_to_unknown_not_zero():
    points = parse_gpx(bare_gpx(POINTS[:50])).points
    assert np.isnan(points[:, 2]).all()
    assert pipeline.elevation_gain_loss(points[:, 2]) == (None, None)


def test_pacing_invents_no_elevation_penalty():
    """Unknown climbing cuts the days as a flat route does, not as 0 m read from nowhere nor as a real climb."""
    flat = np.array([(lat, lon, 100.0) for lat, lon, _ in POINTS])
    unknown = np.array([(lat, lon, math.nan) for lat, lon, _ in POINTS])
    climbing = np.array(POINTS, dtype=float)
    cut = [round(p.distance_km, 3) for p in plan_stages(unknown)]
    assert cut == [round(p.distance_km, 3) for p in plan_stages(flat)]
    assert cut != [round(p.distance_km, 3) for p in plan_stages(climbing)]
    assert all(p.elevation_gain_m is None and p.elevation_loss_m is None for p in plan_stages(unknown))
    assert rider_time(80.0, None, 15.0, 8).riding_hours == rider_time(80.0, 0.0, 15.0, 8).riding_hours


def test_a_service_route_without_elevation_is_stored_unknown(ctx, rider):
    """A Komoot tour whose points carry no `alt`: the stored route's climbing is null, the days' too."""
    user, _ = rider
    track = np.array([(lat, lon, math.nan) for lat, lon, _ in POINTS[:900]])
    route = checked(ParsedRoute(title="T", tracks=[track]))
    with atomic():
        trip = Trip(user_id=user.id, source_type="komoot_tour", max_distance_per_day=80.0, fatigue_factor=0.9,
                    elevation_penalty=50.0)
        db.session.add(trip)
        pipeline.store_route(trip, route)
        pipeline.replace_stages(trip, pipeline.plan_days(trip))
    assert trip.route.elevation_gain is None and trip.route.elevation_loss is None
    assert all(s.elevation is None and s.start_ele is None for s in trip.stages)
    assert all(p[2] is None for s in trip.stages for p in s.geometry)


@pytest.fixture
def bare(rider):
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(bare_gpx(POINTS)), {"startDate": "2031-06-01"})
    return trip.id, headers


def test_rest_answers_null_climbing_with_the_reason(client, bare):
    trip_id, headers = bare
    body = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()
    assert len(body["stages"]) == 3
    assert body["totalElevation"] is None and body["totalElevationLoss"] is None
    assert body["elevationReason"] == REASON
    day = body["stages"][0]
    assert day["elevation"] is None and day["elevationLoss"] is None and day["elevationReason"]
    assert day["startPoint"]["ele"] is None and day["endPoint"]["ele"] is None
    assert day["ridingHours"] == pytest.approx(rider_time(day["distance"], 0.0, 15.0, 8).riding_hours, abs=0.05)
    detail = client.get(f"/api/trips/{trip_id}/stages/{day['stageId']}", headers=headers).get_json()
    assert detail["elevation"] is None and detail["elevationReason"] == REASON


def test_a_route_with_elevation_keeps_its_figures_and_no_reason(client, rider):
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(POINTS)), {})
    body = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    assert body["totalElevation"] >= 800 and body["elevationReason"] is None
    assert all(s["elevation"] is not None and s["elevationReason"] is None for s in body["stages"])


def test_mcp_answers_null_climbing_and_validate_against_their_schemas(app, client, bare):
    trip_id, _ = bare
    trip = db.session.get(Trip, trip_id)
    token = mcp_token(app, db.session.get(User, trip.user_id))
    schemas = {t.name: t.output_schema for t in TOOLS}
    digest = payload(call(client, token, "get_trip", {"id": trip_id}))
    Draft202012Validator(schemas["get_trip"]).validate(digest)
    assert digest["elevationReason"] == REASON and "totalElevation" not in digest
    assert all(line["elevation"] is None for line in digest["stages"])
    day = payload(call(client, token, "get_stage", {"tripId": trip_id, "stageId": trip.stages[0].id}))
    Draft202012Validator(schemas["get_stage"]).validate(day)
    assert day["elevation"] is None and day["elevationLoss"] is None and day["elevationReason"]
    known = import_gpx(db.session.get(User, trip.user_id), io.BytesIO(gpx_from_points(POINTS)), {})
    digest = payload(call(client, token, "get_trip", {"id": known.id}))
    assert "elevationReason" not in digest and all(line["elevation"] is not None for line in digest["stages"])
    day = payload(call(client, token, "get_stage", {"tripId": known.id, "stageId": known.stages[0].id}))
    Draft202012Validator(schemas["get_stage"]).validate(day)
    assert day["elevation"] > 0 and "elevationReason" not in day


def test_the_old_schemas_would_have_refused_the_null():
    """The schemas' nullability is needed: an integer-only `elevation` refuses the honest answer."""
    schema = next(t.output_schema for t in TOOLS if t.name == "get_stage")
    assert not Draft202012Validator({"type": "integer"}).is_valid(None)
    assert Draft202012Validator(schema["properties"]["elevation"]).is_valid(None)


@pytest.mark.parametrize("locale,words", [("en", "carries no elevation"), ("fr", "ne porte pas d'altitude")])
def test_the_share_page_says_there_is_no_elevation_instead_of_a_flat_profile(client, bare, locale, words):
    trip_id, headers = bare
    with atomic():  # the page reads in its owner's language
        db.session.get(Trip, trip_id).locale = locale
        owner = db.session.get(User, db.session.get(Trip, trip_id).user_id)
        owner.locale = locale
    code = client.post(f"/api/trips/{trip_id}/share", headers=headers).get_json()["shortCode"]
    page = client.get(f"/s/{code}").get_data(as_text=True)
    assert words in page.replace("&#39;", "'")
    assert 'class="profile"' not in page and not re.search(r"\b0 m\b", page)


def test_the_exports_write_no_invented_elevation(client, bare):
    """The shared .gpx has no <ele> (not 0.0) and the shared route's points carry ele null."""
    trip_id, headers = bare
    code = client.post(f"/api/trips/{trip_id}/share", headers=headers).get_json()["shortCode"]
    body = client.get(f"/s/{code}.gpx").get_data(as_text=True)
    assert "<trkpt" in body and "<ele>" not in body
    route = client.get(f"/api/s/{code}/route").get_json()
    assert all(p["ele"] is None for s in route["stages"] for p in s["geometry"])


def test_terrain_says_nothing_of_unknown_climbing(ctx):
    """No elevation_gain alert, no steep section, a null steepest gradient with its reason; the e-bike range is
    the flat one."""
    line = [(45.0 + i * 0.001, 5.0, None) for i in range(900)]  # ~100 km: beyond the flat 80 km range
    day = snap_stage("s1", 0, line, gain_m=None, loss_m=None)
    result = terrain.compute(snap_trip([day], ebike_mode=True), db.engine)
    codes = {f.code for f in result.alerts.get("s1", [])}
    assert terrain_alerts.ELEVATION_GAIN.code not in codes and terrain_alerts.STEEP_GRADIENT.code not in codes
    ebike = next(f for f in result.alerts["s1"] if f.code == terrain_alerts.EBIKE_RANGE_EXCEEDED.code)
    assert ebike.params["range"] == terrain.EBIKE_RANGE_KM
    data = result.data["s1"]["terrain"]
    assert data["steepestPct"] is None and i18n.t(data["elevationReason"], "en") == REASON  # kept as its key


# --- categories and dependents -------------------------------------------------------------------------------

def _statuses(trip_id, **rows):
    with atomic():
        trip = db.session.get(Trip, trip_id)
        for c in trip.computations:
            if c.name in rows:
                c.status, c.reason = rows[c.name]


def test_weather_failed_and_wind_done_is_a_failed_weather_category_everywhere(app, client, rider):
    user, headers = rider
    trip = settle(import_gpx(user, io.BytesIO(gpx_from_points(POINTS)), {"startDate": "2031-06-01"}).id)
    _statuses(trip.id, weather=("failed", "the weather service did not answer"), wind=("done", None))
    expected = {"category": "weather", "status": "failed", "reason": "the weather service did not answer"}
    body = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    assert next(c for c in body["categoryStatus"] if c["category"] == "weather") == expected
    stage_id = body["stages"][0]["stageId"]
    detail = client.get(f"/api/trips/{trip.id}/stages/{stage_id}", headers=headers).get_json()
    assert next(c for c in detail["categoryStatus"] if c["category"] == "weather") == expected
    token = mcp_token(app, db.session.get(User, user.id))
    digest = payload(call(client, token, "get_trip", {"id": trip.id}))
    day = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": stage_id}))
    assert next(c for c in digest["categoryStatus"] if c["category"] == "weather") == expected
    assert next(c for c in day["categoryStatus"] if c["category"] == "weather") == expected


def test_a_category_is_done_only_when_all_its_computations_are():
    assert block_status(["done", "done"]) == "done"
    assert block_status(["failed", "done"]) == "failed"
    assert block_status(["done", "failed"]) == "failed"
    assert block_status(["failed", "running"]) == "running"
    assert block_status([]) is None


def _with_forecast(rider, forecast_date: str, weather_status: str = "done"):
    user, _ = rider
    trip = settle(import_gpx(user, io.BytesIO(gpx_from_points(POINTS)), {"startDate": "2031-06-01"}).id)
    with atomic():
        row = db.session.get(Trip, trip.id)
        for s in row.stages:
            s.enrichment = {**(s.enrichment or {}), "weather": {"date": forecast_date, "windSpeed": 40.0,
                                                               "relativeWindDirection": "headwind",
                                                               "precipitationProbability": 90.0}}
        next(c for c in row.computations if c.name == "weather").status = weather_status
    db.session.expire_all()
    return registry.snapshot(db.session.get(Trip, trip.id))


def test_wind_and_fords_read_only_a_forecast_for_the_days_current_date(rider):
    current = _with_forecast(rider, "2031-06-01")
    assert current.stages[0].weather and current.stages[0].weather["windSpeed"] == 40.0
    moved = _with_forecast(rider, "2031-05-20")  # stored for a date the day no longer has
    assert all(s.weather is None for s in moved.stages)
    assert wind.compute(moved, None).alerts == {}  # no day looked at with another date's forecast


def test_after_a_failed_weather_run_the_dependents_read_no_forecast(rider):
    failed = _with_forecast(rider, "2031-06-01", weather_status="failed")
    assert all(s.weather is None for s in failed.stages)


def test_a_stored_line_with_unknown_elevation_snapshots_as_nan(rider):
    user, _ = rider
    trip = import_gpx(user, io.BytesIO(bare_gpx(POINTS[:900])), {})
    snap = registry.snapshot(db.session.get(Trip, trip.id))
    assert snap.stages[0].elevation_gain_m is None
    assert all(math.isnan(p[2]) for p in snap.stages[0].geometry)


def test_stage_and_route_columns_accept_null(rider):
    user, _ = rider
    trip = import_gpx(user, io.BytesIO(bare_gpx(POINTS[:900])), {})
    db.session.expire_all()
    row = db.session.query(Stage).filter_by(trip_id=trip.id).first()
    assert row.elevation is None and row.elevation_loss is None and row.end_ele is None
    assert db.session.get(Trip, trip.id).route.elevation_gain is None
    assert db.session.query(Computation).filter_by(trip_id=trip.id, name="stages").one().status == "done"
    assert date  # imported for the dated fixtures above


def test_a_routers_line_without_elevation_draws_no_flat_profile(app, client, rider, fake_valhalla, monkeypatch):
    """Valhalla gives no elevation: the day's line keeps its climbing and end elevations, and its points carry
    ele null (they were 0: a flat 0 m profile and a 0 % steepest gradient)."""
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(POINTS)), {})
    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    day = trip.stages[0]
    climbing, start_ele = day.elevation, day.start_ele
    lat, lon, _ = day.geometry[len(day.geometry) // 2]
    fake_valhalla.set_route([(day.start_lat, day.start_lon), (lat + 0.01, lon), (day.end_lat, day.end_lon)],
                            length_km=81.5)
    client.post(f"/api/trips/{trip.id}/stages/{day.id}/poi-waypoint", headers=headers,
                json={"lat": lat + 0.01, "lon": lon})
    run_jobs(app)
    day = reload(trip.id).stages[0]
    assert not day.approximate and all(p[2] is None for p in day.geometry)
    assert day.elevation == climbing > 0 and day.start_ele == start_ele


def test_a_day_added_by_hand_without_elevation_has_unknown_climbing(client, rider):
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(POINTS)), {})
    body = client.post(f"/api/trips/{trip.id}/stages", headers={**headers, "If-Match": '"1"'},
                       json={"startPoint": {"lat": 45.5, "lon": 5.5}, "endPoint": {"lat": 45.6, "lon": 5.6}})
    assert body.status_code in (200, 201), body.get_json()
    days = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()["stages"]
    added = days[-1]
    assert added["elevation"] is None and added["elevationReason"] == REASON
    assert added["startPoint"]["ele"] is None
