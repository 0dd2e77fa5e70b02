"""Trips planned from places (create_trip and POST /api/trips `waypoints`, docs/RULES.md "Trips from places"): the
points checked when the trip is created (`check_covered`), the route drawn through them by the route job
(`plan_route`), a leg no router can draw joined straight and said so.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa

from trips.core.db import db
from trips.core.stored_texts import stored
from trips.errors import Invalid, Msg, N_
from trips.osm import router
from trips.osm.waykinds import DEFAULT_BIKE
from trips.osm.areas import ready_areas
from trips.osm.queries import nearest_place_each
from trips.providers.settings import configs
from trips.providers.valhalla import RoutingError, route_through
from trips.route.geo import total_distance_km
from trips.route.gpx import ParsedRoute
from trips.services.routing import map_engine

SOURCE_TYPE = "waypoints"
NOT_COVERED = N_("field.point_not_covered")
NO_NETWORK = N_("field.no_road_network")
NO_MAP_NOW = N_("reason.no_map_any_more")
TITLE_PLACE_M = 15_000.0  # a place this close to the first or last point names the trip


@dataclass
class Planned:
    parsed: ParsedRoute
    legs: list[dict]


def check_covered(points: list[list[float]]) -> None:
    """Raises Invalid naming the first point (`waypoints[i]`) no ready imported area holds, or `waypoints` when the
    map has no road network to route on. Nothing to check when a Valhalla service is configured."""
    if configs().valhalla.valhalla_url:
        return
    areas = ready_areas(db.engine)
    for i, (lat, lon) in enumerate(points):
        inside = ((lat >= areas[:, 0]) & (lat <= areas[:, 2]) & (lon >= areas[:, 1]) & (lon <= areas[:, 3])).any()
        if not inside:
            raise Invalid({f"waypoints[{i}]": NOT_COVERED})
    if map_engine() is None:
        raise Invalid({"waypoints": NO_NETWORK})


def plan_route(points: list[list[float]], bike: str = DEFAULT_BIKE) -> Planned:
    """The route through `points`, with each leg's account. Raises RoutingError (a sentence for the user) when
    Valhalla fails or no imported map with roads is left to route on."""
    config = configs().valhalla
    if config.valhalla_url:
        geometry, length = route_through([(lat, lon, 0.0) for lat, lon in points], config)
        line = np.array([(p[0], p[1], np.nan) for p in geometry], dtype=float)  # Valhalla gives no elevation
        legs = [_leg(1, len(points), 0.0, length, True, None)]
    else:
        return from_legs(points, draw_legs(points, 0, bike=bike))
    return Planned(ParsedRoute(title=_title(points), tracks=[line]), legs)


def on_the_map() -> bool:
    """Whether routes are drawn here, on the imported map (leg by leg, so in turns), rather than by Valhalla."""
    return not configs().valhalla.valhalla_url


def draw_legs(points: list[list[float]], first: int, seconds: float = math.inf,
              bike: str = DEFAULT_BIKE) -> list[router.Leg]:
    """The map's legs through `points` from leg `first` on, as many as end within `seconds` (one at least): a job's
    turn (jobs/route_turns.py); the bike type weighs the surfaces. Raises RoutingError when no imported map with
    roads is left to route on."""
    engine = map_engine()
    if engine is None:
        raise RoutingError(NO_MAP_NOW)
    return router.legs_from(engine, points, first, seconds, bike=bike)


def from_legs(points: list[list[float]], legs: list[router.Leg]) -> Planned:
    """The route through `points` made of its map legs (every one, in order), with each leg's account."""
    found = router.join(points, legs)
    accounts, at = [], 0.0
    for i, leg in enumerate(found.legs):
        km = total_distance_km(leg.line) if len(leg.line) > 1 else 0.0
        accounts.append(_leg(i + 1, i + 2, at, at + km, leg.routed, leg.why, leg.ends_m))
        at += km
    return Planned(ParsedRoute(title=_title(points), tracks=[found.line]), accounts)


def _leg(first: int, last: int, from_km: float, to_km: float, routed: bool, why: Msg | None,
         ends_m: tuple[float, float] = (0.0, 0.0)) -> dict:
    """A leg's account: its points (1-based), its km along the route, routed or not and why, and `straightKm`, the
    [from, to] km of it drawn straight: the whole of a leg not routed, else the way from a point to its road where
    that is over STRAIGHT_END_M (trips/osm/router.py)."""
    if not routed:
        straight = [[round(from_km, 2), round(to_km, 2)]]
    else:
        head, tail = (m / 1000.0 if m > router.STRAIGHT_END_M else 0.0 for m in ends_m)
        straight = [[round(a, 2), round(b, 2)] for a, b in ((from_km, from_km + head), (to_km - tail, to_km)) if b > a]
    return {"from": first, "to": last, "fromKm": round(from_km, 2), "toKm": round(to_km, 2), "routed": routed,
            "why": stored(why, None), "straightKm": straight}  # why: in no language


def _title(points: list[list[float]]) -> str | None:
    """"First place → last place" from the local gazetteer, one name for a loop; None when it knows neither."""
    try:
        first, last = nearest_place_each([points[0], points[-1]], TITLE_PLACE_M, engine=db.engine)
    except sa.exc.SQLAlchemyError:  # a title is a courtesy: a map query that fails must not fail the route
        return None
    names = [p.name for p in (first, last) if p is not None and p.name]
    if not names:
        return None
    return names[0] if len(set(names)) == 1 else f"{names[0]} → {names[1]}"
