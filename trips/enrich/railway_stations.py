"""A way home by train (docs/RULES.md "Services near each day"): a riding day with no railway station
within 10 km of its start nor of its end."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import RAILWAY_STATION_NONE_NEARBY
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "railway_stations"
GROUP = "railway_station"

RADIUS_M = 10_000.0


def compute(snap: TripSnap, engine):
    result, cover, days = C.on_map(snap, engine)
    for stage in days:
        if stage.is_rest_day or not C.whole(cover, stage):
            continue
        if any(Q.points_near(*end, RADIUS_M, kinds=["station"], engine=engine) for end in (stage.start, stage.end)):
            continue
        nearest = Q.points_near(*stage.end, C.NAVIGATE_SEARCH_M, kinds=["station"], engine=engine)
        result.add(AlertFact(RAILWAY_STATION_NONE_NEARBY.code, stage.id, {"threshold": RADIUS_M / 1000},
                             C.navigate(nearest[0].lat, nearest[0].lon) if nearest else None))
    return result
