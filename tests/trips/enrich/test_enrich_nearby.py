"""Services near each day (docs/RULES.md "Services near each day"): water gaps, a repair-capable bike shop, cultural
places, a railway station, a health service, each raised and not raised just under its threshold, on generated map
data."""
import math

import pytest

from tests.enrich_helpers import bounds_around, engine, import_map, trip_east
from tests.osm_maps import MapBuilder, offset_north
from trips.enrich import bike_shops, cultural_pois, health_services, railway_stations, water_points
from trips.enrich.alerts.catalogue import render
from trips.enrich.corridor import haversine_m

LAT, LON = 45.0, 5.0
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))


def at(km: float, north_m: float = 0.0) -> tuple[float, float]:
    return offset_north(LAT, LON + km * 1000 / PER_DEG_LON, north_m)


def run(module, tmp_path, snap, nodes=()):
    m = MapBuilder(bounds=bounds_around(snap))
    m.node(*at(0, 30_000), {"tourism": "hotel"})  # the map is never empty, and has none of these services
    for point, tags in nodes:
        m.node(*point, tags)
    import_map(m, tmp_path)
    return module.compute(snap, engine())


def codes(result, sid):
    return [f.code for f in result.alerts[sid]]


WATER = {"amenity": "drinking_water"}


@pytest.mark.parametrize("km, raised", [(30.5, True), (29.5, False)])
def test_a_day_without_water(ctx, tmp_path, km, raised):
    result = run(water_points, tmp_path, trip_east(LAT, LON, [km]), [(at(10, 2100), WATER)])  # off corridor
    assert codes(result, "s1") == (["water_point_gap"] if raised else [])
    if raised:
        fact = result.alerts["s1"][0]
        assert fact.params == {"threshold": 30.0, "gap": 30.5, "fromKm": 0.0, "toKm": 30.5}
        assert fact.action == {"kind": "navigate", "lat": pytest.approx(at(10, 2100)[0], abs=1e-6),
                               "lon": pytest.approx(at(10, 2100)[1], abs=1e-6)}  # the nearest, off the route
        assert render(fact.as_json(), 1)["message"].startswith(
            "Stretch of over 30 km without a detected drinking-water source on stage 1")


@pytest.mark.parametrize("water_km, raised", [(19.4, True), (20.6, False)])
def test_the_gap_after_the_last_water(ctx, tmp_path, water_km, raised):
    """50 km with water at km 10 and at `water_km`: the last stretch is 30.6 km (raised) or 29.4 km."""
    result = run(water_points, tmp_path, trip_east(LAT, LON, [50]),
                 [(at(10, 1900), WATER), (at(water_km, 50), {"man_made": "water_tap", "drinking_water": "yes"})])
    assert codes(result, "s1") == (["water_point_gap"] if raised else [])
    if raised:
        fact = result.alerts["s1"][0]
        assert fact.params["fromKm"] == pytest.approx(water_km, abs=0.21)  # the nearest vertex, every 200 m
        assert fact.params["toKm"] == pytest.approx(50, abs=0.2)  # the line, a little over its nominal 50 km
        assert (fact.action["lat"], fact.action["lon"]) == pytest.approx(at(water_km, 50), abs=1e-6)


def test_gaps_at_the_start_and_between_points_and_rest_days(ctx, tmp_path):
    snap = trip_east(LAT, LON, [45, 0, 45], rest=(1,))
    result = run(water_points, tmp_path, snap, [(at(31, 0), WATER), (at(80, 0), WATER), (at(90, 0), WATER)])
    assert result.alerts["s1"][0].params["fromKm"] == 0.0  # 31 km from the start to the first
    assert result.alerts["s2"] == []  # a rest day: no riding rule
    fact = result.alerts["s3"][0]  # day 3 starts at km 45: water at 35 (80) and 45 (90) of the day
    assert fact.params["fromKm"] == 0.0 and fact.params["toKm"] == pytest.approx(35, abs=0.21)


def shop_trip(days: int):
    return trip_east(LAT, LON, [20] * days)  # day 1's midpoint is km 10


@pytest.mark.parametrize("north_m, raised", [(2050, True), (1950, False)])
def test_no_repair_shop_within_2_km_of_the_midpoint(ctx, tmp_path, north_m, raised):
    snap = shop_trip(6)
    mid = snap.stages[0].midpoint
    shop = offset_north(*mid, north_m)
    assert haversine_m(*mid, *shop) == pytest.approx(north_m, abs=15)
    result = run(bike_shops, tmp_path, snap, [(shop, {"shop": "bicycle", "name": "Cycles Martin"})])
    assert codes(result, "s1") == (["bike_shop_none_nearby"] if raised else [])
    assert codes(result, "s6") == ["bike_shop_none_nearby"]  # day 6 is far from it
    if raised:
        assert result.alerts["s1"][0].action == {"kind": "navigate", "lat": pytest.approx(shop[0], abs=1e-6),
                                                 "lon": pytest.approx(shop[1], abs=1e-6)}


def test_bike_shops_only_on_trips_over_five_days_and_repair_capable(ctx, tmp_path):
    short = run(bike_shops, tmp_path, shop_trip(5))
    assert all(v == [] for v in short.alerts.values()) and len(short.alerts) == 5
    snap = trip_east(LAT, LON, [20, 0, 20, 20, 20, 20], rest=(1,))
    no_repair = (offset_north(*snap.stages[0].midpoint, 300),
                 {"shop": "bicycle", "service:bicycle:repair": "no"})
    result = run(bike_shops, tmp_path, snap, [no_repair])
    assert codes(result, "s1") == ["bike_shop_none_nearby"]  # a shop that does not repair
    assert codes(result, "s2") == []  # the rest day


def test_every_riding_day_keeps_its_bike_shops_in_route_order(ctx, tmp_path):
    """`bikeShops` lists what a rider can reach from the day (within 2 km of the line), on every trip length; a
    shop 2.1 km off is not listed; a rest day keeps none."""
    snap = trip_east(LAT, LON, [20, 0, 20], rest=(1,))
    result = run(bike_shops, tmp_path, snap, [
        (at(15, 800), {"shop": "bicycle", "name": "Vélo Sud", "phone": "+33 4 75 00 00 00"}),
        (at(4, -300), {"amenity": "bicycle_repair_station"}),
        (at(8, 2100), {"shop": "bicycle", "name": "Too Far"}),
        (at(30, 100), {"shop": "bicycle", "service:bicycle:repair": "no", "name": "Sells Only"})])
    first = result.data["s1"]["bikeShops"]
    assert [(s["kind"], s["name"]) for s in first] == [("repair_station", None), ("repair", "Vélo Sud")]
    assert first[0]["km"] == pytest.approx(4, abs=0.25) and first[1]["km"] == pytest.approx(15, abs=0.25)
    assert first[1]["phone"] == "+33 4 75 00 00 00"
    assert result.data["s2"]["bikeShops"] == []  # the rest day
    assert [(s["kind"], s["name"]) for s in result.data["s3"]["bikeShops"]] == [("shop", "Sells Only")]
    assert all(v == [] for v in result.alerts.values())  # three days: the repair rule is for longer trips


CULTURE = [({"tourism": "museum", "name": "Musée"}, 100), ({"historic": "castle", "name": "Château"}, 450),
           ({"amenity": "place_of_worship", "religion": "christian", "name": "Église"}, 200),
           ({"tourism": "viewpoint", "name": "Belvédère"}, 300)]


@pytest.mark.parametrize("north_m, raised", [(490, True), (510, False)])
def test_cultural_place_within_500_m(ctx, tmp_path, north_m, raised):
    result = run(cultural_pois, tmp_path, trip_east(LAT, LON, [20]),
                 [(at(5, north_m), {"historic": "monument", "name": "Monument aux morts"})])
    assert codes(result, "s1") == (["cultural_poi_suggestion"] if raised else [])
    if raised:
        fact = result.alerts["s1"][0]
        assert fact.params == {"name": "Monument aux morts", "type": "monument", "distance": 490}
        assert render(fact.as_json(), 1)["message"] == (
            "Cultural POI nearby on stage 1: Monument aux morts (monument, 490 m from route).")


def test_at_most_three_cultural_places_a_day(ctx, tmp_path):
    nodes = [(at(2 + i, north), tags) for i, (tags, north) in enumerate(CULTURE)]
    nodes.append((at(8, 20), {"tourism": "attraction"}))  # unnamed: ranked after the named ones
    result = run(cultural_pois, tmp_path, trip_east(LAT, LON, [20, 0], rest=(1,)), nodes)
    assert [f.params["name"] for f in result.alerts["s1"]] == ["Musée", "Église", "Belvédère"]  # route order
    day = result.data["s1"]["culturalPois"]
    assert [p["type"] for p in day] == ["museum", "church", "viewpoint"]
    assert set(day[0]) == {"name", "type", "lat", "lon", "km", "distance", "openingHours", "fee", "image",
                           "website"}
    assert day[0]["km"] == pytest.approx(2, abs=0.1) and day[0]["distance"] == 100
    assert result.data["s2"] == {"culturalPois": []} and result.alerts["s2"] == []


@pytest.mark.parametrize("km_off, raised", [(10.3, True), (9.7, False)])
def test_railway_station_within_10_km_of_the_start_or_end(ctx, tmp_path, km_off, raised):
    snap = trip_east(LAT, LON, [20, 20])
    station = offset_north(*snap.stages[1].end, km_off * 1000)  # 10 km north of day 2's end
    result = run(railway_stations, tmp_path, snap, [(station, {"railway": "station", "name": "Gare"}),
                                                    (at(-15), {"railway": "station", "station": "subway"})])
    assert codes(result, "s1") == ["railway_station_none_nearby"]  # 20 km and more from it
    assert codes(result, "s2") == (["railway_station_none_nearby"] if raised else [])
    fact = result.alerts["s1"][0]
    assert fact.params == {"threshold": 10.0}
    assert (fact.action["lat"], fact.action["lon"]) == pytest.approx(station, abs=1e-6)  # not the subway
    assert render(fact.as_json(), 1)["message"].startswith("No train station within 10 km of the start or end of")


def test_a_station_near_the_start_is_enough(ctx, tmp_path):
    snap = trip_east(LAT, LON, [40, 0], rest=(1,))
    result = run(railway_stations, tmp_path, snap, [(at(0, 9000), {"railway": "halt"})])
    assert result.alerts == {"s1": [], "s2": []}


@pytest.mark.parametrize("km_off, raised", [(15.3, True), (14.7, False)])
def test_health_service_within_15_km_of_the_midpoint_rest_days_too(ctx, tmp_path, km_off, raised):
    snap = trip_east(LAT, LON, [20, 0], rest=(1,))  # the rest day at km 20
    pharmacy = offset_north(*snap.stages[0].midpoint, km_off * 1000)
    result = run(health_services, tmp_path, snap, [(pharmacy, {"amenity": "pharmacy"}),
                                                   (at(20 + km_off), {"healthcare": "clinic"})])
    assert codes(result, "s1") == (["health_service_none_nearby"] if raised else [])
    assert codes(result, "s2") == (["health_service_none_nearby"] if raised else [])
    if raised:
        assert result.alerts["s1"][0].params == {"threshold": 15.0}


def test_a_place_mapped_twice_is_suggested_once(ctx, tmp_path):
    def castle(m):
        m.node(*at(5, 100), {"historic": "castle", "name": "Château"})
        m.way([at(5.05, 150), at(5.1, 150), at(5.1, 250), at(5.05, 250)], {"historic": "castle", "name": "Château"},
              closed=True)  # its walls, about 130 m from the node
        m.node(*at(15, 100), {"historic": "castle", "name": "Château"})  # another castle of that name
    snap = trip_east(LAT, LON, [20])
    m = MapBuilder(bounds=bounds_around(snap))
    castle(m)
    import_map(m, tmp_path)
    result = cultural_pois.compute(snap, engine())
    assert [(p["name"], p["distance"]) for p in result.data["s1"]["culturalPois"]] == [("Château", 100),
                                                                                       ("Château", 100)]


def test_every_riding_day_keeps_its_nearest_stations(ctx, tmp_path):
    """`railwayStations`: the nearest station within 10 km of a day's start and of its end, the same search as the
    alert; a rest day keeps none; a day with none near either end keeps an empty list beside its alert."""
    snap = trip_east(LAT, LON, [20, 0, 20], rest=(1,))
    result = run(railway_stations, tmp_path, snap, [(at(0, 3000), {"railway": "station", "name": "Gare Sud"}),
                                                    (at(0, 6000), {"railway": "halt", "name": "Halte Nord"})])
    assert [(s["end"], s["name"], s["distance"]) for s in result.data["s1"]["railwayStations"]] == [
        ("start", "Gare Sud", 3.0)]
    assert result.data["s2"] == {"railwayStations": []} and result.alerts["s2"] == []
    assert result.data["s3"] == {"railwayStations": []} and codes(result, "s3") == ["railway_station_none_nearby"]
