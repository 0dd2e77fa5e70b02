"""A lodging chosen moves the road (docs/RULES.md "Choosing an accommodation"): the day's line is routed to it on the
imported map (straight and `approximate` where the map cannot), the next day starts there, and every reader agrees
with the line: the GPX track ends on its end waypoint, the FIT course point named after the lodging lies at the
line's end, the share page's disc too, `distanceToEndPoint` is ~0 and the km grow by the detour; clearing the
choice gives the days their road back. On a generated map and on a real extract (Helsinki's centre)."""
import io
import math

import osmium
import pytest
from garmin_fit_sdk import Decoder, Stream
from lxml import etree

from tests.enrich_helpers import import_map
from tests.extracts import extract
from tests.factories import idem
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.osm_maps import MapBuilder, line_east, map_support_or_skip, offset_north
from tests.trips.services.test_pipeline import reload, run_jobs
from trips.core.db import atomic, db
from trips.readmodels import pictures
from trips.route.geo import cumulative_km, haversine_m, locate_on_line
from trips.services.sharing import share_trip
from trips.services.trips import import_gpx

LAT, LON = 45.0, 5.0
DATES = {"startDate": "2031-06-01", "endDate": "2031-06-02"}  # two days: 20 km each on the 40 km road
GPX_NS = {"g": "http://www.topografix.com/GPX/1/1"}


def east(lat: float, lon: float, metres: float) -> tuple[float, float]:
    return lat, lon + metres / (111_320.0 * math.cos(math.radians(lat)))


@pytest.fixture
def road_map(ctx, tmp_path):
    """A 40 km road east from (45.0, 5.0); at km 20.5 a side street 300 m north then 200 m east to a hotel; a
    guest house 2 km south of km 19.5, 2 km from any road."""
    road = line_east(LAT, LON, 40.0, step_m=100.0)
    m = MapBuilder(bounds=(44.9, 4.9, 45.1, 5.6))
    ids = [m.node(lat, lon) for lat, lon in road]
    m.way(ids, {"highway": "tertiary", "name": "Route du lac"})
    corner = offset_north(*road[205], 300.0)
    hotel = east(*corner, 200.0)
    m.way([ids[205], corner, hotel], {"highway": "residential", "name": "Rue du pont"})
    m.node(*hotel, {"tourism": "hotel", "name": "Hôtel du Pont"})
    lost = offset_north(*road[195], -2000.0)
    m.node(*lost, {"tourism": "guest_house", "name": "Gîte isolé"})
    import_map(m, tmp_path)
    return {"road": road, "corner": corner, "hotel": hotel, "lost": lost}


def choose(client, headers, trip_id, stage_id, version, place):
    body = {"lat": place["lat"], "lon": place["lon"]} if place else {"lat": None, "lon": None}
    response = client.patch(f"/api/trips/{trip_id}/stages/{stage_id}/accommodation", json=body,
                            headers={**headers, "If-Match": f'"{version}"'})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def candidate(stage: dict, name: str) -> dict:
    return next(c for c in stage["accommodations"] if c["name"] == name)


def assert_every_reader_ends_at(client, rider, trip_id: str, place: dict) -> None:
    """Day 1's line ends at `place`, and the GPX, the FIT course and the share page say so."""
    user, headers = rider
    trip = reload(trip_id)
    one = trip.stages[0]
    end = (one.geometry[-1][0], one.geometry[-1][1])
    assert haversine_m(*end, place["lat"], place["lon"]) < 2.0  # the line itself ends at the lodging
    assert (one.end_lat, one.end_lon) == end == (trip.stages[1].start_lat, trip.stages[1].start_lon)
    gpx = etree.fromstring(client.get(f"/api/trips/{trip_id}.gpx", headers=headers).data)
    last = gpx.xpath("//g:trk[1]//g:trkpt[last()]", namespaces=GPX_NS)[0]
    flag = gpx.xpath("//g:wpt[g:name='Day 1 end']", namespaces=GPX_NS)[0]
    assert (float(last.get("lat")), float(last.get("lon"))) == (float(flag.get("lat")), float(flag.get("lon")))
    assert haversine_m(float(last.get("lat")), float(last.get("lon")), place["lat"], place["lon"]) < 2.0
    messages, errors = Decoder(Stream.from_byte_array(bytearray(
        client.get(f"/api/trips/{trip_id}.fit", headers=headers).data))).read()
    assert errors == []
    named = next(p for p in messages["course_point_mesgs"] if place["name"].startswith(p["name"]))
    at = (named["position_lat"] * 180 / 2 ** 31, named["position_long"] * 180 / 2 ** 31)
    assert haversine_m(*at, place["lat"], place["lon"]) < 2.0
    html = client.get(f"/s/{share_trip(user, trip_id)[0].short_code}").get_data(as_text=True)
    disc = etree.HTML(html).xpath("//svg[@class='route']//g[@class='day-end']/circle")[0]
    route = [{"number": s.day_number, "geometry": s.geometry} for s in trip.stages if not s.is_rest_day]
    x, y = pictures.route_view(route)[1].xy(place["lat"], place["lon"])
    assert abs(float(disc.get("cx")) - x) < 0.2 and abs(float(disc.get("cy")) - y) < 0.2


def test_a_chosen_hotel_off_the_road_is_reached_along_the_map_s_streets(app, client, rider, road_map):
    user, headers = rider
    points = [(lat, lon, 300.0) for lat, lon in road_map["road"]]
    trip = import_gpx(user, io.BytesIO(gpx_from_points(points, name="Lac")), DATES)
    run_jobs(app)  # the analysis finds the lodgings near day 1's end on the map
    detail = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    before = [(s["distance"], s["endPoint"]) for s in detail["stages"]]
    hotel = candidate(detail["stages"][0], "Hôtel du Pont")
    assert hotel["distanceToEndPoint"] > 0.5  # found 0.8 km from the end the pacing cut

    after = choose(client, headers, trip.id, detail["stages"][0]["stageId"], 1, hotel)
    one, two = after["stages"][0], after["stages"][1]
    assert not one["approximate"] and not two["approximate"]  # routed on the map
    assert one["selectedAccommodation"]["distanceToEndPoint"] == pytest.approx(0, abs=0.002)
    # to km 20.7, back 200 m to the side street, 300 m north, 200 m east; the next morning the same way back
    assert one["distance"] == pytest.approx(21.4, abs=0.1) and two["distance"] == pytest.approx(20.0, abs=0.1)
    line = reload(trip.id).stages[0].geometry
    assert min(haversine_m(p[0], p[1], *road_map["corner"]) for p in line) < 1.0  # along the street, not across
    assert_every_reader_ends_at(client, rider, trip.id, hotel)

    cleared = choose(client, headers, trip.id, one["stageId"], 2, None)
    assert [(s["distance"], s["endPoint"]) for s in cleared["stages"]] == before
    assert cleared["stages"][0]["selectedAccommodation"] is None


def test_a_lodging_the_map_cannot_reach_is_joined_straight_and_said_approximate(app, client, rider, road_map):
    user, headers = rider
    points = [(lat, lon, 300.0) for lat, lon in road_map["road"]]
    trip = import_gpx(user, io.BytesIO(gpx_from_points(points, name="Lac")), DATES)
    run_jobs(app)
    detail = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    stage_id = detail["stages"][0]["stageId"]
    hotel = candidate(detail["stages"][0], "Hôtel du Pont")
    lost = candidate(detail["stages"][0], "Gîte isolé")
    choose(client, headers, trip.id, stage_id, 1, hotel)
    after = choose(client, headers, trip.id, stage_id, 2, lost)  # another choice: the first detour is gone
    one, two = after["stages"][0], after["stages"][1]
    assert one["approximate"] and two["approximate"]
    assert one["distance"] == pytest.approx(19.5 + 2.0, abs=0.1) and two["distance"] == pytest.approx(22.5, abs=0.1)
    line = reload(trip.id).stages[0].geometry
    assert min(haversine_m(p[0], p[1], *road_map["corner"]) for p in line) > 100  # nothing left of the first
    assert_every_reader_ends_at(client, rider, trip.id, lost)
    cleared = choose(client, headers, trip.id, stage_id, 3, None)["stages"]
    assert not cleared[0]["approximate"] and not cleared[1]["approximate"]
    assert [s["distance"] for s in cleared] == [s["distance"] for s in detail["stages"]]


def street_nodes(path) -> set[tuple[float, float]]:
    """The (lat, lon) of every node of the extract's highways, to 1e-6°."""
    found: set[tuple[float, float]] = set()

    class Ways(osmium.SimpleHandler):
        def way(self, w):
            if "highway" in w.tags:
                found.update((round(n.location.lat, 6), round(n.location.lon, 6)) for n in w.nodes
                             if n.location.valid())

    Ways().apply_file(str(path), locations=True)
    return found


def test_on_helsinki_a_hotel_off_the_day_s_line_ends_the_day_along_real_streets(app, client, rider, ctx):
    from trips.osm.importer import import_file

    map_support_or_skip(db.engine)
    path = extract("helsinki")
    import_file(db.engine, path, name="helsinki")
    _, headers = rider
    # Across the centre from Kamppi to Kaisaniemi and back south, routed on the extract's streets
    body = {"waypoints": [{"lat": 60.1665, "lon": 24.9365}, {"lat": 60.1745, "lon": 24.9440},
                          {"lat": 60.1700, "lon": 24.9510}], **DATES}
    created = client.post("/api/trips", json=body, headers={**headers, **idem()})
    assert created.status_code == 202, created.get_json()
    run_jobs(app)
    db.session.rollback()  # a new snapshot: the jobs' commits
    detail = client.get(f"/api/trips/{created.get_json()['id']}", headers=headers).get_json()
    assert [leg["how"] for leg in detail["routing"]] == ["routed", "routed"] and len(detail["stages"]) == 2
    first = reload(detail["id"]).stages[0]
    line = [(p[0], p[1], 0.0) for p in first.geometry] + [
        (p[0], p[1], 0.0) for p in reload(detail["id"]).stages[1].geometry[1:]]
    cum = cumulative_km(line)

    def off_line_m(place):
        return locate_on_line(line, cum, place["lat"], place["lon"], None, 0.0)[1]

    hotels = [c for c in detail["stages"][0]["accommodations"] if c["type"] in ("hotel", "hostel")]
    assert hotels, "the extract's hotels are the day's candidates"
    hotel = max(hotels, key=off_line_m)  # the one farthest off the two days' road
    assert off_line_m(hotel) > 30
    total = sum(s["distance"] for s in detail["stages"])

    after = choose(client, headers, detail["id"], first.id, 1, hotel)
    one, two = after["stages"][0], after["stages"][1]
    assert not one["approximate"] and one["selectedAccommodation"]["distanceToEndPoint"] < 0.002
    assert two["startPoint"] == one["endPoint"]
    assert sum(s["distance"] for s in after["stages"]) > total + 2 * off_line_m(hotel) / 1000 - 0.15
    streets = street_nodes(path)
    detour = reload(detail["id"]).stages[0].geometry
    tail = [(round(p[0], 6), round(p[1], 6)) for p in detour[-12:-2]]  # the way to it, but the foot and the door
    assert sum(p in streets for p in tail) >= len(tail) - 2  # the extract's own street corners
    assert_every_reader_ends_at(client, rider, detail["id"], hotel)
    cleared = choose(client, headers, detail["id"], first.id, 2, None)["stages"]
    assert [s["distance"] for s in cleared] == [s["distance"] for s in detail["stages"]]


def test_with_a_routing_service_the_road_to_a_lodging_is_asked_before_the_trip_lock(app, client, rider, fake_valhalla,
                                                                                   monkeypatch):
    """Choosing, choosing another and clearing: the service is asked before the write chain, never under the lock
    (no trip lock nor transaction held across a remote answer: docs/RULES.md "Editing a day's points")."""
    from trips.services import day_points, stages as stage_ops

    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400, step_m=100.0), name="Lac")), {})
    first, lengths = trip.stages[0], [round(s.distance, 1) for s in trip.stages]
    places = [{"name": name, "type": "hotel", "lat": round(first.end_lat + dlat, 6), "lon": round(first.end_lon, 6)}
              for name, dlat in (("Near", 0.01), ("Far", -0.015))]
    with atomic():
        db.session.get(type(first), first.id).accommodations = places
    order = []
    real_join, real_write = day_points._join, stage_ops.guarded_write
    monkeypatch.setattr(day_points, "_join", lambda a, b: order.append("route") or real_join(a, b))
    monkeypatch.setattr(stage_ops, "guarded_write", lambda ctx: order.append("lock") or real_write(ctx))
    for version, place in enumerate([places[0], places[1], None], start=1):
        target = place or places[1]
        fake_valhalla.set_route([(first.end_lat, first.end_lon, 0.0), (target["lat"], target["lon"], 0.0)])
        order.clear()
        answer = choose(client, headers, trip.id, first.id, version, place)
        assert order[-1] == "lock" and "route" not in order[order.index("lock"):], (place, order)
        assert (answer["stages"][0]["selectedAccommodation"] or {}).get("name") == (place or {}).get("name")
    assert [s["distance"] for s in answer["stages"]] == lengths
