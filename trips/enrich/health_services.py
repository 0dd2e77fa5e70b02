"""A pharmacy, hospital or clinic near each day (docs/RULES.md "Services near each day"): none within
15 km of the day's geometry midpoint. Rest days are checked too (one falls ill on a rest day as well)."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import HEALTH_SERVICE_NONE_NEARBY
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "health_services"
GROUP = "health_service"

RADIUS_M = 15_000.0


def compute(snap: TripSnap, engine):
    result, cover, days = C.on_map(snap, engine)
    days = [s for s in days if C.whole(cover, s)]
    near = Q.points_near_each([s.midpoint for s in days], RADIUS_M, kinds=["health"], engine=engine)  # one query
    for stage, found in zip(days, near):
        if not found:
            result.add(AlertFact(HEALTH_SERVICE_NONE_NEARBY.code, stage.id, {"threshold": RADIUS_M / 1000}))
    return result
