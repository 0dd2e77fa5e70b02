"""The use cases of trips. REST views (and later MCP tools) are thin adapters over these functions.

Every function takes the acting user explicitly, checks ownership itself and raises domain errors only.
"""
from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import sqlalchemy as sa
from marshmallow import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import selectinload

from jobs import enqueue, get_redis
from oauth.models import User, utcnow
from trips import computations, pipeline
from trips.db import after_commit, atomic, db, new_id
from trips.errors import BadRequest, Conflict, Invalid, InvalidQuery
from trips.gpx import GpxError, parse_gpx
from trips.ratelimit import limit
from trips.guards import Precondition, WriteContext, guarded_write, load_owned_trip, trip_lock
from trips.models import IdempotencyRecord, Stage, Trip
from trips.pacing import TooLarge
from trips.stage_ops import find_stage
from trips.text import bounded
from trips.schemas import (
    PACING, WRITABLE, GpxUploadSettings, TripCreate, TripListQuery, TripUpdate, check_dates, load,
)

IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_-]{16,255}")
IDEMPOTENCY_TTL = timedelta(hours=24)


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def create_trip(actor: User, data, idempotency_key: str | None, operation: str = "create_trip") -> tuple[Trip, bool]:
    """Create a trip from a route link and dispatch the route fetch. Returns (trip, created).

    The same key with the same body answers the trip created first (created=False) and dispatches nothing.
    Raises BadRequest (key missing or malformed), Invalid (body), Conflict (key reused with another body,
    or for a trip since deleted), RateLimited (10 new trips a minute).
    """
    fields = load(TripCreate(), data)

    def build() -> Trip:
        trip = new_trip(actor, fields)
        computations.initialize(trip, computations.STRUCTURAL, trip.generation)
        after_commit(_dispatch_fetch, trip.id)
        return trip

    return _idempotent(actor, operation, idempotency_key, _digest(data), build)


def duplicate_trip(actor: User, trip_id: str, idempotency_key: str | None) -> tuple[Trip, bool]:
    """Copy a trip: settings, route and days (new ids), its days already computed. Allowed on a started
    trip. Returns (copy, created). Raises NotFound, BadRequest, Conflict, RateLimited as create_trip."""
    source = load_owned_trip(actor.id, trip_id)

    def build() -> Trip:
        original = load_owned_trip(actor.id, source.id)
        if computations.status_of(original, "stages") != "done":
            raise Conflict("The trip's days are not ready yet; duplicate it once they are.")
        trip = new_trip(actor, {attr: getattr(original, attr) for attr in WRITABLE.values()}
                        | {"title": _copy_title(original.title)})
        pipeline.copy_days(original, trip)
        return trip

    # The key names the request, path included: the same key for another trip is another body (409).
    return _idempotent(actor, "duplicate_trip", idempotency_key, _digest({"tripId": source.id}), build)


def _copy_title(title: str | None) -> str | None:
    return None if title is None else (title[:248] + " (copy)")


def _idempotent(actor: User, operation: str, key: str | None, digest: str, build) -> tuple[Trip, bool]:
    """Run `build` once per (user, operation, key); a replay answers the first result (ADR-077)."""
    if key is None:
        raise BadRequest("The Idempotency-Key header is required (16 to 255 letters, digits, '-' or '_').")
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise BadRequest("The Idempotency-Key must be 16 to 255 letters, digits, '-' or '_'.")
    key_lock = f"idem:{actor.id}:{operation}:{hashlib.sha256(key.encode()).hexdigest()}"
    try:
        with atomic(lock=key_lock, lock_timeout=10):
            replay = _replay(actor, operation, key, digest)
            if replay is not None:
                return replay, False
            limit(get_redis(), "trip_create", actor.id)
            trip = build()
            db.session.add(IdempotencyRecord(user_id=actor.id, operation=operation, key=key,
                                             request_digest=digest, trip_id=trip.id))
    except IntegrityError:  # a concurrent request with the same key won the unique constraint
        with atomic():
            replay = _replay(actor, operation, key, digest)
        if replay is None:
            raise
        return replay, False
    return trip, True


def new_trip(actor: User, fields: dict) -> Trip:
    trip = Trip(id=new_id(), user_id=actor.id, locale=actor.locale, version=1, generation=1, **fields)
    db.session.add(trip)
    db.session.flush()  # column defaults now set on the object: pacing reads them
    return trip


def _dispatch_fetch(trip_id: str) -> None:
    from jobs.tasks import fetch_route

    enqueue(fetch_route, trip_id, 1)


def _replay(actor: User, operation: str, key: str, digest: str) -> Trip | None:
    record = db.session.scalar(sa.select(IdempotencyRecord).where(
        IdempotencyRecord.user_id == actor.id, IdempotencyRecord.operation == operation,
        IdempotencyRecord.key == key))
    if record is None:
        return None
    if record.created_at < utcnow() - IDEMPOTENCY_TTL:
        db.session.delete(record)
        db.session.flush()
        return None
    if record.request_digest != digest:
        raise Conflict("This Idempotency-Key was already used with a different request body.")
    if record.trip_id is None:
        raise Conflict("The trip created with this Idempotency-Key has since been deleted; use a new key.")
    return db.session.get(Trip, record.trip_id)


def import_gpx(actor: User, stream, form: dict) -> Trip:
    """Create a trip from an uploaded GPX file, synchronously: parsed, stored and cut into days.

    Raises Invalid naming `gpxFile` (missing, not a GPX, hostile, too large, no points) or a setting.
    """
    fields = load(GpxUploadSettings(), {k: v for k, v in form.items() if v != ""})
    if stream is None:
        raise Invalid({"gpxFile": "a GPX file is required"})
    limit(get_redis(), "trip_create", actor.id)
    try:
        parsed = parse_gpx(stream)
    except GpxError as exc:
        raise Invalid({"gpxFile": str(exc)}) from None
    try:
        with atomic():
            trip = new_trip(actor, fields)
            pipeline.build_from_gpx(trip, parsed)
    except TooLarge as exc:  # more days or a longer route than BTP plans: nothing was kept
        raise Invalid({exc.field or "gpxFile": exc.message}) from None
    return trip


def list_trips(actor: User, query) -> dict:
    """The caller's trips, newest first, paged. Raises InvalidQuery naming a bad query parameter."""
    try:
        q = load(TripListQuery(), dict(query))
    except Invalid as exc:
        raise InvalidQuery(exc.errors) from None
    where = [Trip.user_id == actor.id]
    if q.get("title"):
        escaped = q["title"].lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append(sa.func.lower(Trip.title).like(f"%{escaped}%", escape="\\"))
    if q.get("start_date"):
        where.append(Trip.start_date >= q["start_date"])
    if q.get("end_date"):
        where.append(Trip.end_date <= q["end_date"])
    total = db.session.scalar(sa.select(sa.func.count()).select_from(Trip).where(*where))
    size = q["items_per_page"]
    trips = db.session.scalars(
        sa.select(Trip).where(*where).order_by(Trip.created_at.desc(), Trip.id.desc())
        .offset((q["page"] - 1) * size).limit(size)
        .options(selectinload(Trip.stages).load_only(Stage.distance, Stage.position),
                 selectinload(Trip.computations))
    ).all()
    return {"trips": trips, "total": total, "page": q["page"], "items_per_page": size}


def get_trip(actor: User, trip_id: str) -> Trip:
    """Raises NotFound alike for an unknown trip and someone else's."""
    return load_owned_trip(actor.id, trip_id)


def get_stage(actor: User, trip_id: str, stage_id: str) -> Stage:
    """Raises NotFound for an unknown or foreign trip, and for a stage that is not one of its days."""
    return find_stage(load_owned_trip(actor.id, trip_id), stage_id)


def update_trip_settings(actor: User, trip_id: str, precondition: Precondition, data, confirm=None) -> Trip:
    """Change settings. A pacing change moves the version and cuts the days again; a title alone does not.

    Guards: ownership → lock → version → validation of the merged record → confirmation (MCP).
    Raises NotFound, Locked, PreconditionRequired, BadRequest, PreconditionFailed, Invalid, Conflict.
    """
    ctx = WriteContext(actor.id, trip_id, precondition, validate=lambda trip: _merged_settings(trip, data),
                       confirm=confirm)
    with guarded_write(ctx) as trip:
        before = _pacing_inputs(trip)
        for name, value in ctx.prepared.items():
            setattr(trip, name, value)
        if _pacing_inputs(trip) != before:
            _repace(trip)
    return trip


def _merged_settings(trip: Trip, data) -> dict:
    """The fields to write, validated on the merged record (the stored trip with the changes applied)."""
    fields = load(TripUpdate(), data, partial=True)
    merged = {name: fields.get(name, getattr(trip, name)) for name in ("start_date", "end_date")}
    try:
        check_dates(merged["start_date"], merged["end_date"])
    except ValidationError as exc:
        raise Invalid({"endDate": " ".join(exc.messages)}) from None
    if fields.keys() & set(PACING):
        try:
            pipeline.check_day_count(trip, fields)  # refused now, not as a failed cutting later
        except TooLarge as exc:
            raise Invalid({exc.field or "maxDistancePerDay": exc.message}) from None
    return fields


def _pacing_inputs(trip: Trip) -> tuple:
    span = (trip.end_date - trip.start_date).days + 1 if trip.start_date and trip.end_date else None
    return tuple(getattr(trip, f) for f in PACING if not f.endswith("_date")) + (span,)


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
        from jobs.tasks import generate_stages

        after_commit(enqueue, generate_stages, trip.id, trip.generation)


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



def search_places(actor: User, query) -> dict:
    """Places matching `q` (Nominatim when configured, else the offline gazetteer).

    Raises Invalid (q, limit), RateLimited (30 upstream look-ups a minute), Unavailable (upstream refused
    or is down: never an empty list in that case).
    """
    from flask import current_app

    from trips.geocode import GeocodeConfig, search_places as search

    extra = sorted(set(query) - {"q", "limit"})
    if extra:
        raise InvalidQuery({bounded(extra[0]): "Unknown field."})
    config = GeocodeConfig(nominatim_url=current_app.config["BTP_NOMINATIM_URL"])
    try:
        return search(query.get("q"), query.get("limit"), config=config, redis=get_redis(), user_key=actor.id)
    except Invalid as exc:
        raise InvalidQuery(exc.errors) from None


def created_before(actor: User, data, idempotency_key: str, operation: str = "create_trip") -> Trip | None:
    """The trip an earlier request with this key and body created (within 24 h), or None.

    Raises Conflict when the key was used with another body.
    """
    with atomic():
        return _replay(actor, operation, idempotency_key, _digest(data))
