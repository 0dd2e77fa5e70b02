"""Borders (docs/RULES.md "Crossings"): each day's line sampled every SAMPLE_M, a sample's country from the imported
boundaries else the offline lookup (trips/enrich/countries.py), so a trip is checked on or off the map. A change of
country raises `border_crossed` on the day, navigating to the crossing bisected to within LOCATE_M; a sample at sea
changes nothing. Each day's start zone (`timeZone`, the tz database's name) is stored beside: the exports' clock
(docs/RULES.md "Times"), read with no time-zone lookup in a web request."""
from __future__ import annotations

import math

import numpy as np

from trips.enrich import corridor as C
from trips.enrich.alerts.crossings import BORDER_CROSSED
from trips.enrich.contract import AlertFact, Result, TripSnap
from trips.enrich.countries import country_at
from trips.osm import queries as Q
from trips.osm.geometry import GEOD
from trips.route import clock

NAME = "border_crossing"
GROUP = "border_crossing"

SAMPLE_M = 1000.0  # a route dipping into a country for less than this between two samples may be missed
LOCATE_M = 25.0


def _samples(line) -> np.ndarray:
    """Points every SAMPLE_M along the line (and its last vertex): (n, 2) lat, lon, however dense its vertices."""
    pts = np.asarray([p[:2] for p in line], dtype=float)
    if len(pts) < 2:
        return pts
    cum = np.concatenate(([0.0], np.cumsum(GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2])))
    at = np.append(np.arange(0.0, cum[-1], SAMPLE_M), cum[-1])
    return np.column_stack((np.interp(at, cum, pts[:, 0]), np.interp(at, cum, pts[:, 1])))


class _Countries:
    """The country key (ISO code, else the boundary's name) of points: imported boundaries first, inside the
    imported areas; else the offline lookup. The boundaries meeting the trip's box are read once (`box`, every
    point asked lies in it), not once per lookup."""

    def __init__(self, engine, box=None):
        self.engine, self.areas = engine, Q.ready_areas(engine)
        self.countries = Q.countries_in(box, engine) if box is not None and len(self.areas) else None

    def of(self, pts: np.ndarray) -> list[str | None]:
        out: list[str | None] = [None] * len(pts)
        if len(self.areas):
            lat, lon = pts[:, :1], pts[:, 1:2]
            a = self.areas
            mapped = np.flatnonzero(((lat >= a[:, 0]) & (lat <= a[:, 2]) & (lon >= a[:, 1]) & (lon <= a[:, 3])).any(1))
            if len(mapped):
                for run in Q.countries_along(pts[mapped], engine=self.engine, countries=self.countries):
                    for k in range(run.start_index, run.end_index + 1):
                        out[int(mapped[k])] = run.iso or run.name
        for i, key in enumerate(out):
            if key is None:
                out[i] = country_at(float(pts[i, 0]), float(pts[i, 1]))
        return out

    def locate(self, a: np.ndarray, b: np.ndarray, country: str) -> np.ndarray:
        """The point of a→b, within LOCATE_M of where the line enters `country` (b lies in it)."""
        metres = GEOD.inv(a[1], a[0], b[1], b[0])[2]
        for _ in range(max(0, math.ceil(math.log2(max(metres, 1.0) / LOCATE_M)))):
            mid = (a + b) / 2
            if self.of(mid[None, :])[0] == country:
                b = mid
            else:
                a = mid
        return b


def compute(snap: TripSnap, engine):
    result = Result()
    every = [p[:2] for s in snap.stages for p in s.line]
    where = _Countries(engine, (min(p[0] for p in every), min(p[1] for p in every), max(p[0] for p in every),
                                max(p[1] for p in every)) if every else None)
    last = None  # the last known country, carried from day to day
    for stage in snap.stages:
        result.ran_on(stage.id)
        zone = clock.zone_name(*stage.start)
        if zone:
            result.data[stage.id] = {"timeZone": zone}
        pts = _samples(stage.line)
        for i, here in enumerate(where.of(pts)):
            if here is None:
                continue
            if last is not None and here != last:  # entered between the previous sample and this one
                at = where.locate(pts[i - 1], pts[i], here) if i > 0 else pts[i]
                result.add(AlertFact(BORDER_CROSSED.code, stage.id, {"fromCountry": last, "country": here},
                                     C.navigate(*at)))
            last = here
    return result
