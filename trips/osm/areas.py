"""The imported areas and the countries of the local map: which imported country boundaries a line crosses, and how
much of a line the imported areas cover (docs/RULES.md "Map coverage"). Plain functions over the database engine, as
trips/osm/queries.py (which re-exports them: callers ask `queries.coverage`, `queries.countries_along` …)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa

from trips.osm import geometry as G
from trips.osm import index
from trips.osm.tables import osm_boundary


@dataclass(frozen=True)
class CountryRun:
    iso: str | None
    name: str | None
    start_index: int  # first vertex of the line inside this country
    end_index: int  # last one


def _ready_areas(conn) -> list:
    return conn.execute(sa.text("SELECT min_lat, min_lon, max_lat, max_lon FROM osm_area "
                                "WHERE status = 'ready' AND min_lat IS NOT NULL")).all()


def coverage(line, engine=None) -> tuple[float, list[tuple[float, float]]]:
    """(fraction of the line's length inside imported areas, [(start_m, end_m) metres along the line of each
    covered stretch]) (docs/RULES.md "Map coverage"). Each segment is clipped to every ready area's box
    (straight in latitude and longitude, as the boxes' edges are), so a segment crossing an area with no
    vertex inside counts for the part inside; overlapping areas count once. A single point: (1.0,
    [(0.0, 0.0)]) inside an area, else (0.0, [])."""
    pts = index.as_line(line)
    return clipped_coverage(pts, ready_areas(engine))


def ready_areas(engine=None) -> np.ndarray:
    """The (k, 4) boxes min_lat, min_lon, max_lat, max_lon of the ready imported areas."""
    with index.engine_of(engine).connect() as conn:
        return np.array(_ready_areas(conn), dtype=float).reshape(-1, 4)


def clipped_coverage(pts: np.ndarray, areas: np.ndarray) -> tuple[float, list[tuple[float, float]]]:
    """`coverage` of the (n, 2) lat, lon line `pts` against the (k, 4) boxes min_lat, min_lon, max_lat, max_lon."""
    if len(pts) == 0 or len(areas) == 0:
        return 0.0, []
    lat, lon = pts[:, 0], pts[:, 1]
    if len(pts) == 1:
        inside = ((lat[0] >= areas[:, 0]) & (lat[0] <= areas[:, 2]) & (lon[0] >= areas[:, 1])
                  & (lon[0] <= areas[:, 3])).any()
        return (1.0, [(0.0, 0.0)]) if inside else (0.0, [])
    seg = G.GEOD.inv(lon[:-1], lat[:-1], lon[1:], lat[1:])[2]
    cum = np.concatenate(([0.0], np.cumsum(seg)))
    # Liang-Barsky: the parameter range [lo, hi] of each segment (rows) inside each box (columns).
    lo, hi = np.zeros((len(seg), len(areas))), np.ones((len(seg), len(areas)))
    for p0, d, low, high in ((lat[:-1], np.diff(lat), areas[:, 0], areas[:, 2]),
                             (lon[:-1], np.diff(lon), areas[:, 1], areas[:, 3])):
        p0, d = p0[:, None], d[:, None]
        flat = d == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            t1, t2 = (low[None, :] - p0) / d, (high[None, :] - p0) / d
        out_flat = flat & ((p0 < low[None, :]) | (p0 > high[None, :]))
        lo = np.where(flat, lo, np.maximum(lo, np.minimum(t1, t2)))
        hi = np.where(flat, hi, np.minimum(hi, np.maximum(t1, t2)))
        hi = np.where(out_flat, -1.0, hi)
    rows, cols = np.nonzero(lo <= hi)
    if not len(rows):
        return 0.0, []
    starts = cum[rows] + lo[rows, cols] * seg[rows]
    ends = cum[rows] + hi[rows, cols] * seg[rows]
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    new = np.concatenate(([True], starts[1:] > ends[:-1] + 1e-6))  # a stretch starts past every earlier end
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [len(starts) - 1]))
    parts = [(float(a), float(b)) for a, b in zip(starts[first], ends[last])]
    total = float(cum[-1])
    if total <= 0:
        return 1.0, [(0.0, 0.0)]
    return min(1.0, sum(b - a for a, b in parts) / total), parts


# The search areas' coverage is read from samples: rings of a disc (DISC_RINGS from its centre out, DISC_ANGLES
# points each), discs every half radius along a line (at most CORRIDOR_STATIONS of them).
DISC_RINGS, DISC_ANGLES = 40, 72
CORRIDOR_STATIONS = 2000
_STATION_RINGS = ((0.5, 8), (1.0, 16))  # (share of the radius, points) of each station's disc beside its centre


def _inside(lat: np.ndarray, lon: np.ndarray, areas: np.ndarray) -> np.ndarray:
    if len(areas) == 0:
        return np.zeros(lat.shape, dtype=bool)
    lat, lon = lat[..., None], lon[..., None]
    return np.asarray(((lat >= areas[:, 0]) & (lat <= areas[:, 2]) & (lon >= areas[:, 1])
                       & (lon <= areas[:, 3])).any(-1))


def _offsets(lat: np.ndarray, lon: np.ndarray, dist_m: np.ndarray, angle: np.ndarray):
    """The points `dist_m` away from (lat, lon) at bearings `angle` (radians), on the local plane (the
    search radii are a few km)."""
    north, east = G.metres_per_degree(float(np.mean(lat)))
    return lat + dist_m * np.cos(angle) / north, lon + dist_m * np.sin(angle) / east


def disc_cover(lat: float, lon: float, radius_m: float, areas: np.ndarray) -> tuple[float, float]:
    """(share of the disc of `radius_m` around (lat, lon) inside the areas' boxes (`ready_areas`), the radius in
    metres around the point the map covers wholly: 0 when the point is off the map, `radius_m` when all of it is
    on). The radius is the last ring of samples wholly inside, so it never claims more than the map holds."""
    step = radius_m / DISC_RINGS
    rings = step * np.arange(1, DISC_RINGS + 1)
    angles = np.linspace(0.0, 2 * np.pi, DISC_ANGLES, endpoint=False)
    r, a = np.meshgrid(rings, angles, indexing="ij")
    ring_lat, ring_lon = _offsets(np.full(r.shape, lat), np.full(r.shape, lon), r, a)
    inside = _inside(ring_lat, ring_lon, areas)
    if not _inside(np.array(lat), np.array(lon), areas):
        return float((inside * r).sum() / r.sum()), 0.0
    whole = inside.all(axis=1)
    held = float(radius_m) if whole.all() else float(step * np.argmin(whole))
    return float((inside * r).sum() / r.sum()), held


def corridor_cover(line, radius_m: float, areas: np.ndarray) -> tuple[float, list[tuple[float, float]]]:
    """(share of the corridor within `radius_m` of the (n, 2) lat, lon `line` the areas' boxes hold, [(start_m,
    end_m)] along the line where they hold all of it across): the corridor is read at stations every half radius,
    each whole when its disc's samples all are."""
    pts = np.asarray(line, dtype=float)[:, :2]
    seg = G.GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2] if len(pts) > 1 else np.zeros(0)
    cum = np.concatenate(([0.0], np.cumsum(seg)))
    total = float(cum[-1])
    count = int(min(CORRIDOR_STATIONS, max(1, math.ceil(total / (radius_m / 2))))) + 1
    at = np.linspace(0.0, total, count)
    lat, lon = np.interp(at, cum, pts[:, 0]), np.interp(at, cum, pts[:, 1])
    rings = [(np.full(n, share * radius_m), np.linspace(0.0, 2 * np.pi, n, endpoint=False))
             for share, n in _STATION_RINGS]
    dist = np.concatenate([[0.0], *(d for d, _ in rings)])
    angle = np.concatenate([[0.0], *(a for _, a in rings)])
    disc_lat, disc_lon = _offsets(lat[:, None], lon[:, None], dist[None, :], angle[None, :])
    whole = _inside(disc_lat, disc_lon, areas).all(axis=1)
    half = total / (count - 1) / 2 if count > 1 else 0.0
    parts: list[tuple[float, float]] = []
    for k in np.flatnonzero(whole):
        a, b = max(0.0, at[k] - half), min(total, at[k] + half)
        if parts and a <= parts[-1][1] + 1e-6:
            parts[-1] = (parts[-1][0], float(b))
        else:
            parts.append((float(a), float(b)))
    return float(whole.mean()), parts


def _countries(conn, box) -> list[tuple[str | None, str | None, list]]:
    rows = index.select(conn, osm_boundary, box)
    out, seen = [], set()
    for row in rows:
        if row["osm_id"] in seen:
            continue
        seen.add(row["osm_id"])
        out.append((row["iso"], row["name"], [(bool(o), G.decode(e)) for o, e in json.loads(row["rings"])]))
    return out


_POINTS_PER_BLOCK = 64


def countries_in(box, engine=None) -> list[tuple[str | None, str | None, list]]:
    """The imported countries whose box meets `box` (min_lat, min_lon, max_lat, max_lon), for countries_along
    (`countries=`) to test many lines or points against without a query each."""
    with index.engine_of(engine).connect() as conn:
        return _countries(conn, box)


def countries_along(line, engine=None, countries=None) -> list[CountryRun]:
    """The countries (imported admin_level=2 boundaries) the line's vertices lie in, run by run in order.
    Vertices in no imported country belong to no run. `countries`: countries_in of a box holding the line
    (the same answer, no query)."""
    pts = index.as_line(line)
    if countries is None:
        with index.engine_of(engine).connect() as conn:
            countries = _countries(conn, index.box_of(pts))
    owner = np.full(len(pts), -1)
    for lo in range(0, len(pts), _POINTS_PER_BLOCK):  # a block of points against every edge its latitudes meet
        block = owner[lo:lo + _POINTS_PER_BLOCK]
        for i, (_iso, _name, rings) in enumerate(countries):
            block[(block < 0) & G.inside_rings(pts[lo:lo + len(block), 0], pts[lo:lo + len(block), 1], rings)] = i
    runs: list[CountryRun] = []
    for idx, who in enumerate(owner):
        if who < 0:
            continue
        iso, name, _ = countries[who]
        if runs and runs[-1].iso == iso and runs[-1].name == name:
            runs[-1] = CountryRun(iso, name, runs[-1].start_index, idx)
        else:
            runs.append(CountryRun(iso, name, idx, idx))
    return runs


def country_at(lat: float, lon: float, engine=None) -> tuple[str | None, str | None] | None:
    """(iso, name) of the imported country containing the point, or None."""
    runs = countries_along([(lat, lon)], engine=engine)
    return (runs[0].iso, runs[0].name) if runs else None
