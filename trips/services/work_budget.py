"""The work an account may cause: km of route drawn from places in any window (`route_km`, trips/core/limits.py: the
straight distance through the places, known before anything is drawn), how many of its trips may wait for their
drawn route at once, and how many may be analysed at once. Each is judged before the jobs that would do the work are
queued."""
from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from trips.computations import ACTIVE
from trips.core.db import db
from trips.core.limits import configured
from trips.core.redis_client import get_redis
from trips.core.workbudget import per, spend
from trips.errors import Invalid, Msg, N_, RateLimited
from trips.enrich import registry
from trips.models import Computation, Trip
from trips.route.geo import total_distance_km
from trips.services.planned import SOURCE_TYPE

MAX_QUEUED_ROUTES = 3  # an account's trips waiting for their route drawn from places, at once
MAX_QUEUED_ANALYSES = 3  # an account's trips with analysis jobs queued or running, at once
QUEUED_RETRY_S = 30  # a drawn route takes seconds: ask again after a few of them
ROUTE_KM_SPENT = N_("refusal.route_km_spent")
ROUTE_KM_TOO_LONG = N_("field.route_km_too_long")
ROUTES_QUEUED = N_("refusal.routes_queued")
ANALYSES_QUEUED = N_("refusal.analyses_queued")


def estimated_km(points) -> float:
    """The straight distance through `points` ((lat, lon) pairs): what drawing their route costs, at least."""
    line = np.asarray(points, dtype=float)
    return total_distance_km(line[:, :2]) if len(line) > 1 else 0.0


def queued_routes(user_id: str, exclude: str | None = None) -> int:
    """How many of the user's trips (other than `exclude`) wait for their route drawn from places."""
    query = (sa.select(sa.func.count()).select_from(Computation).join(Trip, Trip.id == Computation.trip_id)
             .where(Trip.user_id == user_id, Trip.source_type == SOURCE_TYPE, Computation.name == "route",
                    Computation.status.in_(ACTIVE)))
    if exclude is not None:
        query = query.where(Trip.id != exclude)
    return int(db.session.scalar(query) or 0)


def charge_route(user_id: str, points, exclude: str | None = None) -> None:
    """Before a route is drawn through `points` for the user: the queued cap, then the km budget spent.

    Raises RateLimited (three routes already waiting, or the km of the window spent; Retry-After in each), or
    Invalid naming `waypoints` when the route alone is longer than the whole budget (no wait would let it in)."""
    waiting = queued_routes(user_id, exclude)
    if waiting >= MAX_QUEUED_ROUTES:
        raise RateLimited(ROUTES_QUEUED, QUEUED_RETRY_S, count=waiting, most=MAX_QUEUED_ROUTES, wait=QUEUED_RETRY_S)
    km = estimated_km(points)
    limit, window_s = configured("route_km")
    if km > limit:
        raise Invalid({"waypoints": Msg(ROUTE_KM_TOO_LONG, km=round(km), limit=limit, per=per(window_s))})
    spend(get_redis(), "route_km", user_id, km, ROUTE_KM_SPENT)


def queued_analyses(user_id: str, exclude: str | None = None) -> int:
    """How many of the user's trips (other than `exclude`) have analysis computations pending or running."""
    query = (sa.select(sa.func.count(sa.distinct(Computation.trip_id))).select_from(Computation)
             .join(Trip, Trip.id == Computation.trip_id)
             .where(Trip.user_id == user_id, Computation.name.in_(tuple(registry.ENRICHMENTS)),
                    Computation.status.in_(ACTIVE)))
    if exclude is not None:
        query = query.where(Trip.id != exclude)
    return int(db.session.scalar(query) or 0)


def check_analysis(user_id: str, trip_id: str) -> None:
    """Before a trip's analysis is queued again: raises RateLimited (with Retry-After) when MAX_QUEUED_ANALYSES of
    the user's other trips are still being analysed."""
    waiting = queued_analyses(user_id, trip_id)
    if waiting >= MAX_QUEUED_ANALYSES:
        raise RateLimited(ANALYSES_QUEUED, QUEUED_RETRY_S, count=waiting, most=MAX_QUEUED_ANALYSES,
                          wait=QUEUED_RETRY_S)
