"""What the share page's map draws under the route, read from the imported map for one view box: water, the roads,
and the towns and villages with their names (trips/readmodels/mapsvg.py draws it). As on a printed map, the wider
the view, the fewer road classes and places and the larger a lake or river must be; a view a few km across is a
street map, every street and path drawn. Every line is thinned to about a pixel and each layer capped (`LIMITS`).
`covered` says whether the imported map meets the view."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sqlalchemy as sa

from trips.core.lru import LRU
from trips.osm import geometry as G
from trips.osm.index import _postgis_schema, engine_of, without_jit
from trips.osm.tables import osm_area
from trips.route import geo

MAIN = ("motorway", "trunk", "primary", "secondary", "tertiary")
STREETS = (*(f"{c}_link" for c in MAIN), "unclassified", "residential", "living_street", "road")
# Road classes by the view's width (km): the first row whose width the view does not exceed. A view a few km across
# is a street map: every way, service streets and pedestrian zones too, and the paths beside them (None: no filter).
STREET_MAP_KM = 5.0
ROAD_CLASSES = (
    (STREET_MAP_KM, None),
    (20.0, (*MAIN, *STREETS)),
    (60.0, MAIN),
    (250.0, MAIN[:4]),
    (float("inf"), MAIN[:3]),
)
MAJOR = frozenset({"motorway", "trunk", "primary"})
# Drawn as streets; any other highway (footway, cycleway, path, steps, track…) is a path, on a street map only.
ROADS = frozenset({*MAIN, *STREETS, "service", "pedestrian"})
# Places by the view's width (km): the largest rank drawn (trips/osm/tables.py PLACE_RANKS: 1 city … 4 hamlet).
PLACE_RANK = ((40.0, 3), (250.0, 2), (float("inf"), 1))
# Ways drawn at most: a street map holds a city centre's few thousand ways (and paths), a wider view fewer.
LIMITS = {"roads": 1500, "streets": 6000, "water": 400, "rivers": 300, "coastline": 600, "places": 40}
PIXELS = 600  # the picture's width in the SVG's units (trips/readmodels/pictures.py ROUTE_W)
# Per process, by view box and the ready imports it stands on: a re-import (a new area id) is a new key, so a map is
# never drawn from a replaced import (docs/CACHES.md).
_KEPT = LRU(64)


@dataclass
class BaseMap:
    """Layers as lists of (n, 2) arrays of (lat, lon); places as (name, rank, lat, lon), most important first."""

    water: list = field(default_factory=list)  # closed rings, filled
    coastline: list = field(default_factory=list)
    rivers: list = field(default_factory=list)
    roads: list = field(default_factory=list)  # (is major, line)
    paths: list = field(default_factory=list)  # footways, cycleways, tracks…: on a street map only
    places: list = field(default_factory=list)
    covered: bool = False

    def empty(self) -> bool:
        return not (self.water or self.coastline or self.rivers or self.roads or self.paths or self.places)


def view_width_km(box) -> float:
    lat = (box[0] + box[2]) / 2
    return max(box[3] - box[1], 1e-9) * G.metres_per_degree(lat)[1] / 1000.0


def base_map(box, engine=None) -> BaseMap:
    """The layers for the view `box` (min_lat, min_lon, max_lat, max_lon), kept per process (`_KEPT`). A view no ready
    import meets gets empty layers and covered False."""
    engine = engine_of(engine)
    with engine.connect() as conn:
        areas = _areas_meeting(conn, box)
        if not areas:
            return BaseMap()
        key = (engine.url.render_as_string(hide_password=True), tuple(round(float(b), 6) for b in box), areas)
        kept = _KEPT.get(key)
        if kept is None:
            without_jit(conn)
            kept = _read(conn, box)
            _KEPT.put(key, kept)
        return kept


def _read(conn, box) -> BaseMap:
    width = view_width_km(box)
    pixel_m = width * 1000.0 / PIXELS
    classes = next(c for w, c in ROAD_CLASSES if width <= w)
    out = BaseMap(covered=True)
    # Every way at least a pixel long, the longest first: a street is split into short ways at its junctions, and
    # leaving the short ones out would cut it into dashes.
    where, params = ("1 = 1", {}) if classes is None else ("t.highway IN :classes", {"classes": list(classes)})
    for row in _lines(conn, "osm_way", box, where, params, LIMITS["roads" if classes else "streets"], pixel_m):
        line = _thin(row["line"], pixel_m)
        if row["highway"] in ROADS:
            out.roads.append((row["highway"] in MAJOR, line))
        else:
            out.paths.append(line)
    # A lake must be a dozen pixels round and a river twenty long to be drawn; every coastline piece is (the sea's
    # edge has no gap).
    for kind, layer, shortest in (("water", out.water, pixel_m * 12), ("river", out.rivers, pixel_m * 20),
                                  ("coastline", out.coastline, 0.0)):
        for row in _lines(conn, "osm_water", box, "t.kind = :kind", {"kind": kind},
                          LIMITS["rivers" if kind == "river" else kind], shortest):
            line = _thin(row["line"], pixel_m)
            if kind != "water" or len(line) >= 4:
                layer.append(line)
    out.places = _places(conn, box, next(r for w, r in PLACE_RANK if width <= w))
    return out


def _thin(encoded: str, pixel_m: float) -> np.ndarray:
    pts = G.decode(encoded)
    if len(pts) <= 2:
        return pts
    return geo.simplify(np.column_stack((pts, np.zeros(len(pts)))), pixel_m)[:, :2]


def _areas_meeting(conn, box) -> tuple:
    """The ids of the ready imports whose box meets the view, in order (empty: the map does not cover it)."""
    return tuple(conn.execute(sa.select(osm_area.c.id).where(
        osm_area.c.status == "ready", osm_area.c.min_lat <= box[2], osm_area.c.max_lat >= box[0],
        osm_area.c.min_lon <= box[3], osm_area.c.max_lon >= box[1]).order_by(osm_area.c.id)).scalars())


def _in_box(conn, table: str) -> str | None:
    """The FROM … WHERE that keeps the rows `t` of `table` in ready areas whose index box meets :a…:d (None: a
    PostgreSQL without PostGIS, where nothing was ever imported)."""
    ready = "JOIN osm_area r ON r.id = t.area_id AND r.status = 'ready'"
    if conn.dialect.name == "sqlite":
        return (f"FROM {table}_rtree x JOIN {table} t ON t.id = x.id {ready} WHERE x.min_lat <= :c "
                "AND x.max_lat >= :a AND x.min_lon <= :d AND x.max_lon >= :b")
    schema = _postgis_schema(conn)
    if schema is None:
        return None
    return (f'FROM {table} t {ready} WHERE "{schema}".ST_Intersects(t.geom, '
            f'"{schema}".ST_MakeEnvelope(:b, :a, :d, :c, 4326))')


def _lines(conn, table: str, box, where: str, params: dict, limit: int, shortest_m: float) -> list:
    """Lines of `table` meeting the box, at least `shortest_m` long, the `limit` longest (chosen by id and length
    first, so the sort never carries the lines' text)."""
    found = _in_box(conn, table)
    if found is None:
        return []
    sql = sa.text(f"SELECT t.* FROM {table} t WHERE t.id IN (SELECT t.id {found} AND {where} "
                  "AND t.length_m >= :shortest ORDER BY t.length_m DESC, t.id LIMIT :limit) ORDER BY t.length_m DESC")
    if "classes" in params:
        sql = sql.bindparams(sa.bindparam("classes", expanding=True))
    return conn.execute(sql, {"a": box[0], "b": box[1], "c": box[2], "d": box[3], "shortest": shortest_m,
                              "limit": limit, **params}).mappings().all()


def _places(conn, box, rank: int) -> list:
    found = _in_box(conn, "osm_place")
    if found is None:
        return []
    rows = conn.execute(sa.text(
        f"SELECT t.name, t.rank, t.lat, t.lon, t.population {found} AND t.rank <= :rank "
        "ORDER BY t.rank, coalesce(t.population, 0) DESC, t.name, t.id LIMIT :limit"),
        {"a": box[0], "b": box[1], "c": box[2], "d": box[3], "rank": rank, "limit": LIMITS["places"] * 3}).all()
    kept, seen = [], set()
    for name, place_rank, lat, lon, _ in rows:  # overlapping imports list a town twice
        if name in seen:
            continue
        seen.add(name)
        kept.append((name, place_rank, lat, lon))
        if len(kept) == LIMITS["places"]:
            break
    return kept
