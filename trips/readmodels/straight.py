"""The stretches of each day that BTP joined straight where no road was found, which the share page draws dashed
(docs/RULES.md "Trips from places"). A day that still follows the route drawn from places gets the stretches its legs
joined straight (`straightKm`, trips/services/planned.py) that fall in it; an `approximate` day edited off the route
gets each segment of its line longer than STRAIGHT_END_M that ends at one of its own points (its start, its end, its
waypoint), where BTP's detours, reroutes and added days join straight.
"""
from __future__ import annotations

import numpy as np

from trips.models import Stage, Trip
from trips.osm.router import STRAIGHT_END_M
from trips.route.geo import cumulative_km, haversine_m, locate_on_line, slice_km
from trips.services.gpx_days import full_lines
from trips.services.pipeline import straight_km, unpack_tracks

Line = list[tuple[float, float]]
SAME_M = 1.0  # a vertex this close to one of the day's own points is that point


def straight_lines(trip: Trip, stages: list[Stage]) -> dict[str, list[Line]]:
    """{stage id: the (lat, lon) lines of the day joined straight}; days with none are left out."""
    out: dict[str, list[Line]] = {}
    following: dict[str, np.ndarray] = {}
    stretches = straight_km(trip.route_legs)
    if stretches and trip.route is not None:
        following = full_lines(trip)
        tracks = unpack_tracks(trip.route)
        route = tracks[0] if len(tracks) == 1 else np.concatenate(tracks)
        cum = cumulative_km(route)
        after = 0.0
        for stage in stages:
            line = following.get(stage.id)
            found = None if line is None else locate_on_line(route, cum, float(line[0, 0]), float(line[0, 1]),
                                                             SAME_M, after)
            if found is None:
                continue
            start, end = found[0], found[0] + float(cumulative_km(line)[-1])
            after = end
            for a, b in stretches:
                lo, hi = max(a, start), min(b, end)
                if hi - lo > 0.001:
                    out.setdefault(stage.id, []).append(_pairs(slice_km(route, cum, lo, hi)))
    for stage in stages:
        if stage.approximate and stage.id not in following and not stage.is_rest_day:
            joins = _own_joins(stage)
            if joins:
                out[stage.id] = joins
    return out


def _own_joins(stage: Stage) -> list[Line]:
    """The segments of the day's line longer than STRAIGHT_END_M with an end at one of the day's own points."""
    own = [(stage.start_lat, stage.start_lon), (stage.end_lat, stage.end_lon)]
    if isinstance(stage.waypoint, dict) and "lat" in stage.waypoint and "lon" in stage.waypoint:
        own.append((float(stage.waypoint["lat"]), float(stage.waypoint["lon"])))
    pts = [(float(p[0]), float(p[1])) for p in stage.geometry or [] if len(p) >= 2]
    mine = [any(haversine_m(lat, lon, a, b) <= SAME_M for a, b in own) for lat, lon in pts]
    return [[p, q] for p, q, m, n in zip(pts, pts[1:], mine, mine[1:])
            if (m or n) and haversine_m(*p, *q) > STRAIGHT_END_M]


def _pairs(points: np.ndarray) -> Line:
    return [(float(p[0]), float(p[1])) for p in points]
