"""Drinking water along each riding day (docs/RULES.md "Services near each day"): the day's water points kept as
`waterPoints`, and one nudge naming the longest stretch without water when it exceeds MAX_GAP_KM."""
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
    result, cover, days = C.on_map(snap, engine)
    riding = [s for s in days if not s.is_rest_day]
    along = dict(zip([s.id for s in riding],  # every riding day's water in one query
                     Q.points_along_each([s.line for s in riding], CORRIDOR_M, kinds=["water"], engine=engine)))
    for stage in days:
        if stage.is_rest_day:
            result.data[stage.id] = {"waterPoints": []}
            continue  # a riding rule
        cum = C.cumulative_km(stage)
        points = along[stage.id]
        placed = sorted(((C.nearest_vertex_km(stage, cum, p.lat, p.lon), p) for p in points),
                        key=lambda kp: kp[0])
        result.data[stage.id] = {"waterPoints": [_point(k, p) for k, p in C.spread(placed, MAX_WATER_POINTS)]}
        if not C.whole(cover, stage):
            continue  # a missing thing is only said of a day the map covers wholly
        if not placed:
            if stage.distance_km > MAX_GAP_KM:
                near = Q.points_near(*stage.midpoint, C.NAVIGATE_SEARCH_M, kinds=["water"], engine=engine)
                result.add(AlertFact(WATER_POINT_GAP.code, stage.id, _params(0.0, stage.distance_km),
                                     C.navigate(near[0].lat, near[0].lon) if near else None))
            continue
        marks = [0.0, *(k for k, _ in placed), max(float(cum[-1]), placed[-1][0])]
        gap, i = max(((marks[j + 1] - marks[j], j) for j in range(len(marks) - 1)), key=lambda g: (g[0], -g[1]))
        if gap > MAX_GAP_KM:
            # fill up at the water before the stretch, or at the one that ends it when it starts the day
            near = placed[i - 1][1] if i > 0 else placed[0][1]
            result.add(AlertFact(WATER_POINT_GAP.code, stage.id, _params(marks[i], marks[i + 1]),
                                 C.navigate(near.lat, near.lon)))
    return result


def _point(km: float, p) -> dict:
    return {"km": round(float(km), 1), "kind": p.subkind, "name": p.name, "lat": round(p.lat, 6),
            "lon": round(p.lon, 6)}


def _params(from_km: float, to_km: float) -> dict:
    return {"threshold": MAX_GAP_KM, "gap": round(to_km - from_km, 1), "fromKm": round(from_km, 1),
            "toKm": round(to_km, 1)}
