"""Rerouting a day through a waypoint (docs/RULES.md "Bicycle routing"): by Valhalla when it is configured, else along
the imported map's roads, and where neither can, straight and flagged `approximate`. `stretches` says, leg by leg,
which was routed and which joined straight.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import sqlalchemy as sa
from flask import has_app_context

from trips.core.db import db
from trips.errors import Msg
from trips.osm import router
from trips.providers.valhalla import RoutingConfig, route_through
from trips.route.geo import total_distance_km

__all__ = ["Reroute", "reroute", "map_engine", "describe"]

Point = tuple[float, float, float]


@dataclass
class Reroute:
    """The new geometry of the day, (lat, lon, ele) rows (ele None where the map's router placed the point);
    `approximate` marks a straight-line stretch, `stretches` says for each leg how it was joined."""

    geometry: list[Point]
    distance_km: float
    approximate: bool
    stretches: list[Msg] = field(default_factory=list)


def map_engine() -> sa.Engine | None:
    """The database engine when the imported map holds a routable network (in an app context), else None."""
    if not has_app_context():
        return None
    try:
        return db.engine if router.has_network(db.engine) else None
    except sa.exc.SQLAlchemyError:  # a database without the network's tables: no map router
        return None


def describe(legs: list[router.Leg]) -> list[Msg]:
    """Each leg in a few words: "routed on the map" or "joined straight: approximate (why)"."""
    return [Msg("routing.routed_on_map") if leg.routed else Msg("routing.joined_straight", why=leg.why)
            for leg in legs]


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
    if config.valhalla_url:
        geometry, length = route_through(points, config)
        return Reroute(geometry=geometry, distance_km=length, approximate=False,
                       stretches=[Msg("routing.routed_by_service")] * 2)
    engine = map_engine()
    if engine is None:
        return Reroute(geometry=points, distance_km=total_distance_km(points), approximate=True,
                       stretches=[Msg("routing.straight_no_map")] * 2)
    found = router.route(engine, points)
    # The router's points have no elevation: None (unknown), never a flat 0 m (docs/RULES.md "Elevation").
    geometry = [(float(p[0]), float(p[1]), None if np.isnan(p[2]) else float(p[2])) for p in found.line]
    return Reroute(geometry=geometry, distance_km=found.distance_km, approximate=found.approximate,
                   stretches=describe(found.legs))
