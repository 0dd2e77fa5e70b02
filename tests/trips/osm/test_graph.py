"""The prepared graph the router searches (trips/osm/graph.py, trips/osm/search.py): a leg of hundreds of km routed
on the roads, the graph made anew after every import and never a stale one, loaded from the database by another
app instance, a damaged or missing instance copy made again, and the A* search's costs against a plain Dijkstra."""
import heapq
import math
import random

import numpy as np
import pytest
import sqlalchemy as sa

from tests.osm_maps import MapBuilder, map_support_or_skip
from trips.core.db import db
from trips.osm import graph as prepared, router, search
from trips.osm.geometry import GEOD, LocalPlane
from trips.osm.importer import import_file
from trips.route.pacing import MAX_LEG_KM

PLANE = LocalPlane(45.0, 5.0)


def p(x_m: float, y_m: float) -> tuple[float, float]:
    lat, lon = PLANE.latlon(x_m, y_m)
    return round(float(lat), 7), round(float(lon), 7)


def street(m: MapBuilder, x0, y0, x1, y1, tags=None):
    m.way([p(x0, y0), p((x0 + x1) / 2, (y0 + y1) / 2), p(x1, y1)], tags or {"highway": "residential"})


def build(tmp_path, m: MapBuilder, name="region"):
    return import_file(db.engine, m.write(tmp_path / f"{name}.osm.pbf"), name=name)


def go(*xy, **kw):
    return router.route(db.engine, [p(*q) for q in xy], **kw)


@pytest.fixture
def maps(ctx):
    map_support_or_skip(db.engine)
    prepared.forget()
    yield
    prepared.forget()


def test_a_leg_of_600_km_is_routed_on_the_grid_not_joined_straight(tmp_path, maps):
    m, step = MapBuilder(), 10_000
    corner = {(i, j): m.node(*p(i * step, j * step)) for i in range(61) for j in range(6)}
    for j in range(6):  # streets 10 km apart sharing their crossings: east-west over 600 km, north-south over 50 km
        m.way([corner[i, j] for i in range(61)], {"highway": "residential"})
    for i in range(61):
        m.way([corner[i, j] for j in range(6)], {"highway": "tertiary" if i % 2 else "residential"})
    build(tmp_path, m)
    r = go((0, -100), (600_000, 50_100))
    straight = GEOD.inv(*p(0, 0)[::-1], *p(600_000, 50_000)[::-1])[2] / 1000
    along_grid = (GEOD.inv(*p(0, 50_000)[::-1], *p(600_000, 50_000)[::-1])[2] / 1000 + 50.0)
    assert r.legs[0].routed and not r.approximate and straight < 605 < along_grid
    assert r.distance_km == pytest.approx(along_grid, rel=0.01)  # east then north: the grid's own distance
    assert len(r.line) > 60  # through the crossings, not a straight join


def test_a_leg_longer_than_the_router_searches_is_joined_straight_and_said(tmp_path, maps):
    m = MapBuilder()
    street(m, 0, 0, 1000, 0)
    street(m, 1_050_000, 0, 1_051_000, 0)
    build(tmp_path, m)
    r = go((500, 0), (1_050_500, 0))
    assert r.approximate and not r.legs[0].routed
    assert f"longer than {MAX_LEG_KM:,.0f} km" in str(r.legs[0].why)


def test_a_new_import_makes_a_new_graph_and_the_old_one_is_never_searched(tmp_path, maps, app):
    m = MapBuilder()
    street(m, 0, 0, 1000, 0)
    first = build(tmp_path, m)
    assert not go((0, 0), (1000, 0)).approximate
    old = prepared.current(db.engine)
    folder = prepared.instance_folder() / prepared.FOLDER
    assert (folder / old.key).is_dir()
    m2 = MapBuilder()  # the same region again: the street moved 5 km north
    street(m2, 0, 5000, 1000, 5000)
    second = build(tmp_path, m2)
    assert second["replaced"] == [first["area_id"]] and second["graph"]["edges"] == 1
    new = prepared.current(db.engine)
    assert new.key != old.key and not (folder / old.key).exists()
    assert go((0, 0), (1000, 0)).approximate and not go((0, 5000), (1000, 5000)).approximate
    with db.engine.connect() as conn:  # the replaced import's part went with it
        assert conn.execute(sa.text("SELECT count(*) FROM osm_graph WHERE area_id = :a"),
                            {"a": first["area_id"]}).scalar() == 0


def test_an_import_not_ready_has_no_part_in_the_graph(tmp_path, maps):
    m = MapBuilder()
    street(m, 0, 0, 1000, 0)
    area = build(tmp_path, m)["area_id"]
    street(m, 0, 3000, 1000, 3000)
    other = build(tmp_path, m, name="other")["area_id"]  # side by side with the first
    ready = prepared.current(db.engine)
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE osm_area SET status = 'loading' WHERE id = :a"), {"a": other})
    alone = prepared.current(db.engine)
    assert alone.key != ready.key and len(alone.node) < len(ready.node)
    assert go((0, 3000), (1000, 3000)).approximate and not go((0, 0), (1000, 0)).approximate
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE osm_area SET status = 'loading' WHERE id = :a"), {"a": area})
    assert prepared.current(db.engine) is None and go((0, 0), (1000, 0)).approximate


def test_another_app_instance_loads_the_graph_from_the_database(tmp_path, maps, fresh_app):
    m = MapBuilder()
    corner = m.node(*p(1000, 0))  # shared: the two streets meet there
    m.way([p(0, 0), p(500, 0), corner], {"highway": "residential"})
    m.way([corner, p(1000, 1000), p(1000, 2000)], {"highway": "residential"})
    build(tmp_path, m)
    here = go((0, 0), (1000, 2000))
    assert not here.approximate and here.distance_km == pytest.approx(3.0, abs=0.01)
    other = fresh_app(BTP_INSTANCE_DIR=str(tmp_path / "other-node"))
    prepared.forget()  # what this process held: the other instance starts from the database alone
    with other.app_context():
        there = router.route(db.engine, [p(0, 0), p(1000, 2000)])
        key = prepared.current(db.engine).key
    assert (tmp_path / "other-node" / prepared.FOLDER / key / "manifest.json").is_file()
    assert not there.approximate and there.distance_km == pytest.approx(here.distance_km, abs=1e-9)
    assert np.allclose(there.line[:, :2], here.line[:, :2])


@pytest.mark.parametrize("damage", ["flipped", "truncated", "deleted", "no manifest"])
def test_a_damaged_or_missing_instance_copy_is_made_again_from_the_database(tmp_path, maps, damage):
    m = MapBuilder()
    corner = m.node(*p(1000, 0))  # shared: the two streets meet there
    m.way([p(0, 0), p(500, 0), corner], {"highway": "residential"})
    m.way([corner, p(1000, 1000), p(1000, 2000)], {"highway": "residential"})
    build(tmp_path, m)
    good = go((0, 0), (1000, 2000))
    assert not good.approximate and good.distance_km == pytest.approx(3.0, abs=0.01)
    copy = prepared.instance_folder() / prepared.FOLDER / prepared.current(db.engine).key
    cost = copy / "cost.npy"
    if damage == "flipped":  # one cost's bytes changed: the file still loads, with a wrong cost
        data = bytearray(cost.read_bytes())
        data[-3] ^= 0x40
        cost.write_bytes(bytes(data))
    elif damage == "truncated":
        cost.write_bytes(cost.read_bytes()[:-8])
    elif damage == "deleted":
        cost.unlink()
    else:
        (copy / "manifest.json").unlink()
    assert prepared._open(copy, copy.name) is None  # never searched as it is
    prepared.forget()
    again = go((0, 0), (1000, 2000))
    assert prepared._open(copy, copy.name) is not None
    assert again.distance_km == pytest.approx(good.distance_km, abs=1e-9) and not again.approximate


def test_an_import_without_its_part_gets_it_on_first_use(tmp_path, maps):
    m = MapBuilder()
    street(m, 0, 0, 1000, 0)
    area = build(tmp_path, m)["area_id"]
    with db.engine.begin() as conn:  # as an import made before the graph was prepared at import
        conn.execute(sa.text("DELETE FROM osm_graph"))
    prepared.forget()
    assert not go((0, 0), (1000, 0)).approximate
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM osm_graph WHERE area_id = :a"), {"a": area}).scalar() >= 1


@pytest.mark.parametrize("damage", ["flipped", "truncated"])
def test_a_part_damaged_in_the_database_is_prepared_again_from_the_edges(tmp_path, maps, damage):
    m = MapBuilder()
    street(m, 0, 0, 1000, 0)
    area = build(tmp_path, m)["area_id"]
    with db.engine.begin() as conn:
        token, data = conn.execute(sa.text("SELECT token, data FROM osm_graph WHERE area_id = :a AND seq = 0"),
                                   {"a": area}).one()
        data = bytearray(data)
        if damage == "flipped":  # inside an array's bytes: its CRC-32 no longer matches
            data[len(data) // 2] ^= 0x55
        else:
            data = data[:len(data) // 2]
        conn.execute(sa.text("UPDATE osm_graph SET data = :d WHERE area_id = :a"), {"d": bytes(data), "a": area})
    prepared.forget()
    r = go((0, 0), (1000, 0))
    assert not r.approximate and r.distance_km == pytest.approx(1.0, abs=0.01)
    with db.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT token FROM osm_graph WHERE area_id = :a AND seq = 0"),
                            {"a": area}).scalar() != token


def test_a_weighing_of_the_arcs_changes_the_cheapest_path(tmp_path, maps):
    m = MapBuilder()
    a, b = m.node(*p(0, 0)), m.node(*p(1000, 0))
    m.way([a, p(500, 0), b], {"highway": "cycleway"})  # the short way, and a detour of quiet streets
    m.way([a, p(0, 600), p(1000, 600), b], {"highway": "residential"})
    m.way([p(-500, 0), p(-250, 0), a], {"highway": "residential"})  # the ends: on streets of their own
    m.way([b, p(1250, 0), p(1500, 0)], {"highway": "residential"})
    build(tmp_path, m)
    assert go((-500, 0), (1500, 0)).distance_km == pytest.approx(2.0, abs=0.01)

    def no_cycleways(g):  # a factor per arc through its edge id, as a bike type's weighing would
        with db.engine.connect() as conn:
            ways = {r.id for r in conn.execute(sa.text("SELECT id FROM osm_edge WHERE kind = 'cycleway'"))}
        return np.where(np.isin(g.edge, list(ways)), 10.0, 1.0)

    assert go((-500, 0), (1500, 0), weigh=no_cycleways).distance_km == pytest.approx(3.2, abs=0.02)
    assert go((-500, 0), (1500, 0)).distance_km == pytest.approx(2.0, abs=0.01)  # the graph itself is unchanged


def _dijkstra(arcs, starts, ends):
    best = {n: c for n, c in starts.items()}
    heap = [(c, n) for n, c in starts.items()]
    heapq.heapify(heap)
    done = set()
    while heap:
        c, u = heapq.heappop(heap)
        if u in done:
            continue
        done.add(u)
        for v, w in arcs.get(u, ()):
            if c + w < best.get(v, math.inf):
                best[v] = c + w
                heapq.heappush(heap, (c + w, v))
    return min((best[n] + c for n, c in ends.items() if n in best), default=math.inf)


@pytest.mark.parametrize("seed", range(6))
def test_the_a_star_search_finds_the_cost_a_plain_dijkstra_finds(seed):
    rng = random.Random(seed)
    n = 300
    lat = np.array([45 + rng.uniform(0, 0.3) for _ in range(n)])
    lon = np.array([5 + rng.uniform(0, 0.4) for _ in range(n)])
    src, dst = [], []
    for _ in range(900):
        a = rng.randrange(n)
        b = min(range(n), key=lambda k: (lat[k] - lat[a]) ** 2 + (lon[k] - lon[a]) ** 2 + rng.uniform(0, 4e-4)
                if k != a else math.inf)
        src.append(a), dst.append(b)
    src, dst = np.array(src), np.array(dst)
    length = GEOD.inv(lon[src], lat[src], lon[dst], lat[dst])[2] * np.array([rng.uniform(1.0, 1.6) for _ in src])
    factor = np.array([rng.choice((0.8, 1.0, 1.3, 2.2, 25.0)) for _ in src])
    one_way = np.array([rng.random() < 0.2 for _ in src])
    part = {"edge": np.arange(len(src)) + 100, "source": src + 10, "target": dst + 10, "cost": length * factor,
            "reverse": np.where(one_way, -1.0, length * factor), "length": length, "node": np.arange(n) + 10,
            "lat": lat, "lon": lon}
    arrays, per_metre = prepared.merge([part])
    g = prepared.Graph(key="t", per_metre=per_metre, **arrays)
    arcs: dict = {}
    for u in range(n):
        for k in range(g.indptr[u], g.indptr[u + 1]):
            arcs.setdefault(u, []).append((int(g.head[k]), float(g.cost[k])))
    for _ in range(15):
        starts = {rng.randrange(n): rng.uniform(0, 50) for _ in range(2)}
        goal = rng.randrange(n)
        target = (float(lat[goal]), float(lon[goal]))
        # as the router's end edge: each end node's cost at least the cheapest metre times its way to the target
        ends = {k: rng.uniform(0, 50) + per_metre * GEOD.inv(lon[k], lat[k], target[1], target[0])[2]
                for k in (goal, rng.randrange(n))}
        found = search.cheapest(g, g.scratch, starts, ends, target)
        expected = _dijkstra(arcs, starts, ends)
        if found is None:
            assert expected == math.inf
            continue
        cost, first, last, nodes, path = found
        assert cost == pytest.approx(expected, rel=1e-9) and first in starts and last in ends
        assert [int(g.head[a]) for a in path] == [*nodes[1:].tolist(), last]  # arcs that join, node to node
        assert cost == pytest.approx(starts[first] + float(g.cost[path].sum()) + ends[last], rel=1e-9)
