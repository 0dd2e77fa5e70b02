"""The resupply enrichment (docs/RULES.md "Resupply"): food in a 2 km corridor, given to the day passing closest; ≤ 6
kept per day, a 500 m supply timeline; `resupply_none_on_stage` from 40 km, `resupply_closed_at_passage`
when every place is known closed at the rider's passage time (opening_hours through opening-hours-py)."""
import math
from datetime import date

import pytest

from tests.enrich_helpers import bounds_around, engine, import_map, trip_east
from tests.osm_maps import MapBuilder, offset_north
from trips.enrich import pois
from trips.enrich.alerts.catalogue import render

LAT, LON = 45.0, 5.0
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))
TUESDAY, SUNDAY, BASTILLE_DAY = date(2026, 6, 2), date(2026, 6, 7), date(2026, 7, 14)


def at(km: float, north_m: float = 0.0) -> tuple[float, float]:
    """A point `km` east of the trip's start and `north_m` off the line."""
    return offset_north(LAT, LON + km * 1000 / PER_DEG_LON, north_m)


def run(tmp_path, snap, nodes=()):
    m = MapBuilder(bounds=bounds_around(snap))
    m.node(*at(0, 5000), {"amenity": "drinking_water"})  # the map is never empty
    for (km, north), tags in nodes:
        m.node(*at(km, north), tags)
    import_map(m, tmp_path)
    return pois.compute(snap, engine())


def codes(result, sid):
    return [f.code for f in result.alerts[sid]]


@pytest.mark.parametrize("km, raised", [(40.0, True), (39.9, False)])
def test_no_food_from_40_km(ctx, tmp_path, km, raised):
    snap = trip_east(LAT, LON, [km])
    result = run(tmp_path, snap, [((10, 2100), {"shop": "bakery"})])  # just outside the corridor
    assert codes(result, "s1") == (["resupply_none_on_stage"] if raised else [])
    assert result.data["s1"] == {"resupply": [], "supplyTimeline": []}
    if raised:
        fact = result.alerts["s1"][0].as_json()
        assert render(fact, 1)["message"] == "No restaurant or food shop detected on stage 1. Pack provisions."


def test_food_inside_the_corridor_and_rest_days(ctx, tmp_path):
    snap = trip_east(LAT, LON, [45, 0, 45])  # day 2 is a rest day at km 45
    result = run(tmp_path, snap, [((10, 1900), {"shop": "bakery", "name": "Boulangerie"}),
                                  ((45, 300), {"amenity": "cafe"})])
    assert codes(result, "s1") == [] and codes(result, "s2") == []
    assert [r["name"] for r in result.data["s1"]["resupply"]] == ["Boulangerie", None]
    # the café at the end of day 1 is day 1's (the line passing closest, the earlier day on a tie), so the
    # 45 km of day 3 have nothing; the rest day is looked at but has no riding rule
    assert result.data["s3"]["resupply"] == [] and codes(result, "s3") == ["resupply_none_on_stage"]
    assert result.data["s2"] == {"resupply": [], "supplyTimeline": []}


def test_resupply_keeps_six_spread_along_the_day_and_clusters_500_m(ctx, tmp_path):
    snap = trip_east(LAT, LON, [60])
    nodes = [((km, 100), {"shop": "convenience", "name": f"Shop {km}"}) for km in range(5, 55, 5)]  # 10 shops
    nodes += [((5.3, 50), {"amenity": "restaurant", "name": "Chez Paul", "opening_hours": "Mo-Su 12:00-14:00"}),
              ((20, 10), {"amenity": "bank"})]  # not resupply: not imported as such
    result = run(tmp_path, snap, nodes)
    day = result.data["s1"]
    assert len(day["resupply"]) == pois.MAX_RESUPPLY_PER_DAY
    kms = [r["km"] for r in day["resupply"]]
    assert kms == sorted(kms) and kms[0] == pytest.approx(5.0, abs=0.4) and kms[-1] == pytest.approx(50, abs=0.2)
    # in the 5 km cluster the shop 100 m off the line stands for it, not the restaurant 50 m off: groceries first
    first = day["resupply"][0]
    assert first == {"name": "Shop 5", "category": "convenience", "lat": pytest.approx(at(5, 100)[0], abs=1e-6),
                     "lon": pytest.approx(at(5, 100)[1], abs=1e-6), "km": pytest.approx(5.0, abs=0.1),
                     "openingHours": None, "openAtPassage": None}  # undated trip
    assert "Chez Paul" not in [r["name"] for r in day["resupply"]]  # six groceries leave no slot to a restaurant
    timeline = day["supplyTimeline"]
    assert len(timeline) == 10  # the restaurant 300 m after the shop at km 5 shares its cluster
    assert timeline[0] == {"km": pytest.approx(5.0, abs=0.1), "categories": ["convenience", "restaurant"]}
    assert all(e["categories"] == ["convenience"] for e in timeline[1:])


def test_timeline_is_capped_evenly(ctx, tmp_path):
    snap = trip_east(LAT, LON, [40])
    nodes = [((0.6 * i + 0.3, 20), {"shop": "bakery"}) for i in range(60)]  # every 600 m: 60 clusters
    timeline = run(tmp_path, snap, nodes).data["s1"]["supplyTimeline"]
    assert len(timeline) == pois.MAX_TIMELINE_CLUSTERS
    assert timeline[0]["km"] == pytest.approx(0.3, abs=0.1) and timeline[-1]["km"] == pytest.approx(35.7, abs=0.1)


def passage(km: float, day_km: float = 45.0, departure: int = 8, speed: float = 15.0) -> float:
    snap = trip_east(LAT, LON, [day_km], departure_hour=departure, average_speed=speed)
    return pois.time_at(snap.stages[0], departure, speed, km)


def hhmm(hour: float) -> str:
    minutes = int(round(hour * 60))
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def test_rider_time_is_the_domain_formula():
    # 45 km at 15 km/h: 3 h riding, one 10 min break, no lunch (the ride ends before noon)
    assert passage(45) == pytest.approx(8 + 3 + 10 / 60)
    assert passage(15) == pytest.approx(8 + (3 + 10 / 60) / 3)
    # 75 km from 9 h: 5 h riding crosses noon, two breaks plus lunch
    assert passage(75, 75, departure=9) == pytest.approx(9 + 5 + 2 * 10 / 60 + 1)
    snap = trip_east(LAT, LON, [30], departure_hour=8, average_speed=12)
    hilly = snap.stages[0].__class__(**{**snap.stages[0].__dict__, "elevation_gain_m": 2000})
    assert pois.time_at(hilly, 8, 12, 30) == pytest.approx(8 + 30 / 5 + 3 * 10 / 60 + 1)  # speed floor 5 km/h


@pytest.mark.parametrize("shift, raised", [(+3, True), (-3, False)])
def test_closed_at_passage(ctx, tmp_path, shift, raised):
    """Two shops, at km 15 and 30 of a 45 km Tuesday; the second opens 3 min after (closed) or 3 min before
    (open) the rider reaches it."""
    snap = trip_east(LAT, LON, [45], start_date=TUESDAY)
    opens = hhmm(passage(30) + shift / 60)
    result = run(tmp_path, snap, [((15, 100), {"shop": "bakery", "opening_hours": "Mo-Sa 06:00-08:30"}),
                                  ((30, 100), {"shop": "supermarket", "opening_hours": f"Mo-Sa {opens}-19:00"})])
    assert codes(result, "s1") == (["resupply_closed_at_passage"] if raised else [])
    # the supermarket first (groceries lead), then the bakery
    assert [r["openAtPassage"] for r in result.data["s1"]["resupply"]] == [not raised, False]
    if raised:
        assert render(result.alerts["s1"][0].as_json(), 1)["message"] == (
            "Shops exist on stage 1, but you would pass them outside typical opening hours.")


@pytest.mark.parametrize("hours", [None, "Mo-Sa 06:00-20:00 unknown", "not opening hours at all"])
def test_an_unknown_schedule_is_no_alert(ctx, tmp_path, hours):
    snap = trip_east(LAT, LON, [45], start_date=TUESDAY)
    tags = {"shop": "supermarket", **({"opening_hours": hours} if hours else {})}
    result = run(tmp_path, snap, [((15, 100), {"shop": "bakery", "opening_hours": "Mo-Sa 06:00-08:30"}),
                                  ((30, 100), tags)])
    assert codes(result, "s1") == []
    assert [r["openAtPassage"] for r in result.data["s1"]["resupply"]] == [None, False]  # the supermarket first


@pytest.mark.parametrize("day, raised", [(SUNDAY, True), (TUESDAY, False), (None, False)])
def test_the_weekday_comes_from_the_stage_date(ctx, tmp_path, day, raised):
    snap = trip_east(LAT, LON, [45], start_date=day)
    result = run(tmp_path, snap, [((15, 100), {"shop": "bakery", "opening_hours": "Mo-Sa 06:00-20:00"})])
    assert codes(result, "s1") == (["resupply_closed_at_passage"] if raised else [])
    assert result.data["s1"]["resupply"][0]["openAtPassage"] is (None if day is None else not raised)


def test_public_holidays_are_those_of_the_place(ctx, tmp_path):
    snap = trip_east(LAT, LON, [45], start_date=BASTILLE_DAY)  # 14 July, a Tuesday, a holiday in France
    result = run(tmp_path, snap, [((15, 100), {"shop": "bakery", "opening_hours": "Mo-Sa 06:00-20:00; PH off"})])
    assert codes(result, "s1") == ["resupply_closed_at_passage"]


def test_a_trip_off_the_map_is_not_covered(ctx, tmp_path):
    m = MapBuilder(bounds=(LAT - 0.1, LON - 0.1, LAT + 0.1, LON + 0.1))
    m.node(LAT, LON, {"shop": "bakery"})
    import_map(m, tmp_path)
    away = trip_east(LAT + 1, LON, [45])
    result = pois.compute(away, engine())
    assert result.covered is False and result.alerts == {} and result.data == {}
    # a trip leaving the area: its day off the map is not looked at, the covered one is
    partly = trip_east(LAT, LON + 0.03, [5, 45, 10])  # day 2 runs out of the area, day 3 is all outside
    result = pois.compute(partly, engine())
    assert result.covered is True and set(result.alerts) == set(result.data) == {"s1", "s2"}
    assert codes(result, "s2") == []  # a day the map covers only in part is not said to have no food


@pytest.mark.parametrize("last_hours, raised", [("Mo-Sa 06:00-07:00", True), ("Mo-Sa 06:00-20:00", False)])
def test_every_place_counts_not_only_the_six_kept(ctx, tmp_path, last_hours, raised):
    """Seven shops around km 15; the six nearest the line are closed; the seventh decides."""
    snap = trip_east(LAT, LON, [45], start_date=TUESDAY)
    nodes = [((15 + i / 20, 10 * (i + 1)), {"shop": "bakery", "opening_hours": "Mo-Sa 06:00-07:00"}) for i in range(6)]
    nodes.append(((15.35, 70), {"shop": "bakery", "name": "Last", "opening_hours": last_hours}))
    result = run(tmp_path, snap, nodes)
    kept = result.data["s1"]["resupply"]
    assert len(kept) == 6 and "Last" not in [r["name"] for r in kept]
    assert all(r["openAtPassage"] is False for r in kept)
    assert codes(result, "s1") == (["resupply_closed_at_passage"] if raised else [])


def test_a_shop_mapped_twice_counts_once(ctx, tmp_path):
    snap = trip_east(LAT, LON, [20])
    m = MapBuilder(bounds=bounds_around(snap))
    m.node(*at(5, 100), {"shop": "supermarket", "name": "Super U"})
    m.way([at(5.05, 150), at(5.1, 150), at(5.1, 250), at(5.05, 250)], {"shop": "supermarket", "name": "Super U"},
          closed=True)
    m.node(*at(5, 120), {"shop": "bakery", "name": "Super U"})  # another category: another place
    import_map(m, tmp_path)
    result = pois.compute(snap, engine())
    assert [(r["name"], r["category"]) for r in result.data["s1"]["resupply"]] == [("Super U", "supermarket"),
                                                                                   ("Super U", "bakery")]
