"""Map coverage as length (docs/RULES.md "Map coverage"), end to end: a day that crosses a small extract with none of
its stored vertices inside reads `partial` with the km not looked at, and the trip's nextAction names them and the fix.
"""
import io

import numpy as np
import pytest

from tests.enrich_helpers import import_map
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.osm_maps import MapBuilder, offset_north
from tests.trips.services.test_pipeline import analysis, reload, run_jobs
from trips.core.db import atomic
from trips.enrich import corridor as C
from trips.enrich.registry import ENRICHMENTS, NO_MAP_DATA
from trips.readmodels import day
from trips.guards import Precondition
from trips.readmodels.trip import next_action
from trips.services.stages import update_stage
from trips.services.trips import import_gpx

STRAIGHT = make_points(1600, step_m=100.0, wiggle_deg=0.0)  # 159.9 km north-east, straight: two days of ~80 km
UNDATED = [n for n, e in ENRICHMENTS.items() if not e.requires_start_date]


def small_extract(points) -> MapBuilder:
    """An area around km 30–50 of the route (no stored vertex of a simplified day inside), with a shop."""
    lats, lons = [p[0] for p in points], [p[1] for p in points]
    region = MapBuilder(bounds=(min(lats), min(lons), max(lats), max(lons)))
    mid = points[len(points) // 2]
    region.node(*offset_north(mid[0], mid[1], 60), {"shop": "supermarket", "name": "Au milieu"})
    return region


@pytest.fixture
def straight_trip(app, ctx, rider, tmp_path):
    import_map(small_extract(STRAIGHT[300:501]), tmp_path)
    trip = import_gpx(rider[0], io.BytesIO(gpx_from_points(STRAIGHT, name="Straight")), {})
    run_jobs(app)
    return reload(trip.id)


def test_a_day_crossing_a_small_extract_with_no_vertex_inside_is_analysed(straight_trip):
    trip = straight_trip
    first, second = trip.stages
    assert len(first.geometry) < 10  # stored simplified: a vertex at each end, none inside the extract
    assert analysis(trip) == {name: ("done", None) for name in UNDATED}  # not "no map data"
    cover = first.enrichment["mapCoverage"]
    assert cover["share"] == pytest.approx(20 / first.distance, abs=0.01)
    (a, b), (c, d) = cover["offMapKm"]
    assert (a, b, c, d) == (0.0, pytest.approx(30.0, abs=0.2), pytest.approx(50.0, abs=0.2),
                            pytest.approx(first.distance, abs=0.6))
    assert second.enrichment["mapCoverage"]["share"] == 0.0 and trip.out_of_zone is True
    assert [p["name"] for p in first.enrichment["resupply"]] == ["Au milieu"]


def test_a_partly_covered_day_says_partial_and_the_trip_names_the_km_off_the_map(straight_trip):
    trip = straight_trip
    first, second = trip.stages
    groups = day.group_statuses(trip, first)
    assert groups["pois"] == "partial" and groups["terrain"] == "partial"  # not "done"
    assert day.group_statuses(trip, second)["pois"] == "off map"  # never looked at: the map does not reach it
    told = next_action(trip)
    assert "day 1: km 0–30" in told and "km 50–" in told and "day 2: km 0–" in told
    assert "flask osm import" in told and "analyze_trip" in told and NO_MAP_DATA not in told
    with atomic():  # a group that reads no map is done whatever the map covers
        first.alerts_by_group = {**first.alerts_by_group, "daylight": []}
    assert day.group_statuses(trip, first)["daylight"] == "done"
    summary = day.stage_summary(trip, first)
    assert summary["mapCoverage"] == first.enrichment["mapCoverage"] and summary["groups"]["pois"] == "partial"


def test_a_whole_day_is_done_and_a_day_measured_by_no_dispatch_is_told_nothing(straight_trip):
    trip = straight_trip
    first, second = trip.stages
    with atomic():
        first.enrichment = {**first.enrichment, "mapCoverage": {"share": 1.0, "offMapKm": []}}
        second.enrichment = {k: v for k, v in second.enrichment.items() if k != "mapCoverage"}
    assert day.group_statuses(trip, first)["pois"] == "done"
    assert day.stage_summary(trip, second)["mapCoverage"] is None
    assert next_action(trip) is None  # nothing measured off the map
    with atomic():
        second.enrichment = {**second.enrichment, "mapCoverage": "garbage"}
    assert day.stage_summary(trip, second)["mapCoverage"] is None


def test_map_coverage_names_the_stretches_off_the_map_bounded():
    line = [(45.0, 5.0 + k * 0.01) for k in range(101)]  # ~78.7 km east, a vertex every ~787 m
    step = 0.01
    boxes = np.array([[44.9, 5.0 + k * 10 * step + 0.002, 45.1, 5.0 + (k * 10 + 5) * step] for k in range(10)])
    cover = C.map_coverage(line, boxes)
    assert 0.4 < cover["share"] < 0.5
    assert len(cover["offMapKm"]) == C.MAX_OFF_MAP  # ten gaps, five named
    assert cover["offMapKm"][0] == [0.0, 0.2]
    # a gap of a few metres between two touching areas is not named, and the day counts as whole
    touching = np.array([[44.9, 4.9, 45.1, 5.5], [44.9, 5.50003, 45.1, 6.1]])
    assert C.map_coverage(line, touching) == {"share": 1.0, "offMapKm": []}
    assert C.map_coverage(line, np.zeros((0, 4))) == {"share": 0.0, "offMapKm": [[0.0, 78.8]]}
    assert C.map_coverage([], touching) == {"share": 0.0, "offMapKm": []}


def test_after_edits_the_coverage_is_measured_again_and_no_map_data_only_when_no_day_touches(straight_trip, app,
                                                                                               rider):
    """Day 1's end moved onto the route before the extract (an edit keeps the road: day 2 takes km 25–160): day 1
    is wholly off the map, day 2 crosses it, so the trip is analysed, not "no map data"; moved again into the
    extract: day 1 is partly covered and named so."""
    trip = straight_trip
    first_id = trip.stages[0].id

    def move_end(km):
        lat, lon = STRAIGHT[int(km * 10)][:2]  # a point every 100 m
        update_stage(rider[0], trip.id, first_id, Precondition("any"), {"endPoint": {"lat": lat, "lon": lon}})
        run_jobs(app)
        return reload(trip.id)

    before = move_end(25)
    one, two = before.stages
    assert one.distance == pytest.approx(25, abs=0.3) and two.distance == pytest.approx(135, abs=0.6)
    assert one.enrichment["mapCoverage"]["share"] == 0.0
    assert two.enrichment["mapCoverage"]["share"] == pytest.approx(20 / two.distance, abs=0.01)
    assert analysis(before)["pois"] == ("done", None)  # one day touches the map: analysed
    assert not next_action(before).startswith("No map data covers this trip")
    assert "day 1" in next_action(before) and [p["name"] for p in two.enrichment["resupply"]] == ["Au milieu"]
    inside = move_end(40)
    assert inside.stages[0].enrichment["mapCoverage"]["share"] == pytest.approx(10 / 40, abs=0.01)
    assert day.group_statuses(inside, inside.stages[0])["pois"] == "partial"
    assert "day 1: km 0–" in next_action(inside)
