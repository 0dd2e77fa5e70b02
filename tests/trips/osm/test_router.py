"""The bicycle router on the imported map (docs/RULES.md "Bicycle routing"): generated maps whose shortest bicycle
path is known (one-ways, a contraflow, a motorway and a road closed to bicycles to avoid, a cycleway to prefer, a
ferry as a last resort, a gap the map does not cover), searched on the prepared graph (SQLite and PostgreSQL) and with
pgRouting (PostgreSQL), and hostile input."""
import math
import random

import numpy as np
import pytest
import sqlalchemy as sa

from tests.osm_maps import MapBuilder, map_support_or_skip
from trips.core.db import db
from trips.osm import router
from trips.osm.importer import import_file
from trips.osm.network import profile
from trips.osm.geometry import LocalPlane, nearest_on_line

PLANE = LocalPlane(45.0, 5.0)


def p(x_m: float, y_m: float) -> tuple[float, float]:
    """The point x_m metres east and y_m north of (45.0, 5.0)."""
    lat, lon = PLANE.latlon(x_m, y_m)
    return round(float(lat), 7), round(float(lon), 7)


def line(*xy, step: float = 100.0) -> list[tuple[float, float]]:
    """A polyline through the (x, y) corners, a vertex every `step` metres."""
    out = []
    for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
        n = max(1, int(math.hypot(x1 - x0, y1 - y0) // step))
        out += [p(x0 + (x1 - x0) * i / n, y0 + (y1 - y0) * i / n) for i in range(n)]
    return out + [p(*xy[-1])]


@pytest.fixture(params=["graph", "pgrouting"])
def search(request, ctx):
    """How the route is searched: the prepared graph everywhere; pgRouting on PostgreSQL only (skipped on SQLite)."""
    engine = db.engine
    map_support_or_skip(engine)
    if request.param == "pgrouting":
        if engine.dialect.name != "postgresql":
            pytest.skip("pgRouting is PostgreSQL's: on SQLite the router searches the prepared graph")
        with engine.begin() as conn:
            if not router.install_pgrouting(conn):
                pytest.skip("this PostgreSQL has no pgRouting (apt-get install postgresql-15-pgrouting)")
    return request.param == "pgrouting"


def build(tmp_path, m: MapBuilder, name="region"):
    return import_file(db.engine, m.write(tmp_path / f"{name}.osm.pbf"))


def go(pgr: bool, *points):
    return router.route(db.engine, [p(*xy) for xy in points], use_pgrouting=pgr)


def km(route) -> float:
    return route.distance_km


def passes(route, xy, within_m=30.0) -> bool:
    lat, lon = p(*xy)
    return float(nearest_on_line(np.array([lat]), np.array([lon]), route.line[:, :2])[0][0]) <= within_m


def square(m: MapBuilder, top_tags: dict, detour: str = "residential") -> None:
    """A 1 km street along y = 0 from (0, 0) to (1000, 0) tagged `top_tags`, and a 3 km detour by y = 1000."""
    a, b = m.node(*p(0, 0)), m.node(*p(1000, 0))
    m.way([a, *line((100, 0), (900, 0)), b], top_tags)
    m.way([a, *line((0, 100), (0, 1000), (1000, 1000), (1000, 900)), b], {"highway": detour})


def test_a_one_way_street_against_its_direction_forces_the_detour(tmp_path, search):
    m = MapBuilder()
    square(m, {"highway": "residential", "oneway": "-1"})  # open east → west only
    build(tmp_path, m)
    east = go(search, (0, -20), (1000, -20))
    assert not east.approximate and east.distance_km == pytest.approx(3.04, abs=0.05)
    assert passes(east, (500, 1000))
    west = go(search, (1000, -20), (0, -20))
    assert not west.approximate and west.distance_km == pytest.approx(1.04, abs=0.05)
    assert not passes(west, (500, 1000))


def test_a_contraflow_for_bicycles_is_ridden_both_ways(tmp_path, search):
    m = MapBuilder()
    square(m, {"highway": "residential", "oneway": "yes", "oneway:bicycle": "no"})
    build(tmp_path, m)
    assert go(search, (1000, 0), (0, 0)).distance_km == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("tags", [{"highway": "motorway"}, {"highway": "primary", "bicycle": "no"},
                                  {"highway": "service", "access": "private"}])
def test_a_way_closed_to_bicycles_is_never_used_even_when_shorter(tmp_path, search, tags):
    m = MapBuilder()
    square(m, tags)
    build(tmp_path, m)
    r = go(search, (0, -20), (1000, -20))
    assert not r.approximate and r.distance_km == pytest.approx(3.04, abs=0.05) and passes(r, (500, 1000))


def test_a_cycleway_is_preferred_over_a_slightly_shorter_primary_road(tmp_path, search):
    m = MapBuilder()
    a, b = m.node(*p(0, 0)), m.node(*p(1000, 0))
    m.way([a, *line((100, 0), (900, 0)), b], {"highway": "primary"})
    m.way([a, *line((0, 150), (1000, 150)), b], {"highway": "cycleway"})  # 1.3 km
    build(tmp_path, m)
    r = go(search, (0, 0), (1000, 0))
    assert r.distance_km == pytest.approx(1.3, abs=0.02) and passes(r, (500, 150), within_m=1)
    # the road's real shape, not node to node: every vertex of the cycleway is in the answer
    assert len(r.line) >= 12


def test_a_ferry_only_when_nothing_else_connects(tmp_path, search):
    m = MapBuilder()
    a, b = m.node(*p(0, 0)), m.node(*p(1000, 0))
    m.way([a, p(-500, 0)], {"highway": "residential"})
    m.way([b, p(1500, 0)], {"highway": "residential"})
    m.way([a, b], {"route": "ferry"})
    build(tmp_path, m)
    r = go(search, (-500, 0), (1500, 0))
    assert not r.approximate and r.distance_km == pytest.approx(2.0, abs=0.02)
    m.way([a, *line((0, -2000), (1000, -2000)), b], {"highway": "unclassified"})  # a 5 km road round the water
    build(tmp_path, m)  # the same region again: replaces the first import
    r = go(search, (-500, 0), (1500, 0))
    assert r.distance_km == pytest.approx(6.0, abs=0.05) and passes(r, (500, -2000))


def test_a_gap_the_map_does_not_cover_is_joined_straight_and_said(tmp_path, search):
    m = MapBuilder()
    m.way(line((0, 0), (1000, 0)), {"highway": "residential"})
    m.way(line((3000, 0), (4000, 0)), {"highway": "residential"})
    build(tmp_path, m)
    r = go(search, (0, 0), (4000, 0))
    assert r.approximate and not r.legs[0].routed and "do not join" in str(r.legs[0].why)
    r = go(search, (0, 0), (800, 0), (10_000, 0))  # the second point is covered, the third 6 km from any road
    assert [leg.routed for leg in r.legs] == [True, False] and "no road within 500 m of the end" in str(r.legs[1].why)
    assert r.approximate and np.isnan(r.line[1:-2, 2]).all()  # the router's points have no elevation


def test_points_in_the_sea_the_same_point_twice_and_too_many_points(tmp_path, search):
    m = MapBuilder()
    m.way(line((0, 0), (1000, 0)), {"highway": "residential"})
    build(tmp_path, m)
    sea = router.route(db.engine, [(43.0, 7.5), (43.1, 7.6)], use_pgrouting=search)
    assert sea.approximate and len(sea.line) == 2 and "no road within 500 m of the start" in str(sea.legs[0].why)
    same = go(search, (500, 0), (500, 0))
    assert not same.approximate and same.distance_km == 0.0 and len(same.line) == 2  # a line, still
    fifty = go(search, *[(i * 20, 0) for i in range(50)])  # 50 points in a line: answered, along the street
    assert not fifty.approximate and len(fifty.legs) == 49 and abs(fifty.distance_km - 0.98) < 0.01
    with pytest.raises(ValueError, match="points: between 2 and 50"):
        go(search, *[(i * 20, 0) for i in range(51)])
    for bad in ([(45.0, 5.0)], [(45.0, 5.0), (float("nan"), 5.0)], [(45.0, 5.0), (95.0, 5.0)], [(45.0, 5.0), "ab"]):
        with pytest.raises(ValueError, match="points"):
            router.route(db.engine, bad)


def test_both_ends_on_one_edge_and_a_one_way_turned_back(tmp_path, search):
    m = MapBuilder()
    square(m, {"highway": "residential", "oneway": "yes"})  # west → east only
    build(tmp_path, m)
    assert go(search, (200, 0), (700, 0)).distance_km == pytest.approx(0.5, abs=0.01)
    back = go(search, (700, 0), (200, 0))  # round the block: 300 m east, the 3 km detour, 200 m back east
    assert back.distance_km == pytest.approx(3.5, abs=0.05) and passes(back, (500, 1000))


def pgrouting_or_skip() -> None:
    """Skip unless the test database is PostgreSQL with pgRouting installed (or installable)."""
    engine = db.engine
    map_support_or_skip(engine)
    if engine.dialect.name != "postgresql":
        pytest.skip("pgRouting is PostgreSQL's")
    with engine.begin() as conn:
        if not router.install_pgrouting(conn):
            pytest.skip("this PostgreSQL has no pgRouting (apt-get install postgresql-15-pgrouting)")


def test_pgrouting_and_the_graph_agree(tmp_path, ctx):
    pgrouting_or_skip()
    m = MapBuilder()
    corner = {(i, j): m.node(*p(i * 300, j * 300)) for i in range(6) for j in range(6)}
    for i in range(6):  # a grid of crossing streets (sharing their corner nodes), one-ways on alternate ones
        m.way([corner[k, i] for k in range(6)], {"highway": "residential", "oneway": "yes" if i % 2 else "no"})
        m.way([corner[i, k] for k in range(6)], {"highway": "tertiary" if i % 2 else "residential"})
    build(tmp_path, m)
    for a, b in (((10, 10), (1490, 1490)), ((1490, 310), (10, 890)), ((600, 600), (0, 1500))):
        fast, slow = go(True, a, b), go(False, a, b)
        assert not fast.approximate and fast.distance_km == pytest.approx(slow.distance_km, abs=1e-6)
        assert np.allclose(fast.line[:, :2], slow.line[:, :2])


def test_the_profile_reads_access_and_direction():
    assert profile({"highway": "motorway"}) is None and profile({"highway": "trunk", "motorroad": "yes"}) is None
    assert profile({"highway": "footway", "bicycle": "yes"}) == ("path", True, True)
    assert profile({"highway": "path", "bicycle": "designated"}) == ("cycleway", True, True)
    assert profile({"highway": "track", "access": "no", "bicycle": "yes"}) == ("track", True, True)
    assert profile({"highway": "primary", "junction": "roundabout"}) == ("primary", True, False)
    assert profile({"highway": "residential", "oneway": "yes", "cycleway": "opposite_lane"}) == ("quiet", True, True)
    assert profile({"highway": "residential", "oneway:bicycle": "-1"}) == ("quiet", False, True)
    assert profile({"route": "ferry"}) == ("ferry", True, True)


def test_a_reimport_replaces_the_network(tmp_path, search):
    m = MapBuilder()
    m.way(line((0, 0), (1000, 0)), {"highway": "residential"})
    first = build(tmp_path, m)
    assert first["counts"]["network"] == {"edges": 1}
    m2 = MapBuilder()
    m2.way(line((0, 5000), (1000, 5000)), {"highway": "residential"})
    build(tmp_path, m2)
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM osm_edge WHERE area_id = :a"),
                            {"a": first["area_id"]}).scalar() == 0
    assert go(search, (0, 0), (1000, 0)).approximate and not go(search, (0, 5000), (1000, 5000)).approximate


def test_reroute_says_which_stretch_is_routed_and_valhalla_still_wins(tmp_path, ctx, fake_valhalla):
    from trips.providers.valhalla import RoutingConfig
    from trips.services.routing import reroute

    map_support_or_skip(db.engine)
    m = MapBuilder()
    m.way(line((0, 0), (0, 1000), (1000, 1000)), {"highway": "residential"})
    build(tmp_path, m)
    start, via, far = p(0, -50), p(1000, 1000), p(9000, 1000)
    found = reroute(start, via, far, RoutingConfig(valhalla_url=None))
    assert found.approximate and str(found.stretches[0]) == "routed on the map"
    assert str(found.stretches[1]).startswith("joined straight: approximate (no road within 500 m of the end")
    assert found.distance_km == pytest.approx(2.05 + 8.0, abs=0.05) and passes(router.Route(
        np.array([list(q) for q in found.geometry], dtype=float), 0.0, []), (0, 1000), within_m=1)
    assert [q[2] for q in found.geometry[1:-2]] == [None] * (len(found.geometry) - 3)  # unknown, not 0 m
    assert found.geometry[0][2] == 0.0 and found.geometry[-1][2] == 0.0  # the given points as given
    fake_valhalla.set_route([start, via, far], length_km=12.0)
    online = reroute(start, via, far, fake_valhalla.config())
    assert not online.approximate and online.distance_km == 12.0 and len(fake_valhalla.bodies) == 1


@pytest.mark.parametrize("north_m, routed", [(4500, True), (5600, False)])
def test_the_wide_box_is_searched_when_the_band_holds_no_way_through(tmp_path, search, north_m, routed):
    # pgRouting searches a band, then a box; the prepared graph holds the whole network and routes both. Two streets north from the ends of a 2 km leg, joined only by a street `north_m` north: beyond the band (3 km
    # from the straight line), within the wide box (3 km beyond the ends' edges, which end 2 km north) or beyond it.
    m = MapBuilder()
    west, east = m.node(*p(0, 2000)), m.node(*p(2000, 2000))
    m.way([*line((0, 0), (0, 1900)), west], {"highway": "residential"})
    m.way([*line((2000, 0), (2000, 1900)), east], {"highway": "residential"})
    nw, ne = m.node(*p(0, north_m)), m.node(*p(2000, north_m))
    m.way([west, *line((0, 2100), (0, north_m - 100)), nw], {"highway": "residential"})
    m.way([nw, *line((100, north_m), (1900, north_m)), ne], {"highway": "residential"})  # an edge of its own
    m.way([ne, *line((2000, north_m - 100), (2000, 2100)), east], {"highway": "residential"})
    build(tmp_path, m)
    r = go(search, (0, 0), (2000, 0))
    routed = routed or not search
    assert r.legs[0].routed is routed
    if routed:
        assert r.distance_km == pytest.approx(2 * north_m / 1000 + 2.0, abs=0.05)


def test_a_way_the_extract_cut_keeps_its_located_nodes(tmp_path, search):
    m = MapBuilder()
    a, b, c = m.node(*p(0, 0)), m.node(*p(500, 0)), m.node(*p(1000, 0))
    m.way([a, b, 999_999, c], {"highway": "residential"})  # node 999999 is not in the file
    m.node(*p(0, 3000), {"amenity": "drinking_water"})  # the import keeps a point (the cut way is no osm_way row)
    summary = build(tmp_path, m)
    assert summary["counts"]["network"] == {"edges": 1}
    r = go(search, (0, 0), (1000, 0))
    assert not r.approximate and r.distance_km == pytest.approx(1.0, abs=0.01)


def test_the_import_writes_each_edges_cost_each_way(tmp_path, ctx):
    """docs/RULES.md "Bicycle routing": cost = length × the class's cost of a metre, -1 the way a bicycle may not ride."""
    map_support_or_skip(db.engine)
    m = MapBuilder()
    m.way(line((0, 0), (1000, 0)), {"highway": "cycleway"})
    m.way(line((0, 500), (1000, 500)), {"highway": "primary", "oneway": "yes"})
    m.way(line((0, 900), (1000, 900)), {"highway": "residential", "oneway": "-1"})
    build(tmp_path, m)
    with db.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT kind, length_m, cost, reverse_cost FROM osm_edge ORDER BY kind")).all()
    assert [r.kind for r in rows] == ["cycleway", "primary", "quiet"]
    assert all(r.length_m == pytest.approx(1000, abs=2) for r in rows)
    per_metre = [(r.cost / r.length_m, r.reverse_cost / r.length_m) for r in rows]
    assert per_metre == [pytest.approx((0.8, 0.8)), pytest.approx((2.2, -1 / rows[1].length_m)),
                         pytest.approx((-1 / rows[2].length_m, 1.0))]


def test_an_import_not_ready_is_not_routed_on(tmp_path, search):
    m = MapBuilder()
    m.way(line((0, 0), (1000, 0)), {"highway": "residential"})
    area = build(tmp_path, m)["area_id"]
    for status, approximate in (("loading", True), ("ready", False)):
        with db.engine.begin() as conn:
            conn.execute(sa.text("UPDATE osm_area SET status = :s WHERE id = :a"), {"s": status, "a": area})
        assert go(search, (0, 0), (1000, 0)).approximate is approximate


def test_migration_0017_costs_the_edges_imported_before_it(tmp_path, redis_server):
    """Edges written before 0017 get their costs from COST_PER_METRE; the downgrade removes the two columns."""
    import os

    from flask_migrate import downgrade, upgrade

    from app import create_app
    from tests.conftest import PG_TEST_SCHEMA, pg_url_with_schema, reset_pg_schema

    url = os.environ.get("DATABASE_URL") or ""
    if url.startswith("postgresql"):
        reset_pg_schema(url, f"{PG_TEST_SCHEMA}_m16")
        url = pg_url_with_schema(url, f"{PG_TEST_SCHEMA}_m16")
    else:
        url = f"sqlite:///{tmp_path / 'm16.sqlite3'}"
    app = create_app({"DATABASE_URL": url, "REDIS_URL": redis_server, "BTP_INSTANCE_DIR": str(tmp_path),
                      "BTP_SECRET_KEY": "x"}, environ={})
    with app.app_context():
        upgrade(revision="0016")
        edge = ("INSERT INTO osm_edge (area_id, osm_type, osm_id, source, target, kind, forward, backward, length_m, "
                "line, min_lat, min_lon, max_lat, max_lon) VALUES (1, 'w', {0}, 1, 2, '{1}', {2}, {3}, 100, '', 0, 0, "
                "0, 0)")
        with db.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO osm_area (id, name, source_file, status, started_at) "
                                 "VALUES (1, 'r', 'r.pbf', 'ready', CURRENT_TIMESTAMP)"))
            for osm_id, kind, fwd, bwd in ((1, "cycleway", "TRUE", "TRUE"), (2, "trunk", "FALSE", "TRUE"),
                                           (3, "no such class", "TRUE", "FALSE")):
                conn.execute(sa.text(edge.format(osm_id, kind, fwd, bwd)))
        upgrade(revision="0017")
        with db.engine.connect() as conn:
            got = conn.execute(sa.text("SELECT osm_id, cost, reverse_cost FROM osm_edge ORDER BY osm_id")).all()
        assert [tuple(r) for r in got] == [(1, 80.0, 80.0), (2, -1.0, 300.0), (3, 150.0, -1.0)]
        downgrade(revision="0016")
        with db.engine.connect() as conn, pytest.raises(sa.exc.DBAPIError, match="cost"):
            conn.execute(sa.text("SELECT cost FROM osm_edge"))
        downgrade(revision="base")
        db.engine.dispose()


def test_pgrouting_finds_the_cheapest_path_the_graph_finds_on_a_grid(tmp_path, ctx, monkeypatch):
    """pgRouting and the prepared graph's A* find paths of the same cost on 30 random legs of a 30 × 30 grid of
    classes and one-ways: pgr_bdDijkstra, used before, returned a dearer one on one of them (router.PGR_FUNCTION)."""
    pgrouting_or_skip()
    m, n = MapBuilder(), 30
    corner = {(i, j): m.node(*p(i * 150, j * 150)) for i in range(n) for j in range(n)}
    kinds = ["residential", "tertiary", "residential", "cycleway", "residential", "primary", "residential"]
    for i in range(n):
        for k in range(n - 1):  # one edge per block side, each way its own class and one-way every 5th
            tags = {"highway": kinds[(i + k) % 7], **({"oneway": "yes"} if (i * 3 + k) % 5 == 0 else {})}
            m.way([corner[k, i], corner[k + 1, i]], tags)
            m.way([corner[i, k], corner[i, k + 1]], {**tags, "highway": kinds[(i * 2 + k) % 7]})
    build(tmp_path, m)
    costs = {}
    for name in ("_search_graph", "_search_pgr"):
        def keep(*args, _f=getattr(router, name), _n=name):
            found = _f(*args)
            costs[_n] = found[0]
            return found
        monkeypatch.setattr(router, name, keep)
    rng = random.Random(3)
    for a, b in [((rng.uniform(0, 4300), rng.uniform(0, 4300)), (rng.uniform(0, 4300), rng.uniform(0, 4300)))
                 for _ in range(30)]:
        go(False, a, b), go(True, a, b)
        assert costs["_search_pgr"] == pytest.approx(costs["_search_graph"], rel=1e-9), (a, b)
