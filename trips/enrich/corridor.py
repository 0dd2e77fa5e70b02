"""What the point-based enrichments share: which days the map covers (docs/RULES.md "Map coverage"), haversine
proximity (docs/RULES.md "Geodesy"), positions along a day, assigning a point to one day by geometry, and the
`navigate` action.
"""
from __future__ import annotations

import math

import numpy as np

from trips.enrich.contract import Result, StageSnap, TripSnap
from trips.osm import queries as Q
from trips.osm.geometry import GEOD
from trips.osm.queries import MapPoint

EARTH_RADIUS_M = 6_371_000.0  # haversine for proximity checks (docs/RULES.md "Geodesy")
FULL_COVERAGE = 0.999  # a day's share of length inside imported areas that counts as wholly covered
OFF_MAP_MIN_M = 50.0  # an off-map stretch shorter than this is not named (rounding at an area's edge)
MAX_OFF_MAP = 5  # off-map stretches named per day
NAVIGATE_SEARCH_M = 30_000.0  # how far a `navigate` hint looks for the nearest service once a check failed
# Two days meeting at a point are equally close to what stands there, but stored coordinates are rounded to
# the microdegree (about 0.1 m): distances within 1 m are a tie.
TIE_M = 1.0
# A shop or a castle mapped twice (a node and its building) is one place: the same name and subkind within
# 200 m, the distance lodgings are deduplicated by (docs/RULES.md "Accommodations").
DEDUP_M = 200.0


def haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres, R = 6 371 000 m (docs/RULES.md "Geodesy")."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    a = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(math.radians(lon2 - lon1) / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.atan2(math.sqrt(a), math.sqrt(1 - a))


def day_coverage(snap: TripSnap, engine) -> dict[str, float]:
    """Share of each day's length inside imported map areas (0 … 1)."""
    areas = Q.ready_areas(engine)
    return {s.id: Q.clipped_coverage(np.array([p[:2] for p in s.line], dtype=float), areas)[0] if s.line else 0.0
            for s in snap.stages}


def map_coverage(line, areas: np.ndarray) -> dict:
    """{"share": 0 … 1, "offMapKm": [[from, to], …]} of a day's line against the areas' boxes
    (trips/osm/queries.py ready_areas): the km from the day's start not on the imported map, stretches
    shorter than OFF_MAP_MIN_M left out, at most MAX_OFF_MAP of them."""
    if not len(line):
        return {"share": 0.0, "offMapKm": []}
    pts = np.array([p[:2] for p in line], dtype=float)
    share, parts = Q.clipped_coverage(pts, areas)
    total = float(GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2].sum()) if len(pts) > 1 else 0.0
    gaps, at = [], 0.0
    for a, b in [*parts, (total, total)]:
        if a - at >= OFF_MAP_MIN_M:
            gaps.append([round(at / 1000.0, 1), round(a / 1000.0, 1)])
        at = max(at, b)
    share = round(share, 3) if share < FULL_COVERAGE else 1.0
    return {"share": share, "offMapKm": gaps[:MAX_OFF_MAP] if share < 1.0 else []}


def start(snap: TripSnap, engine) -> tuple[Result, dict[str, float]]:
    """A Result for the trip and the days' coverage; `covered` is False when no imported area touches any day
    (the registry then fails the computation with the "no map data" reason)."""
    cover = day_coverage(snap, engine)
    result = Result(covered=any(f > 0 for f in cover.values()))
    return result, cover


def on_map(snap: TripSnap, engine) -> tuple[Result, dict[str, float], list[StageSnap]]:
    """`start`, and the days the map touches, each already marked as looked at (its group then exists, perhaps
    empty); no day when no imported area touches the trip."""
    result, cover = start(snap, engine)
    days = [s for s in snap.stages if cover[s.id] > 0] if result.covered else []
    for stage in days:
        result.ran_on(stage.id)
    return result, cover, days


def whole(cover: dict[str, float], stage: StageSnap) -> bool:
    return cover.get(stage.id, 0.0) >= FULL_COVERAGE


def held_km(metres: float) -> float:
    """What a search area's covered part measures, in km floored to 0.1: a "none within" never claims more
    than the map holds (docs/RULES.md "Map coverage")."""
    return math.floor(metres / 100.0 + 1e-6) / 10.0


def corridor_km(stage: StageSnap, radius_m: float, areas: np.ndarray) -> tuple[bool, list[tuple[float, float]]]:
    """(whether the map holds all of the day's corridor of `radius_m`, [(from_km, to_km)] of the day along which
    it holds all of it across) (trips/osm/areas.py corridor_cover)."""
    if not stage.line:
        return False, []
    share, parts = Q.corridor_cover([p[:2] for p in stage.line], radius_m, areas)
    return share >= FULL_COVERAGE, [(a / 1000.0, b / 1000.0) for a, b in parts]


def navigate(lat: float, lon: float) -> dict:
    return {"kind": "navigate", "lat": round(float(lat), 6), "lon": round(float(lon), 6)}


def cumulative_km(stage: StageSnap) -> np.ndarray:
    """Kilometres from the day's start at each vertex of its geometry (WGS-84 geodesics)."""
    pts = np.asarray(stage.line, dtype=float)
    if len(pts) < 2:
        return np.zeros(len(pts))
    seg = GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2]
    return np.concatenate(([0.0], np.cumsum(seg))) / 1000.0


def nearest_vertex_km(stage: StageSnap, cum_km: np.ndarray, lat: float, lon: float) -> float:
    """The cumulative km of the day's vertex nearest to (lat, lon) (docs/RULES.md "Services near each day")."""
    pts = np.asarray(stage.line, dtype=float)
    dist = GEOD.inv(np.full(len(pts), lon), np.full(len(pts), lat), pts[:, 1], pts[:, 0])[2]
    return float(cum_km[int(np.argmin(dist))])


def assign_along(stages, buffer_m: float, kinds, engine) -> dict[str, list[MapPoint]]:
    """Points within buffer_m of each day's line, each given to the one day whose geometry passes closest
    (the earlier day on a tie, within TIE_M), so that a shop at a day's end is not counted on the next day
    too. Per day, in the order the line passes them."""
    best: dict[tuple, tuple[float, str, MapPoint]] = {}
    found = Q.points_along_each([s.line for s in stages], buffer_m, kinds=kinds, engine=engine)  # one query
    for stage, points in zip(stages, found):  # in trip order: a later day takes a point only when clearly closer
        for p in points:
            key = (p.osm_type, p.osm_id, p.kind)
            if key not in best or p.distance_m < best[key][0] - TIE_M:
                best[key] = (p.distance_m, stage.id, p)
    out: dict[str, list[MapPoint]] = {s.id: [] for s in stages}
    for _d, sid, p in best.values():
        out[sid].append(p)
    for pts in out.values():
        pts.sort(key=lambda p: (p.along_m, p.distance_m))
    return out


def dedup_named(points: list[MapPoint]) -> list[MapPoint]:
    """`points` (in route order) without the repeats of a named place: the same name and subkind within
    DEDUP_M (haversine) of one already kept, the one nearest the line being kept. Unnamed points all stay."""
    kept: list[MapPoint] = []
    for p in sorted(points, key=lambda q: q.distance_m):
        if p.name is None or not any(
                k.name == p.name and k.subkind == p.subkind and haversine_m(k.lat, k.lon, p.lat, p.lon) <= DEDUP_M
                for k in kept):
            kept.append(p)
    return sorted(kept, key=lambda q: (q.along_m, q.distance_m))


def spread(items: list, n: int) -> list:
    """At most n of `items`, evenly spaced over the list (first and last kept), in their order."""
    if len(items) <= n:
        return list(items)
    if n <= 1:
        return items[:n]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def km(metres: float | None) -> float | None:
    return None if metres is None else round(metres / 1000.0, 1)
