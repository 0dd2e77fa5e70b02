"""Ferries (docs/RULES.md "Crossings"): a ferry route within 100 m of a riding day's line. The same
crossing drawn as several ways (one per direction or operator) is one alert: ferries are told apart by name,
unnamed ones by their end coordinates (to about 100 m)."""
from __future__ import annotations

import numpy as np

from trips.enrich import corridor as C
from trips.enrich.alerts.crossings import FERRY_CROSSING
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import geometry as G
from trips.osm import queries as Q

NAME = "ferries"
GROUP = "ferry"

CORRIDOR_M = 100.0
DEDUP_DECIMALS = 3  # 0.001° ≈ 110 m of latitude


def _key(ferry: Q.MapLine):
    if ferry.name:
        return ("name", ferry.name.strip().casefold())
    ends = sorted(tuple(np.round(ferry.points[i], DEDUP_DECIMALS)) for i in (0, -1))
    return ("ends", *ends)


def compute(snap: TripSnap, engine):
    result, _, days = C.on_map(snap, engine)
    for stage in days:
        if stage.is_rest_day:
            continue
        seen = set()
        for ferry in Q.ferries_along(stage.line, CORRIDOR_M, engine=engine):
            key = _key(ferry)
            if key in seen:
                continue
            seen.add(key)
            dist = G.nearest_on_line(ferry.points[:, 0], ferry.points[:, 1], np.asarray(stage.line))[0]
            lat, lon = ferry.points[int(np.argmin(dist))]
            result.add(AlertFact(FERRY_CROSSING.code, stage.id, {"name": ferry.name}, C.navigate(lat, lon)))
    return result
