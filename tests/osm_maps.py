"""Map data written by the tests: OpenStreetMap files (.osm, .osm.pbf, .osm.bz2) around generated routes.

    m = MapBuilder()
    a = m.node(45.0, 5.0, {"amenity": "drinking_water"})
    m.way([(45.0, 5.0), (45.01, 5.0)], {"highway": "secondary", "maxspeed": "70"})
    m.write(tmp_path / "region.osm.pbf")

The .osm is written as XML (https://wiki.openstreetmap.org/wiki/OSM_XML); the .osm.pbf is that XML read and
written again by osmium's SimpleWriter, so the importer reads what osmium itself produces.
"""
from __future__ import annotations

import bz2
import math
from pathlib import Path
from xml.sax.saxutils import quoteattr

import osmium


def line_east(lat: float, lon: float, km: float, step_m: float = 200.0) -> list[tuple[float, float]]:
    """A straight route going east from (lat, lon) for `km` kilometres, a vertex every `step_m` metres."""
    per_deg = 111_320.0 * math.cos(math.radians(lat))
    n = max(1, int(km * 1000 / step_m))
    return [(lat, lon + i * step_m / per_deg) for i in range(n + 1)]


def offset_north(lat: float, lon: float, metres: float) -> tuple[float, float]:
    return lat + metres / 111_132.0, lon


class MapBuilder:
    def __init__(self, bounds: tuple[float, float, float, float] | None = None):
        self.bounds = bounds  # (min_lat, min_lon, max_lat, max_lon) written in the header
        self.nodes: list[tuple[int, float, float, dict]] = []
        self.ways: list[tuple[int, list[int], dict]] = []
        self.relations: list[tuple[int, list[tuple[str, int, str]], dict]] = []
        self._ids = {"n": 0, "w": 0, "r": 0}

    def _next(self, kind: str) -> int:
        self._ids[kind] += 1
        return self._ids[kind]

    def node(self, lat: float, lon: float, tags: dict | None = None) -> int:
        nid = self._next("n")
        self.nodes.append((nid, lat, lon, dict(tags or {})))
        return nid

    def way(self, points, tags: dict | None = None, closed: bool = False) -> int:
        """A way through `points` ((lat, lon) pairs, or node ids); `closed` repeats the first node."""
        ids = [p if isinstance(p, int) else self.node(*p) for p in points]
        if closed:
            ids.append(ids[0])
        wid = self._next("w")
        self.ways.append((wid, ids, dict(tags or {})))
        return wid

    def relation(self, members: list[tuple[str, int, str]], tags: dict) -> int:
        """members: (type 'node'|'way', id, role)."""
        rid = self._next("r")
        self.relations.append((rid, members, dict(tags)))
        return rid

    def country(self, ring: list[tuple[float, float]], iso: str, name: str) -> int:
        """An admin_level=2 boundary relation with one outer ring (closed by the builder)."""
        wid = self.way(ring, {}, closed=True)
        return self.relation([("way", wid, "outer")], {
            "type": "boundary", "boundary": "administrative", "admin_level": "2", "ISO3166-1:alpha2": iso,
            "name": name})

    def xml(self) -> str:
        def tag_lines(tags):
            return "".join(f"    <tag k={quoteattr(k)} v={quoteattr(v)}/>\n" for k, v in tags.items())

        out = ["<?xml version='1.0' encoding='UTF-8'?>\n<osm version=\"0.6\" generator=\"btp-tests\">\n"]
        if self.bounds:
            a, b, c, d = self.bounds
            out.append(f'  <bounds minlat="{a}" minlon="{b}" maxlat="{c}" maxlon="{d}"/>\n')
        for nid, lat, lon, tags in self.nodes:
            attrs = f'id="{nid}" version="1" lat="{lat:.7f}" lon="{lon:.7f}"'
            out.append(f"  <node {attrs}>\n{tag_lines(tags)}  </node>\n" if tags else f"  <node {attrs}/>\n")
        for wid, ids, tags in self.ways:
            refs = "".join(f'    <nd ref="{i}"/>\n' for i in ids)
            out.append(f'  <way id="{wid}" version="1">\n{refs}{tag_lines(tags)}  </way>\n')
        for rid, members, tags in self.relations:
            mem = "".join(f'    <member type="{t}" ref="{i}" role="{r}"/>\n' for t, i, r in members)
            out.append(f'  <relation id="{rid}" version="1">\n{mem}{tag_lines(tags)}  </relation>\n')
        out.append("</osm>\n")
        return "".join(out)

    def write(self, path: Path) -> Path:
        path = Path(path)
        name = path.name
        if name.endswith(".osm.bz2"):
            path.write_bytes(bz2.compress(self.xml().encode()))
        elif name.endswith(".osm.pbf"):
            xml_path = path.with_name(name[: -len(".pbf")] + ".tmp.osm")
            xml_path.write_text(self.xml(), encoding="utf-8")
            header = osmium.io.Header()
            if self.bounds:
                a, b, c, d = self.bounds
                header.add_box(osmium.osm.Box(b, a, d, c))
            with osmium.SimpleWriter(str(path), header=header, overwrite=True) as writer:
                for obj in osmium.FileProcessor(str(xml_path)):
                    writer.add(obj)
            xml_path.unlink()
        else:
            path.write_text(self.xml(), encoding="utf-8")
        return path


def scatter(m: MapBuilder, rnd, around, kinds, nodes: int, ways: int, ferries: int, spread: float) -> None:
    """Random map data near the points of `around` ((lat, lon) pairs), drawn from `rnd` in a fixed order (one seed, one
    map): `nodes` points of `kinds` within `spread` degrees, `ways` short roads (2–5 vertices, gravel) within 0.01°,
    `ferries` ferry lines 0.02° long."""
    for _ in range(nodes):
        lat, lon = rnd.choice(around)
        m.node(lat + rnd.uniform(-spread, spread), lon + rnd.uniform(-spread, spread), dict(rnd.choice(kinds)))
    for _ in range(ways):
        lat, lon = rnd.choice(around)
        pts = [(lat + rnd.uniform(-0.01, 0.01), lon + rnd.uniform(-0.01, 0.01)) for _ in range(rnd.randint(2, 5))]
        m.way(pts, {"highway": rnd.choice(["track", "primary", "residential"]), "surface": "gravel"})
    for _ in range(ferries):
        lat, lon = rnd.choice(around)
        m.way([(lat - 0.01, lon - 0.01), (lat + 0.01, lon + 0.01)], {"route": "ferry", "name": "F"})


def plane_point(x_m: float, y_m: float, lat0: float = 45.0, lon0: float = 5.0) -> tuple[float, float]:
    """The point x_m metres east and y_m north of (lat0, lon0)."""
    from trips.osm.geometry import LocalPlane

    lat, lon = LocalPlane(lat0, lon0).latlon(x_m, y_m)
    return round(float(lat), 7), round(float(lon), 7)


def plane_line(*xy, step: float = 50.0) -> list[tuple[float, float]]:
    """A polyline through the (x, y) corners (metres from (45.0, 5.0)), a vertex every `step` metres."""
    out = []
    for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
        n = max(1, int(math.hypot(x1 - x0, y1 - y0) // step))
        out += [plane_point(x0 + (x1 - x0) * i / n, y0 + (y1 - y0) * i / n) for i in range(n)]
    return out + [plane_point(*xy[-1])]


# The ride `surfaced_town` draws: its corners (metres east, north of (45.0, 5.0)), 3.4 km in all.
TOWN_RIDE = ((0, 0), (1000, 0), (1000, 800), (1800, 800), (1800, 0))
# What each stretch of it is: (from km, to km, name, surface class, way type), and its turns (km, turn, street).
TOWN_STRETCHES = ((0.0, 1.0, "Rue Alpha", "paved", "quiet_road"), (1.0, 1.8, "Chemin Beta", "compacted", "track"),
                  (1.8, 2.6, "Piste Gamma", "unpaved", "cycleway"), (2.6, 3.4, "Route Delta", "unknown", "main_road"))
TOWN_TURNS = ((1.0, "left", "Chemin Beta"), (1.8, "right", "Piste Gamma"), (2.6, "right", "Route Delta"))


def surfaced_town(m: MapBuilder) -> list[tuple[float, float]]:
    """Four streets of known surface and type around TOWN_RIDE's corners, joined at shared nodes, and streets
    crossing them (which the ride crosses, never rides); returns the ride's line."""
    corners = [m.node(*plane_point(*xy)) for xy in TOWN_RIDE]
    tags = ({"highway": "residential", "surface": "asphalt"}, {"highway": "track", "tracktype": "grade2"},
            {"highway": "cycleway", "surface": "dirt"}, {"highway": "primary"})
    for (a, b), (ia, ib), t, (*_, name, _s, _w) in zip(zip(TOWN_RIDE[:-1], TOWN_RIDE[1:]),
                                                       zip(corners[:-1], corners[1:]), tags, TOWN_STRETCHES):
        m.way([ia, *plane_line(a, b)[1:-1], ib], {**t, "name": name})
    m.way(plane_line((500, -300), (500, 300)), {"highway": "residential", "name": "Rue Croisee", "surface": "asphalt"})
    m.way(plane_line((700, 400), (2100, 400)), {"highway": "secondary", "name": "Avenue Travers"})
    m.way(plane_line((-500, 0), (0, 0))[:-1] + [corners[0]], {"highway": "residential", "name": "Rue Alpha"})
    return plane_line(*TOWN_RIDE)


def _on_ring(k: int, radius: float = 25.0) -> tuple[float, float]:
    """The k-th of 16 points of a ring round (0, 0), from the west, anticlockwise."""
    angle = math.radians(180 + 22.5 * k)
    return radius * math.cos(angle), radius * math.sin(angle)


def roundabout_town(m: MapBuilder) -> list[tuple[float, float]]:
    """A roundabout of 25 m radius at (0, 0) (junction=roundabout, ridden anticlockwise), Rue Ouest, Rue Sud, Rue Est
    and Rue Nord meeting it at west, south, east and north; returns a ride in from the west and out by the north:
    the third exit, Rue Nord."""
    ring = [m.node(*plane_point(*_on_ring(k))) for k in range(16)]
    m.way(ring, {"highway": "tertiary", "junction": "roundabout", "surface": "asphalt"}, closed=True)
    for name, at, far in (("Rue Ouest", 0, (-600, 0)), ("Rue Sud", 4, (0, -600)), ("Rue Est", 8, (600, 0)),
                          ("Rue Nord", 12, (0, 600))):
        m.way([*plane_line(far, (far[0] / 24, far[1] / 24))[:-1], ring[at]], {"highway": "residential", "name": name})
    arc = [plane_point(*_on_ring(k)) for k in range(13)]
    return plane_line((-600, 0), (-25, 0))[:-1] + arc + plane_line((0, 25), (0, 600))[1:]


def map_support_or_skip(engine) -> None:
    """Skip on a PostgreSQL that has no PostGIS to offer (the map needs it; .ci/run installs it)."""
    import pytest
    import sqlalchemy as sa

    if engine.dialect.name != "postgresql":
        return
    with engine.connect() as conn:
        if not conn.execute(sa.text("SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'")).scalar():
            pytest.skip("this PostgreSQL has no PostGIS (apt-get install postgresql-15-postgis-3)")


def per_box_select(conn, table, boxes, where="", params=None):
    """trips.osm.index.select_boxes as it was before batching: one statement per box (R*Tree IN, or the
    PostGIS envelope): the reference tests/trips/osm/test_osm_queries.py and bench/bench_analysis.py compare with."""
    import sqlalchemy as sa

    from trips.osm.store import postgis_schema

    cols = ", ".join(f"t.{c.name}" for c in table.columns)
    out = []
    for box in boxes:
        args = {"a": box[0], "b": box[1], "c": box[2], "d": box[3], **(params or {})}
        if conn.dialect.name == "sqlite":
            spatial = (f"t.id IN (SELECT id FROM {table.name}_rtree WHERE min_lat <= :c AND max_lat >= :a "
                       "AND min_lon <= :d AND max_lon >= :b)")
        else:
            s = postgis_schema(conn)
            spatial = f'"{s}".ST_Intersects(t.geom, "{s}".ST_MakeEnvelope(:b, :a, :d, :c, 4326))'
        sql = sa.text(f"SELECT {cols} FROM {table.name} t JOIN osm_area r ON r.id = t.area_id "
                      f"AND r.status = 'ready' WHERE {spatial} {where} ORDER BY t.id")
        if "kinds" in args:
            sql = sql.bindparams(sa.bindparam("kinds", expanding=True))
        out.append(conn.execute(sql, args).mappings().all())
    return out
