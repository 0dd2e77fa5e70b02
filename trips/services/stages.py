"""Editing days: add, update (points, label, or a cut at a distance), move, delete (merge), rest day.

Every operation goes through the write chain (ownership → lock → version → validation), holds the trip's
write lock while it rewrites, keeps stage ids, renumbers the days, makes the end date follow the day
count, and moves the version by one.
"""
from __future__ import annotations

from datetime import timedelta

import numpy as np
from sqlalchemy.orm import defer, joinedload, selectinload
from sqlalchemy.orm.attributes import set_committed_value

from oauth.kernel.models import User
from trips import computations
from trips.services import analysis, day_points
from trips.core.db import new_id
from trips.core.i18n import N_
from trips.errors import Conflict, DomainError, Invalid, Msg, NotFound, Plural
from trips.route import elevation
from trips.route.geo import cut_at_km, distance_m, elevation_gain_loss, total_distance_km
from trips.guards import Precondition, WriteContext, guarded_write, load_owned_trip
from trips.models import Stage, Trip
from trips.route.pacing import MAX_ROUTE_KM, MAX_STAGE_POINTS, MAX_STEP_KM, MAX_TRIP_DAYS, fit_points
from trips.services.inputs import StageAdd, StageMove, StageUpdate
from trips.core.validation import load

MIN_RIDING_DAYS = 1  # a one-day trip is a trip (docs/RULES.md "Trip limits")
STAGE_NOT_FOUND = N_("refusal.stage_not_found")
POINT_MOVED = {"start": N_("edit.start_point"), "end": N_("edit.end_point")}  # how a moved point was joined


def find_stage(trip: Trip, stage_id: str) -> Stage:
    """Raises NotFound unless `stage_id` is one of the trip's days."""
    stage = next((s for s in trip.stages if s.id == str(stage_id).lower()), None)
    if stage is None:
        raise NotFound(STAGE_NOT_FOUND)
    return stage


def riding_days(trip: Trip) -> int:
    return sum(not s.is_rest_day for s in trip.stages)


def set_geometry(stage: Stage, points) -> None:
    """Make the stage follow `points` ((n, 3) lat, lon, ele; None or NaN: unknown): ends, distance and climbing
    follow, measured on every point; the stored line keeps at most MAX_STAGE_POINTS of them (trips/route/pacing.py fit_points), so a
    day's answers and exports stay bounded whatever made the line (a cut, a merge, a router's answer)."""
    pts = np.round(np.asarray(points, dtype=float).reshape(-1, 3), 6)  # ~0.1 m: what is stored and shown
    # A point without elevation (a rider's point, a router's line) is filled along the distance when the line
    # mostly carries elevation, else the whole line's is unknown (docs/RULES.md "Elevation")
    pts = elevation.settle(pts)
    stage.geometry = elevation.rows(fit_points(pts) if len(pts) > MAX_STAGE_POINTS else pts)  # NaN: None
    stage.start_lat, stage.start_lon, stage.start_ele = float(pts[0, 0]), float(pts[0, 1]), elevation.value(pts[0, 2])
    stage.end_lat, stage.end_lon, stage.end_ele = float(pts[-1, 0]), float(pts[-1, 1]), elevation.value(pts[-1, 2])
    stage.distance = total_distance_km(pts)
    stage.elevation, stage.elevation_loss = elevation_gain_loss(pts[:, 2])


def _check_day_line(trip: Trip, start: list[float], end: list[float], replacing: Stage | None = None) -> None:
    """A day drawn as a straight line from `start` to `end`: refused (Invalid naming endPoint) when it is a
    jump longer than the longest day BTP plans, or when it would take the trip past MAX_ROUTE_KM."""
    km = distance_m(start[0], start[1], end[0], end[1]) / 1000.0
    if km > MAX_STEP_KM:
        raise Invalid({"endPoint": Msg("field.day_too_long", km=round(km), most=MAX_STEP_KM)})
    total = sum(s.distance for s in trip.stages if s is not replacing) + km
    if total > MAX_ROUTE_KM:
        raise Invalid({"endPoint": Msg("field.trip_too_long", km=round(total), most=MAX_ROUTE_KM)})


def _point(p: dict) -> list[float]:
    return [p["lat"], p["lon"], p.get("ele")]  # no ele: unknown, not 0 (docs/RULES.md "Elevation")


def _start(stage: Stage) -> list[float]:
    return [stage.start_lat, stage.start_lon, stage.start_ele]


def _end(stage: Stage) -> list[float]:
    """Where the day ends: the chosen accommodation when there is one, else its route's last point."""
    return [stage.end_lat, stage.end_lon, stage.end_ele]


_contiguous = day_points.contiguous


def geometry_changed(trip: Trip, _prepared=None) -> None:
    """The days' lines, ends or order changed: the GEOMETRY-triggered enrichments run again, and the calendar
    on a dated trip (a day's date is startDate + its index, and an added, moved or removed day shifts the
    others': docs/RULES.md "What an edit invalidates")."""
    analysis.redispatch(trip, triggers=("GEOMETRY",), names=("calendar",))


# An edit of the days reads the trip with its computations, then its days: two statements (under the lock), without
# the JSON columns the enrichments own (no edit reads them; a dispatch after it reads the geometry, for the map
# coverage). A rename alone reads no geometry either.
_OWNED_BY_ENRICHMENTS = (Stage.alerts_by_group, Stage.enrichment, Stage.accommodations, Stage.selected_accommodation,
                         Stage.waypoint)
DAY_EDIT_OPTIONS = (selectinload(Trip.stages).options(*(defer(c) for c in _OWNED_BY_ENRICHMENTS)),
                    joinedload(Trip.computations))
RENAME_OPTIONS = (selectinload(Trip.stages).options(*(defer(c) for c in (Stage.geometry, *_OWNED_BY_ENRICHMENTS))),
                  joinedload(Trip.computations))


def write_days(actor: User, trip_id: str, precondition: Precondition, validate, apply,
               invalidate=geometry_changed, load_options=DAY_EDIT_OPTIONS, notes: list[Msg] | None = None,
               forget_facts: bool = False) -> Trip:
    """Run an edit: the chain, the trip's lock, `apply(trip, prepared)`, then renumbering, the version and
    `invalidate(trip, prepared)`, which dispatches again what the edit made stale (None: nothing). The trip
    answered carries `edit_summary` (`_summary`; `notes`: what `apply` said of how it joined a point).
    `forget_facts`: the days whose line changed drop their old facts (`_forget_facts`)."""
    ctx = WriteContext(actor.id, trip_id, precondition, validate=validate, load_options=load_options)
    with guarded_write(ctx) as trip:
        if computations.status_of(trip, "stages") in computations.ACTIVE:
            raise Conflict("refusal.days_computing")
        before = {s.id: _shape(s) for s in trip.stages}, trip.end_date
        apply(trip, ctx.prepared)
        for position, stage in enumerate(trip.stages):
            stage.position = position
        if trip.start_date and trip.end_date:
            trip.end_date = trip.start_date + timedelta(days=len(trip.stages) - 1)
        summary = _summary(trip, *before, notes or [])
        if forget_facts:
            _forget_facts(trip, {d["stageId"] for d in summary["changed"]} & before[0].keys())
        trip.status = "ready" if riding_days(trip) >= MIN_RIDING_DAYS else "draft"
        trip.version += 1
        if invalidate is not None:
            invalidate(trip, ctx.prepared)
        version = trip.version
    # The commit expired the trip: the version it wrote is known, and the answer needs no read to say it.
    set_committed_value(trip, "version", version)
    trip.edit_summary = summary  # what the edit moved, for the answer (not stored)
    return trip


def _forget_facts(trip: Trip, stage_ids: set[str]) -> None:
    """A day whose line changed drops what the enrichments found on its old line (alerts, map fields, lodging
    candidates; the rider's choice stays): until they run again it reads "running", never the old day's facts
    (docs/RULES.md "What an edit invalidates")."""
    for stage in trip.stages:
        if stage.id in stage_ids:
            stage.alerts_by_group, stage.enrichment = {}, {}
            if stage.selected_accommodation is None:
                stage.accommodations = []


def _shape(stage: Stage) -> tuple:
    return (round(stage.distance, 2), round(stage.start_lat, 6), round(stage.start_lon, 6),
            round(stage.end_lat, 6), round(stage.end_lon, 6))


def _summary(trip: Trip, shapes: dict, end_date, notes: list[Msg]) -> dict:
    """The days whose line changed (new ones included) with their new distances, how a moved point was joined,
    and the end date when it moved."""
    changed = [{"day": i + 1, "stageId": s.id, "distanceKm": round(s.distance, 1), "isRestDay": s.is_rest_day}
               for i, s in enumerate(trip.stages) if shapes.get(s.id) != _shape(s)]
    moved = (end_date, trip.end_date) if end_date != trip.end_date else None
    return {"changed": changed, "how": notes, "endDate": moved}


def add_stage(actor: User, trip_id: str, precondition: Precondition, data) -> Trip:
    """Insert a day from startPoint to endPoint at `position` (default: last): routed by bicycle when a router is
    configured, else a straight line marked `approximate`."""

    def validate(trip):
        fields = load(StageAdd(), data)
        position = fields.get("position", len(trip.stages))
        if position > len(trip.stages):
            raise Invalid({"position": Msg("field.between", low=0, high=len(trip.stages))})
        if len(trip.stages) >= MAX_TRIP_DAYS:
            raise Invalid({"position": Msg("field.days_at_most", most=MAX_TRIP_DAYS)})
        _check_day_line(trip, _point(fields["start_point"]), _point(fields["end_point"]))
        return fields | {"position": position}

    notes: list[Msg] = []
    routes: dict = {}
    if day_points.routing():  # asked before the trip lock (see _route_before_the_lock)
        try:
            fields = load(StageAdd(), data)
            load_owned_trip(actor.id, trip_id)
            day_points.join(np.asarray(_point(fields["start_point"])), np.asarray(_point(fields["end_point"])),
                            routes)
        except DomainError:
            pass

    def apply(trip, fields):
        stage = Stage(id=new_id(), label=fields.get("label"), accommodations=[])
        line, stage.approximate = day_points.join(np.asarray(_point(fields["start_point"])),
                                                  np.asarray(_point(fields["end_point"])), routes)
        set_geometry(stage, line)
        trip.stages.insert(fields["position"], stage)
        notes.append(Msg("edit.new_day_straight") if stage.approximate else Msg("edit.new_day_routed"))

    return write_days(actor, trip_id, precondition, validate, apply, notes=notes, forget_facts=True)


def update_stage(actor: User, trip_id: str, stage_id: str, precondition: Precondition, data) -> Trip:
    """New points and/or label, or a cut at `distance` km. A moved point keeps the road (`move_point`,
    docs/RULES.md "Editing a day's points"); a cut gives the rest to the next day (its end stays) or, on the
    last day, makes it a new day."""

    def validate(trip):
        fields = load(StageUpdate(), data)
        stage = find_stage(trip, stage_id)
        if stage.is_rest_day and fields.keys() - {"label"}:
            raise Invalid({"stageId": Msg("field.rest_day_label_only")})
        if "distance" in fields:
            path, following = _cut_path(trip, stage)
            available = total_distance_km(np.asarray(path))
            if fields["distance"] >= available:
                raise Invalid({"distance": Msg("field.cut_beyond", km=round(available, 1))})
            if following is None and len(trip.stages) >= MAX_TRIP_DAYS:  # the rest would become a new day
                raise Invalid({"distance": Msg("field.would_add_day", most=MAX_TRIP_DAYS)})
        elif {"start_point", "end_point"} & fields.keys():
            start = _point(fields["start_point"]) if "start_point" in fields else _start(stage)
            end = _point(fields["end_point"]) if "end_point" in fields else _end(stage)
            _check_day_line(trip, start, end, replacing=stage)
        return fields

    notes: list[Msg] = []
    routes = _route_before_the_lock(actor, trip_id, stage_id, data)

    def apply(trip, fields):
        stage = find_stage(trip, stage_id)
        if "label" in fields:
            stage.label = fields["label"].strip() if fields["label"] else None
        if "distance" in fields:
            _cut(trip, stage, fields["distance"])
            notes.append(Msg("edit.cut_at", km=round(fields["distance"], 1)))
        for side, name in (("start", "start_point"), ("end", "end_point")):
            if name in fields and "distance" not in fields:
                move_point(trip, stage, side, _point(fields[name]), notes, routes)

    def invalidate(trip, fields):
        if fields.keys() - {"label"}:  # the rider's label is no input of any enrichment
            geometry_changed(trip)

    rename = isinstance(data, dict) and data.keys() == {"label"}  # nothing but the label: no geometry read
    return write_days(actor, trip_id, precondition, validate, apply, invalidate,
                      RENAME_OPTIONS if rename else DAY_EDIT_OPTIONS, notes, forget_facts=True)


def _route_before_the_lock(actor: User, trip_id: str, stage_id: str, data) -> dict:
    """With a router, the detours a moved point needs, asked before the write chain: no trip lock nor write
    transaction is held across the router's answer (the chain reads the trip anew; the same version makes the
    same detours). Anything wrong here is left for the chain to refuse."""
    routes: dict = {}
    if not isinstance(data, dict) or "distance" in data or not {"startPoint", "endPoint"} & data.keys() \
            or not day_points.routing():  # no point moves: nothing to route
        return routes
    try:
        fields = load(StageUpdate(), data)
        trip = load_owned_trip(actor.id, trip_id)
        stage = find_stage(trip, stage_id)
        if not stage.is_rest_day:
            for side, name in (("start", "start_point"), ("end", "end_point")):
                if name in fields:
                    day_points.plan(trip, stage, side, _point(fields[name]), routes)
    except DomainError:
        pass
    return routes


def move_point(trip: Trip, stage: Stage, side: str, point: list[float], notes: list[Msg],
               routes: dict | None = None, reach: bool = False,
               near_km: float | None = None) -> day_points.PointEdit:
    """Move the day's start or end to `point`, keeping the road (trips/services/day_points.py; `reach`: to the point
    itself, a lodging; `near_km`: see day_points.plan): the neighbour sharing that point takes over the rest, or a
    new day when there is none. Returns the edit made."""
    edit = day_points.plan(trip, stage, side, point, routes, reach, near_km)
    set_geometry(stage, edit.line)
    stage.approximate = edit.approximate
    other = edit.other
    if edit.rest is not None:
        if other is None:
            if len(trip.stages) >= MAX_TRIP_DAYS:
                raise Invalid({f"{side}Point": Msg("field.would_add_day", most=MAX_TRIP_DAYS)})
            other = Stage(id=new_id(), accommodations=[])
            trip.stages.insert(trip.stages.index(stage) + (1 if side == "end" else 0), other)
        set_geometry(other, edit.rest)
        other.approximate = edit.approximate
        if edit.lengths is not None:
            stage.distance, other.distance = edit.lengths
    if other is not None:  # a rest day between the two stays where the riding ends
        first, second = sorted((trip.stages.index(stage), trip.stages.index(other)))
        for rest in trip.stages[first + 1:second]:
            set_geometry(rest, [_end(trip.stages[first])])
            rest.distance = rest.elevation = rest.elevation_loss = 0.0
    notes.append(Msg(POINT_MOVED[side], how=edit.how))
    return edit


def _cut_path(trip: Trip, stage: Stage) -> tuple[list, Stage | None]:
    """The line a cut walks along: the day, then the next riding day when it continues this one."""
    index = trip.stages.index(stage)
    following = trip.stages[index + 1] if index + 1 < len(trip.stages) else None
    if following is not None and not following.is_rest_day and _contiguous(stage, following):
        return stage.geometry + following.geometry[1:], following
    return stage.geometry, None


def _cut(trip: Trip, stage: Stage, km: float) -> None:
    """Cut on the stored full-resolution route when the days still lie on it (lengths and climbing measured
    there), else on the days' own lines (their stored lengths shared at the cut)."""
    _, following = _cut_path(trip, stage)
    days = [stage] if following is None else [stage, following]
    total = sum(d.distance for d in days)
    line, _, stored = day_points.window(trip, days)
    head, tail = cut_at_km(line, min(km, float(np.nextafter(total_distance_km(line), 0))))
    set_geometry(stage, head)
    if following is None:
        following = Stage(id=new_id(), accommodations=[])
        trip.stages.insert(trip.stages.index(stage) + 1, following)
    set_geometry(following, tail)
    if not stored:
        stage.distance, following.distance = km, max(total - km, 0.0)


def move_stage(actor: User, trip_id: str, stage_id: str, precondition: Precondition, data) -> Trip:
    """Move a day to `toIndex` (0-based). The days keep their routes."""

    def validate(trip):
        to_index = load(StageMove(), data)["to_index"]
        current = trip.stages.index(find_stage(trip, stage_id))
        if not 0 <= to_index < len(trip.stages):
            raise Invalid({"toIndex": Msg("field.between", low=0, high=len(trip.stages) - 1)})
        if to_index == current:
            raise Invalid({"toIndex": Msg("field.same_place")})
        return to_index

    def apply(trip, to_index):
        stage = find_stage(trip, stage_id)
        trip.stages.remove(stage)
        trip.stages.insert(to_index, stage)

    return write_days(actor, trip_id, precondition, validate, apply, forget_facts=True)


def delete_stage(actor: User, trip_id: str, stage_id: str, precondition: Precondition) -> Trip:
    """Remove a day. A riding day's route is merged into the next riding day (or the previous one when it
    is the last); a rest day, or a day of a Komoot collection, is simply removed. A trip keeps at least
    two riding days."""

    def validate(trip):
        stage = find_stage(trip, stage_id)
        if not stage.is_rest_day and riding_days(trip) - 1 < MIN_RIDING_DAYS:
            raise Invalid({"stageId": Plural("stages.keep_riding_days", MIN_RIDING_DAYS)})

    def apply(trip, _):
        stage = find_stage(trip, stage_id)
        index = trip.stages.index(stage)
        trip.stages.remove(stage)
        if stage.is_rest_day or trip.source_type == "komoot_collection":
            return
        after = trip.stages[index] if index < len(trip.stages) else None
        before = trip.stages[index - 1] if index > 0 else None
        if after is not None and not after.is_rest_day:
            _merge(after, stage.geometry + after.geometry[1:], stage, after)
        elif before is not None and not before.is_rest_day:
            _merge(before, before.geometry + stage.geometry[1:], before, stage)

    return write_days(actor, trip_id, precondition, validate, apply, forget_facts=True)


def _merge(target: Stage, geometry: list, first: Stage, second: Stage) -> None:
    """`target` becomes first + second. Lengths and climbing add up (each was measured on full-resolution
    points, which the stored simplified lines no longer carry)."""
    totals = (first.distance + second.distance, elevation.add(first.elevation, second.elevation),
              elevation.add(first.elevation_loss, second.elevation_loss))  # unknown + anything: unknown
    set_geometry(target, geometry)
    target.distance, target.elevation, target.elevation_loss = totals


def insert_rest_day(actor: User, trip_id: str, stage_id: str, precondition: Precondition) -> Trip:
    """Insert a rest day after a riding day, where that day ends."""

    def validate(trip):
        stage = find_stage(trip, stage_id)
        index = trip.stages.index(stage)
        following = trip.stages[index + 1] if index + 1 < len(trip.stages) else None
        if stage.is_rest_day or (following is not None and following.is_rest_day):
            raise Invalid({"stageId": Msg("field.rest_days_apart")})
        if len(trip.stages) >= MAX_TRIP_DAYS:
            raise Invalid({"stageId": Msg("field.days_at_most", most=MAX_TRIP_DAYS)})

    def apply(trip, _):
        stage = find_stage(trip, stage_id)
        rest = Stage(id=new_id(), is_rest_day=True, accommodations=[])
        set_geometry(rest, [_end(stage)])
        rest.distance = rest.elevation = rest.elevation_loss = 0.0
        trip.stages.insert(trip.stages.index(stage) + 1, rest)

    return write_days(actor, trip_id, precondition, validate, apply, forget_facts=True)


def get_stage(actor: User, trip_id: str, stage_id: str) -> Stage:
    """Raises NotFound for an unknown or foreign trip, and for a stage that is not one of its days."""
    return find_stage(load_owned_trip(actor.id, trip_id), stage_id)
