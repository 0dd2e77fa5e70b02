"""The map queries the enrichments call, on map data written around a generated route: distances are exact
(to a metre), filters cut where they say, only complete imports are read, and an object two overlapping
imports share comes back once."""
import math

import pytest
import sqlalchemy as sa

from tests.osm_maps import MapBuilder, line_east, map_support_or_skip, offset_north, per_box_select, scatter
from trips.core.db import db
from trips.route.geo import distance_m
from trips.osm import index
from trips.osm import queries as Q
from trips.osm.importer import import_file

LAT, LON = 45.0, 5.0
ROUTE = line_east(LAT, LON, 10)  # 10 km east, a vertex every 200 m
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))


def east(metres: float) -> float:
    return LON + metres / PER_DEG_LON


@pytest.fixture
def imported(ctx, tmp_path):
    map_support_or_skip(db.engine)

    def run(builder: MapBuilder, name: str = "drome"):
        return import_file(db.engine, builder.write(tmp_path / f"{name}.osm.pbf"))

    return run


def test_points_near_measures_geodesic_distance_and_filters_by_kind(imported):
    m = MapBuilder()
    m.node(*offset_north(LAT, east(1000), 300), {"amenity": "drinking_water"})
    m.node(*offset_north(LAT, east(1000), 100), {"shop": "bicycle"})
    imported(m)
    assert Q.points_near(LAT, east(1000), 250, kinds=["water"]) == []
    (water,) = Q.points_near(LAT, east(1000), 350, kinds=["water"])
    assert water.kind == "water" and water.distance_m == pytest.approx(300, abs=1.0)
    both = Q.points_near(LAT, east(1000), 350)
    assert [p.kind for p in both] == ["bike_shop", "water"]  # nearest first
    assert both[0].subkind == "repair"


def test_points_along_keeps_the_corridor_in_route_order(imported):
    m = MapBuilder()
    m.node(*offset_north(LAT, east(7000), 50), {"amenity": "cafe", "name": "Far along"})
    m.node(*offset_north(LAT, east(2000), -1500), {"shop": "bakery", "name": "Near start"})
    m.node(*offset_north(LAT, east(4000), 2500), {"shop": "supermarket", "name": "Outside"})
    m.node(*offset_north(LAT, east(-3000), 0), {"shop": "supermarket", "name": "Before the start"})
    imported(m)
    found = Q.points_along(ROUTE, 2000, kinds=["resupply"])
    assert [p.name for p in found] == ["Near start", "Far along"]
    assert found[0].distance_m == pytest.approx(1500, abs=2.0)
    # along the route as a WGS-84 geodesic (east() is a spherical approximation of the metres)
    assert found[0].along_m == pytest.approx(distance_m(LAT, LON, LAT, east(2000)), abs=1.0)
    assert found[1].along_m == pytest.approx(distance_m(LAT, LON, LAT, east(7000)), abs=1.0)
    assert Q.points_along(ROUTE, 2000, kinds=["water"]) == []


def test_ways_along_finds_roads_in_the_corridor_including_crossings(imported):
    m = MapBuilder()
    parallel = [offset_north(lat, lon, 10) for lat, lon in line_east(LAT, east(1000), 2, step_m=100)]
    m.way(parallel, {"highway": "track", "surface": "gravel", "cycleway:left": "lane", "name": "Parallel"})
    m.way([offset_north(lat, lon, 40) for lat, lon in line_east(LAT, east(5000), 1)], {"highway": "primary"})
    m.way([offset_north(LAT, east(8000), -300), offset_north(LAT, east(8000), 300)], {"highway": "residential"})
    m.way([offset_north(LAT, east(9000), 500), offset_north(LAT, east(9000), 900)], {"highway": "service"})
    beyond = ROUTE[-1][1] + 10 / PER_DEG_LON  # a way passing 10 m beyond the route's last vertex, no crossing
    m.way([offset_north(LAT, beyond, -500), offset_north(LAT, beyond, 500)], {"highway": "cycleway",
                                                                             "name": "Beyond the end"})
    imported(m)
    ways = {w.name or w.tags["highway"]: w for w in Q.ways_along(ROUTE, 20)}
    assert set(ways) == {"Parallel", "residential", "Beyond the end"}
    assert ways["residential"].distance_m == pytest.approx(0, abs=0.01)  # crosses, no vertex near
    assert ways["Beyond the end"].distance_m == pytest.approx(10, abs=0.5)  # the route's end to its segment
    assert ways["Beyond the end"].near_m == 0  # neither of its vertices is in the corridor
    par = ways["Parallel"]
    assert par.distance_m == pytest.approx(10, abs=0.5)
    assert par.near_m == pytest.approx(2000, rel=0.01) and par.length_m == pytest.approx(2000, rel=0.01)
    assert par.tags == {"highway": "track", "surface": "gravel", "cycleway:left": "lane"}
    assert {w.tags["highway"] for w in Q.ways_along(ROUTE, 50)} == {"track", "primary", "residential", "cycleway"}


def test_ferries_along_use_their_own_table(imported):
    m = MapBuilder()
    m.way([offset_north(LAT, east(3000), 80), offset_north(LAT, east(3000), 2000)], {"route": "ferry",
                                                                                    "name": "Bac de Loire"})
    imported(m)
    assert Q.ferries_along(ROUTE, 50) == []
    (ferry,) = Q.ferries_along(ROUTE, 100)
    assert ferry.name == "Bac de Loire" and ferry.distance_m == pytest.approx(80, abs=1.0)
    assert Q.ways_along(ROUTE, 100) == []


def test_nearest_place_and_place_search(imported):
    m = MapBuilder()
    m.node(*offset_north(LAT, east(500), 1000), {"place": "village", "name": "Saint-Étienne", "population": "900"})
    m.node(*offset_north(LAT, east(500), 300), {"place": "hamlet", "name": "Saint-Agrève"})
    m.node(46.0, 6.0, {"place": "city", "name": "Saint-Ouen", "population": "50000"})
    m.node(46.1, 6.0, {"place": "suburb", "name": "Saint-Suburb"})  # a feature, not a settlement
    imported(m)
    assert Q.nearest_place(LAT, east(500), 2000).name == "Saint-Agrève"
    village = Q.nearest_place(LAT, east(500), 2000, places=("city", "town", "village"))
    assert village.name == "Saint-Étienne" and village.distance_m == pytest.approx(1000, abs=2.0)
    assert Q.nearest_place(LAT, east(500), 200) is None
    assert [p.name for p in Q.places_matching("saint etienne")] == ["Saint-Étienne"]
    assert [p.name for p in Q.places_matching("SAINT")] == ["Saint-Ouen", "Saint-Étienne", "Saint-Agrève"]
    assert [p.name for p in Q.places_matching("saint", limit=1)] == ["Saint-Ouen"]
    assert Q.places_matching("%") == [] and Q.places_matching("_aint") == [] and Q.places_matching("  ") == []


def test_coverage_says_which_part_of_a_route_has_map_data(imported):
    assert Q.coverage(ROUTE) == (0.0, [])
    m = MapBuilder(bounds=(LAT - 0.1, LON - 0.1, LAT + 0.1, east(5000)))
    m.node(LAT, LON, {"amenity": "drinking_water"})
    imported(m)
    fraction, parts = Q.coverage(ROUTE)
    edge = distance_m(LAT, LON, LAT, east(5000))  # the area's east edge, metres along the route
    assert fraction == pytest.approx(edge / distance_m(LAT, LON, LAT, east(10_000)), abs=0.001)
    assert parts == [(0.0, pytest.approx(edge, abs=1.0))]  # metres along the line, cut at the edge
    assert Q.coverage(ROUTE[:10]) == (1.0, [(0.0, pytest.approx(distance_m(LAT, LON, *ROUTE[9][:2]), abs=1.0))])
    assert Q.coverage([(50.0, 10.0)]) == (0.0, [])
    assert Q.coverage([(LAT, east(100))]) == (1.0, [(0.0, 0.0)])


def test_coverage_counts_a_segment_crossing_an_area_with_no_vertex_inside(imported):
    """A stored day is simplified: a straight 10 km segment crosses a 2 km wide extract with no vertex in it.
    Its coverage is the length inside (the old rule, both ends inside a box, said 0: "no map data")."""
    m = MapBuilder(bounds=(LAT - 0.01, east(4000), LAT + 0.01, east(6000)))
    m.node(LAT, east(5000), {"amenity": "drinking_water"})
    imported(m)
    line = [(LAT, LON), (LAT, east(10_000))]
    fraction, parts = Q.coverage(line)
    assert fraction == pytest.approx(0.2, abs=0.002)
    ((a, b),) = parts
    assert a == pytest.approx(distance_m(LAT, LON, LAT, east(4000)), abs=2.0)
    assert b == pytest.approx(distance_m(LAT, LON, LAT, east(6000)), abs=2.0)
    # a diagonal segment clipping only the box's corner counts its short piece inside
    corner = Q.coverage([(LAT + 0.02, east(4000)), (LAT, east(7000))])[0]
    assert corner == pytest.approx(1 / 6, abs=0.01)  # from halfway (the north edge) to 2/3 (the east edge)
    # passing north of the box, or a segment along its latitude outside it: nothing
    assert Q.coverage([(LAT + 0.02, LON), (LAT + 0.02, east(10_000))]) == (0.0, [])
    assert Q.coverage([(LAT, east(7000)), (LAT, east(9000))]) == (0.0, [])


def test_coverage_counts_overlapping_areas_once_and_joins_touching_ones(imported):
    m1 = MapBuilder(bounds=(LAT - 0.01, LON - 0.01, LAT + 0.01, east(4000)))
    m1.node(LAT, east(1000), {"amenity": "drinking_water"})
    imported(m1, "west")
    m2 = MapBuilder(bounds=(LAT - 0.01, east(3000), LAT + 0.01, east(6000)))
    m2.node(LAT, east(5000), {"amenity": "drinking_water"})
    imported(m2, "middle")
    fraction, parts = Q.coverage([(LAT, LON), (LAT, east(10_000))])
    assert fraction == pytest.approx(0.6, abs=0.002)  # 0–6 km once, not 0–4 + 3–6
    assert len(parts) == 1 and parts[0][0] == 0.0


def test_countries_along_follow_the_imported_boundaries(imported):
    m = MapBuilder()
    m.country([(44.5, 4.5), (44.5, east(4000)), (45.5, east(4000)), (45.5, 4.5)], "FR", "France")
    m.country([(44.5, east(4000)), (44.5, 6.0), (45.5, 6.0), (45.5, east(4000))], "CH", "Switzerland")
    imported(m)
    runs = Q.countries_along(ROUTE)
    assert [(r.iso, r.name) for r in runs] == [("FR", "France"), ("CH", "Switzerland")]
    assert runs[0].start_index == 0 and runs[1].start_index == runs[0].end_index + 1
    assert 19 <= runs[0].end_index <= 20  # the border at 4 km, vertices every 200 m
    assert Q.country_at(LAT, east(9000)) == ("CH", "Switzerland")
    assert Q.country_at(47.0, 5.0) is None


def test_only_complete_imports_are_read_and_overlaps_come_back_once(imported):
    hotel = {"tourism": "hotel", "name": "Hôtel de la Gare"}
    for name in ("drome", "ardeche"):  # two extracts sharing a border strip hold the same node
        m = MapBuilder()
        m.node(LAT, east(100), hotel)
        imported(m, name)
    assert [p.name for p in Q.points_near(LAT, LON, 500)] == ["Hôtel de la Gare"]
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE osm_area SET status = 'loading'"))
    assert Q.points_near(LAT, LON, 500) == [] and Q.coverage(ROUTE) == (0.0, [])


def test_queries_need_no_flask_context_given_an_engine(imported, app_config):
    m = MapBuilder()
    m.node(LAT, east(100), {"amenity": "pharmacy"})
    imported(m)
    url = app_config["DATABASE_URL"]
    engine = sa.create_engine(url)
    try:
        (pharmacy,) = Q.points_near(LAT, LON, 500, kinds=["health"], engine=engine)
        assert pharmacy.subkind == "pharmacy"
    finally:
        engine.dispose()


def test_a_malformed_line_is_refused():
    with pytest.raises(ValueError, match="line must be"):
        Q.points_along([], 100)
    with pytest.raises(ValueError, match="line must be"):
        Q.ways_along([1.0, 2.0], 100)


def test_encoded_lines_round_trip_to_the_microdegree():
    import numpy as np

    from trips.osm.geometry import decode, encode_many

    rng = np.random.default_rng(7)
    coords = np.column_stack((rng.uniform(-89.9, 89.9, 600), rng.uniform(-179.9, 179.9, 600)))
    lengths = np.array([1, 0, 2, 97, 500])
    start = 0
    for n, text in zip(lengths, encode_many(coords, lengths)):
        expected = np.round(coords[start:start + n] * 1e6) / 1e6
        assert decode(text).shape == (n, 2) and np.allclose(decode(text), expected, atol=1e-9)
        start += n
    with pytest.raises(ValueError, match="truncated"):
        decode(encode_many(coords[:3], np.array([3]))[0][:-1])


def test_batched_chunk_queries_answer_as_one_query_per_chunk_did(imported, monkeypatch):
    """Property over a generated map (random points, ways and ferries around a meandering line): one
    statement for all of a line's chunks (also cut into several statements) finds exactly what one statement
    per chunk found, and issues one statement where the per-chunk form issued one per chunk."""
    import random

    rnd = random.Random(12)
    line = [(LAT, LON)]
    for _ in range(120):  # ~24 km, a vertex every ~200 m, turning
        lat, lon = line[-1]
        line.append((lat + rnd.uniform(-0.0015, 0.0025), lon + rnd.uniform(0.0, 0.003)))
    m = MapBuilder()
    kinds = [{"amenity": "drinking_water"}, {"shop": "bakery"}, {"tourism": "hotel", "name": "H"},
             {"shop": "bicycle"}, {"amenity": "pharmacy"}]
    scatter(m, rnd, line, kinds, nodes=600, ways=150, ferries=10, spread=0.02)
    imported(m)

    def answers():
        return (Q.points_along(line, 800), Q.points_along(line, 1500, kinds=["water", "resupply"]),
                Q.ways_along(line, 50), Q.ferries_along(line, 500))

    statements = []

    def spatial_statements(run):
        statements.clear()
        result = run()
        return result, len([s for s in statements if "osm_area r" in s])

    def record(*args):
        statements.append(args[2])

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        batched, batched_statements = spatial_statements(answers)
        monkeypatch.setattr(index, "BOXES_PER_STATEMENT", 7)
        split, split_statements = spatial_statements(answers)
        monkeypatch.setattr(index, "select_boxes", per_box_select)
        monkeypatch.setattr(index, "select_chunks", per_box_select)
        reference, per_chunk_statements = spatial_statements(answers)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)

    def comparable(answer):
        return [sorted((p.osm_type, p.osm_id, p.kind, round(p.distance_m, 6), round(p.along_m, 6)) for p in r)
                for r in answer[:2]] + [
                sorted((w.osm_id, round(w.distance_m, 6), round(w.near_m, 6)) for w in r) for r in answer[2:]]

    assert all(batched) and all(reference)  # the map has something for every query
    assert comparable(batched) == comparable(split) == comparable(reference)
    assert [[p.osm_id for p in r] for r in batched] == [[p.osm_id for p in r] for r in reference]
    chunks = len(list(index.line_chunks(index.as_line(line))))
    assert chunks > 20
    assert per_chunk_statements == 4 * chunks
    assert batched_statements == 4
    pieces = [c for _, c, _ in index.line_chunks(index.as_line(line))]
    probes = [len(index.merge_boxes(index.grow_chunks(pieces, m))) for m in (800, 1500, 50, 500)]
    assert probes[0] < chunks / 2 and probes[2] > probes[0]  # a wide corridor's boxes merge, a narrow one's less
    assert split_statements == sum(math.ceil(n / 7) for n in probes)


@pytest.mark.parametrize("vertices", [1, 2, 40, 400])
def test_nearest_in_chunks_is_nearest_on_line_per_chunk_bit_for_bit(vertices, monkeypatch):
    """points_along measures every (chunk, point) pair at once: the same distances and positions along the
    line, to the last bit, as trips.osm.geometry.nearest_on_line called chunk by chunk (repeated vertices,
    a one-point line and pairs cut into several blocks included)."""
    import numpy as np

    from trips.osm import geometry as G

    rng = np.random.default_rng(vertices)
    line = np.column_stack((LAT + np.cumsum(rng.normal(0, 0.001, vertices)),
                            LON + np.cumsum(rng.uniform(0, 0.002, vertices))))
    if vertices > 2:
        line[5] = line[4]  # a zero-length segment
    chunks = list(index.line_chunks(line))
    chunk_of = rng.integers(0, len(chunks), 700)
    lat = line[:, 0].mean() + rng.normal(0, 0.01, 700)
    lon = line[:, 1].mean() + rng.normal(0, 0.01, 700)
    monkeypatch.setattr(Q, "_PAIRS_PER_BLOCK", 97)
    dist, along = Q._nearest_in_chunks(chunks, list(chunk_of), lat, lon)
    for k, (_start, chunk, cum) in enumerate(chunks):
        mine = chunk_of == k
        if not mine.any():
            continue
        d, seg, t, _, _ = G.nearest_on_line(lat[mine], lon[mine], chunk)
        seg_len = np.diff(cum) if len(cum) > 1 else np.zeros(1)
        assert np.array_equal(dist[mine], d)
        assert np.array_equal(along[mine], cum[seg] + t * seg_len[seg])
    assert Q._nearest_in_chunks(chunks, [], np.zeros(0), np.zeros(0))[0].shape == (0,)
