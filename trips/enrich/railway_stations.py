"""A way home by train (docs/RULES.md "Services near each day"): a riding day with no railway station
within 10 km of its start nor of its end, said of what the map covers of those discs (docs/RULES.md "Map
coverage"): all of them, the radius it covers around both, or unknown when it covers none of one. Each riding day
keeps the nearest station to its start and to its end within that radius as `railwayStations`."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import (RAILWAY_STATION_NONE_IN_COVERED, RAILWAY_STATION_NONE_NEARBY,
                                        RAILWAY_STATION_UNKNOWN)
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "railway_stations"
GROUP = "railway_station"

RADIUS_M = 10_000.0


def compute(snap: TripSnap, engine):
    result, _cover, days = C.on_map(snap, engine)
    days = [s for s in days if not s.is_rest_day]
    near = Q.points_near_each([end for s in days for end in (s.start, s.end)], RADIUS_M, kinds=["station"],
                              engine=engine)  # both ends of every day in one query
    for stage in snap.stages:
        if stage.id in result.alerts:
            result.data[stage.id] = {"railwayStations": []}  # a rest day keeps none
    for k, stage in enumerate(days):
        result.data[stage.id] = {"railwayStations": [_station(end, found[0]) for end, found in
                                                     (("start", near[2 * k]), ("end", near[2 * k + 1])) if found]}
    lacking = [s for k, s in enumerate(days) if not (near[2 * k] or near[2 * k + 1])]
    far = Q.points_near_each([s.end for s in lacking], C.NAVIGATE_SEARCH_M, kinds=["station"], engine=engine)
    areas = Q.ready_areas(engine)
    for stage, nearest in zip(lacking, far):
        action = C.navigate(nearest[0].lat, nearest[0].lon) if nearest else None
        held = min(Q.disc_cover(*end[:2], RADIUS_M, areas)[1] for end in (stage.start, stage.end))
        threshold = RADIUS_M / 1000
        if held >= RADIUS_M:
            result.add(AlertFact(RAILWAY_STATION_NONE_NEARBY.code, stage.id, {"threshold": threshold}, action))
        elif C.held_km(held) > 0:
            result.add(AlertFact(RAILWAY_STATION_NONE_IN_COVERED.code, stage.id,
                                 {"threshold": threshold, "covered": C.held_km(held)}, action))
        else:
            result.add(AlertFact(RAILWAY_STATION_UNKNOWN.code, stage.id, {"threshold": threshold}, action))
    return result


def _station(end: str, p) -> dict:
    """The nearest station to the day's `end` (start or end): {end, name, distance (km), lat, lon}."""
    return {"end": end, "name": p.name, "distance": round(p.distance_m / 1000.0, 1), "lat": round(p.lat, 6),
            "lon": round(p.lon, 6)}
