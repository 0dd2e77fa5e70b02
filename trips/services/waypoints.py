"""Rerouting a day through a waypoint: asked synchronously, computed by a job (trips/services/routing.py). It does
not move the version: the days keep their shape and ids."""
from __future__ import annotations

import numpy as np

from trips.core.queue import enqueue
from oauth.kernel.models import User
from trips import computations
from trips.services import analysis
from trips.core.db import after_commit, new_id
from trips.core.stored_texts import stored
from trips.errors import Invalid, Msg, N_
from trips.route.geo import haversine_m
from trips.guards import WriteContext, guarded_write
from trips.models import Stage, Trip
from trips.services.inputs import WaypointIn
from trips.core.validation import load
from trips.services.stages import find_stage, set_geometry

MAX_DETOUR_KM = 30.0


def add_waypoint(actor: User, trip_id: str, stage_id: str, data) -> tuple[Trip, Stage]:
    """Ask for the day to pass through (lat, lon). Guards: ownership → lock (no version: it does not move).

    Raises NotFound, Locked, Invalid (bad point, rest day, point too far from the day), Conflict (lock).
    """

    def validate(trip):
        point = load(WaypointIn(), data)
        stage = find_stage(trip, stage_id)
        if stage.is_rest_day:
            raise Invalid({"stageId": Msg("field.rest_day_no_route")})
        line = np.asarray(stage.geometry, dtype=float)
        if haversine_m(line[:, 0], line[:, 1], point["lat"], point["lon"]).min() > MAX_DETOUR_KM * 1000:
            raise Invalid({"lat": Msg("field.waypoint_too_far", km=round(MAX_DETOUR_KM))})
        return point

    ctx = WriteContext(actor.id, trip_id, precondition=None, validate=validate)
    with guarded_write(ctx) as trip:
        stage = find_stage(trip, stage_id)
        stage.waypoint = {"lat": ctx.prepared["lat"], "lon": ctx.prepared["lon"], "requestId": new_id()}
        computations.initialize(trip, ("route_segment",), trip.generation)
        after_commit(enqueue, "jobs.tasks.reroute_stage", trip.id, stage.id, stage.waypoint["requestId"])
    return trip, stage


def apply_reroute(stage: Stage, geometry, approximate: bool, stretches: list[Msg] | None = None) -> None:
    """The day follows the new line; its start and end markers stay. Climbing is kept when the new line
    carries no elevation (the routing provider gives none). The GEOMETRY enrichments are dispatched again:
    call under the trip lock, in the job's unit of work."""
    markers = (stage.start_lat, stage.start_lon, stage.start_ele, stage.end_lat, stage.end_lon, stage.end_ele)
    climbing = (stage.elevation, stage.elevation_loss)
    line = [list(p) for p in geometry]
    has_elevation = any(p[2] for p in line)
    if not has_elevation:  # the router's 0s are no elevation: unknown, never a flat 0 m (docs/RULES.md "Elevation")
        line = [[p[0], p[1], None] for p in line]
    # A router snaps the ends to the nearest road: pin them, so that consecutive days still meet.
    start = [markers[0], markers[1], markers[2] if has_elevation else None]
    end = [markers[3], markers[4], markers[5] if has_elevation else None]
    if haversine_m(line[0][0], line[0][1], start[0], start[1]) > 1.0:
        line.insert(0, start)
    if haversine_m(line[-1][0], line[-1][1], end[0], end[1]) > 1.0:
        line.append(end)
    set_geometry(stage, line)
    (stage.start_lat, stage.start_lon, stage.start_ele, stage.end_lat, stage.end_lon, stage.end_ele) = markers
    if not has_elevation:
        stage.elevation, stage.elevation_loss = climbing
    stage.approximate = approximate
    if stretches and stage.waypoint is not None:  # which stretch is routed, which straight (REST stage `routing`)
        names = (N_("routing.start_to_waypoint"), N_("routing.waypoint_to_end"))
        stage.waypoint = {**stage.waypoint, "stretches": [stored(Msg("routing.stretch", name=Msg(name), how=how), None)
                                                          for name, how in zip(names, stretches)]}
    analysis.redispatch(stage.trip, triggers=("GEOMETRY",))  # the line moved (docs/RULES.md "What an edit invalidates")
