"""What the enrichments ask of the local map: plain functions over the database engine, with no request, session or
lock. Candidates come from the spatial index by box and are then filtered exactly: geodesic distances, and the
nearest place on a line found in a local plane per chunk of at most 1 km. Lines are (lat, lon[, ele]) sequences;
only ready areas are read, an object of two overlapping imports is returned once, and boxes do not wrap around the
antimeridian.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import sqlalchemy as sa

from trips.osm import geometry as G
from trips.osm import index
from trips.osm.tables import osm_ferry, osm_point, osm_way
# The imported areas' coverage of a line and the countries along it (trips/osm/areas.py), asked as queries.*
from trips.osm.areas import (CountryRun, clipped_coverage, corridor_cover, countries_along,  # noqa: F401
                             countries_in, country_at, coverage, disc_cover, ready_areas)
# The named places and features (trips/osm/names.py), asked as queries.* too
from trips.osm.names import (MAX_MATCHES, Place, nearest_place, nearest_place_each,  # noqa: F401
                             places_matching)


@dataclass(frozen=True)
class MapPoint:
    osm_type: str
    osm_id: int
    kind: str
    subkind: str
    name: str | None
    lat: float
    lon: float
    tags: dict
    tag_count: int
    distance_m: float  # from the query point, or from the line
    along_m: float | None = None  # points_along: metres from the line's start to the nearest place on it


@dataclass(frozen=True)
class MapLine:
    """A way (osm_way: the road tags are filled) or a ferry route (osm_ferry: only name)."""

    osm_id: int
    name: str | None
    length_m: float
    points: np.ndarray = field(repr=False)  # (n, 2) lat, lon
    distance_m: float  # closest approach to the query line
    near_m: float  # length of its segments lying wholly within the buffer
    tags: dict  # highway, surface, tracktype, smoothness, cycleway, cycleway:left|right|both, bicycle, maxspeed


def _point(row, distance: float, along: float | None = None) -> MapPoint:
    tags = row["tags"] if isinstance(row["tags"], dict) else json.loads(row["tags"])
    return MapPoint(row["osm_type"], row["osm_id"], row["kind"], row["subkind"], row["name"], row["lat"],
                    row["lon"], tags, row["tag_count"], float(distance), along)


def points_near(lat: float, lon: float, radius_m: float, kinds=None, engine=None) -> list[MapPoint]:
    """Points of the given kinds (trips/osm/tags.py KINDS; None: all) within radius_m, nearest first."""
    return points_near_each([(lat, lon)], radius_m, kinds, engine)[0]


def points_near_each(centres, radius_m: float, kinds=None, engine=None) -> list[list[MapPoint]]:
    """`points_near` of every (lat, lon) of `centres`, in one statement: the answer per centre, in their order,
    each exactly what points_near gives for it alone."""
    centres = [(float(c[0]), float(c[1])) for c in centres]
    if not centres:
        return []
    where, params = ("AND t.kind IN :kinds", {"kinds": list(kinds)}) if kinds else ("", {})
    with index.engine_of(engine).connect() as conn:
        per_centre = index.select_boxes(conn, osm_point, [G.box_around(lat, lon, radius_m) for lat, lon in centres],
                                        where, params)
    return [_nearest_first(lat, lon, radius_m, rows) for (lat, lon), rows in zip(centres, per_centre)]


def _nearest_first(lat: float, lon: float, radius_m: float, rows: list) -> list[MapPoint]:
    if not rows:
        return []
    dist = G.GEOD.inv(np.full(len(rows), lon), np.full(len(rows), lat), [r["lon"] for r in rows],
                      [r["lat"] for r in rows])[2]
    out, seen = [], set()
    for i in np.argsort(dist, kind="stable"):
        row = rows[i]
        key = (row["osm_type"], row["osm_id"], row["kind"])
        if dist[i] <= radius_m and key not in seen:
            seen.add(key)
            out.append(_point(row, dist[i]))
    return out


def points_along(line, buffer_m: float, kinds=None, engine=None) -> list[MapPoint]:
    """Points within buffer_m of the line, in the order the line passes them (`along_m`)."""
    return points_along_each([line], buffer_m, kinds, engine)[0]


def _chunked(lines) -> tuple[list[list], list]:
    """The 1 km chunks of each line (trips/osm/index.py line_chunks), and all of them in one list."""
    per_line = [list(index.line_chunks(index.as_line(line))) for line in lines]
    return per_line, [c for chunks in per_line for c in chunks]


def _split(per_line: list[list], rows: list[list]) -> list[list[list]]:
    """The rows per chunk of one select_boxes over every line's chunks, cut back into one list per line."""
    out, at = [], 0
    for chunks in per_line:
        out.append(rows[at:at + len(chunks)])
        at += len(chunks)
    return out


def points_along_each(lines, buffer_m: float, kinds=None, engine=None) -> list[list[MapPoint]]:
    """`points_along` of every line of `lines` (the days of a trip), in one statement (per
    index.BOXES_PER_STATEMENT chunks): the answer per line, in their order, each exactly what points_along
    gives for that line alone (the same chunks and the same rows per chunk)."""
    if not lines:
        return []
    where, params = ("AND t.kind IN :kinds", {"kinds": list(kinds)}) if kinds else ("", {})
    per_line, every = _chunked(lines)
    with index.engine_of(engine).connect() as conn:
        rows = index.select_chunks(conn, osm_point, index.grow_chunks([c for _, c, _ in every], buffer_m),
                                  where, params)
    return [_along(chunks, per_chunk, buffer_m) for chunks, per_chunk in zip(per_line, _split(per_line, rows))]


def _along(chunks: list, per_chunk: list[list], buffer_m: float) -> list[MapPoint]:
    best: dict[tuple, tuple[float, float, dict]] = {}
    pairs = [(k, row) for k, rows in enumerate(per_chunk) for row in rows]
    dist, along = _nearest_in_chunks(chunks, [k for k, _ in pairs], np.array([r["lat"] for _, r in pairs]),
                                     np.array([r["lon"] for _, r in pairs]))
    for (_, row), d, a in zip(pairs, dist.tolist(), along.tolist()):
        key = (row["osm_type"], row["osm_id"], row["kind"])
        if d <= buffer_m and (key not in best or d < best[key][0]):
            best[key] = (d, a, row)
    found = [_point(row, d, a) for d, a, row in best.values()]
    return sorted(found, key=lambda p: (p.along_m, p.distance_m))


_PAIRS_PER_BLOCK = 4096


def _nearest_in_chunks(chunks: list, chunk_of: list[int], lat: np.ndarray, lon: np.ndarray):
    """(geodesic distance, metres along the line) of the nearest place on chunk `chunk_of[i]` for each point
    i: trips.osm.geometry.nearest_on_line per chunk, the same arithmetic element for element, computed for
    every (chunk, point) pair at once (segments padded to the longest chunk's) instead of a call per chunk."""
    n = len(chunk_of)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    width = max(max(len(c) - 1, 1) for _, c, _ in chunks)
    k_count = len(chunks)
    origin = np.empty((k_count, 4))  # lat0, lon0, metres per degree north, east
    ax, ay = np.full((k_count, width), np.inf), np.full((k_count, width), np.inf)
    dx, dy = np.zeros((k_count, width)), np.zeros((k_count, width))
    base, step = np.zeros((k_count, width)), np.zeros((k_count, width))  # metres along at each segment start, its length
    for k, (_start, chunk, cum) in enumerate(chunks):
        plane = G.LocalPlane(float(chunk[:, 0].mean()), float(chunk[:, 1].mean()))
        origin[k] = plane.lat0, plane.lon0, plane.north, plane.east
        lx, ly = plane.xy(chunk[:, 0], chunk[:, 1])
        if len(chunk) == 1:
            lx, ly = np.repeat(lx, 2), np.repeat(ly, 2)
        m = len(lx) - 1
        ax[k, :m], ay[k, :m], dx[k, :m], dy[k, :m] = lx[:-1], ly[:-1], np.diff(lx), np.diff(ly)
        if len(cum) > 1:
            base[k, :m], step[k, :m] = cum[:-1], np.diff(cum)
    seg2 = dx * dx + dy * dy
    safe = np.where(seg2 > 0, seg2, 1.0)
    chunk_ks = np.asarray(chunk_of, dtype=np.int64)
    dist, along = np.empty(n), np.empty(n)
    for lo in range(0, n, _PAIRS_PER_BLOCK):
        hi = min(lo + _PAIRS_PER_BLOCK, n)
        ks = chunk_ks[lo:hi]
        o = origin[ks]
        px, py = (lon[lo:hi] - o[:, 1]) * o[:, 3], (lat[lo:hi] - o[:, 0]) * o[:, 2]
        with np.errstate(invalid="ignore"):  # padding segments: inf - inf; never the nearest
            t = ((px[:, None] - ax[ks]) * dx[ks] + (py[:, None] - ay[ks]) * dy[ks]) / safe[ks]
        t = np.clip(np.where(seg2[ks] > 0, t, 0.0), 0.0, 1.0)
        fx, fy = ax[ks] + t * dx[ks], ay[ks] + t * dy[ks]
        nearest = np.argmin((px[:, None] - fx) ** 2 + (py[:, None] - fy) ** 2, axis=1)
        rows = np.arange(hi - lo)
        flat, flon = fy[rows, nearest] / o[:, 2] + o[:, 0], fx[rows, nearest] / o[:, 3] + o[:, 1]
        dist[lo:hi] = G.GEOD.inv(lon[lo:hi], lat[lo:hi], flon, flat)[2]
        along[lo:hi] = base[ks, nearest] + t[rows, nearest] * step[ks, nearest]
    return dist, along


def _lines_along(table: sa.Table, lines, buffer_m: float, engine) -> list[list[MapLine]]:
    """Lines of `table` within buffer_m of each line of `lines`, one statement for all. Per chunk of a line,
    every candidate at once: the distance of their vertices to the chunk, of the chunk's vertices to their
    segments, and crossings (the closest approach of two polylines is one of these)."""
    if not lines:
        return []
    per_line, every = _chunked(lines)
    with index.engine_of(engine).connect() as conn:
        rows = index.select_chunks(conn, table, index.grow_chunks([c for _, c, _ in every], buffer_m))
    return [_lines_near(chunks, per_chunk, buffer_m) for chunks, per_chunk in zip(per_line, _split(per_line, rows))]


def _lines_near(chunks: list, per_chunk: list[list], buffer_m: float) -> list[MapLine]:
    found: dict[int, list] = {}  # osm_id -> [row, points, vertex distances, closest approach]
    pairs: list[tuple[int, list]] = []  # (chunk, entry): each candidate measured against each chunk it came from
    for k, rows in enumerate(per_chunk):
        for row in rows:
            entry = found.get(row["osm_id"])
            if entry is None:
                entry = found[row["osm_id"]] = [row, None, None, np.inf]
            pairs.append((k, entry))
    for entry, way in zip(found.values(), G.decode_many([e[0]["line"] for e in found.values()])):
        entry[1], entry[2] = way, np.full(len(way), np.inf)
    if pairs:
        _measure_pairs([c for _, c, _ in chunks], pairs)
    out: list[MapLine] = []
    kept = [entry for entry in found.values() if entry[3] <= buffer_m]
    if not kept:
        return out
    verts = np.vstack([way for _, way, _, _ in kept])  # every kept line's segments measured in one call
    every = G.GEOD.inv(verts[:-1, 1], verts[:-1, 0], verts[1:, 1], verts[1:, 0])[2] if len(verts) > 1 else []
    first = np.concatenate(([0], np.cumsum([len(way) for _, way, _, _ in kept])))
    keys = [k for k in _ROAD_TAGS if k in kept[0][0]]  # osm_way's road columns; osm_ferry has none
    for (row, way, vertex, dist), start in zip(kept, first.tolist()):
        inside = vertex <= buffer_m
        seg = np.asarray(every[start:start + len(way) - 1]) if len(way) > 1 else np.zeros(0)
        near = float(seg[inside[:-1] & inside[1:]].sum()) if len(seg) else 0.0
        tags = {k.replace("cycleway_", "cycleway:"): row[k] for k in keys if row[k] is not None}
        out.append(MapLine(row["osm_id"], row["name"], row["length_m"], way, dist, near, tags))
    return sorted(out, key=lambda w: (w.distance_m, w.osm_id))


_ROAD_TAGS = ("highway", "surface", "tracktype", "smoothness", "cycleway", "cycleway_left", "cycleway_right",
              "cycleway_both", "bicycle", "maxspeed")


def _measure_pairs(chunks: list[np.ndarray], pairs: list[tuple[int, list]]) -> None:
    """Update each entry's vertex distances and closest approach against the chunks of the query line it came
    from: for every (chunk, entry) pair at once, in the chunk's local plane (trips.osm.geometry.LocalPlane),
    the distance of the entry's vertices to the chunk's segments, of the chunk's vertices to the entry's
    segments, and whether they cross (G.segment_distances and G.segments_cross element for element, chunks
    padded to the longest; tests/trips/osm/test_osm_batched_days.py holds the chunk-by-chunk form it answers as)."""
    k_count = len(chunks)
    sizes = [max(len(c), 2) for c in chunks]  # a one-vertex chunk is a zero-length segment
    width = max(sizes)
    origin = np.empty((k_count, 4))  # lat0, lon0, metres per degree north, east
    cx, cy = np.zeros((k_count, width)), np.zeros((k_count, width))  # padding: masked out (vert_ok, seg_ok)
    for k, chunk in enumerate(chunks):
        plane = G.LocalPlane(float(chunk[:, 0].mean()), float(chunk[:, 1].mean()))
        origin[k] = plane.lat0, plane.lon0, plane.north, plane.east
        x, y = plane.xy(chunk[:, 0], chunk[:, 1])
        if len(chunk) == 1:
            x, y = np.repeat(x, 2), np.repeat(y, 2)
        cx[k, :len(x)], cy[k, :len(y)] = x, y
    n_verts = np.array(sizes)
    col = np.arange(width)
    vert_ok = col[None, :] < n_verts[:, None]  # (K, width): real chunk vertices
    seg_ok = col[None, :-1] < (n_verts - 1)[:, None]  # (K, width - 1): real chunk segments
    sax, say, sbx, sby = cx[:, :-1], cy[:, :-1], cx[:, 1:], cy[:, 1:]
    sdx, sdy = sbx - sax, sby - say
    sseg2 = sdx * sdx + sdy * sdy
    pk = np.array([k for k, _ in pairs])
    lengths = np.array([len(e[1]) for _, e in pairs])
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    verts = np.vstack([e[1] for _, e in pairs])
    vk = np.repeat(pk, lengths)  # the chunk of each pair vertex
    o = origin[vk]
    wx, wy = (verts[:, 1] - o[:, 1]) * o[:, 3], (verts[:, 0] - o[:, 0]) * o[:, 2]
    # entries' vertices to the chunk's segments (G.segment_distances, min over the chunk's segments)
    ax, ay, dx, dy, seg2 = sax[vk], say[vk], sdx[vk], sdy[vk], sseg2[vk]
    t = ((wx[:, None] - ax) * dx + (wy[:, None] - ay) * dy) / np.where(seg2 > 0, seg2, 1.0)
    t = np.clip(np.where(seg2 > 0, t, 0.0), 0.0, 1.0)
    d = np.hypot(wx[:, None] - (ax + t * dx), wy[:, None] - (ay + t * dy))
    vertex = np.where(seg_ok[vk], d, np.inf).min(axis=1)
    closest = np.minimum.reduceat(vertex, starts)
    has_seg = np.ones(len(verts), dtype=bool)
    has_seg[starts + lengths - 1] = False  # a segment starts at every vertex but each line's last
    if has_seg.any():
        a = np.flatnonzero(has_seg)
        b, sk = a + 1, vk[a]
        # the chunk's vertices to the entries' segments (G.segment_distances, min over the chunk's vertices)
        px, py = cx[sk], cy[sk]
        ex, ey = wx[b] - wx[a], wy[b] - wy[a]
        eseg2 = ex * ex + ey * ey
        t = ((px - wx[a][:, None]) * ex[:, None] + (py - wy[a][:, None]) * ey[:, None]) / \
            np.where(eseg2 > 0, eseg2, 1.0)[:, None]
        t = np.clip(np.where(eseg2[:, None] > 0, t, 0.0), 0.0, 1.0)
        d = np.hypot(px - (wx[a][:, None] + t * ex[:, None]), py - (wy[a][:, None] + t * ey[:, None]))
        back = np.where(vert_ok[sk], d, np.inf).min(axis=1)
        # crossings (G.segments_cross: the entry's segment A→B against each of the chunk's segments C→D)
        rx, ry = ex[:, None], ey[:, None]
        sx, sy = sdx[sk], sdy[sk]
        qx, qy = sax[sk] - wx[a][:, None], say[sk] - wy[a][:, None]
        rxs = rx * sy - ry * sx
        with np.errstate(divide="ignore", invalid="ignore"):
            tt = (qx * sy - qy * sx) / rxs
            u = (qx * ry - qy * rx) / rxs
        cross = ((rxs != 0) & (tt >= 0) & (tt <= 1) & (u >= 0) & (u <= 1) & seg_ok[sk]).any(axis=1)
        per_seg = np.where(cross, 0.0, back)
        owner = np.repeat(np.arange(len(pairs)), lengths)[a]  # the pair each segment belongs to
        seg_min = np.full(len(pairs), np.inf)
        np.minimum.at(seg_min, owner, per_seg)
        closest = np.minimum(closest, seg_min)
    for (_k, entry), s, n, c in zip(pairs, starts.tolist(), lengths.tolist(), closest.tolist()):
        entry[2] = np.minimum(entry[2], vertex[s:s + n])
        entry[3] = min(entry[3], c)


def ways_along(line, buffer_m: float, engine=None) -> list[MapLine]:
    """Roads and paths coming within buffer_m of the line, closest first, with their terrain tags."""
    return _lines_along(osm_way, [line], buffer_m, engine)[0]


def ways_along_each(lines, buffer_m: float, engine=None) -> list[list[MapLine]]:
    """`ways_along` of every line of `lines`, in one statement; each answer exactly ways_along's for it alone."""
    return _lines_along(osm_way, lines, buffer_m, engine)


def ferries_along(line, buffer_m: float, engine=None) -> list[MapLine]:
    """Ferry routes coming within buffer_m of the line."""
    return _lines_along(osm_ferry, [line], buffer_m, engine)[0]


def ferries_along_each(lines, buffer_m: float, engine=None) -> list[list[MapLine]]:
    """`ferries_along` of every line of `lines`, in one statement; each answer exactly ferries_along's for it alone."""
    return _lines_along(osm_ferry, lines, buffer_m, engine)
