"""Drinking water along each riding day (docs/RULES.md "Services near each day"): the day's water points kept as
`waterPoints`, and one nudge naming the longest stretch without water when it exceeds MAX_GAP_KM, looked for only
where the map holds the whole corridor across (a stretch off it is unknown, never dry: docs/RULES.md "Map coverage")."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import WATER_POINT_GAP
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "water_points"
GROUP = "water_point"

CORRIDOR_M = 2000.0
MAX_GAP_KM = 30.0  # a gap strictly over 30 km is flagged
MAX_WATER_POINTS = 12  # kept per day in `waterPoints` (evenly spread along it): get_stage stays small


def compute(snap: TripSnap, engine):
    result, _cover, days = C.on_map(snap, engine)
    riding = [s for s in days if not s.is_rest_day]
    along = dict(zip([s.id for s in riding],  # every riding day's water in one query
                     Q.points_along_each([s.line for s in riding], CORRIDOR_M, kinds=["water"], engine=engine)))
    areas = Q.ready_areas(engine)
    for stage in days:
        if stage.is_rest_day:
            result.data[stage.id] = {"waterPoints": []}
            continue  # a riding rule
        cum = C.cumulative_km(stage)
        placed = sorted(((C.nearest_vertex_km(stage, cum, p.lat, p.lon), p) for p in along[stage.id]),
                        key=lambda kp: kp[0])
        result.data[stage.id] = {"waterPoints": [_point(k, p) for k, p in C.spread(placed, MAX_WATER_POINTS)]}
        gap = longest_gap(C.corridor_km(stage, CORRIDOR_M, areas)[1], placed)
        if gap is None or gap[1] - gap[0] <= MAX_GAP_KM:
            continue
        near = gap[2] or gap[3]  # fill up at the water before the stretch, or at the one that ends it
        if near is None:
            found = Q.points_near(*stage.midpoint, C.NAVIGATE_SEARCH_M, kinds=["water"], engine=engine)
            near = found[0] if found else None
        result.add(AlertFact(WATER_POINT_GAP.code, stage.id, _params(gap[0], gap[1]),
                             C.navigate(near.lat, near.lon) if near else None))
    return result


def longest_gap(parts: list[tuple[float, float]], placed: list) -> tuple | None:
    """(from_km, to_km, the water before it or None, the water ending it or None) of the longest stretch without
    water inside the km `parts` the map holds (the first on a tie); None without any. A part's edges bound a
    stretch: what lies beyond is unknown."""
    best = None
    for a, b in parts:
        marks = [(a, None), *((k, p) for k, p in placed if a <= k <= b), (b, None)]
        for (k0, p0), (k1, p1) in zip(marks, marks[1:]):
            if best is None or k1 - k0 > best[1] - best[0]:
                best = (k0, k1, p0, p1)
    return best


def _point(km: float, p) -> dict:
    return {"km": round(float(km), 1), "kind": p.subkind, "name": p.name, "lat": round(p.lat, 6),
            "lon": round(p.lon, 6)}


def _params(from_km: float, to_km: float) -> dict:
    return {"threshold": MAX_GAP_KM, "gap": round(to_km - from_km, 1), "fromKm": round(from_km, 1),
            "toKm": round(to_km, 1)}
