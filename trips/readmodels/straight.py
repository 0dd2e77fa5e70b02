"""The stretches of each day that BTP joined straight where no road was found, which the share page draws dashed
(docs/RULES.md "Trips from places"). A day that still follows the route drawn from places gets the stretches its legs
joined straight (`straightKm`, trips/services/planned.py) that fall in it. An `approximate` day edited off the route
gets the joins BTP's edits draw straight: a segment between two of the day's own points (its start, its end, its
waypoint: a reroute or an added day), and the way out to a moved point and back (a detour: the same segment ends
one day and, reversed, starts the next).
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
    for i, stage in enumerate(stages):
        if stage.approximate and stage.id not in following and not stage.is_rest_day:
            joins = _own_joins(stage, stages[i - 1] if i else None, stages[i + 1] if i + 1 < len(stages) else None)
            if joins:
                out[stage.id] = joins
    return out


def _line(stage: Stage | None) -> list[tuple[float, float]]:
    return [] if stage is None else [(float(p[0]), float(p[1])) for p in stage.geometry or [] if len(p) >= 2]


def _same(p, q) -> bool:
    return haversine_m(p[0], p[1], q[0], q[1]) <= SAME_M


def _own_joins(stage: Stage, before: Stage | None, after: Stage | None) -> list[Line]:
    """The day's segments between two of its own points, and its detour's way out or back (see the module)."""
    own = [(stage.start_lat, stage.start_lon), (stage.end_lat, stage.end_lon)]
    if isinstance(stage.waypoint, dict) and "lat" in stage.waypoint and "lon" in stage.waypoint:
        own.append((float(stage.waypoint["lat"]), float(stage.waypoint["lon"])))
    pts = _line(stage)
    mine = [any(_same(p, q) for q in own) for p in pts]
    joins = [[p, q] for p, q, m, n in zip(pts, pts[1:], mine, mine[1:]) if m and n]
    head, tail = _line(after)[:2], _line(before)[-2:]  # the next day's first segment, the day before's last
    if len(pts) > 2 and len(head) == 2 and _same(pts[-1], head[0]) and _same(pts[-2], head[1]):
        joins.append(pts[-2:])  # out to the moved end; the next day comes back the same way
    if len(pts) > 2 and len(tail) == 2 and _same(pts[0], tail[1]) and _same(pts[1], tail[0]):
        joins.append(pts[:2])  # back from the moved start; the day before went out the same way
    return [join for join in joins if haversine_m(*join[0], *join[1]) > STRAIGHT_END_M]


def _pairs(points: np.ndarray) -> Line:
    return [(float(p[0]), float(p[1])) for p in points]
