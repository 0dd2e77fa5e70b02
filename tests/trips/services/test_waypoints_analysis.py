"""Waypoint reroutes (Valhalla or a straight detour) and the analysis framework (statuses, supersession)."""
import io
from dataclasses import replace

import pytest

from jobs.tasks import reroute_stage, run_enrichment
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.trips.services.test_pipeline import reload, run_jobs, statuses
from trips.enrich import registry
from trips.core.db import atomic, db
from trips.models import Stage
from trips.services.trips import import_gpx
from trips.core.stored_texts import said_stored

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Waypoints")


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(GPX), {})


def waypoint(client, headers, trip, stage, lat, lon):
    return client.post(f"/api/trips/{trip.id}/stages/{stage.id}/poi-waypoint", headers=headers,
                       json={"lat": lat, "lon": lon})


def snapshot(stage) -> dict:
    """The day's values now (the ORM object itself is refreshed by later reads)."""
    return {"geometry": [list(p) for p in stage.geometry], "start": (stage.start_lat, stage.start_lon),
            "end": (stage.end_lat, stage.end_lon), "elevation": stage.elevation}


def near(stage, dlat=0.01):
    lat, lon, _ = stage.geometry[len(stage.geometry) // 2]
    return lat + dlat, lon


def test_without_a_router_the_detour_is_straight_and_approximate(app, client, rider, trip):
    _, headers = rider
    stage = trip.stages[0]
    before = snapshot(stage)
    lat, lon = near(stage)
    response = waypoint(client, headers, trip, stage, lat, lon)
    assert response.status_code == 202 and response.headers["ETag"] == '"1"'  # the version does not move
    run_jobs(app)
    fresh = reload(trip.id)
    day = fresh.stages[0]
    assert statuses(fresh)["route_segment"] == ("done", None)
    assert day.approximate and day.geometry[1][:2] == [round(lat, 6), round(lon, 6)] and len(day.geometry) == 3
    assert (day.start_lat, day.start_lon) == before["start"] and (day.end_lat, day.end_lon) == before["end"]
    assert day.distance > 0 and fresh.version == 1
    detail = client.get(f"/api/trips/{trip.id}/stages/{day.id}", headers=headers).get_json()
    assert detail["approximate"] is True
    assert detail["routing"] == ["start → waypoint: joined straight: approximate (no map to route on)",
                                 "waypoint → end: joined straight: approximate (no map to route on)"]


def test_with_valhalla_the_day_follows_the_route(app, client, rider, trip, fake_valhalla, monkeypatch):
    _, headers = rider
    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    stage = trip.stages[0]
    before = snapshot(stage)
    lat, lon = near(stage)
    road = [(stage.start_lat + 0.0001, stage.start_lon), (lat, lon), (stage.end_lat, stage.end_lon + 0.0001)]
    fake_valhalla.set_route(road, length_km=81.5)
    waypoint(client, headers, trip, stage, lat, lon)
    run_jobs(app)
    day = reload(trip.id).stages[0]
    assert not day.approximate and len(day.geometry) == 5
    assert tuple(day.geometry[0][:2]) == before["start"]  # the ends are pinned to the markers
    assert tuple(day.geometry[-1][:2]) == before["end"]
    assert day.geometry[2][:2] == [lat, lon]
    assert day.elevation == before["elevation"] > 0  # the router gives no elevation: climbing is kept
    assert [loc["type"] for loc in fake_valhalla.bodies[0]["locations"]] == ["break", "through", "break"]
    assert [said_stored(s, "en") for s in day.waypoint["stretches"]] == [  # kept in no language
        "start → waypoint: routed by the routing service", "waypoint → end: routed by the routing service"]


def test_a_router_failure_is_a_readable_failed_status(app, client, rider, trip, fake_valhalla, monkeypatch):
    _, headers = rider
    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    fake_valhalla.fail(400, error_code=442)
    stage = trip.stages[0]
    before = snapshot(stage)
    waypoint(client, headers, trip, stage, *near(stage))
    run_jobs(app)
    fresh = reload(trip.id)
    state, reason = statuses(fresh)["route_segment"]
    assert state == "failed" and "route" in reason.lower()
    assert fresh.stages[0].geometry == before["geometry"]


def test_a_newer_waypoint_wins_over_a_late_job(app, client, rider, trip):
    _, headers = rider
    stage = trip.stages[0]
    before, first_point, second_point = snapshot(stage), near(stage, 0.01), near(stage, -0.01)
    waypoint(client, headers, trip, stage, *first_point)
    first_request = reload(trip.id).stages[0].waypoint["requestId"]
    waypoint(client, headers, trip, stage, *second_point)
    reroute_stage(trip.id, stage.id, first_request)  # the older job runs late: it must not write
    assert reload(trip.id).stages[0].geometry == before["geometry"]
    run_jobs(app)
    assert reload(trip.id).stages[0].geometry[1][:2] == [round(v, 6) for v in second_point]


@pytest.mark.parametrize("body,field", [({"lat": 91, "lon": 5}, "lat"), ({"lat": 45}, "lon"),
                                        ({"lat": 10.0, "lon": 10.0}, "lat"), ({"lat": 45, "lon": 5, "x": 1}, "x")])
def test_waypoint_refusals(client, rider, trip, body, field):
    _, headers = rider
    response = client.post(f"/api/trips/{trip.id}/stages/{trip.stages[0].id}/poi-waypoint", headers=headers,
                           json=body)
    assert response.status_code == 422 and field in response.get_json()["errors"]


@pytest.fixture
def enrichments(monkeypatch):
    """Two stand-in enrichments in the registry: terrain records its calls and finds one fact a day."""
    from trips.enrich.contract import AlertFact, Result

    calls = []

    def terrain(snap, engine):
        calls.append(snap.id)
        result = Result()
        for stage in snap.stages:
            result.add(AlertFact("elevation_gain", stage.id, {"gain": 1}))
            result.data[stage.id] = {"terrain": {"analyzed": True}}
        return result

    fake = {"terrain": replace(registry.ENRICHMENTS["terrain"], compute=terrain),
            "cultural_pois": replace(registry.ENRICHMENTS["cultural_pois"], compute=lambda snap, engine: Result())}
    monkeypatch.setattr(registry, "ENRICHMENTS", fake)
    return calls


def test_analyze_resets_and_runs_the_enrichments(app, client, rider, trip, enrichments):
    _, headers = rider
    response = client.post(f"/api/trips/{trip.id}/analyze", headers=headers)
    assert response.status_code == 202
    body = response.get_json()
    assert {c["name"]: c["status"] for c in body["computations"]}["terrain"] == "pending"
    assert {"category": "terrain_security", "status": "running"} in body["categoryStatus"]
    run_jobs(app)
    fresh = reload(trip.id)
    assert statuses(fresh)["terrain"] == ("done", None) and statuses(fresh)["cultural_pois"] == ("done", None)
    assert enrichments == [trip.id] and fresh.version == 1
    # beside the dispatch's measure of the day's map coverage (docs/RULES.md "Map coverage": no map imported here)
    assert fresh.stages[0].enrichment == {"terrain": {"analyzed": True}, "mapCoverage": {
        "share": 0.0, "offMapKm": fresh.stages[0].enrichment["mapCoverage"]["offMapKm"]}}
    assert fresh.stages[0].alerts_by_group == {"terrain": [{"code": "elevation_gain", "params": {"gain": 1}}]}


def test_analyze_refusals(app, client, rider, trip, enrichments):
    from trips import computations

    _, headers = rider
    with atomic():
        stored = db.session.get(type(trip), trip.id)
        computations.initialize(stored, ("terrain",), stored.generation)
        computations.transition(trip.id, "terrain", stored.generation, "running")
    assert client.post(f"/api/trips/{trip.id}/analyze", headers=headers).status_code == 409
    with atomic():
        for stage in db.session.get(type(trip), trip.id).stages:
            db.session.delete(stage)
    assert client.post(f"/api/trips/{trip.id}/analyze", headers=headers).status_code == 422


def test_a_pacing_change_supersedes_the_enrichments(app, client, rider, trip, enrichments):
    _, headers = rider
    client.post(f"/api/trips/{trip.id}/analyze", headers=headers)
    client.patch(f"/api/trips/{trip.id}", json={"maxDistancePerDay": 120}, headers={**headers, "If-Match": '"1"'})
    fresh = reload(trip.id)
    assert statuses(fresh)["terrain"] == ("superseded", None)
    run_enrichment(trip.id, "terrain", 1)  # the old generation's job: writes nothing
    assert enrichments == [] and statuses(reload(trip.id))["terrain"] == ("superseded", None)


def test_geocode_search_offline(client, rider):
    _, headers = rider
    response = client.get("/api/geocode/search?q=Grenoble&limit=3", headers=headers)
    assert response.status_code == 200
    body = response.get_json()
    assert body["member"][0]["name"] == "Grenoble" and body["totalItems"] == len(body["member"]) <= 3
    missing = client.get("/api/geocode/search", headers=headers)
    assert missing.status_code == 400 and "q" in missing.get_json()["errors"]
    bad = client.get("/api/geocode/search?q=Lyon&limit=11", headers=headers)
    assert bad.status_code == 400 and "limit" in bad.get_json()["errors"]
    extra = client.get("/api/geocode/search?q=Lyon&format=xml", headers=headers)
    assert extra.status_code == 400 and "format" in extra.get_json()["errors"]
    assert client.get("/api/geocode/search?q=Lyon").status_code == 401


def test_stage_detail_is_read_through_its_own_endpoint(client, rider, trip):
    _, headers = rider
    stage = db.session.get(Stage, trip.stages[2].id)
    body = client.get(f"/api/trips/{trip.id}/stages/{stage.id}", headers=headers).get_json()
    assert body["dayNumber"] == 3 and body["tripId"] == trip.id and "geometry" not in body


def _map_of_the_day(tmp_path, stage, until: float = 1.0):
    """The imported map: the day's own line as a secondary road up to `until` of its points, and a 1 km side
    street north from its middle point. Returns the side street's end."""
    from tests.osm_maps import MapBuilder, map_support_or_skip
    from trips.osm.importer import import_file

    map_support_or_skip(db.engine)
    pts = [tuple(p[:2]) for p in stage.geometry]
    middle = len(pts) // 2
    m = MapBuilder()
    ids = [m.node(lat, lon) for lat, lon in pts[:max(2, int(len(pts) * until))]]
    m.way(ids, {"highway": "secondary"})
    end = (pts[middle][0] + 0.009, pts[middle][1])
    m.way([ids[middle], end], {"highway": "residential"})
    import_file(db.engine, m.write(tmp_path / "day.osm.pbf"))
    return end


def test_with_the_imported_map_the_day_follows_its_roads(app, client, rider, trip, tmp_path):
    _, headers = rider
    stage = trip.stages[0]
    before, km = snapshot(stage), stage.distance
    lat, lon = _map_of_the_day(tmp_path, stage)
    waypoint(client, headers, trip, stage, lat, lon)
    run_jobs(app)
    fresh = reload(trip.id)
    day = fresh.stages[0]
    assert statuses(fresh)["route_segment"] == ("done", None) and not day.approximate
    assert len(day.geometry) > 100 and [lat, lon] in [p[:2] for p in day.geometry]
    assert (day.start_lat, day.start_lon) == before["start"] and (day.end_lat, day.end_lon) == before["end"]
    assert day.distance == pytest.approx(km + 2.0, abs=0.3)  # the side street there and back
    assert day.elevation == before["elevation"] > 0  # the router gives no elevation: climbing is kept


def test_a_day_the_map_covers_in_part_is_routed_in_part_and_approximate(app, client, rider, trip, tmp_path):
    _, headers = rider
    stage = trip.stages[0]
    lat, lon = _map_of_the_day(tmp_path, stage, until=0.6)  # the map ends 40 % before the day's end
    waypoint(client, headers, trip, stage, lat, lon)
    run_jobs(app)
    day = reload(trip.id).stages[0]
    assert day.approximate and [lat, lon] in [p[:2] for p in day.geometry] and len(day.geometry) > 10  # not 3: routed in part
    detail = client.get(f"/api/trips/{trip.id}/stages/{day.id}", headers=headers).get_json()
    assert detail["routing"][0] == "start → waypoint: routed on the map"  # the answer says which stretch is which
    assert detail["routing"][1].startswith("waypoint → end: joined straight: approximate (no road within 500 m")
