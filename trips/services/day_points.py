"""Moving a day's start or end point while keeping the road (docs/RULES.md "Editing a day's points").

A point on the route cuts the window the day shares with its neighbour, which takes over the rest; a point off it
is reached by a detour, routed where BTP can route, else straight and `approximate`. Either way the two days still
join end to start and add up to the window (plus the detour).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from trips.errors import Invalid, Msg
from trips.models import Stage, Trip
from trips.providers.settings import configs
from trips.osm import router
from trips.providers.valhalla import RoutingError, route_through
from trips.services.routing import map_engine
from trips.route.geo import cumulative_km, haversine_m, locate_on_line, slice_km, total_distance_km

ON_ROUTE_M = 200.0  # a point this close to the route cuts it there
CONTIGUOUS_M = 50.0  # a day continues the previous one when it starts this close to its end
MIN_PART_KM = 0.05  # a cut leaves at least this much to each side, else the point is past the window
AT_POINT_M = 10.0  # a place to reach (a lodging) this close to the road: the cut alone ends the day at it
_MATCH_KM, _MATCH_SHARE = 0.5, 0.02  # the stored route still carries the days when their lengths agree this well


@dataclass
class PointEdit:
    """The moved day's new line, and the rest of the window: the neighbour's new line, or (no neighbour on that
    side) a new day's, placed after the day when its end moved and before it when its start moved; None when
    nothing of the route is left over."""

    line: np.ndarray
    other: Stage | None
    rest: np.ndarray | None
    how: Msg  # cut on the route at km X, routed, joined straight: approximate
    approximate: bool
    lengths: tuple[float, float] | None  # (day, rest) km to keep when the days' own lines were cut
    via: tuple[float, float] | None = None  # where a detour leaves the window's road (None: a cut, no detour)


def contiguous(a: Stage, b: Stage) -> bool:
    return haversine_m(a.end_lat, a.end_lon, b.start_lat, b.start_lon) <= CONTIGUOUS_M


def neighbour(trip: Trip, stage: Stage, step: int) -> Stage | None:
    """The riding day after (step 1) or before (-1) `stage`, rest days between skipped, when the two join."""
    index = trip.stages.index(stage) + step
    while 0 <= index < len(trip.stages) and trip.stages[index].is_rest_day:
        index += step
    if not 0 <= index < len(trip.stages):
        return None
    other = trip.stages[index]
    pair = (stage, other) if step > 0 else (other, stage)
    return other if contiguous(*pair) else None


def _route_line(trip: Trip) -> np.ndarray | None:
    route = trip.route
    if route is None or len(route.track_ends) != 1:
        return None  # no stored route, or a collection of separate tours: the days' own lines
    return np.frombuffer(zlib.decompress(route.points), dtype="<f8").reshape(-1, 3)


def window(trip: Trip, days: list[Stage]) -> tuple[np.ndarray, float, bool]:
    """The line of `days` (consecutive), the km of the first's end on it, and whether it is the stored route."""
    route = _route_line(trip)
    span = sum(d.distance for d in days)
    if route is not None:
        cum = cumulative_km(route)
        offset = sum(s.distance for s in trip.stages[:trip.stages.index(days[0])])
        a = locate_on_line(route, cum, days[0].start_lat, days[0].start_lon, ON_ROUTE_M, offset)
        b = locate_on_line(route, cum, days[-1].end_lat, days[-1].end_lon, ON_ROUTE_M, offset + span)
        if a and b and abs((b[0] - a[0]) - span) <= max(_MATCH_KM, _MATCH_SHARE * span):
            return slice_km(route, cum, a[0], b[0]), days[0].distance, True
    line = np.asarray(days[0].geometry, dtype=float).reshape(-1, 3)
    boundary = float(cumulative_km(line)[-1])
    for day in days[1:]:
        line = np.vstack((line, np.asarray(day.geometry, dtype=float).reshape(-1, 3)[1:]))
    return line, boundary, False


def join(a: np.ndarray, b: np.ndarray, routes: dict | None = None) -> tuple[np.ndarray, bool]:
    """From a to b: (line, approximate). Routed by bicycle when a router is configured and answers. The router
    gives no elevation: the routed points between a and b carry none (NaN), nor does b when it came without
    one; the day's line fills them or says its climbing is unknown (stages.set_geometry, docs/RULES.md "Elevation").
    `routes` keeps the answers by their ends: asked before the trip lock, they are not asked under it."""
    a, b = np.asarray(a, dtype=float), np.array(b, dtype=float)
    key = tuple(np.round(np.nan_to_num(np.concatenate((a, b)), nan=-1e9), 6))  # NaN is no dict key
    if routes is not None and key in routes:
        return routes[key]
    found = _join(a, b)
    if routes is not None:
        routes[key] = found
    return found


def _join(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, bool]:
    config = configs().valhalla
    if config.valhalla_url:
        try:
            line, _ = route_through([tuple(a), tuple(b), tuple(b)], config)
            pts = np.asarray(line, dtype=float).reshape(-1, 3)
            if len(pts) >= 2:
                pts = np.vstack((a, pts, b))
                pts[1:-1, 2] = np.nan  # the router's line has no elevation: unknown, not invented
                return pts, False
        except RoutingError:
            pass  # said in the answer: "joined straight: approximate"
        return np.vstack((a, b)), True
    engine = map_engine()
    if engine is not None:
        found = router.route(engine, [a, b])  # a stretch the map does not cover comes back straight, approximate
        pts = found.line.copy()
        pts[0], pts[-1] = a, b
        return pts, found.approximate
    return np.vstack((a, b)), True


def routing() -> bool:
    """Whether Valhalla is configured: its answers are asked before the trip lock (a remote service's seconds must
    not hold it). The imported map's router is asked where the line is drawn (`_join`): local reads of the map
    tables on their own connection, no write transaction of theirs, and no statement where nothing is routed."""
    return bool(configs().valhalla.valhalla_url)


def plan(trip: Trip, stage: Stage, side: str, point: list[float], routes: dict | None = None,
         reach: bool = False, near_km: float | None = None) -> PointEdit:
    """The new lines of `stage` and its neighbour when its `side` ("start" or "end") moves to `point`
    (`routes`: see `join`). `reach`: the day must end at the point itself (a lodging), so only a point within
    AT_POINT_M of the road is a cut; further off, the detour leaves the road where it passes nearest (the pass
    nearest the boundary), and on a day without a next riding day after the whole day's road. `near_km`: where
    on the window the point is looked for first when the road passes it more than once (default: the boundary).
    Writes nothing."""
    other = neighbour(trip, stage, 1 if side == "end" else -1)
    days = [stage, other] if side == "end" else [other, stage]
    days = [d for d in days if d is not None]
    line, boundary, stored = window(trip, days)
    cum = cumulative_km(line)
    total = float(cum[-1])
    p = np.asarray(point, dtype=float)
    ref = boundary if other is not None else (total if side == "end" else 0.0)
    ref = ref if near_km is None else near_km
    hit = locate_on_line(line, cum, p[0], p[1], AT_POINT_M if reach else ON_ROUTE_M, ref)
    old_approx = any(d.approximate for d in days)
    if hit is not None and MIN_PART_KM <= hit[0] <= total - MIN_PART_KM:
        km = hit[0]
        head, tail = slice_km(line, cum, 0.0, km), slice_km(line, cum, km, total)
        lengths = None if stored else _scaled(days, km, total)
        on_trip = km + sum(s.distance for s in trip.stages[:trip.stages.index(days[0])])
        how = Msg("edit.cut_on_route", km=round(on_trip, 1))
        return _edit(side, other, head, tail, how, old_approx, lengths)
    # Off the route (or past its ends): a detour from the nearest point of the window, there and back.
    km = _detour_from(line, cum, p, ref, total if reach and other is None and side == "end" else None, reach)
    base = slice_km(line, cum, km, km)[0]
    out, approx_out = join(base, p, routes)
    back, approx_back = join(p, base, routes)
    head = np.vstack((slice_km(line, cum, 0.0, km)[:-1], out)) if km > 0 else out
    tail = np.vstack((back, slice_km(line, cum, km, total)[1:])) if km < total else back
    approximate = approx_out or approx_back
    how = Msg("edit.joined_straight") if approximate else Msg("edit.routed")
    edit = _edit(side, other, head, tail, how, approximate or old_approx, None, total - km if side == "end" else km)
    edit.via = (float(base[0]), float(base[1]))
    return edit


def _detour_from(line, cum, p, ref: float, fixed: float | None, reach: bool) -> float:
    """The km of the window where a detour to `p` leaves it: `fixed` when given; else the nearest point, and to
    reach a place, the nearest point of the passes at most twice as far as that, the one nearest `ref` (a road that
    comes back by the place later is not where the day leaves it)."""
    if fixed is not None:
        return fixed
    near = locate_on_line(line, cum, p[0], p[1], None, ref)
    if reach:
        near = locate_on_line(line, cum, p[0], p[1], max(ON_ROUTE_M, 2.0 * near[1]), ref) or near
    return min(max(near[0], 0.0), float(cum[-1]))


def _scaled(days: list[Stage], km: float, total: float) -> tuple[float, float]:
    """The days' own lines are simplified: their stored lengths (measured on the full route) are shared at the cut."""
    stored = sum(d.distance for d in days)
    first = stored * km / total if total > 0 else 0.0
    return first, stored - first


def _edit(side, other, head, tail, how, approximate, lengths, rest_km=None) -> PointEdit:
    """head/tail: the window before and after the new point; the day keeps the side it did not move. Raises
    Invalid (naming the point) when the day would be shorter than MIN_PART_KM."""
    line, rest = (head, tail) if side == "end" else (tail, head)
    if total_distance_km(line) < MIN_PART_KM:
        raise Invalid({f"{side}Point": Msg("field.day_too_short", metres=round(MIN_PART_KM * 1000))})
    if lengths is not None and side == "start":
        lengths = lengths[::-1]
    if other is None and rest_km is not None and rest_km < MIN_PART_KM:
        rest = None  # only the way back of a detour past the route's end: no day of its own
    return PointEdit(line, other, rest, how, approximate, lengths)
