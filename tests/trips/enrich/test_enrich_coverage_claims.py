"""No absence claimed beyond the map (docs/RULES.md "Map coverage"): every "none within R" asks the coverage of its
own search area, a disc around a point or a corridor along the day, and says what the map covered of it, or that
it is unknown. The areas' coverage on boxes, then each check on generated maps that cover only part of its search."""
import math

import numpy as np
import pytest

from tests.enrich_helpers import engine, import_map, trip_east
from tests.osm_maps import MapBuilder, offset_north
from trips.enrich import bike_shops, health_services, pois, railway_stations, water_points
from trips.enrich.alerts.catalogue import render
from trips.osm.areas import corridor_cover, disc_cover

LAT, LON = 45.0, 5.0
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))
PER_DEG_LAT = 111_132.0


def at(km: float, north_m: float = 0.0) -> tuple[float, float]:
    return offset_north(LAT, LON + km * 1000 / PER_DEG_LON, north_m)


def box(west_km: float, east_km: float, half_height_m: float) -> tuple[float, float, float, float]:
    """A map area from `west_km` to `east_km` east of (LAT, LON), `half_height_m` north and south of the route."""
    dlat = half_height_m / PER_DEG_LAT
    return LAT - dlat, LON + west_km * 1000 / PER_DEG_LON, LAT + dlat, LON + east_km * 1000 / PER_DEG_LON


def boxes(*b) -> np.ndarray:
    return np.array(b, dtype=float)


# --- the areas' coverage of a search area --------------------------------------------------------------------

def test_a_disc_wholly_on_partly_on_and_off_the_map():
    one_km = boxes(box(-0.5, 0.5, 500))  # about 1 km across, centred on the point
    assert disc_cover(LAT, LON, 400, one_km) == (1.0, 400)
    share, held = disc_cover(LAT, LON, 10_000, one_km)
    assert share == pytest.approx(1.0 / (math.pi * 100), rel=0.3)  # 1 km² of a 314 km² disc
    assert 250 <= held <= 500  # the nearest edge is 500 m away: never more is claimed
    assert disc_cover(*at(30), 10_000, one_km) == (0.0, 0.0)  # 30 km away
    off_centre = disc_cover(*at(0.7), 1000, one_km)  # 200 m east of the box: a part of its disc, no radius
    assert 0 < off_centre[0] < 0.5 and off_centre[1] == 0.0
    two = boxes(box(-0.5, 0.2, 500), box(0.2, 0.5, 500))  # the same ground in two areas: still whole
    assert disc_cover(LAT, LON, 400, two) == (1.0, 400)


def test_a_corridor_wholly_partly_and_not_on_the_map():
    line = [at(k / 10) for k in range(0, 201)]  # 20 km east
    assert corridor_cover(line, 2000, boxes(box(-5, 25, 5000)))[0] == 1.0
    share, parts = corridor_cover(line, 2000, boxes(box(-5, 10, 5000)))  # the map stops at km 10
    assert share == pytest.approx(0.4, abs=0.05)
    assert len(parts) == 1 and parts[0][0] == 0.0 and parts[0][1] == pytest.approx(8000, abs=600)
    thin = corridor_cover(line, 2000, boxes(box(-5, 25, 1000)))  # the line on the map, not 2 km across it
    assert thin == (0.0, [])
    assert corridor_cover(line, 2000, boxes())[0] == 0.0


# --- each check on a map covering part of its search ----------------------------------------------------------

def imported(tmp_path, bounds, nodes=(), name="region"):
    m = MapBuilder(bounds=bounds)
    m.node(bounds[0] + 1e-4, bounds[1] + 1e-4, {"tourism": "hotel"})  # the map is never empty
    for point, tags in nodes:
        m.node(*point, tags)
    import_map(m, tmp_path, name)


def codes(result, sid):
    return [f.code for f in result.alerts[sid]]


def test_a_one_km_map_never_says_no_station_within_ten_km(ctx, tmp_path):
    """A map about 1 km across around a 1 km day: the station check says the radius it covered and that beyond it
    is unknown, never "no train station within 10 km"."""
    snap = trip_east(LAT, LON, [0.6])
    imported(tmp_path, box(-0.3, 0.9, 600))
    fact = railway_stations.compute(snap, engine()).alerts["s1"][0]
    assert fact.code == "railway_station_none_in_covered"
    assert fact.params["threshold"] == 10.0 and 0 < fact.params["covered"] <= 0.3  # the nearest edge: 300 m
    said = render(fact.as_json(), 1)["message"]
    assert "No train station within 10 km" not in said
    assert said.startswith(f"No train station within the {fact.params['covered']:g} km around the start and end "
                           "of stage 1 that the imported map covers; beyond it, up to 10 km, unknown")
    french = render(fact.as_json(), 1, "fr")["message"]
    assert "que couvre la carte importée" in french and "inconnu" in french


def test_a_day_ending_off_the_map_does_not_know(ctx, tmp_path):
    snap = trip_east(LAT, LON, [20])  # the map holds its first 3 km
    imported(tmp_path, box(-12, 3, 12_000))
    fact = railway_stations.compute(snap, engine()).alerts["s1"][0]
    assert fact.code == "railway_station_unknown" and fact.params == {"threshold": 10.0}
    assert render(fact.as_json(), 1)["message"].startswith(
        "Unknown whether a train station lies within 10 km of the start or end of stage 1: the imported map")


def test_health_services_said_of_the_disc_the_map_covers(ctx, tmp_path):
    snap = trip_east(LAT, LON, [10, 0], rest=(1,))  # the midpoint at km 5
    imported(tmp_path, box(-20, 10, 20_000))  # 5 km east of the midpoint, 15 km everywhere else
    fact = health_services.compute(snap, engine()).alerts["s1"][0]
    assert fact.code == "health_service_none_in_covered"
    assert 4.5 <= fact.params["covered"] <= 5.0
    imported(tmp_path, box(-20, 40, 20_000), name="wider")  # a second area: the whole disc now
    assert codes(health_services.compute(snap, engine()), "s1") == ["health_service_none_nearby"]


def test_a_water_gap_is_looked_for_only_where_the_map_holds_the_corridor(ctx, tmp_path):
    """60 km, water at km 3, the map to km 45: the gap named ends where the map's corridor does, not at km 60."""
    snap = trip_east(LAT, LON, [60])
    imported(tmp_path, box(-10, 45, 10_000), [(at(3, 100), {"amenity": "drinking_water"})])
    fact = water_points.compute(snap, engine()).alerts["s1"][0]
    assert fact.params["fromKm"] == pytest.approx(3, abs=0.25)
    assert 42 <= fact.params["toKm"] <= 45 and fact.params["gap"] < 42


def test_a_long_day_without_food_said_of_the_km_the_map_holds(ctx, tmp_path):
    snap = trip_east(LAT, LON, [60])
    imported(tmp_path, box(-10, 50, 10_000))
    fact = pois.compute(snap, engine()).alerts["s1"][0]
    assert fact.code == "resupply_none_in_covered" and 46 <= fact.params["covered"] <= 49
    assert render(fact.as_json(), 1, "fr")["message"].startswith(
        "Aucun restaurant ni commerce alimentaire détecté sur les ")


def test_the_bike_shop_alert_agrees_with_the_list_beside_it(ctx, tmp_path):
    """A repair shop 300 m off day 1 at its km 2 (8 km from the midpoint) is listed: no alert on that day. A shop
    that only sells is listed too, and the alert beside it says no shop *doing repairs*."""
    snap = trip_east(LAT, LON, [20] * 6)
    imported(tmp_path, box(-10, 130, 10_000), [(at(2, 300), {"shop": "bicycle", "name": "Cycles Martin"}),
                                               (at(25, 300), {"shop": "bicycle", "name": "Sells Only",
                                                              "service:bicycle:repair": "no"})])
    result = bike_shops.compute(snap, engine())
    assert [s["name"] for s in result.data["s1"]["bikeShops"]] == ["Cycles Martin"]
    assert codes(result, "s1") == []
    assert [s["kind"] for s in result.data["s2"]["bikeShops"]] == ["shop"]
    fact = result.alerts["s2"][0]
    assert fact.code == "bike_shop_none_nearby" and fact.params == {"threshold": 2.0}
    assert render(fact.as_json(), 2)["message"].startswith(
        "No bike shop doing repairs detected within 2 km of stage 2's route.")


def test_a_bike_shop_alert_on_a_day_the_map_holds_in_part(ctx, tmp_path):
    snap = trip_east(LAT, LON, [20] * 6)
    imported(tmp_path, box(-10, 110, 10_000))  # day 6 (km 100 to 120): its first 8 km are held across
    fact = bike_shops.compute(snap, engine()).alerts["s6"][0]
    assert fact.code == "bike_shop_none_in_covered" and 7 <= fact.params["covered"] <= 9


def test_a_bike_shop_alert_stored_before_it_named_its_radius_still_reads_whole():
    said = render({"code": "bike_shop_none_nearby", "params": {}}, 3)["message"]
    assert said.startswith("No bike shop doing repairs detected within 2 km of stage 3's route.")
    assert "{" not in render({"code": "bike_shop_none_nearby", "params": {}}, 3, "fr")["message"]
