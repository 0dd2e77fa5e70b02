"""The imported areas and the countries of the local map: which imported country boundaries a line crosses, and how
much of a line the imported areas cover (docs/RULES.md "Map coverage"). Plain functions over the database engine, as
trips/osm/queries.py (which re-exports them: callers ask `queries.coverage`, `queries.countries_along` …)."""
from __future__ import annotations

import json
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
