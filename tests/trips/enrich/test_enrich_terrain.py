"""Terrain (docs/RULES.md "Terrain"): every code raised, and kept quiet just under its threshold; the ways count by the
stretch of route they accompany in the 20 m corridor (a crossing counts nothing, two parallel ways once)."""
import math

import pytest

from tests.enrich_helpers import engine, import_map, stage, trip, trip_east
from tests.osm_maps import MapBuilder, line_east, offset_north
from trips.enrich import terrain as T
from trips.enrich.alerts.catalogue import CATALOGUE, render

LAT, LON = 45.0, 5.0
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))


def east(metres: float) -> float:
    return LON + metres / PER_DEG_LON


def codes(result, sid):
    return [f.code for f in result.alerts[sid]]


def traffic(result, sid):
    return [c for c in codes(result, sid) if c.startswith("traffic_")]


def facts(result, sid, code):
    return [f for f in result.alerts[sid] if f.code == code]


def alongside(m: MapBuilder, from_m: float, length_m: float, tags: dict, north_m: float = 10.0, step_m=50.0):
    """A way running beside the route (north of it by `north_m`) from `from_m` for `length_m`."""
    n = max(1, round(length_m / step_m))
    return m.way([offset_north(LAT, east(from_m + k * length_m / n), north_m) for k in range(n + 1)], tags)


def across(m: MapBuilder, at_m: float, tags: dict, half_m: float = 18.0, step_m: float = 3.0):
    """A way crossing the route at `at_m`, densely drawn, so that all its vertices lie inside the corridor."""
    n = int(2 * half_m / step_m)
    return m.way([offset_north(LAT, east(at_m), -half_m + k * step_m) for k in range(n + 1)], tags)


# --- rules on the snapshot alone ------------------------------------------------------------------------

def test_continuity_gaps_are_placed_on_the_earlier_day_even_a_rest_day(nomap):
    def day(sid, i, start_m, north_m=0.0, rest=False):
        a = offset_north(LAT, east(start_m), north_m)
        return stage(sid, i, [a, (a[0], a[1] + 1000 / PER_DEG_LON)], rest=rest)

    snap = trip([day("s1", 0, 0), day("s2", 1, 1000, 501), day("s3", 2, 2000, 501 + 499),
                 day("s4", 3, 3000, 1000 + 100.5, rest=True), day("s5", 4, 4000, 1100.5 + 200),
                 day("s6", 5, 5000, 1300.5 + 99.5)])
    result = T.compute(snap, engine=nomap)
    (crit,) = facts(result, "s1", "continuity_gap_critical")
    assert crit.params["distance"] == pytest.approx(0.501, abs=0.002) and crit.params["next"] == 2
    assert crit.action == {"kind": "navigate", "lat": pytest.approx(snap.stages[0].end[0], abs=1e-6),
                           "lon": pytest.approx(snap.stages[0].end[1], abs=1e-6)}
    assert codes(result, "s2") == ["continuity_gap_warning"]  # 499 m: a warning, not critical
    assert facts(result, "s2", "continuity_gap_warning")[0].params["gap"] == 499
    assert codes(result, "s3") == ["continuity_gap_warning"]  # 100.5 m
    assert codes(result, "s4") == ["continuity_gap_warning"]  # 200 m after a rest day: still checked
    assert codes(result, "s5") == []  # 99.5 m
    assert codes(result, "s6") == []  # the last day has no next one
    text = render(crit.as_json(), 1)["message"]
    assert text == "Discontinuity: 0.5 km between stage 1 and 2."


@pytest.fixture
def nomap(ctx):
    """The test database with no map imported (each test starts with empty tables)."""
    return engine()


def test_elevation_gain_over_1200_m_offers_a_split(nomap):
    snap = trip_east(LAT, LON, [50, 50, 50], rest=(2,))
    snap = trip([_with(snap.stages[0], elevation_gain_m=1201.0), _with(snap.stages[1], elevation_gain_m=1200.0),
                 _with(snap.stages[2], elevation_gain_m=2500.0)])
    result = T.compute(snap, engine=nomap)
    (fact,) = facts(result, "s1", "elevation_gain")
    assert fact.params == {"elevation": 1201} and fact.action == {"kind": "auto_fix", "splitAtKm": 25.0}
    assert "elevation_gain" not in codes(result, "s2")
    assert codes(result, "s3") == [] and "s3" not in result.data  # a rest day: looked at, not ridden


def _with(s, **changes):
    from dataclasses import replace

    return replace(s, **changes)


def _climb(pct: float, climb_m: float, step_m: float = 50.0):
    """1 km flat, `climb_m` at `pct` %, 1 km flat: (lat, lon, ele) vertices every `step_m`."""
    pts, ele = [], 100.0
    line = line_east(LAT, LON, (2000 + climb_m) / 1000, step_m)
    for k, (lat, lon) in enumerate(line):
        pts.append((lat, lon, ele))
        here = k * step_m
        if 1000 <= here < 1000 + climb_m and k + 1 < len(line):
            seg = T.G.GEOD.inv(lon, lat, line[k + 1][1], line[k + 1][0])[2]
            ele += seg * pct / 100
    return pts


def test_steep_gradient_per_section_of_at_least_500_m(nomap):
    snap = trip([stage("s1", 0, _climb(8.5, 600)), stage("s2", 1, _climb(9.0, 450)),
                 stage("s3", 2, _climb(7.9, 1500))])
    result = T.compute(snap, engine=nomap)
    (fact,) = facts(result, "s1", "steep_gradient")
    assert fact.params["gradient"] == pytest.approx(8.5, abs=0.05)
    assert fact.params["distance"] == pytest.approx(0.6, abs=0.01)
    assert fact.action["lat"] == pytest.approx(LAT) and fact.action["lon"] == pytest.approx(east(1000), abs=1e-5)
    assert facts(result, "s2", "steep_gradient") == []  # 9 % but only 450 m
    assert facts(result, "s3", "steep_gradient") == []  # 1.5 km at 7.9 %
    assert result.data["s1"]["terrain"]["steepestPct"] == pytest.approx(8.5, abs=0.05)
    assert result.data["s2"]["terrain"]["steepestPct"] < 9.0  # no 500 m stretch is wholly at 9 %
    assert result.data["s3"]["terrain"]["steepestPct"] == pytest.approx(7.9, abs=0.05)


def test_unknown_elevation_breaks_a_section(nomap):
    pts = _climb(10, 800)
    assert len(facts(T.compute(trip([stage("s1", 0, pts)]), engine=nomap), "s1", "steep_gradient")) == 1
    pts[28] = (*pts[28][:2], None)  # 1400 m: mid-climb, 350 m of it before, 350 m after
    result = T.compute(trip([stage("s1", 0, pts)]), engine=nomap)
    assert facts(result, "s1", "steep_gradient") == []


def test_ebike_range_navigates_to_a_charging_station_or_caps_the_day(ctx, tmp_path):
    snap = trip_east(LAT, LON, [81, 80, 61, 60], ebike_mode=True)
    stages = list(snap.stages)
    stages[2], stages[3] = _with(stages[2], elevation_gain_m=500.0), _with(stages[3], elevation_gain_m=500.0)
    m = MapBuilder()
    m.node(*offset_north(LAT, east(161_000 + 30_000), 1500), {"amenity": "charging_station"})
    m.node(*offset_north(LAT, east(161_000 + 40_000), 2500), {"amenity": "charging_station"})  # outside 2 km
    import_map(m, tmp_path)
    result = T.compute(trip(stages, ebike_mode=True), engine=engine())
    (first,) = facts(result, "s1", "ebike_range_exceeded")
    assert first.params == {"distance": 81.0, "range": 80.0}
    assert first.action == {"kind": "auto_fix", "maxDistance": 80.0}  # no station near day 1
    assert facts(result, "s2", "ebike_range_exceeded") == []  # 80 km of an 80 km range
    (third,) = facts(result, "s3", "ebike_range_exceeded")  # 61 km > 80 − 500/25 = 60 km
    assert third.params["range"] == 60.0 and third.action["kind"] == "navigate"
    assert third.action["lon"] == pytest.approx(east(191_000), abs=1e-4)
    assert facts(result, "s4", "ebike_range_exceeded") == []
    plain = T.compute(trip(stages, ebike_mode=False), engine=engine())
    assert not any(f.code == "ebike_range_exceeded" for fs in plain.alerts.values() for f in fs)


def test_rest_day_suggested_every_third_riding_day_unless_a_rest_follows_or_the_trip_ends(nomap):
    result = T.compute(trip_east(LAT, LON, [10] * 7), engine=nomap)
    found = {sid: facts(result, sid, "rest_day_suggested") for sid in result.alerts}
    assert [sid for sid, fs in found.items() if fs] == ["s3", "s6"]
    assert found["s6"][0].params == {"days": 6}
    assert found["s3"][0].action == {"kind": "auto_fix", "afterStage": 3}
    assert render(found["s6"][0].as_json(), 6)["message"].startswith("Stage 6 is day 6 of cycling")
    for kms, rest in (([10] * 3, ()), ([10, 10, 10, 0, 10], (3,)), ([10, 10, 0, 10, 10, 10, 10], (2,))):
        result = T.compute(trip_east(LAT, LON, kms, rest=rest), engine=nomap)
        flagged = [sid for sid, fs in result.alerts.items() if "rest_day_suggested" in [f.code for f in fs]]
        assert flagged == ([] if len(kms) != 7 else ["s6"]), kms  # streak 3 ends on day 3 … then day 6


# --- rules on the ways in the corridor ------------------------------------------------------------------

def test_surface_rough_sums_the_route_the_rough_ways_accompany(ctx, tmp_path):
    snap = trip_east(LAT, LON, [5, 5, 5, 5])
    m = MapBuilder()
    alongside(m, 1000, 600, {"highway": "track", "surface": "gravel"})  # day 1: 600 m
    alongside(m, 5000 + 1000, 480, {"highway": "track", "surface": "asphalt;gravel"})  # day 2: 480 m
    for k in range(40):  # day 3: 40 rough ways crossing the route, every vertex within 18 m of it
        across(m, 10_000 + 100 + k * 100, {"highway": "track", "surface": "dirt"})
    alongside(m, 15_000 + 500, 300, {"highway": "track", "tracktype": "grade4"})  # day 4: two parallel ways
    alongside(m, 15_000 + 500, 280, {"highway": "path", "smoothness": "bad"}, north_m=-8)  # on one stretch
    alongside(m, 15_000 + 900, 250, {"highway": "track", "tracktype": "grade5"})  # and 250 m more
    alongside(m, 15_000 + 1500, 900, {"highway": "track", "surface": "asphalt", "tracktype": "grade5"})
    import_map(m, tmp_path)
    result = T.compute(snap, engine=engine())
    (rough,) = facts(result, "s1", "surface_rough")
    assert rough.params == {"length": pytest.approx(0.6, abs=0.01), "surface": "gravel"}
    assert rough.action["kind"] == "navigate" and rough.action["lon"] == pytest.approx(east(1000), abs=1e-5)
    assert len(rough.action["segments"]) == 1 and len(rough.action["segments"][0]) <= T.MAX_SEGMENT_POINTS
    assert facts(result, "s2", "surface_rough") == [] and result.data["s2"]["terrain"]["roughKm"] == \
        pytest.approx(0.48, abs=0.01)
    assert facts(result, "s3", "surface_rough") == [] and result.data["s3"]["terrain"]["roughKm"] < 0.05
    (day4,) = facts(result, "s4", "surface_rough")  # 300 m once (not 600) + 250 m; asphalt beats grade5
    assert day4.params["length"] == pytest.approx(0.55, abs=0.01)
    assert day4.params["surface"] == "grade4, bad, grade5"
    assert render(day4.as_json(), 4)["message"] == "Rough surface totalling 0.6 km (track grade 4, bad surface, track grade 5). " \
                                                   "Check bike suitability."


def test_traffic_on_main_roads_without_cycle_infrastructure(ctx, tmp_path):
    snap = trip_east(LAT, LON, [5, 5, 5])
    m = MapBuilder()
    alongside(m, 500, 600, {"highway": "primary"}, north_m=5)  # day 1: two main roads of 600 m
    alongside(m, 2000, 700, {"highway": "trunk", "cycleway": "no"}, north_m=5)
    alongside(m, 3000, 1000, {"highway": "primary", "cycleway:right": "lane"}, north_m=5)  # has a lane
    alongside(m, 3000, 1000, {"highway": "primary", "bicycle": "use_sidepath"}, north_m=-5)
    alongside(m, 5000 + 500, 480, {"highway": "primary"}, north_m=5)  # day 2: 480 m only
    m.way([offset_north(LAT, east(5000 + 2500), -5000), offset_north(LAT, east(5000 + 2500), 5000)],
          {"highway": "trunk"})  # and a 10 km trunk crossing it
    alongside(m, 10_000 + 500, 2000, {"highway": "primary"}, north_m=35)  # day 3: outside the corridor,
    alongside(m, 10_000 + 2500, 300, {"highway": "primary"}, north_m=5)  # one road drawn as two 300 m ways,
    alongside(m, 10_000 + 2800, 300, {"highway": "primary", "maxspeed": "70"}, north_m=5)
    alongside(m, 10_000 + 4000, 250, {"highway": "primary"}, north_m=5)  # and two 250 m stretches apart
    alongside(m, 10_000 + 4350, 250, {"highway": "primary"}, north_m=5)
    import_map(m, tmp_path)
    result = T.compute(snap, engine=engine())
    (main,) = facts(result, "s1", "traffic_main_road")
    assert main.params == {"count": 2, "length": pytest.approx(1.3, abs=0.01)}
    assert main.action["lon"] == pytest.approx(east(500), abs=1e-5) and len(main.action["segments"]) == 2
    assert render(main.as_json(), 1)["severity"] == "critical"
    assert result.data["s1"]["terrain"]["mainRoadKm"] == pytest.approx(1.3, abs=0.01)
    assert facts(result, "s2", "traffic_main_road") == []
    assert result.data["s2"]["terrain"]["mainRoadKm"] == pytest.approx(0.48, abs=0.01)  # the crossing: ~0
    (chain,) = facts(result, "s3", "traffic_main_road")
    assert chain.params == {"count": 1, "length": pytest.approx(0.6, abs=0.01)}
    assert len(chain.action["segments"]) == 1  # one stretch of route, though drawn as two ways
    assert chain.action["segments"][0][0] == [LAT, pytest.approx(east(10_000 + 2500), abs=2e-5)]  # on the route
    assert result.data["s3"]["terrain"]["mainRoadKm"] == pytest.approx(1.1, abs=0.01)


def test_secondary_roads_fast_and_slow_by_parsed_speed_limit(ctx, tmp_path):
    snap = trip_east(LAT, LON, [5, 5, 5, 5])
    m = MapBuilder()
    alongside(m, 500, 600, {"highway": "secondary", "maxspeed": "FR:70"})  # day 1: fast
    alongside(m, 2000, 600, {"highway": "secondary", "maxspeed": "80 km/h", "cycleway:both": "track"})
    alongside(m, 5000 + 500, 600, {"highway": "secondary", "maxspeed": "30 mph"})  # day 2: slow (48 km/h)
    alongside(m, 5000 + 2000, 600, {"highway": "secondary", "maxspeed": "50"})  # 50 is not above 50
    alongside(m, 10_000 + 500, 600, {"highway": "secondary", "maxspeed": "none"})  # day 3: slow, no limit known
    alongside(m, 10_000 + 2000, 480, {"highway": "secondary", "maxspeed": "90"})  # too short to count
    alongside(m, 15_000 + 500, 480, {"highway": "secondary"})  # day 4: too short to count
    import_map(m, tmp_path)
    result = T.compute(snap, engine=engine())
    (fast,) = facts(result, "s1", "traffic_secondary_road_fast")
    assert fast.params == {"count": 1, "length": pytest.approx(0.6, abs=0.01), "maxspeed": 70}
    assert traffic(result, "s1") == ["traffic_secondary_road_fast"]
    (slow,) = facts(result, "s2", "traffic_secondary_road_slow")
    assert slow.params == {"count": 2, "length": pytest.approx(1.2, abs=0.01), "maxspeed": 50}
    assert traffic(result, "s2") == ["traffic_secondary_road_slow"]
    (unknown,) = facts(result, "s3", "traffic_secondary_road_slow")
    assert unknown.params["count"] == 1 and unknown.params["maxspeed"] == 50
    assert traffic(result, "s3") == ["traffic_secondary_road_slow"]
    assert traffic(result, "s4") == []
    assert CATALOGUE["traffic_secondary_road_slow"].severity == "nudge"


def test_an_alert_carries_at_most_ten_short_polylines_first_along_the_route(ctx, tmp_path):
    m = MapBuilder()
    for k in range(14):  # 14 rough pieces of 60 m, 100 m apart: 840 m in all
        alongside(m, 300 + k * 160, 60, {"highway": "track", "surface": "sand"}, step_m=2)
    import_map(m, tmp_path)
    result = T.compute(trip_east(LAT, LON, [5]), engine=engine())
    (rough,) = facts(result, "s1", "surface_rough")
    assert rough.params["length"] == pytest.approx(0.84, abs=0.01)
    segments = rough.action["segments"]
    assert len(segments) == T.MAX_SEGMENTS and all(len(s) <= T.MAX_SEGMENT_POINTS for s in segments)
    assert [s[0][1] for s in segments] == sorted(s[0][1] for s in segments)
    assert segments[0][0][1] == pytest.approx(east(300), abs=2e-5) and segments[-1][-1][1] == pytest.approx(
        east(300 + 9 * 160 + 60), abs=2e-5)
    assert len(str(rough.as_json())) < 8000


@pytest.mark.parametrize("raw, kmh", [
    ("50", 50.0), ("50 km/h", 50.0), ("FR:50", 50.0), ("30 mph", 48.28), ("70;90", 90.0), (" 80 kmh", 80.0),
    ("none", None), ("signals", None), ("FR:urban", None), ("walk", None), ("", None), (None, None),
    ("9" * 500, None)])
def test_maxspeed_formats(raw, kmh):
    got = T.parse_maxspeed(raw)
    assert (got is None and kmh is None) or got == pytest.approx(kmh, abs=0.01)


def test_per_day_data_is_small_and_says_how_much_map_covered_the_day(ctx, tmp_path):
    snap = trip_east(LAT, LON, [5, 0, 5], rest=(1,))
    m = MapBuilder(bounds=(LAT - 0.1, LON - 0.1, LAT + 0.1, east(7500)))
    alongside(m, 500, 600, {"highway": "track", "surface": "gravel"})
    import_map(m, tmp_path)
    result = T.compute(snap, engine=engine())
    assert set(result.alerts) == {"s1", "s2", "s3"} and result.covered
    assert set(result.data) == {"s1", "s3"}
    day = result.data["s1"]["terrain"]
    assert day == {"roughKm": pytest.approx(0.6, abs=0.01), "mainRoadKm": 0.0, "steepestPct": 0.0,
                   "mapCoverage": 1.0}
    assert result.data["s3"]["terrain"]["mapCoverage"] == pytest.approx(0.5, abs=0.05)
    assert len(str(day)) < 120


def test_a_trip_no_map_touches_is_not_covered(nomap):
    result = T.compute(trip_east(LAT, LON, [5, 5]), engine=nomap)
    assert result.covered is False and set(result.alerts) == {"s1", "s2"}
