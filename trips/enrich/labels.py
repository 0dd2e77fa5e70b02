"""Day labels (docs/RULES.md "Day labels"): the nearest imported place to each day's start and end, stored as
`stage.enrichment["labels"]`. The rider's own labels are other columns the registry never writes, so they win at
read time.
"""
from __future__ import annotations

import numpy as np

from trips.enrich import corridor as C
from trips.enrich.contract import Point, Result, TripSnap
from trips.osm import queries as Q

NAME = "labels"
GROUP = None
# How far from a day's end a place still names it: a village 10 km off is still "near"; further is misleading.
LABEL_RADIUS_M = 10_000.0


def _names(points: list[Point], engine) -> dict[Point, str | None]:
    """{point: the nearest place's name} for the points an imported area holds (None for the others), in one
    query for all of them."""
    areas = Q.ready_areas(engine)
    mapped = [p for p in points if Q.clipped_coverage(np.array([p[:2]], dtype=float), areas)[0] > 0]
    places = Q.nearest_place_each(mapped, LABEL_RADIUS_M, engine=engine)
    found = {p: place.name if place is not None else None for p, place in zip(mapped, places)}
    return {p: found.get(p) for p in points}


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
