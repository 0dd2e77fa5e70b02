"""Ferries (docs/RULES.md "Crossings"): a riding day takes a ferry when its line rides the ferry route: at least
FOLLOW_SHARE of the ferry's length lies within FOLLOW_M of the day's line. Passing near a harbour, or crossing a
ferry line, is not taking it. The same crossing drawn as several ways (one per direction or operator) is one
alert: ferries are told apart by name, unnamed ones by their end coordinates (to about 100 m)."""
from __future__ import annotations

import numpy as np

from trips.enrich import corridor as C
from trips.enrich.alerts.crossings import FERRY_CROSSING
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import geometry as G
from trips.osm import queries as Q

NAME = "ferries"
GROUP = "ferry"

FOLLOW_M = 50.0  # a route drawn along a ferry line (a router's, simplified) stays this close to it
FOLLOW_SHARE = 0.6  # of the ferry's length within FOLLOW_M of the day: the day rides it
DEDUP_DECIMALS = 3  # 0.001° ≈ 110 m of latitude


def _key(ferry: Q.MapLine):
    if ferry.name:
        return ("name", ferry.name.strip().casefold())
    ends = sorted(tuple(np.round(ferry.points[i], DEDUP_DECIMALS)) for i in (0, -1))
    return ("ends", *ends)


def _boarding(ferry: np.ndarray, line: np.ndarray) -> tuple[float, float]:
    """The ferry's end the day reaches first (where the rider boards): the end whose nearest place on the
    line comes earlier along it."""
    ends = ferry[[0, -1]]
    _dist, seg, t, _lat, _lon = G.nearest_on_line(ends[:, 0], ends[:, 1], line)
    first = int(np.argmin(seg + t))  # segment index plus the fraction along it: the order along the line
    return float(ends[first, 0]), float(ends[first, 1])


def compute(snap: TripSnap, engine):
    result, _, days = C.on_map(snap, engine)
    riding = [s for s in days if not s.is_rest_day]
    for stage, ferries in zip(riding, Q.ferries_along_each([s.line for s in riding], FOLLOW_M, engine=engine)):
        seen = set()
        line = np.asarray(stage.line, dtype=float)
        for ferry in ferries:
            key = _key(ferry)
            if key in seen or G.share_near(ferry.points, line, FOLLOW_M) < FOLLOW_SHARE:
                continue
            seen.add(key)
            lat, lon = _boarding(ferry.points, line)
            result.add(AlertFact(FERRY_CROSSING.code, stage.id, {"name": ferry.name}, C.navigate(lat, lon)))
    return result
