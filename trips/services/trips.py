"""The use cases of a trip as a whole: create (link or GPX), duplicate, settings, delete (the reads: trip_reads.py).

Every function takes the acting user explicitly, checks ownership itself and raises domain errors only.
"""
from __future__ import annotations


from marshmallow import ValidationError

from trips.core.queue import enqueue
from trips.core.redis_client import get_redis
from oauth.kernel.models import User
from trips import computations
from trips.services import analysis
from trips.services import pipeline, planned, work_budget
from trips.core.db import after_commit, atomic, db, new_id
from trips.errors import BadRequest, Conflict, Invalid, Msg, as_msg
from trips.route.gpx import GpxError, parse_gpx
from trips.core.ratelimit import limit
from trips.core.text import shorten
from trips.guards import Precondition, WriteContext, guarded_write, load_owned_trip, trip_lock
from trips.models import Trip
from trips.route.pacing import TooLarge
from trips.services.idempotency import digest, idempotent
from trips.core.validation import flatten, load
from trips.services.inputs import PACING, WRITABLE, GpxUploadSettings, TripCreate, TripUpdate, check_dates


def create_trip(actor: User, data, idempotency_key: str | None, operation: str = "create_trip") -> tuple[Trip, bool]:
    """Create a trip from a route link, or from the points to ride through (trips/services/planned.py), and dispatch
    the route fetch (or drawing). Returns (trip, created).

    The same key with the same body answers the trip created first (created=False) and dispatches nothing.
    Raises BadRequest (key missing or malformed), Invalid (body), Conflict (key reused with another body,
    or for a trip since deleted), RateLimited (the new-trips budget, which a request refused for its body or key
    spends too; the routing budgets of trips/services/work_budget.py).
    """
    try:
        fields = load(TripCreate(), data)
        if "source_points" in fields:  # a trip planned from places: refused here when the map cannot route it
            planned.check_covered(fields["source_points"])
            fields["source_type"] = planned.SOURCE_TYPE
    except Invalid:
        spend_on_refusal(actor)
        raise

    def build() -> Trip:
        if "source_points" in fields:  # the routing it causes, judged before its job is queued
            work_budget.charge_route(actor.id, fields["source_points"])
        trip = new_trip(actor, fields)
        computations.initialize(trip, computations.STRUCTURAL, trip.generation)
        after_commit(_dispatch_fetch, trip.id)
        return trip

    try:
        return idempotent(actor, operation, idempotency_key, digest(data), build)
    except BadRequest:  # the key missing or malformed, refused before the budget was spent
        spend_on_refusal(actor)
        raise


def spend_on_refusal(actor: User) -> None:
    """A create refused for its input spends the creation budget as a made one does, so a flood of bad creates meets
    429 too. Raises RateLimited when that budget is spent."""
    limit(get_redis(), "trip_create", actor.id)


def duplicate_trip(actor: User, trip_id: str, idempotency_key: str | None) -> tuple[Trip, bool]:
    """Copy a trip: settings, route and days (new ids), its days already computed. Allowed on a started
    trip. Returns (copy, created). Raises NotFound, BadRequest, Conflict, RateLimited as create_trip."""
    source = load_owned_trip(actor.id, trip_id)

    def build() -> Trip:
        original = load_owned_trip(actor.id, source.id)
        if computations.status_of(original, "stages") != "done":
            raise Conflict("refusal.duplicate_not_ready")
        trip = new_trip(actor, {attr: getattr(original, attr) for attr in WRITABLE.values()}
                        | {"title": _copy_title(original.title), "source_points": original.source_points})
        pipeline.copy_days(original, trip)
        return trip

    # The key names the request, path included: the same key for another trip is another body (409).
    return idempotent(actor, "duplicate_trip", idempotency_key, digest({"tripId": source.id}), build)


def _copy_title(title: str | None) -> str | None:
    return None if title is None else shorten(title, 248) + " (copy)"  # 255 characters at most, cut at a word


def new_trip(actor: User, fields: dict) -> Trip:
    trip = Trip(id=new_id(), user_id=actor.id, locale=actor.locale or "en", version=1, generation=1, **fields)
    db.session.add(trip)
    db.session.flush()  # column defaults now set on the object: pacing reads them
    return trip


def _dispatch_fetch(trip_id: str) -> None:
    enqueue("jobs.tasks.fetch_route", trip_id, 1)


def import_gpx(actor: User, stream, form: dict) -> Trip:
    """Create a trip from an uploaded GPX file, synchronously: parsed, stored and cut into days.

    Raises Invalid naming `gpxFile` (missing, not a GPX, hostile, too large, no points) or a setting.
    """
    limit(get_redis(), "trip_create", actor.id)  # before anything is read: a refused upload spends it too
    fields = load(GpxUploadSettings(), {k: v for k, v in form.items() if v != ""})
    if stream is None:
        raise Invalid({"gpxFile": Msg("field.gpx_required")})
    try:
        parsed = parse_gpx(stream)
    except GpxError as exc:
        raise Invalid({"gpxFile": as_msg(exc.message)}) from None
    try:
        with atomic():
            trip = new_trip(actor, fields)
            pipeline.build_from_gpx(trip, parsed)
    except TooLarge as exc:  # more days or a longer route than BTP plans: nothing was kept
        raise Invalid({exc.field or "gpxFile": as_msg(exc.message)}) from None
    return trip


# docs/RULES.md "What an edit invalidates": what a changed setting invalidates, dispatched again as one
# (the union). The pacing fields cut the days again instead, and the title invalidates nothing. Weather is named
# for departureHour/averageSpeed (its riding window moves), and wind and fords follow it; pois too (resupply's
# "open at passage" is the time the rider passes the shop).
INVALIDATES = {
    "start_date": {"triggers": ("DATES",)},
    "ebike_mode": {"names": ("terrain",)},
    "bike_type": {"names": ("surfaces",)},  # its alert's limit; a planned route keeps the roads it was drawn on
    "departure_hour": {"names": ("terrain", "weather", "daylight", "pois")},  # daylight: the arrival time moves
    "average_speed": {"names": ("terrain", "weather", "daylight", "pois")},
    "enabled_accommodation_types": {"names": ("accommodations",)},
}


def update_trip_settings(actor: User, trip_id: str, precondition: Precondition, data, confirm=None) -> Trip:
    """Change settings. A pacing change moves the version and cuts the days again; a title alone does not;
    any other change dispatches again the enrichments it invalidates (INVALIDATES).

    Guards: ownership → lock → version → validation of the merged record → confirmation (MCP), asked only when
    the change cuts the days again (nothing else discards anything).
    Raises NotFound, Locked, PreconditionRequired, BadRequest, PreconditionFailed, Invalid, Conflict.
    """

    def confirm_recut(trip: Trip) -> None:
        if confirm is not None and recuts(trip, ctx.prepared):
            confirm(trip)

    ctx = WriteContext(actor.id, trip_id, precondition, validate=lambda trip: _merged_settings(trip, data),
                       confirm=confirm_recut)
    with guarded_write(ctx) as trip:
        before = _pacing_inputs(trip)
        changed = {name for name, value in ctx.prepared.items() if getattr(trip, name) != value}
        for name, value in ctx.prepared.items():
            setattr(trip, name, value)
        if _pacing_inputs(trip) != before:
            _repace(trip)  # new days: the whole analysis follows them
        else:
            rows = [INVALIDATES[f] for f in changed if f in INVALIDATES]
            analysis.redispatch(trip, triggers=[t for r in rows for t in r.get("triggers", ())],
                                names=[n for r in rows for n in r.get("names", ())])
    return trip


def _merged_settings(trip: Trip, data) -> dict:
    """The fields to write, validated on the merged record (the stored trip with the changes applied)."""
    fields = load(TripUpdate(), data, partial=True)
    merged = {name: fields.get(name, getattr(trip, name)) for name in ("start_date", "end_date")}
    try:
        check_dates(merged["start_date"], merged["end_date"])
    except ValidationError as exc:
        raise Invalid({"endDate": flatten(exc.messages)["body"]}) from None
    if fields.keys() & set(PACING):
        try:
            pipeline.check_day_count(trip, fields)  # refused now, not as a failed cutting later
        except TooLarge as exc:
            raise Invalid({exc.field or "maxDistancePerDay": as_msg(exc.message)}) from None
    return fields


def _pacing_inputs(trip: Trip, changes: dict | None = None) -> tuple:
    value = {f: (changes or {}).get(f, getattr(trip, f)) for f in PACING}
    start, end = value["start_date"], value["end_date"]
    span = (end - start).days + 1 if start and end else None
    return tuple(value[f] for f in PACING if not f.endswith("_date")) + (span,)


def recuts(trip: Trip, changes: dict) -> bool:
    """Whether writing `changes` (attribute name → value) cuts the days again: only that discards days, their edits
    and chosen lodgings (docs/RULES.md "What an edit invalidates")."""
    return _pacing_inputs(trip, changes) != _pacing_inputs(trip)


def _repace(trip: Trip) -> None:
    """The days will be cut again: a new version and generation; jobs of older generations write nothing."""
    trip.version += 1
    trip.generation += 1
    computations.supersede_unsettled(trip, keep=computations.STRUCTURAL)
    route_status = computations.status_of(trip, "route")
    if route_status == "failed":
        return
    computations.initialize(trip, ("stages",), trip.generation)
    if route_status == "done":
        after_commit(enqueue, "jobs.tasks.generate_stages", trip.id, trip.generation)


def delete_trip(actor: User, trip_id: str, confirm=None) -> None:
    """Delete a trip and everything it owns (allowed on a started trip).

    Guards: ownership → confirmation (MCP). Raises NotFound.
    """
    trip = load_owned_trip(actor.id, trip_id)
    if confirm is not None:
        confirm(trip)
    with atomic(lock=trip_lock(trip.id)):
        trip = load_owned_trip(actor.id, trip_id)
        db.session.delete(trip)
