"""Day labels (docs/RULES.md "Day labels"): the nearest imported place to each day's start and end, else the nearest
named feature close by (a square, a station, a street), stored as `stage.enrichment["labels"]`. The rider's own labels
are other columns the registry never writes, so they win at read time.
"""
from __future__ import annotations

import numpy as np

from trips.enrich import corridor as C
from trips.enrich.contract import Point, Result, TripSnap
from trips.osm import queries as Q
from trips.osm.tables import FEATURE_RANKS

NAME = "labels"
GROUP = None
# How far from a day's end a place still names it: a village 10 km off is still "near"; further is misleading.
LABEL_RADIUS_M = 10_000.0
# Without a place that near, a named feature this close names the point; a street further off is somewhere else.
FEATURE_RADIUS_M = 500.0
_POINT_FEATURES = tuple(k for k in FEATURE_RANKS if k != "street")  # streets are measured to their line


def _names(points: list[Point], engine) -> dict[Point, str | None]:
    """{point: the nearest place's name, else the nearest named feature's} for the points an imported area holds
    (None for the others), in a few queries for all of them."""
    areas = Q.ready_areas(engine)
    mapped = [p for p in points if Q.clipped_coverage(np.array([p[:2]], dtype=float), areas)[0] > 0]
    places = Q.nearest_place_each(mapped, LABEL_RADIUS_M, engine=engine)
    found = {p: place.name if place is not None else None for p, place in zip(mapped, places)}
    bare = [p for p in mapped if found[p] is None]
    found.update(zip(bare, _nearest_features(bare, engine)))
    return {p: found.get(p) for p in points}


def _nearest_features(points: list[Point], engine) -> list[str | None]:
    """The name of the nearest named feature within FEATURE_RADIUS_M of each point: a feature's point (a square's
    centre, a station), or a named road's line; at equal distance the feature's class decides (a square first)."""
    if not points:
        return []
    features = Q.nearest_place_each(points, FEATURE_RADIUS_M, places=_POINT_FEATURES, engine=engine)
    roads = Q.ways_along_each([[p[:2]] for p in points], FEATURE_RADIUS_M, engine=engine)
    out: list[str | None] = []
    for feature, near in zip(features, roads):
        street = next((w for w in near if w.name), None)  # closest first
        candidates = [(feature.distance_m, feature.rank, feature.name)] if feature is not None else []
        if street is not None:
            candidates.append((street.distance_m, FEATURE_RANKS["street"], street.name))
        out.append(min(candidates)[2] if candidates else None)
    return out


def compute(snap: TripSnap, engine) -> Result:
    """{"labels": {"start", "end"}} on every day the map touches; a day no imported area touches is left out."""
    result, cover = C.start(snap, engine)
    if not result.covered:
        return result
    days = [s for s in snap.stages if cover[s.id] > 0]
    names = _names(list(dict.fromkeys(p for s in days for p in (s.start, s.end))), engine)
    for stage in days:
        result.ran_on(stage.id)
        result.data[stage.id] = {"labels": {"start": names[stage.start], "end": names[stage.end]}}
    return result
