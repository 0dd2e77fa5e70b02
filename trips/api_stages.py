"""REST for days: the five operations, the accommodation choice and the waypoint. Thin adapters."""
from __future__ import annotations

from flask import Blueprint, g, request, url_for

from oauth.principal import require_api_scope
from trips import readmodels, stage_ops
from trips.api import READ, WRITE, versioned
from trips.guards import Precondition
from trips.problems import json_body
from trips.services import get_stage
from trips.waypoints import add_waypoint

bp = Blueprint("stages_api", __name__, url_prefix="/api/trips/<trip_id>/stages")


def _if_match() -> Precondition:
    return Precondition.from_if_match(request.headers.get("If-Match"))


def _trip(trip, status=200):
    return versioned(readmodels.trip_detail(trip), trip.version, status)


@bp.post("")
@require_api_scope(WRITE)
def add(trip_id):
    trip = stage_ops.add_stage(g.principal.user, trip_id, _if_match(), json_body())
    return _trip(trip)


@bp.get("/<stage_id>")
@require_api_scope(READ)
def read(trip_id, stage_id):
    stage = get_stage(g.principal.user, trip_id, stage_id)
    return versioned(readmodels.stage_detail(stage.trip, stage), stage.trip.version)


@bp.patch("/<stage_id>")
@require_api_scope(WRITE)
def update(trip_id, stage_id):
    return _trip(stage_ops.update_stage(g.principal.user, trip_id, stage_id, _if_match(), json_body()))


@bp.patch("/<stage_id>/move")
@require_api_scope(WRITE)
def move(trip_id, stage_id):
    return _trip(stage_ops.move_stage(g.principal.user, trip_id, stage_id, _if_match(), json_body()))


@bp.delete("/<stage_id>")
@require_api_scope(WRITE)
def delete(trip_id, stage_id):
    return _trip(stage_ops.delete_stage(g.principal.user, trip_id, stage_id, _if_match()))


@bp.post("/<stage_id>/rest-day")
@require_api_scope(WRITE)
def rest_day(trip_id, stage_id):
    return _trip(stage_ops.insert_rest_day(g.principal.user, trip_id, stage_id, _if_match()))


@bp.patch("/<stage_id>/accommodation")
@require_api_scope(WRITE)
def accommodation(trip_id, stage_id):
    trip = stage_ops.choose_accommodation(g.principal.user, trip_id, stage_id, _if_match(), json_body())
    return _trip(trip)


@bp.post("/<stage_id>/poi-waypoint")
@require_api_scope(WRITE)
def waypoint(trip_id, stage_id):
    trip, stage = add_waypoint(g.principal.user, trip_id, stage_id, json_body())
    response = _trip(trip, 202)
    response.headers["Location"] = url_for(".read", trip_id=trip.id, stage_id=stage.id)
    return response
