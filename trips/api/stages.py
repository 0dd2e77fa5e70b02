"""REST for days: add, read, update, move, delete, rest day, the accommodation choice and the waypoint."""
from __future__ import annotations

from flask import Blueprint, g, url_for

from oauth.kernel.principal import require_api_scope
from trips.readmodels.day import stage_detail
from trips.services import stages as stage_ops
from trips.api.trips import READ, WRITE, if_match, trip_answer, versioned
from trips.core.problems import json_body
from trips.services.accommodations import choose_accommodation
from trips.services.stages import get_stage
from trips.services.waypoints import add_waypoint

bp = Blueprint("stages_api", __name__, url_prefix="/api/trips/<trip_id>/stages")


@bp.post("")
@require_api_scope(WRITE)
def add(trip_id):
    trip = stage_ops.add_stage(g.principal.user, trip_id, if_match(), json_body())
    return trip_answer(trip)


@bp.get("/<stage_id>")
@require_api_scope(READ)
def read(trip_id, stage_id):
    stage = get_stage(g.principal.user, trip_id, stage_id)
    return versioned(stage_detail(stage.trip, stage), stage.trip.version)


@bp.patch("/<stage_id>")
@require_api_scope(WRITE)
def update(trip_id, stage_id):
    return trip_answer(stage_ops.update_stage(g.principal.user, trip_id, stage_id, if_match(), json_body()))


@bp.patch("/<stage_id>/move")
@require_api_scope(WRITE)
def move(trip_id, stage_id):
    return trip_answer(stage_ops.move_stage(g.principal.user, trip_id, stage_id, if_match(), json_body()))


@bp.delete("/<stage_id>")
@require_api_scope(WRITE)
def delete(trip_id, stage_id):
    return trip_answer(stage_ops.delete_stage(g.principal.user, trip_id, stage_id, if_match()))


@bp.post("/<stage_id>/rest-day")
@require_api_scope(WRITE)
def rest_day(trip_id, stage_id):
    return trip_answer(stage_ops.insert_rest_day(g.principal.user, trip_id, stage_id, if_match()))


@bp.patch("/<stage_id>/accommodation")
@require_api_scope(WRITE)
def accommodation(trip_id, stage_id):
    trip = choose_accommodation(g.principal.user, trip_id, stage_id, if_match(), json_body())
    return trip_answer(trip)


@bp.post("/<stage_id>/poi-waypoint")
@require_api_scope(WRITE)
def waypoint(trip_id, stage_id):
    trip, stage = add_waypoint(g.principal.user, trip_id, stage_id, json_body())
    response = trip_answer(trip, 202)
    response.headers["Location"] = url_for(".read", trip_id=trip.id, stage_id=stage.id)
    return response
