"""The bicycle router over the imported map (docs/RULES.md "Bicycle routing"), with no outside service. Each leg's
ends are snapped to the nearest routable edge within SNAP_M; the cheapest path between them is searched on the
graph of the whole network the import prepared (trips/osm/graph.py, an A* search: trips/osm/search.py), or, on
request, with pgRouting over the edges of a band along the straight line (`_corridor`), else of a wider box
(`_box`). A leg the map cannot route is joined straight and marked approximate; the `Leg` says why.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import sqlalchemy as sa

from trips.errors import Msg, N_
from trips.osm import geometry, search
from trips.osm.graph import Graph, current
from trips.osm.network import COST_PER_METRE
from trips.osm.index import _postgis_schema
from trips.osm.waykinds import DEFAULT_BIKE, route_weights
from trips.route.geo import total_distance_km
from trips.route.pacing import MAX_LEG_KM

SNAP_M = 500.0  # a point further than this from every road is not covered by the map
STRAIGHT_END_M = 50.0  # a point further than this from its road is joined to it by a straight line worth saying
MARGIN_M, MARGIN_SHARE = 3000.0, 0.5  # pgRouting's wide box: the leg's ends' box grown by max(3 km, half the leg)
CORRIDOR_SHARE, MAX_CORRIDOR_BOXES = 0.15, 16  # its band, searched first: max(3 km, 15 % of the leg) each side
MAX_POINTS = 50  # points of one route (start, waypoints, end): a trip planned from places has up to 50
LINES_PER_STATEMENT = 5_000
_EDGE_COLS = "t.id, t.source, t.target, t.kind, t.forward, t.backward, t.length_m, t.grade"
# Only a ready import's rows (trips/osm/tables.py): a per-row test, not a join, so PostgreSQL reads the band by its
# spatial index rather than the whole table by its area index.
_READY = "t.area_id NOT IN (SELECT id FROM osm_area WHERE status <> 'ready')"


@dataclass
class Leg:
    line: np.ndarray  # (n, 2) lat, lon from one point to the next
    routed: bool
    why: Msg | None = None  # for a straight leg: what the map lacks
    # A routed leg's straight metres from its first point to its road and from its road to its last point (the
    # points may lie up to SNAP_M off any road): drawn straight, said so beyond STRAIGHT_END_M.
    ends_m: tuple[float, float] = (0.0, 0.0)


@dataclass
class Route:
    line: np.ndarray  # (n, 3) lat, lon, ele: the given points keep their elevation, the router's are NaN
    distance_km: float
    legs: list[Leg]

    @property
    def approximate(self) -> bool:
        return not all(leg.routed for leg in self.legs)


@dataclass
class _Snap:
    edge: int
    source: int
    target: int
    forward: bool
    backward: bool
    factor: float
    length: float
    along: float  # metres from the edge's source to the foot
    line: np.ndarray
    seg: int  # the foot lies on segment line[seg] → line[seg + 1]
    foot: np.ndarray


def install_pgrouting(conn) -> bool:
    """CREATE EXTENSION pgrouting where the server has it and we may (best effort); True when it is there."""
    if conn.dialect.name != "postgresql":
        return False
    if _pgr_schema(conn):
        return True
    if not conn.exec_driver_sql("SELECT 1 FROM pg_available_extensions WHERE name = 'pgrouting'").scalar():
        return False
    try:
        with conn.begin_nested():
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pgrouting SCHEMA public")
    except sa.exc.DBAPIError:
        return False
    return bool(_pgr_schema(conn))


def _pgr_schema(conn) -> str | None:
    return conn.exec_driver_sql(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pgrouting'").scalar()


def has_network(engine: sa.Engine) -> bool:
    """Whether a ready import holds routable edges."""
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT 1 FROM osm_edge t JOIN osm_area r ON r.id = t.area_id "
                                    "AND r.status = 'ready' LIMIT 1")).first() is not None


def route(engine: sa.Engine, points, use_pgrouting: bool = False, bike: str = DEFAULT_BIKE,
          weigh: Callable[[Graph], np.ndarray] | None = None) -> Route:
    """The bicycle route through `points` ((lat, lon) or (lat, lon, ele), 2 to MAX_POINTS of them).

    Raises ValueError (naming `points`) when there are fewer than 2 or more than MAX_POINTS, or one is not
    a finite latitude and longitude in range. `use_pgrouting=True` searches with pgRouting where installed; `bike`
    (trips/osm/waykinds.py BIKE_TYPES) weighs each edge's cost by its surface; `weigh`, when given instead: the
    graph → a factor (≥ 0) per arc its costs are multiplied by in this route's searches.
    """
    return join(points, legs_from(engine, points, 0, use_pgrouting=use_pgrouting, bike=bike, weigh=weigh))


def legs_from(engine: sa.Engine, points, first: int, seconds: float = math.inf, use_pgrouting: bool = False,
              bike: str = DEFAULT_BIKE, weigh: Callable[[Graph], np.ndarray] | None = None) -> list[Leg]:
    """The legs of the route through `points` from leg `first` on, in order, as many as end within `seconds` (one
    at least): a job routes a long trip in turns (jobs/route_turns.py). Raises ValueError as `route`."""
    weights = route_weights(bike)
    pts = _points(points)
    legs: list[Leg] = []
    began = time.monotonic()
    with engine.connect() as conn:
        pgr = use_pgrouting and conn.dialect.name == "postgresql" and _pgr_schema(conn)
        graph = None if pgr else current(engine, conn)
        scale = None if graph is None else weigh(graph) if weigh is not None else _bike_scale(graph, weights)
        if conn.dialect.name == "postgresql":
            # The snaps (and pgRouting's band) through the spatial index: for a small map the planner guesses a
            # sequential scan. For this transaction only; without JIT, which a disabled scan's price calls in (as
            # trips/osm/index.py without_jit): one statement for both.
            conn.exec_driver_sql("SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true)")
        for a, b in zip(pts[first:-1], pts[first + 1:]):
            legs.append(_leg(conn, a[:2], b[:2], pgr or None, graph, scale, weights))
            if time.monotonic() - began >= seconds:
                break
    return legs


def _bike_scale(graph: Graph, weights: list[float]) -> np.ndarray | None:
    """The bike's factor per arc of `graph` (by its edge's surface grade); None when every grade weighs 1."""
    if all(w == 1.0 for w in weights):
        return None
    return np.asarray(weights, dtype=float)[np.minimum(graph.grade, len(weights) - 1)]


def join(points, legs: list[Leg]) -> Route:
    """The route through `points` made of its `legs` (one per pair of points, in order). Raises ValueError as
    `route`."""
    pts = _points(points)
    rows = [pts[0]]
    for leg, end in zip(legs, pts[1:]):
        inner = leg.line[1:-1]
        rows.extend(np.column_stack((inner, np.full(len(inner), np.nan))))
        rows.append(end)
    line = np.array(rows, dtype=float)
    keep = np.concatenate(([True], np.any(np.diff(line[:, :2], axis=0) != 0, axis=1)))
    keep[-1] = True
    line = line[keep]
    return Route(line=line, distance_km=total_distance_km(line[:, :2]) if len(line) > 1 else 0.0, legs=legs)


def _points(points) -> np.ndarray:
    try:
        rows = [[float(v) for v in p] for p in points]
    except (TypeError, ValueError):
        raise ValueError("points: each point must be (lat, lon) or (lat, lon, ele) numbers") from None
    if not 2 <= len(rows) <= MAX_POINTS:
        raise ValueError(f"points: between 2 and {MAX_POINTS} points")
    out = np.full((len(rows), 3), np.nan)
    for i, p in enumerate(rows):
        if len(p) not in (2, 3) or not all(math.isfinite(v) for v in p[:2]) or abs(p[0]) > 90 or abs(p[1]) > 180:
            raise ValueError(f"points: point {i + 1} is not a latitude and longitude in range")
        out[i, :len(p)] = p
    return out


def _straight(a, b, why: Msg) -> Leg:
    return Leg(np.array([a, b], dtype=float), False, why)


def _leg(conn, a: np.ndarray, b: np.ndarray, pgr: str | None, graph: Graph | None, scale,
         weights: list[float]) -> Leg:
    if np.array_equal(a, b):
        return Leg(np.array([a, b]), True)  # nothing to ride
    if total_distance_km(np.array([a, b])) > MAX_LEG_KM:
        return _straight(a, b, Msg("routing.why_too_long", km=round(MAX_LEG_KM)))
    s, e = _snap(conn, float(a[0]), float(a[1]), weights), _snap(conn, float(b[0]), float(b[1]), weights)
    if s is None or e is None:
        which = N_("routing.why_no_road_at_start") if s is None else N_("routing.why_no_road_at_end")
        return _straight(a, b, Msg(which, metres=round(SNAP_M)))
    starts, ends = _exits(s), _entries(e)
    best = _direct(s, e)
    found = None
    if pgr:
        for boxes in (_corridor(s, e), [_box(s, e)]):  # the wide box only when the corridor holds no way through
            found = _search_pgr(conn, pgr, boxes, starts, ends, weights)
            if found is not None:
                break
    else:
        found = _search_graph(graph, starts, ends, e.foot, scale)
    if found is not None and (best is None or found[0] < best[0]):
        cost, start, end, nodes, edges = found
        lines = _lines(conn, edges)
        parts = [starts[start][1]]
        for n0, eid in zip(nodes, edges):
            src, line = lines[eid]
            parts.append((line if src == n0 else line[::-1])[1:])
        parts.append(ends[end][1][1:])
        best = (cost, np.vstack(parts))
    if best is None:
        return _straight(a, b, Msg("routing.why_not_joined"))
    road = best[1]
    straight = (float(geometry.GEOD.inv(a[1], a[0], road[0][1], road[0][0])[2]),
                float(geometry.GEOD.inv(road[-1][1], road[-1][0], b[1], b[0])[2]))
    return Leg(np.vstack((a, road, b)), True, ends_m=straight)


def _snap(conn, lat: float, lon: float, weights: list[float]) -> _Snap | None:
    rows = _read(conn, [geometry.box_around(lat, lon, SNAP_M)], _EDGE_COLS + ", t.line")
    if not rows:
        return None
    # Every segment of every edge around at once, on a plane centred on the point (within SNAP_M: flat enough).
    lines = geometry.decode_many([r.line for r in rows])
    counts = np.array([len(ln) for ln in lines])
    ends = np.cumsum(counts)
    x, y = geometry.LocalPlane(lat, lon).xy(*np.vstack(lines).T)
    ax, ay, dx, dy = x[:-1], y[:-1], np.diff(x), np.diff(y)
    seg2 = dx * dx + dy * dy
    t = np.clip(-(ax * dx + ay * dy) / np.where(seg2 > 0, seg2, 1.0), 0.0, 1.0)
    d2 = (ax + t * dx) ** 2 + (ay + t * dy) ** 2
    d2[ends[:-1] - 1] = np.inf  # from one edge's last point to the next edge's first: no segment
    k = int(np.argmin(d2))
    i = int(np.searchsorted(ends, k, side="right"))
    line, seg, frac = lines[i], k - int(ends[i] - counts[i]), float(t[k])
    foot = line[seg] + frac * (line[seg + 1] - line[seg]) if len(line) > 1 else line[0]
    if float(geometry.GEOD.inv(lon, lat, foot[1], foot[0])[2]) > SNAP_M:
        return None
    row = rows[i]
    steps = geometry.GEOD.inv(line[:-1, 1], line[:-1, 0], line[1:, 1], line[1:, 0])[2] if len(line) > 1 else [0]
    along = float(np.sum(steps[:seg]) + frac * steps[seg])
    return _Snap(row.id, int(row.source), int(row.target), bool(row.forward), bool(row.backward),
                 COST_PER_METRE.get(row.kind, COST_PER_METRE["other"]) * weights[min(int(row.grade), len(weights) - 1)],
                 float(row.length_m),
                 min(along, float(row.length_m)), line, seg, foot)


def _exits(s: _Snap) -> dict[int, tuple[float, np.ndarray]]:
    """The nodes a leg can leave its start's edge by: node → (cost, line from the foot to the node)."""
    out = {}
    if s.backward:
        out[s.source] = (s.along * s.factor, np.vstack((s.foot, s.line[:s.seg + 1][::-1])))
    if s.forward and (s.target not in out or (s.length - s.along) * s.factor < out[s.target][0]):
        out[s.target] = ((s.length - s.along) * s.factor, np.vstack((s.foot, s.line[s.seg + 1:])))
    return out


def _entries(e: _Snap) -> dict[int, tuple[float, np.ndarray]]:
    """The nodes a leg can reach its end's edge by: node → (cost, line from the node to the foot)."""
    out = {}
    if e.forward:
        out[e.source] = (e.along * e.factor, np.vstack((e.line[:e.seg + 1], e.foot)))
    if e.backward and (e.target not in out or (e.length - e.along) * e.factor < out[e.target][0]):
        out[e.target] = ((e.length - e.along) * e.factor, np.vstack((e.line[e.seg + 1:][::-1], e.foot)))
    return out


def _direct(s: _Snap, e: _Snap):
    """Both feet on the same edge: along it, when its direction allows."""
    if s.edge != e.edge:
        return None
    if s.forward and e.along >= s.along:
        return (e.along - s.along) * s.factor, np.vstack((s.foot, s.line[s.seg + 1:e.seg + 1], e.foot))
    if s.backward and e.along <= s.along:
        return (s.along - e.along) * s.factor, np.vstack((s.foot, s.line[e.seg + 1:s.seg + 1][::-1], e.foot))
    return None


def _grow(lo, hi, margin: float) -> tuple[float, float, float, float]:
    north, east = geometry.metres_per_degree(float(min(max(abs(lo[0]), abs(hi[0])), 89.9)))
    dlat, dlon = margin / north, min(180.0, margin / east)
    return lo[0] - dlat, lo[1] - dlon, hi[0] + dlat, hi[1] + dlon


def _span(s: _Snap, e: _Snap) -> float:
    return float(geometry.GEOD.inv(s.foot[1], s.foot[0], e.foot[1], e.foot[0])[2])


def _box(s: _Snap, e: _Snap) -> tuple[float, float, float, float]:
    """The box of both ends' edges grown by max(MARGIN_M, MARGIN_SHARE × the leg)."""
    pts = np.vstack((s.line, e.line))
    return _grow(pts.min(axis=0), pts.max(axis=0), max(MARGIN_M, MARGIN_SHARE * _span(s, e)))


def _corridor(s: _Snap, e: _Snap) -> list[tuple[float, float, float, float]]:
    """Boxes along the straight line between the feet, each reaching max(MARGIN_M, CORRIDOR_SHARE × the leg) to
    every side, and the two ends' edges: a band a few times narrower than `_box` on a long leg."""
    width = max(MARGIN_M, CORRIDOR_SHARE * _span(s, e))
    pieces = int(min(MAX_CORRIDOR_BOXES, max(1, np.ceil(_span(s, e) / width))))
    steps = s.foot + np.linspace(0.0, 1.0, pieces + 1)[:, None] * (e.foot - s.foot)
    boxes = [_grow(np.minimum(p, q), np.maximum(p, q), width) for p, q in zip(steps[:-1], steps[1:])]
    return boxes + [_grow(x.line.min(axis=0), x.line.max(axis=0), 0.0) for x in (s, e)]


def _spatial(conn, boxes, inline: bool = False) -> tuple[str, dict]:
    """The SQL condition "the edge's box meets one of `boxes`" and its parameters (`inline`: numbers written in,
    for the edges SQL pgRouting runs as text; they are floats this module computed)."""
    args = {}
    for i, box in enumerate(boxes):
        args.update({f"a{i}_": box[0], f"b{i}_": box[1], f"c{i}_": box[2], f"d{i}_": box[3]})
    if conn.dialect.name == "sqlite":
        one = ("SELECT id FROM osm_edge_rtree WHERE min_lat <= :c{i}_ AND max_lat >= :a{i}_ AND min_lon <= :d{i}_ "
               "AND max_lon >= :b{i}_")
        where = "t.id IN (" + " UNION ".join(one.format(i=i) for i in range(len(boxes))) + ")"
    else:
        g = _postgis_schema(conn)  # asked once per database and process
        one = 't.geom OPERATOR("{g}".&&) "{g}".ST_MakeEnvelope(:b{i}_, :a{i}_, :d{i}_, :c{i}_, 4326)'
        where = "(" + " OR ".join(one.format(g=g, i=i) for i in range(len(boxes))) + ")"
    if inline:
        for k, v in args.items():  # every name ends in "_": none is the start of another
            where = where.replace(f":{k}", repr(float(v)))
        args = {}
    return where, args


def _read(conn, boxes, cols: str):
    where, args = _spatial(conn, boxes)
    return conn.execute(sa.text(f"SELECT {cols} FROM osm_edge t WHERE {_READY} AND {where}"), args).all()


def _lines(conn, ids: list[int]) -> dict[int, tuple[int, np.ndarray]]:
    out: dict[int, tuple[int, np.ndarray]] = {}
    sql = sa.text("SELECT id, source, line FROM osm_edge WHERE id IN :ids").bindparams(
        sa.bindparam("ids", expanding=True))
    wanted = sorted(set(ids))
    for at in range(0, len(wanted), LINES_PER_STATEMENT):  # a long leg rides thousands of edges
        rows = conn.execute(sql, {"ids": wanted[at:at + LINES_PER_STATEMENT]}).all()
        out.update({r.id: (int(r.source), line) for r, line in zip(rows, geometry.decode_many([r.line for r in rows]))})
    return out


def _search_graph(found: Graph | None, starts, ends, foot, scale=None):
    """(cost, start node, end node, nodes, edge ids) of the cheapest path on the prepared graph (trips/osm/graph.py,
    searched by trips/osm/search.py), or None; `scale`: a factor per arc of the graph its costs are multiplied by."""
    if found is None:
        return None
    first = {i: c for n, (c, _) in starts.items() if (i := found.index(n)) is not None}
    last = {i: c for n, (c, _) in ends.items() if (i := found.index(n)) is not None}
    if not first or not last:
        return None
    path = search.cheapest(found, found.scratch, first, last, foot, scale)
    if path is None:
        return None
    cost, a, b, nodes, arcs = path
    return cost, int(found.node[a]), int(found.node[b]), found.node[nodes].tolist(), found.edge[arcs].tolist()


# Not pgr_bdDijkstra: on the bench's grid it returned dearer paths than pgr_dijkstra and a plain Dijkstra, which agree
# (bench/README.md "bench_router.py").
PGR_FUNCTION = "pgr_dijkstra"


def _search_pgr(conn, pgr: str, boxes, starts, ends, weights: list[float]):
    """As _search_graph, with pgRouting over the edges of the boxes: one search from a virtual vertex (-1) joined to
    the start's exits to one (-2) the end's entries join, their costs on the virtual edges (ids -11…, -21…)."""
    where, _ = _spatial(conn, boxes, inline=True)
    virtual = [(-11 - i, -1, n, c) for i, (n, (c, _)) in enumerate(starts.items())]
    virtual += [(-21 - i, n, -2, c) for i, (n, (c, _)) in enumerate(ends.items())]
    values = ", ".join(f"({i}::bigint, {a}::bigint, {b}::bigint, {float(c)!r}::float8, -1::float8)"
                       for i, a, b, c in virtual)
    factor = "CASE t.grade " + " ".join(f"WHEN {g} THEN {float(w)!r}" for g, w in enumerate(weights)) + " ELSE 1 END"
    edges_sql = (f"SELECT * FROM (VALUES {values}) AS v(id, source, target, cost, reverse_cost) UNION ALL "
                 f"SELECT t.id, t.source, t.target, t.cost * {factor}, t.reverse_cost * {factor} "
                 f"FROM osm_edge t WHERE {_READY} AND {where}")
    # pgRouting's SQL functions call their helpers unqualified: its schema joins the search path behind the
    # connection's own, for this transaction only (the rollback at the connection's close ends it).
    current = conn.exec_driver_sql("SHOW search_path").scalar()
    conn.exec_driver_sql(f'SET LOCAL search_path TO {current}, "{pgr}"')
    rows = conn.execute(sa.text(f'SELECT node, edge, agg_cost FROM "{pgr}".{PGR_FUNCTION}(:sql, -1, -2, true) '
                                "ORDER BY path_seq"), {"sql": edges_sql}).all()
    inner = [r for r in rows if r.node not in (-1, -2)]
    if not inner:
        return None
    steps = [r for r in inner if r.edge > 0]
    return float(rows[-1].agg_cost), int(inner[0].node), int(inner[-1].node), [int(r.node) for r in steps], \
        [int(r.edge) for r in steps]
