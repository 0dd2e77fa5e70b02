"""Trips planned from places (docs/RULES.md "Trips from places"): create_trip and POST /api/trips with `waypoints`,
routed on a generated map, paced and analysed like any route; a stretch the map does not route is joined straight and
said so; bad input is refused by name. On SQLite and on PostGIS (pgRouting where installed)."""
import math

import pytest
from lxml import etree

from tests.factories import idem, make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.osm_maps import MapBuilder, line_east, map_support_or_skip
from tests.trips.services.test_pipeline import reload, run_jobs
from trips.core import i18n
from trips.core.db import db
from trips.osm.importer import import_file
from trips.services import planned
from trips.services.sharing import share_trip

LAT, LON = 45.0, 5.0
ROAD_KM = 70.0
BOUNDS = (44.9, 4.9, 45.1, 6.0)


def along(km: float) -> dict:
    """The point `km` east of the road's west end, on the road."""
    return {"lat": LAT, "lon": round(LON + km / (111.32 * math.cos(math.radians(LAT))), 6)}


@pytest.fixture
def road_map(ctx, tmp_path):
    """A 70 km road east from (45.0, 5.0), a village at each end, imported; the area's box reaches 11 km north
    of it, where no road is."""
    map_support_or_skip(db.engine)
    m = MapBuilder(bounds=BOUNDS)
    m.way(line_east(LAT, LON, ROAD_KM, step_m=200.0), {"highway": "tertiary"})
    m.node(LAT + 0.002, LON, {"place": "village", "name": "Alphaville"})
    end = along(ROAD_KM)
    m.node(LAT + 0.002, end["lon"], {"place": "village", "name": "Betaville"})
    import_file(db.engine, m.write(tmp_path / "road.osm.pbf"))
    return m


def create(client, headers, body, status=202):
    response = client.post("/api/trips", json=body, headers={**headers, **idem()})
    assert response.status_code == status, response.get_json()
    return response.get_json()


def test_a_trip_from_three_points_on_the_map_is_routed_paced_and_named(app, client, rider, road_map):
    _, headers = rider
    body = create(client, headers, {"waypoints": [along(0), along(35), along(ROAD_KM)], "maxDistancePerDay": 30})
    assert body["sourceType"] == "waypoints" and body["sourceUrl"] is None and body["partial"] is True
    assert body["waypoints"] == [along(0), along(35), along(ROAD_KM)]
    run_jobs(app)
    trip = reload(body["id"])
    assert {c.name: c.status for c in trip.computations}["route"] == "done"
    assert abs(trip.route.distance_km - ROAD_KM) < 1.0  # along the road, not through the field
    assert trip.title == "Alphaville → Betaville"
    assert len(trip.stages) == 3 and trip.status == "ready"
    assert not any(s.approximate for s in trip.stages)
    detail = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    assert [leg["how"] for leg in detail["routing"]] == ["routed", "routed"]
    assert [(leg["from"], leg["to"]) for leg in detail["routing"]] == [(1, 2), (2, 3)]
    assert abs(sum(leg["km"] for leg in detail["routing"]) - ROAD_KM) < 1.0
    assert detail["sourceType"] == "waypoints" and detail["totalDistance"] == pytest.approx(ROAD_KM, abs=1.0)


def test_a_point_off_every_road_is_joined_straight_and_the_days_over_it_say_approximate(app, client, rider,
                                                                                          road_map):
    _, headers = rider
    off = {"lat": LAT + 0.1, "lon": along(60)["lon"]}  # 11 km north of the road, inside the imported box
    body = create(client, headers, {"waypoints": [along(0), along(55), off], "maxDistancePerDay": 30})
    run_jobs(app)
    trip = reload(body["id"])
    detail = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    how = [leg["how"] for leg in detail["routing"]]
    assert how[0] == "routed"
    assert how[1].startswith("joined straight, approximate: no road within 500 m of the end")
    assert [s.approximate for s in trip.stages][-1] is True  # the last day rides the straight stretch
    assert trip.stages[0].approximate is False  # the first 30 km are on the road


def dashed(client, user, trip_id) -> dict[int, int]:
    """{day number: the straight joins the share page's map draws dashed on it}."""
    html = client.get(f"/s/{share_trip(user, trip_id)[0].short_code}").get_data(as_text=True)
    svg = etree.HTML(html).xpath("//svg[@class='route']")[0]
    out, day = {}, 0
    for element in svg.iter():
        if element.get("class") == "day-line":
            day += 1
        elif element.get("class") == "day-straight":
            assert element.xpath("./polyline[@stroke-dasharray]")
            out[day] = out.get(day, 0) + 1
    return out


def test_a_straight_join_is_drawn_dashed_and_a_routed_day_is_not(app, client, rider, road_map):
    user, headers = rider
    off = {"lat": LAT + 0.1, "lon": along(60)["lon"]}  # 11 km north of the road: joined straight
    straight = create(client, headers, {"waypoints": [along(0), along(55), off], "maxDistancePerDay": 30})
    routed = create(client, headers, {"waypoints": [along(0), along(ROAD_KM)], "maxDistancePerDay": 40})
    run_jobs(app)
    trip = reload(straight["id"])
    assert [s.approximate for s in trip.stages] == [False, False, True]
    assert dashed(client, user, trip.id) == {3: 1}  # the last day's straight stretch, nothing else
    assert dashed(client, user, routed["id"]) == {}


def test_a_point_off_the_road_is_joined_to_it_straight_and_said_so(app, client, rider, road_map):
    """A point 330 m off the road (within the 500 m a point is snapped from): the legs are routed, but the way from
    the point to the road is a straight line, said so, its days approximate and drawn dashed there."""
    user, headers = rider
    aside = {"lat": round(LAT + 0.003, 6), "lon": along(35)["lon"]}
    body = create(client, headers, {"waypoints": [along(0), aside, along(ROAD_KM)], "maxDistancePerDay": 40})
    run_jobs(app)
    trip = reload(body["id"])
    how = [leg["how"] for leg in client.get(f"/api/trips/{trip.id}", headers=headers).get_json()["routing"]]
    assert how == ["routed, joined straight for the 0.3 km from its road to point 2: approximate",
                   "routed, joined straight for the 0.3 km from point 2 to its road: approximate"]
    assert [s.approximate for s in trip.stages] == [True, False]  # the first 40 km ride to the point and back
    assert dashed(client, user, trip.id) == {1: 2}  # points on the road: "routed", nothing dashed (the tests above)
    french = client.get(f"/api/trips/{trip.id}", headers={**headers, "Accept-Language": "fr"}).get_json()
    assert french["routing"][1]["how"] == ("tracé sur les routes, relié en ligne droite sur les 0,3 km du point 2 à sa "
                                           "route\u00a0: approximatif")


def test_create_trip_over_mcp_with_waypoints_answers_the_same_trip_again_and_get_trip_says_how(app, client,
                                                                                               road_map):
    user = make_user("planner@example.org")
    token = mcp_token(app, user)
    args = {"waypoints": [along(0), along(ROAD_KM)], "maxDistancePerDay": 40}
    first = payload(call(client, token, "create_trip", args))
    again = payload(call(client, token, "create_trip", dict(reversed(list(args.items())))))
    assert first["id"] == again["id"]  # the derived idempotency key covers the waypoints
    other = payload(call(client, token, "create_trip", {**args, "waypoints": [along(0), along(50)]}))
    assert other["id"] != first["id"]
    run_jobs(app)
    db.session.rollback()  # the test's app context is the requests': end its read snapshot
    digest = payload(call(client, token, "get_trip", {"id": first["id"]}))
    assert digest["sourceType"] == "waypoints" and digest["stageCount"] == 2
    assert digest["routing"] == [{"from": 1, "to": 2, "km": pytest.approx(ROAD_KM, abs=1.0), "how": "routed"}]


@pytest.mark.parametrize("waypoints, field", [
    ([{"lat": 48.85, "lon": 2.35}, along(10)], "waypoints[0]"),  # Paris: no imported area holds it
    ([along(10), {"lat": 10.0, "lon": -30.0}], "waypoints[1]"),  # the Atlantic
])
def test_a_point_no_imported_area_holds_is_refused_by_name(client, rider, road_map, waypoints, field):
    _, headers = rider
    problem = create(client, headers, {"waypoints": waypoints}, status=422)
    assert problem["errors"][field] == i18n.t(planned.NOT_COVERED, "en")
    assert "import a region" in i18n.t(planned.NOT_COVERED, "en")


def test_without_any_map_a_trip_from_places_is_refused_and_nothing_is_kept(client, rider):
    _, headers = rider
    problem = create(client, headers, {"waypoints": [along(0), along(10)]}, status=422)
    assert problem["errors"] == {"waypoints[0]": i18n.t(planned.NOT_COVERED, "en")}
    assert client.get("/api/trips", headers=headers).get_json()["totalItems"] == 0


@pytest.mark.parametrize("body, field", [
    ({"waypoints": [along(0)]}, "waypoints"),  # one point
    ({"waypoints": [along(i * 0.1) for i in range(51)]}, "waypoints"),  # 51 points
    ({"waypoints": [{"lat": 91, "lon": 5}, along(1)]}, "waypoints[0].lat"),
    ({"waypoints": [{"lat": 45, "lon": "east"}, along(1)]}, "waypoints[0].lon"),
    ({"waypoints": [{"lat": 45}, along(1)]}, "waypoints[0].lon"),
    ({"waypoints": [{"lat": 45, "lon": 5, "name": "x" * 10_000}, along(1)]}, "waypoints[0].name"),
    ({"waypoints": "45,5;46,6"}, "waypoints"),
    ({"waypoints": [along(0), along(5)], "sourceUrl": "https://www.komoot.com/tour/1"}, "sourceUrl"),
    ({"title": "Nothing to ride"}, "body"),
])
def test_malformed_waypoints_are_refused_by_name_without_echoing_them(client, rider, road_map, body, field):
    _, headers = rider
    problem = create(client, headers, body, status=422)
    assert field in problem["errors"], problem
    assert "x" * 100 not in str(problem)


def test_fifty_points_in_a_line_and_the_same_point_twice_are_answered_never_a_500(app, client, rider, road_map):
    _, headers = rider
    fifty = create(client, headers, {"waypoints": [along(i * 1.4) for i in range(50)], "maxDistancePerDay": 30})
    twice = create(client, headers, {"waypoints": [along(20), along(20)]})
    run_jobs(app)
    routed = reload(fifty["id"])
    assert abs(routed.route.distance_km - 49 * 1.4) < 1.0 and len(routed.route_legs) == 49
    assert all(leg["routed"] for leg in routed.route_legs)
    same = reload(twice["id"])
    states = {c.name: (c.status, c.reason) for c in same.computations}
    # nothing to ride: the route is drawn (0 km) and the cutting says why there are no days, as for any route
    assert states["route"][0] == "done" and states["stages"][0] in ("done", "failed")
    assert client.get(f"/api/trips/{same.id}", headers=headers).status_code == 200


def test_with_valhalla_configured_any_points_are_routed_by_it_through_every_point(app, client, rider,
                                                                                  fake_valhalla, monkeypatch):
    """BTP_VALHALLA_URL still wins: no imported map is needed, the service routes through each point in order."""
    _, headers = rider
    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    road = [(46.0, 6.0, 0.0), (46.2, 6.1, 0.0), (46.4, 6.3, 0.0), (46.6, 6.5, 0.0)]
    fake_valhalla.set_route(road, length_km=77.0)
    points = [{"lat": 46.0, "lon": 6.0}, {"lat": 46.3, "lon": 6.2}, {"lat": 46.6, "lon": 6.5}]
    body = create(client, headers, {"waypoints": points, "maxDistancePerDay": 40})
    run_jobs(app)
    trip = reload(body["id"])
    assert [loc["type"] for loc in fake_valhalla.bodies[0]["locations"]] == ["break", "through", "break"]
    assert [(loc["lat"], loc["lon"]) for loc in fake_valhalla.bodies[0]["locations"]] == [(46.0, 6.0), (46.3, 6.2),
                                                                                           (46.6, 6.5)]
    assert trip.route_legs == [{"from": 1, "to": 3, "fromKm": 0.0, "toKm": 77.0, "routed": True, "why": None,
                                "straightKm": []}]
    assert trip.route.elevation_gain is None  # the service gives no elevation: unknown, never 0
    assert len(trip.stages) >= 2 and not any(s.approximate for s in trip.stages)
