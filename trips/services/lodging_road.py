"""The road to the day's lodging (docs/RULES.md "Choosing an accommodation"): a lodging chosen (a candidate or one
entered by hand) ends the day at it along the roads, as moving the day's end does (trips/services/day_points.py),
and the next day starts there; clearing the choice gives the two days back the road they had. The stored choice
keeps that road under ROAD: where the day ended before and its length, where the detour leaves the road, the days'
flags.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from oauth.kernel.models import User
from trips.errors import DomainError
from trips.guards import load_owned_trip
from trips.models import Stage, Trip
from trips.route.geo import haversine_m
from trips.services import day_points
from trips.services.stages import find_stage, move_point, set_geometry

ROAD = "road"  # the stored choice's record of the road before it; never shown (`shown`)
SAME_POINT_M = 1.0  # a stored line's point this close to the detour's start is that start (rounded to 1e-6°)


def shown(place: dict | None) -> dict | None:
    """The stored choice as answers show it: without the record of the road before it."""
    return None if place is None else {k: v for k, v in place.items() if k != ROAD}


def reach(trip: Trip, stage: Stage, place: dict, notes: list[str], routes: dict | None = None) -> None:
    """Make `place` ({name, lat, lon, …}) the day's lodging and end the day at it along the roads (routed where BTP
    can route, else straight and `approximate`); the next riding day starts there. A lodging chosen before is left
    first, so detours never pile up. Raises Invalid (day_points) when the day would be left under 50 m."""
    before = leave(trip, stage, [], routes)
    other = day_points.neighbour(trip, stage, 1)
    road = before or {"end": [stage.end_lat, stage.end_lon, stage.end_ele], "km": stage.distance,
                      "approximate": [stage.approximate, None if other is None else other.approximate]}
    edit = move_point(trip, stage, "end", [place["lat"], place["lon"], None], notes, routes, reach=True)
    at = haversine_m(stage.end_lat, stage.end_lon, place["lat"], place["lon"]) / 1000.0
    stage.selected_accommodation = shown(place) | {"distanceToEndPoint": round(at, 3),
                                                    ROAD: {**road, "via": edit.via and list(edit.via)}}


def leave(trip: Trip, stage: Stage, notes: list[str], routes: dict | None = None) -> dict | None:
    """Clear the day's lodging and give the day and the next riding day the road they had before it: the detour
    cut off, the end moved back where it was (on the route: cut there). Returns the record of that road, or None
    when there is none to go back to (no choice, a choice stored without it, or a day an edit has moved off its
    lodging since: its road stays)."""
    chosen, stage.selected_accommodation = stage.selected_accommodation, None
    road = (chosen or {}).get(ROAD)
    at = haversine_m(stage.end_lat, stage.end_lon, chosen["lat"], chosen["lon"]) if road else None
    if at is None or at > day_points.AT_POINT_M + SAME_POINT_M:
        return None
    if road.get("via") is not None:
        _cut_detour(stage, day_points.neighbour(trip, stage, 1), road["via"])
    # to that very point (a road that passes it twice is cut at the pass as far along as the day was long)
    move_point(trip, stage, "end", road["end"], notes, routes, reach=True, near_km=road["km"])
    stage.approximate = road["approximate"][0]
    other = day_points.neighbour(trip, stage, 1)
    if other is not None and road["approximate"][1] is not None:
        other.approximate = road["approximate"][1]
    return road


def _cut_detour(stage: Stage, other: Stage | None, via: list[float]) -> None:
    """The day's line up to where its detour left the road (the last time it passes there), and the next day's from
    where its way back joins it (the first time); nothing when a line no longer passes there."""
    day = np.asarray(stage.geometry, dtype=float).reshape(-1, 3)
    i = _passes(day, via)
    following = None if other is None else np.asarray(other.geometry, dtype=float).reshape(-1, 3)
    j = None if following is None else _passes(following, via)
    if not len(i) or (following is not None and not len(j)):
        return
    if i[-1] >= 1:
        set_geometry(stage, day[:i[-1] + 1])
    if following is not None and j[0] < len(following) - 1:
        set_geometry(other, following[j[0]:])


def _passes(line: np.ndarray, point: list[float]) -> np.ndarray:
    """The indexes of `line`'s points within SAME_POINT_M of `point`."""
    k = np.pi / 180 * 6_371_000.0
    dy = (line[:, 0] - point[0]) * k
    dx = (line[:, 1] - point[1]) * k * np.cos(np.radians(point[0]))
    return np.flatnonzero(np.hypot(dx, dy) <= SAME_POINT_M)


def route_before_the_lock(actor: User, trip_id: str, stage_id: str, place_of) -> dict:
    """With a routing service, its answers for the road to the lodging `place_of(day)` gives (None: back to the
    road before the choice), asked before the write chain, on a copy of the trip's days (no trip lock nor
    transaction is held across the service's answer, and nothing is written): the chain makes the same edit and
    finds them here. Anything wrong is left for the chain to refuse."""
    routes: dict = {}
    if not day_points.routing():
        return routes
    try:
        trip = load_owned_trip(actor.id, trip_id)
        copy = SimpleNamespace(route=trip.route, stages=[_copy(s) for s in trip.stages])
        stage = find_stage(copy, stage_id)
        if not stage.is_rest_day:
            place = place_of(stage)
            if place is None:
                leave(copy, stage, [], routes)
            else:
                reach(copy, stage, place, [], routes)
    except DomainError:
        pass
    return routes


_COPIED = ("id", "is_rest_day", "distance", "elevation", "elevation_loss", "start_lat", "start_lon", "start_ele",
           "end_lat", "end_lon", "end_ele", "approximate", "selected_accommodation")


def _copy(stage: Stage) -> SimpleNamespace:
    """A day's fields an edit of its points reads and writes, on a plain object no session ever flushes."""
    return SimpleNamespace(**{name: getattr(stage, name) for name in _COPIED}, geometry=list(stage.geometry),
                           accommodations=list(stage.accommodations or []))
