"""Day labels: the nearest imported place (city … hamlet) to each day's start and end.

docs/RULES.md "Day labels": the ends of each day are named from local map data, never a third party. The
labels land in `stage.enrichment["labels"]` ({"start", "end"}, each a place name or None); the rider's own
labels (`stage.label`, `start_label`, `end_label`) are other columns the registry never writes, so a label the
rider set always wins at read time. No alert group: labels raise nothing.
"""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.contract import Point, Result, TripSnap
from trips.osm import queries as Q

NAME = "labels"
GROUP = None
# How far from a day's end a place still names it: a village 10 km off is still "near"; further is misleading.
LABEL_RADIUS_M = 10_000.0


def _name(point: Point, engine) -> str | None:
    if Q.coverage([point], engine=engine)[0] <= 0:
        return None
    place = Q.nearest_place(point[0], point[1], LABEL_RADIUS_M, engine=engine)
    return place.name if place is not None else None


def compute(snap: TripSnap, engine) -> Result:
    """{"labels": {"start", "end"}} on every day the map touches; a day no imported area touches is left out."""
    result, cover = C.start(snap, engine)
    if not result.covered:
        return result
    names: dict[Point, str | None] = {}
    for stage in snap.stages:
        if cover[stage.id] <= 0:
            continue
        for point in (stage.start, stage.end):
            if point not in names:
                names[point] = _name(point, engine)
        result.ran_on(stage.id)
        result.data[stage.id] = {"labels": {"start": names[stage.start], "end": names[stage.end]}}
    return result
