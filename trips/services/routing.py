"""Rerouting a day through a waypoint: by bicycle with a Valhalla routing service (trips/providers/valhalla.py),
or, without one, as the straight line start → waypoint → end with its WGS-84 geodesic length, flagged
`approximate`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from trips.providers.valhalla import RoutingConfig, route_through
from trips.route.geo import total_distance_km

__all__ = ["Reroute", "reroute"]

Point = tuple[float, float, float]


@dataclass
class Reroute:
    """The new geometry of the day, (lat, lon, ele) rows; `approximate` marks the straight-line fallback."""

    geometry: list[Point]
    distance_km: float
    approximate: bool


def _point(value: Any, what: str) -> Point:
    """(lat, lon, ele) floats; a missing or non-finite elevation is 0.0.

    Raises ValueError unless `value` is (lat, lon) or (lat, lon, ele) with finite, in-range coordinates."""
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"the {what} must be (lat, lon) or (lat, lon, ele) numbers") from None
    if len(values) not in (2, 3):
        raise ValueError(f"the {what} must be (lat, lon) or (lat, lon, ele) numbers")
    lat, lon = values[0], values[1]
    if not (math.isfinite(lat) and math.isfinite(lon)) or abs(lat) > 90 or abs(lon) > 180:
        raise ValueError(f"the {what} has a latitude or longitude out of range")
    ele = values[2] if len(values) == 3 and math.isfinite(values[2]) else 0.0
    return lat, lon, ele


def reroute(start: Sequence[float], waypoint: Sequence[float], end: Sequence[float],
            config: RoutingConfig) -> Reroute:
    """The route from `start` through `waypoint` to `end` ((lat, lon) or (lat, lon, ele) points).

    Raises ValueError on a malformed point. With a Valhalla URL, raises RoutingError when the service cannot
    be reached, times out, answers with a redirect, an error (no route: error codes 170/171/442), a body
    over MAX_RESPONSE_BYTES or an answer that cannot be read; it never falls back silently.
    """
    points = [_point(start, "start"), _point(waypoint, "waypoint"), _point(end, "end")]
    if not config.valhalla_url:
        return Reroute(geometry=points, distance_km=total_distance_km(points), approximate=True)
    geometry, length = route_through(points, config)
    return Reroute(geometry=geometry, distance_km=length, approximate=False)
