"""Reading the map tables through their spatial index (R*Tree on SQLite, GiST on PostGIS): rows of ready areas whose
box meets a query box, many boxes in one statement, and a line cut into the chunks the corridor queries measure
in (trips/osm/queries.py). A corridor's chunk boxes overlap, so they are asked as fewer merged probes
(`select_chunks`) that read the rows they share once."""
from __future__ import annotations

import json

import numpy as np
import sqlalchemy as sa

from trips.core.db import db
from trips.osm import geometry as G
from trips.osm.store import postgis_schema

CHUNK_M, CHUNK_SEGMENTS = 1000.0, 32


def engine_of(engine):
    return engine if engine is not None else db.engine


def as_line(line) -> np.ndarray:
    pts = np.asarray(line, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] < 2 or len(pts) == 0:
        raise ValueError("line must be a non-empty sequence of (lat, lon) pairs")
    return pts[:, :2]


def grow(box, metres: float):
    lo = G.box_around(box[0], box[1], metres)
    hi = G.box_around(box[2], box[3], metres)
    return min(lo[0], hi[0]), min(lo[1], hi[1]), max(lo[2], hi[2]), max(lo[3], hi[3])


def _around(lat: np.ndarray, lon: np.ndarray, metres: float) -> tuple[np.ndarray, ...]:
    """trips.osm.geometry.box_around of many points at once (numpy: equal to within a few ulp, which the box's
    1 % margin leaves without effect on what the queries answer)."""
    def per_degree(phi):
        s = np.sin(np.radians(phi))
        w = 1 - G.GEOD.es * s * s
        north = G.GEOD.a * (1 - G.GEOD.es) / w ** 1.5 * np.pi / 180
        east = G.GEOD.a / np.sqrt(w) * np.cos(np.radians(phi)) * np.pi / 180
        return north, np.maximum(east, 1e-6)

    north, east = per_degree(lat)
    dlat = metres * 1.01 / north
    dlon = np.minimum(180.0, metres * 1.01 / np.maximum(east, per_degree(np.minimum(89.9, np.abs(lat) + dlat))[1]))
    return lat - dlat, lon - dlon, lat + dlat, lon + dlon


def grow_chunks(chunks: list[np.ndarray], metres: float) -> list:
    """`grow(box_of(chunk), metres)` of every chunk ((n, 2) lat, lon arrays), computed all at once."""
    if not chunks:
        return []
    lengths = np.array([len(c) for c in chunks])
    pts = np.vstack([c[:, :2] for c in chunks])
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    lo, hi = np.minimum.reduceat(pts, starts), np.maximum.reduceat(pts, starts)
    a, b = _around(lo[:, 0], lo[:, 1], metres), _around(hi[:, 0], hi[:, 1], metres)
    return np.column_stack((np.minimum(a[0], b[0]), np.minimum(a[1], b[1]), np.maximum(a[2], b[2]),
                            np.maximum(a[3], b[3]))).tolist()


def select(conn, table: sa.Table, box, where: str = "", params: dict | None = None) -> list:
    """Rows of `table` in ready areas whose index box meets `box` (min_lat, min_lon, max_lat, max_lon)."""
    return select_boxes(conn, table, [box], where, params)[0]


BOXES_PER_STATEMENT = 5_000


def select_boxes(conn, table: sa.Table, boxes: list, where: str = "", params: dict | None = None) -> list[list]:
    """`select` for every box of `boxes`, in one statement (per BOXES_PER_STATEMENT boxes): the boxes are
    a relation joined to the spatial index, so a line's chunks cost one round trip, not one each. Returns the
    rows per box, in the order of `boxes`, each box's rows by id."""
    out: list[list] = [[] for _ in boxes]
    for first in range(0, len(boxes), BOXES_PER_STATEMENT):
        part = boxes[first:first + BOXES_PER_STATEMENT]
        for row in select_part(conn, table, part, where, params or {}):
            out[first + row["q_k"]].append(row)
    return out


# A probe may read up to this many times the area its chunks' boxes cover (their union, estimated as the sum of
# the boxes less each one's overlap with the one before): the cost of one more index probe against rows read twice.
MERGE_SLACK = 1.5


def merge_boxes(boxes) -> list[tuple[tuple, list[int]]]:
    """Consecutive boxes (a line's chunks, grown by the corridor) merged into fewer probes: (probe box, indices of
    the boxes it holds), every box in exactly one probe and inside it. A probe grows while its box stays within
    MERGE_SLACK of the area its boxes cover, so the overlapping boxes of a wide corridor become one probe and the
    rows they share are read once; a narrow corridor's boxes, which barely overlap, stay apart rather than read the
    empty ground between two bends."""
    out: list[tuple[tuple, list[int]]] = []
    covered, prev = 0.0, (0.0, 0.0, 0.0, 0.0)  # the area the last probe's boxes cover, the box before
    for k, (a, b, c, d) in enumerate(np.asarray(boxes, dtype=np.float64).reshape(-1, 4).tolist()):
        if out:
            (lo_lat, lo_lon, hi_lat, hi_lon), members = out[-1]
            box = (min(lo_lat, a), min(lo_lon, b), max(hi_lat, c), max(hi_lon, d))
            pa, pb, pc, pd = prev
            shared = max(0.0, min(pc, c) - max(pa, a)) * max(0.0, min(pd, d) - max(pb, b))
            grown = covered + (c - a) * (d - b) - shared
            if (box[2] - box[0]) * (box[3] - box[1]) <= MERGE_SLACK * grown:
                members.append(k)
                out[-1], covered, prev = (box, members), grown, (a, b, c, d)
                continue
        out.append(((a, b, c, d), [k]))
        covered, prev = (c - a) * (d - b), (a, b, c, d)
    return out


def select_chunks(conn, table: sa.Table, boxes: list, where: str = "", params: dict | None = None) -> list[list]:
    """What `select_boxes` answers (the rows per box, by id), asked through the merged probes of `merge_boxes`:
    each probe's rows are handed to the boxes of it that they meet (a point's position, a line's stored box).
    A box gets the rows of its own box whose index entry meets it (on PostGIS a line whose box meets but whose
    geometry does not is handed too: further than the corridor, measured and dropped by the caller)."""
    out: list[list] = [[] for _ in boxes]
    if not boxes:
        return out
    probes = merge_boxes(boxes)
    lo, hi = (("lat", "lon"), ("lat", "lon")) if "lat" in table.c else (("min_lat", "min_lon"), ("max_lat", "max_lon"))
    for (_probe, members), rows in zip(probes, select_boxes(conn, table, [p for p, _ in probes], where, params)):
        if not rows:
            continue
        if len(members) == 1:
            out[members[0]] = rows
            continue
        r = np.array([[row[lo[0]], row[lo[1]], row[hi[0]], row[hi[1]]] for row in rows], dtype=np.float64)
        m = np.asarray([boxes[k] for k in members], dtype=np.float64)
        meets = (r[None, :, 0] <= m[:, None, 2]) & (r[None, :, 2] >= m[:, None, 0]) & \
            (r[None, :, 1] <= m[:, None, 3]) & (r[None, :, 3] >= m[:, None, 1])
        for k, hit in zip(members, meets):
            out[k] = [rows[i] for i in np.flatnonzero(hit).tolist()]
    return out


def select_part(conn, table: sa.Table, boxes: list, where: str, params: dict) -> list:
    cols = ", ".join(f"t.{c.name}" for c in table.columns)
    join = f"JOIN osm_area r ON r.id = t.area_id AND r.status = 'ready' WHERE 1 = 1 {where} ORDER BY q.k, t.id"
    if conn.dialect.name == "sqlite":
        # CROSS JOIN keeps the boxes the outer loop: each one probes the R*Tree (SQLite never reorders it).
        sql = sa.text(
            "WITH q(k, a, b, c, d) AS (SELECT key, json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
            "json_extract(value, '$[2]'), json_extract(value, '$[3]') FROM json_each(:boxes)) "
            f"SELECT q.k AS q_k, {cols} FROM q CROSS JOIN {table.name}_rtree x ON x.min_lat <= q.c "
            "AND x.max_lat >= q.a AND x.min_lon <= q.d AND x.max_lon >= q.b "
            f"CROSS JOIN {table.name} t ON t.id = x.id {join}")
        args = {"boxes": json.dumps([list(map(float, b)) for b in boxes]), **params}
    else:
        s = _postgis_schema(conn)
        if s is None:
            return []  # no PostGIS, so nothing was ever imported
        # Each box probes the GiST index in a LATERAL subquery that OFFSET 0 keeps from being flattened: as a plain
        # join the planner may test every row of the area against every box. JSON columns come back as text, decoded
        # by the caller for the rows it keeps (trips/osm/queries.py _point): most are dropped as too far or seen twice.
        x_cols = ", ".join(f"x.{c.name}" for c in table.columns)
        inner = ", ".join(f"CAST(t.{c.name} AS text) AS {c.name}" if isinstance(c.type, sa.JSON) else f"t.{c.name}"
                          for c in table.columns)
        sql = sa.text(
            "WITH q AS (SELECT * FROM unnest(CAST(:qk AS integer[]), CAST(:qa AS float8[]), CAST(:qb AS float8[]), "
            "CAST(:qc AS float8[]), CAST(:qd AS float8[])) AS q(k, a, b, c, d)) "
            f"SELECT q.k AS q_k, {x_cols} FROM q CROSS JOIN LATERAL (SELECT {inner} FROM {table.name} t "
            f"JOIN osm_area r ON r.id = t.area_id AND r.status = 'ready' "
            f'WHERE "{s}".ST_Intersects(t.geom, "{s}".ST_MakeEnvelope(q.b, q.a, q.d, q.c, 4326)) {where} '
            "OFFSET 0) x ORDER BY q.k, x.id")
        without_jit(conn)
        args = {"qk": list(range(len(boxes))), **{f"q{n}": [float(b[i]) for b in boxes] for i, n in enumerate("abcd")},
                **params}
    if "kinds" in args:
        sql = sql.bindparams(sa.bindparam("kinds", expanding=True))
    return conn.execute(sql, args).mappings().all()


def without_jit(conn) -> None:
    """PostgreSQL: no JIT for the map queries of this transaction. The planner prices each box's probe as if it read
    hundreds of rows, so a trip's boxes pass jit_above_cost and compiling costs more than the probes of a few rows
    each. SET LOCAL ends with the connection's transaction, which the caller's `connect()` rolls back."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL jit = off")


_SCHEMAS: dict[str, str] = {}


def _postgis_schema(conn) -> str | None:
    """store.postgis_schema, asked once per database (by URL) and process: a statement less per query. Only a
    found schema is remembered (an extension created later is still seen)."""
    key = conn.engine.url.render_as_string(hide_password=True)
    if key not in _SCHEMAS:
        schema = postgis_schema(conn)
        if schema is None:
            return None
        _SCHEMAS[key] = schema
    return _SCHEMAS[key]


def line_chunks(pts: np.ndarray):
    """(first vertex index, vertices, metres from the line start at each vertex) per chunk of the line."""
    if len(pts) == 1:
        yield 0, pts, np.zeros(1)
        return
    seg = G.GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2]
    cum = np.concatenate(([0.0], np.cumsum(seg)))
    start = 0
    while start < len(pts) - 1:
        end = start + 1
        while end < len(pts) - 1 and end - start < CHUNK_SEGMENTS and cum[end + 1] - cum[start] <= CHUNK_M:
            end += 1
        yield start, pts[start:end + 1], cum[start:end + 1]
        start = end


def box_of(pts: np.ndarray):
    return float(pts[:, 0].min()), float(pts[:, 1].min()), float(pts[:, 0].max()), float(pts[:, 1].max())
