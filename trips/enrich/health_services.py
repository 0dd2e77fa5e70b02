"""A pharmacy, hospital or clinic near each day (docs/RULES.md "Services near each day"): none within
15 km of the day's geometry midpoint, said of what the map covers of that disc (docs/RULES.md "Map coverage").
Rest days are checked too (one falls ill on a rest day as well)."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import (HEALTH_SERVICE_NONE_IN_COVERED, HEALTH_SERVICE_NONE_NEARBY,
                                        HEALTH_SERVICE_UNKNOWN)
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "health_services"
GROUP = "health_service"

RADIUS_M = 15_000.0


def compute(snap: TripSnap, engine):
    result, _cover, days = C.on_map(snap, engine)
    near = Q.points_near_each([s.midpoint for s in days], RADIUS_M, kinds=["health"], engine=engine)  # one query
    areas = Q.ready_areas(engine)
    threshold = RADIUS_M / 1000
    for stage, found in zip(days, near):
        if found:
            continue
        held = Q.disc_cover(*stage.midpoint[:2], RADIUS_M, areas)[1]
        if held >= RADIUS_M:
            result.add(AlertFact(HEALTH_SERVICE_NONE_NEARBY.code, stage.id, {"threshold": threshold}))
        elif C.held_km(held) > 0:
            result.add(AlertFact(HEALTH_SERVICE_NONE_IN_COVERED.code, stage.id,
                                 {"threshold": threshold, "covered": C.held_km(held)}))
        else:
            result.add(AlertFact(HEALTH_SERVICE_UNKNOWN.code, stage.id, {"threshold": threshold}))
    return result
