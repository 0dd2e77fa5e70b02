"""Geometry for the map tables: lines stored as encoded polylines (Google's polyline algorithm at 1e-6 degrees,
encoded a batch of lines at a time with numpy), WKB from osmium, local distances, point in polygon. The foot of the
perpendicular on a line is found in a local plane with the WGS-84 radii of curvature there; the distance to it is
the geodesic.
"""
from __future__ import annotations

import math

import numpy as np
from pyproj import Geod

GEOD = Geod(ellps="WGS84")
_SCALE = 1e6
_A, _E2 = GEOD.a, GEOD.es


def encode_many(coords: np.ndarray, lengths: np.ndarray) -> list[str]:
    """Encode consecutive runs of `coords` ((n, 2) lat, lon) of the given `lengths` as polylines."""
    if len(coords) == 0:
        return ["" for _ in lengths]
    ints = np.rint(coords * _SCALE).astype(np.int64)
    deltas = ints.copy()
    deltas[1:] -= ints[:-1]
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    deltas[starts[lengths > 0]] = ints[starts[lengths > 0]]  # each line starts from (0, 0)
    values = deltas.reshape(-1)
    zig = np.where(values < 0, ~(values << 1), values << 1)
    # 5-bit groups per value, then one byte column per group: uint8 and bool arrays, so a batch of lines
    # costs a few bytes per value here rather than 7 int64 columns.
    groups = np.ones(len(zig), dtype=np.int8)
    for k in range(1, 7):
        groups += zig >= (1 << (5 * k))
    chars = np.empty((len(zig), 7), dtype=np.uint8)
    for k in range(7):
        chars[:, k] = ((zig >> (5 * k)) & 31) + 63 + 32 * (groups > k + 1)
    valid = np.arange(7, dtype=np.int8)[None, :] < groups[:, None]
    flat = chars[valid].tobytes().decode("ascii")
    per_value = groups.astype(np.int64).reshape(-1, 2).sum(axis=1)  # characters per vertex
    cum = np.concatenate(([0], np.cumsum(per_value)))
    return [flat[cum[s]:cum[s + n]] for s, n in zip(starts, lengths)]


def decode(text: str) -> np.ndarray:
    """The (n, 2) lat, lon array of an encoded polyline. Raises ValueError on a malformed string."""
    values, shift, acc = [], 0, 0
    for ch in text:
        b = ord(ch) - 63
        if not 0 <= b < 64:
            raise ValueError("not an encoded polyline")
        acc |= (b & 31) << shift
        shift += 5
        if b < 32:
            values.append(~(acc >> 1) if acc & 1 else acc >> 1)
            shift, acc = 0, 0
    if shift or len(values) % 2:
        raise ValueError("truncated encoded polyline")
    return np.cumsum(np.array(values, dtype=np.int64).reshape(-1, 2), axis=0) / _SCALE


def decode_many(texts: list[str]) -> list[np.ndarray]:
    """`decode` of every text, at once: the 5-bit groups of all the lines summed per value with numpy instead of
    a Python step per character; the same arrays to the last bit (integers until the final division). A malformed
    text raises decode's ValueError."""
    if not texts:
        return []
    try:
        raw = np.frombuffer("".join(texts).encode("ascii"), dtype=np.uint8).astype(np.int64) - 63
    except UnicodeEncodeError:
        return [decode(t) for t in texts]  # raises decode's error for the malformed one
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    last = raw[ends[lengths > 0] - 1]
    if ((raw < 0) | (raw >= 64)).any() or (last >= 32).any():
        return [decode(t) for t in texts]  # raises decode's error for the malformed one
    stop = raw < 32  # the last group of each value
    first = np.flatnonzero(np.concatenate(([True], stop[:-1])))  # the first group of each value
    shift = 5 * (np.arange(len(raw)) - np.repeat(first, np.diff(np.append(first, len(raw)))))
    acc = np.add.reduceat((raw & 31) << shift, first) if len(raw) else np.zeros(0, dtype=np.int64)
    values = np.where(acc & 1, ~(acc >> 1), acc >> 1)
    per_text = np.diff(np.concatenate(([0], np.cumsum(stop)[ends - 1] if len(raw) else np.zeros(len(texts), int))))
    if (per_text % 2).any():
        return [decode(t) for t in texts]
    pairs = values.reshape(-1, 2)
    total = np.cumsum(pairs, axis=0)
    counts = per_text // 2
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    offset = np.where(starts[:, None] > 0, total[np.maximum(starts - 1, 0)], 0)  # each line from (0, 0)
    coords = (total - np.repeat(offset, counts, axis=0)) / _SCALE
    return np.split(coords, np.cumsum(counts)[:-1])


def wkb_line(hexwkb: str) -> np.ndarray:
    """(n, 2) lat, lon of a little-endian WKB LineString (as osmium.geom.WKBFactory writes it)."""
    xy = np.frombuffer(bytes.fromhex(hexwkb), dtype="<f8", offset=9).reshape(-1, 2)
    return xy[:, ::-1]


def wkb_polygons(hexwkb: str) -> list[tuple[bool, np.ndarray]]:
    """The rings of a little-endian WKB MultiPolygon as (is_outer, (n, 2) lat, lon) pairs."""
    raw = bytes.fromhex(hexwkb)
    pos, rings = 9, []
    for _ in range(int.from_bytes(raw[5:9], "little")):
        nrings = int.from_bytes(raw[pos + 5:pos + 9], "little")
        pos += 9
        for r in range(nrings):
            n = int.from_bytes(raw[pos:pos + 4], "little")
            xy = np.frombuffer(raw, dtype="<f8", count=2 * n, offset=pos + 4).reshape(-1, 2)
            rings.append((r == 0, xy[:, ::-1].copy()))
            pos += 4 + 16 * n
    return rings


def ewkt_point(lat: float, lon: float) -> str:
    return f"SRID=4326;POINT({lon!r} {lat!r})"


def ewkt_line(coords: np.ndarray) -> str:
    pts = coords if len(coords) > 1 else np.vstack((coords, coords))
    return "SRID=4326;LINESTRING(" + ",".join(f"{lon!r} {lat!r}" for lat, lon in pts) + ")"


def ewkt_box(min_lat: float, min_lon: float, max_lat: float, max_lon: float) -> str:
    return (f"SRID=4326;POLYGON(({min_lon!r} {min_lat!r},{max_lon!r} {min_lat!r},{max_lon!r} {max_lat!r},"
            f"{min_lon!r} {max_lat!r},{min_lon!r} {min_lat!r}))")


def lengths_m(coords: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Geodesic length of each run of `coords` (as in encode_many)."""
    if len(coords) < 2:
        return np.zeros(len(lengths))
    seg = GEOD.inv(coords[:-1, 1], coords[:-1, 0], coords[1:, 1], coords[1:, 0])[2]
    cum = np.concatenate(([0.0], np.cumsum(seg)))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    ends = np.maximum(starts, starts + np.asarray(lengths) - 1)  # a line's own segments only
    return cum[ends] - cum[starts]


def metres_per_degree(lat: float) -> tuple[float, float]:
    """(north, east) metres per degree of latitude and longitude at `lat` on the WGS-84 ellipsoid."""
    s = math.sin(math.radians(lat))
    w = 1 - _E2 * s * s
    north = _A * (1 - _E2) / w ** 1.5 * math.pi / 180
    east = _A / math.sqrt(w) * math.cos(math.radians(lat)) * math.pi / 180
    return north, max(east, 1e-6)


def box_around(lat: float, lon: float, radius_m: float) -> tuple[float, float, float, float]:
    """(min_lat, min_lon, max_lat, max_lon) containing every point within radius_m (1 % margin)."""
    north, east = metres_per_degree(lat)
    dlat = radius_m * 1.01 / north
    dlon = min(180.0, radius_m * 1.01 / max(east, metres_per_degree(min(89.9, abs(lat) + dlat))[1]))
    return lat - dlat, lon - dlon, lat + dlat, lon + dlon


class LocalPlane:
    """Metres east (x) and north (y) of a reference point."""

    def __init__(self, lat0: float, lon0: float):
        self.lat0, self.lon0 = lat0, lon0
        self.north, self.east = metres_per_degree(lat0)

    def xy(self, lat, lon) -> tuple[np.ndarray, np.ndarray]:
        return (np.asarray(lon) - self.lon0) * self.east, (np.asarray(lat) - self.lat0) * self.north

    def latlon(self, x, y) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(y) / self.north + self.lat0, np.asarray(x) / self.east + self.lon0


def nearest_on_line(lat: np.ndarray, lon: np.ndarray, line: np.ndarray):
    """For each point, the nearest place on `line` ((n, 2) lat, lon, n >= 1).

    Returns (distance_m geodesic, segment index, fraction along that segment, foot lat, foot lon).
    """
    plane = LocalPlane(float(line[:, 0].mean()), float(line[:, 1].mean()))
    lx, ly = plane.xy(line[:, 0], line[:, 1])
    if len(line) == 1:
        lx, ly = np.repeat(lx, 2), np.repeat(ly, 2)
    px, py = plane.xy(lat, lon)
    ax, ay, dx, dy = lx[:-1], ly[:-1], np.diff(lx), np.diff(ly)
    seg2 = dx * dx + dy * dy
    t = ((px[:, None] - ax) * dx + (py[:, None] - ay) * dy) / np.where(seg2 > 0, seg2, 1.0)
    t = np.clip(np.where(seg2 > 0, t, 0.0), 0.0, 1.0)
    fx, fy = ax + t * dx, ay + t * dy
    best = np.argmin((px[:, None] - fx) ** 2 + (py[:, None] - fy) ** 2, axis=1)
    rows = np.arange(len(best))
    flat, flon = plane.latlon(fx[rows, best], fy[rows, best])
    dist = GEOD.inv(np.asarray(lon, float), np.asarray(lat, float), flon, flat)[2]
    return np.asarray(dist), best, t[rows, best], flat, flon


def segment_distances(px, py, ax, ay, bx, by) -> np.ndarray:
    """Planar distance from each point P to each segment A→B: an array (len P, len A)."""
    dx, dy = bx - ax, by - ay
    seg2 = dx * dx + dy * dy
    t = ((px[:, None] - ax) * dx + (py[:, None] - ay) * dy) / np.where(seg2 > 0, seg2, 1.0)
    t = np.clip(np.where(seg2 > 0, t, 0.0), 0.0, 1.0)
    return np.hypot(px[:, None] - (ax + t * dx), py[:, None] - (ay + t * dy))


def segments_cross(ax, ay, bx, by, cx, cy, dx, dy) -> np.ndarray:
    """Whether each planar segment A→B crosses each segment C→D: a bool array (len A, len C)."""
    rx, ry = (bx - ax)[:, None], (by - ay)[:, None]
    sx, sy = (dx - cx)[None, :], (dy - cy)[None, :]
    qx, qy = cx[None, :] - ax[:, None], cy[None, :] - ay[:, None]
    rxs = rx * sy - ry * sx
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (qx * sy - qy * sx) / rxs
        u = (qx * ry - qy * rx) / rxs
    return (rxs != 0) & (t >= 0) & (t <= 1) & (u >= 0) & (u <= 1)


def inside_rings(lat: np.ndarray, lon: np.ndarray, rings: list[tuple[bool, np.ndarray]]) -> np.ndarray:
    """Even–odd point in polygon over every ring (outer and inner alike: holes toggle back out)."""
    lat, lon = np.asarray(lat, float), np.asarray(lon, float)
    inside = np.zeros(len(lat), dtype=bool)
    if not len(lat):
        return inside
    low, high = lat.min(), lat.max()
    for _outer, ring in rings:
        y1, x1 = ring[:-1, 0], ring[:-1, 1]
        y2, x2 = ring[1:, 0], ring[1:, 1]
        near = (np.maximum(y1, y2) >= low) & (np.minimum(y1, y2) <= high)  # only edges a point's latitude meets
        y1, x1, y2, x2 = y1[near], x1[near], y2[near], x2[near]
        straddle = (y1[None, :] > lat[:, None]) != (y2[None, :] > lat[:, None])
        with np.errstate(divide="ignore", invalid="ignore"):
            xcross = x1 + (lat[:, None] - y1) * (x2 - x1) / (y2 - y1)
        hits = straddle & (lon[:, None] < xcross)
        inside ^= (hits.sum(axis=1) % 2).astype(bool)
    return inside


def share_near(line: np.ndarray, other: np.ndarray, within_m: float, step_m: float = 10.0) -> float:
    """The share (0 … 1) of `line`'s length lying within `within_m` of `other` (both (n, 2) lat, lon): `line`
    cut into pieces of at most `step_m`, each counted when its midpoint is that close (planar distance in a
    local plane, exact to centimetres at these distances). Bounded: per block of pieces only the segments of
    `other` whose box comes near the block are measured."""
    line, other = np.asarray(line, float)[:, :2], np.asarray(other, float)[:, :2]
    if len(line) < 2 or len(other) == 0:
        return 0.0
    plane = LocalPlane(float(line[:, 0].mean()), float(line[:, 1].mean()))
    lx, ly = plane.xy(line[:, 0], line[:, 1])
    ox, oy = plane.xy(other[:, 0], other[:, 1])
    if len(other) == 1:
        ox, oy = np.repeat(ox, 2), np.repeat(oy, 2)
    seg = np.hypot(np.diff(lx), np.diff(ly))
    pieces = np.maximum(1, np.ceil(seg / step_m).astype(np.int64))
    owner = np.repeat(np.arange(len(seg)), pieces)
    frac = (np.arange(len(owner)) - np.repeat(np.cumsum(pieces) - pieces, pieces) + 0.5) / pieces[owner]
    px, py = lx[owner] + frac * np.diff(lx)[owner], ly[owner] + frac * np.diff(ly)[owner]
    weight = (seg / pieces)[owner]
    total = float(seg.sum())
    if total <= 0:
        return 0.0
    near = 0.0
    sx0, sx1 = np.minimum(ox[:-1], ox[1:]), np.maximum(ox[:-1], ox[1:])
    sy0, sy1 = np.minimum(oy[:-1], oy[1:]), np.maximum(oy[:-1], oy[1:])
    for lo in range(0, len(px), 512):
        bx, by = px[lo:lo + 512], py[lo:lo + 512]
        keep = np.flatnonzero((sx1 >= bx.min() - within_m) & (sx0 <= bx.max() + within_m)
                              & (sy1 >= by.min() - within_m) & (sy0 <= by.max() + within_m))
        if not len(keep):
            continue
        dist = segment_distances(bx, by, ox[keep], oy[keep], ox[keep + 1], oy[keep + 1]).min(axis=1)
        near += float(weight[lo:lo + 512][dist <= within_m].sum())
    return min(1.0, near / total)
