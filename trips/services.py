"""The use cases of trips. REST views (and later MCP tools) are thin adapters over these functions.

Every function takes the acting user explicitly, checks ownership itself and raises domain errors only.
"""
from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import selectinload

from jobs import enqueue
from oauth.models import User, utcnow
from trips import computations, pipeline
from trips.db import after_commit, atomic, db, new_id
from trips.errors import BadRequest, Conflict, Invalid, NotFound
from trips.gpx import GpxError, parse_gpx
from trips.guards import Precondition, WriteContext, load_owned_trip, run_chain
from trips.models import IdempotencyRecord, Stage, Trip
from trips.schemas import (
    PACING, GpxUploadSettings, TripCreate, TripListQuery, TripUpdate, check_dates, load,
)

IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_-]{16,255}")
IDEMPOTENCY_TTL = timedelta(hours=24)
STAGE_NOT_FOUND = "Stage not found."


def trip_lock(trip_id: str) -> str:
    return f"trip:{trip_id}"


def _digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def create_trip(actor: User, data, idempotency_key: str | None, operation: str = "create_trip") -> tuple[Trip, bool]:
    """Create a trip from a route link and dispatch the route fetch. Returns (trip, created).

    The same key with the same body answers the trip created first (created=False) and dispatches nothing.
    Raises BadRequest (key missing or malformed), Invalid (body), Conflict (key reused with another body,
    or for a trip since deleted).
    """
    if idempotency_key is None:
        raise BadRequest("The Idempotency-Key header is required (16 to 255 letters, digits, '-' or '_').")
    if not IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise BadRequest("The Idempotency-Key must be 16 to 255 letters, digits, '-' or '_'.")
    fields = load(TripCreate(), data)
    digest = _digest(data)
    key_lock = f"idem:{actor.id}:{operation}:{hashlib.sha256(idempotency_key.encode()).hexdigest()}"
    try:
        with atomic(lock=key_lock, lock_timeout=10):
            replay = _replay(actor, operation, idempotency_key, digest)
            if replay is not None:
                return replay, False
            trip = new_trip(actor, fields)
            computations.initialize(trip, computations.STRUCTURAL, trip.generation)
            db.session.add(IdempotencyRecord(user_id=actor.id, operation=operation, key=idempotency_key,
                                             request_digest=digest, trip_id=trip.id))
            after_commit(_dispatch_fetch, trip.id)
    except IntegrityError:  # a concurrent request with the same key won the unique constraint
        with atomic():
            replay = _replay(actor, operation, idempotency_key, digest)
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
    try:
        parsed = parse_gpx(stream)
    except GpxError as exc:
        raise Invalid({"gpxFile": str(exc)}) from None
    with atomic():
        trip = new_trip(actor, fields)
        pipeline.build_from_gpx(trip, parsed)
    return trip


def list_trips(actor: User, query) -> dict:
    """The caller's trips, newest first, paged. Raises Invalid naming a bad query parameter."""
    q = load(TripListQuery(), dict(query))
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
    trip = load_owned_trip(actor.id, trip_id)
    stage = next((s for s in trip.stages if s.id == str(stage_id).lower()), None)
    if stage is None:
        raise NotFound(STAGE_NOT_FOUND)
    return stage


def update_trip_settings(actor: User, trip_id: str, precondition: Precondition, data) -> Trip:
    """Change settings. A pacing change moves the version and cuts the days again; a title alone does not.

    Guards: ownership → lock → version (fail-fast, then again under the trip's write lock).
    Raises NotFound, Locked, PreconditionRequired, BadRequest, PreconditionFailed, Invalid, Conflict.
    """
    ctx = WriteContext(actor.id, trip_id, precondition)
    run_chain(ctx)
    fields = load(TripUpdate(), data, partial=True)
    with atomic(lock=trip_lock(ctx.trip.id)):
        trip = run_chain(ctx)
        merged = {name: fields.get(name, getattr(trip, name)) for name in ("start_date", "end_date")}
        try:
            check_dates(merged["start_date"], merged["end_date"])
        except Exception as exc:  # marshmallow ValidationError: the merged record is invalid
            raise Invalid({"endDate": " ".join(exc.messages)}) from None
        before = _pacing_inputs(trip)
        for name, value in fields.items():
            setattr(trip, name, value)
        if _pacing_inputs(trip) != before:
            _repace(trip)
    return trip


def _pacing_inputs(trip: Trip) -> tuple:
    span = (trip.end_date - trip.start_date).days + 1 if trip.start_date and trip.end_date else None
    return tuple(getattr(trip, f) for f in PACING if not f.endswith("_date")) + (span,)


def _repace(trip: Trip) -> None:
    """The days will be cut again: a new version and generation; jobs of older generations write nothing."""
    trip.version += 1
    trip.generation += 1
    route_status = computations.status_of(trip, "route")
    if route_status == "failed":
        return
    computations.initialize(trip, ("stages",), trip.generation)
    if route_status == "done":
        from jobs.tasks import generate_stages

        after_commit(enqueue, generate_stages, trip.id, trip.generation)


def delete_trip(actor: User, trip_id: str) -> None:
    """Delete a trip and everything it owns (allowed on a started trip). Raises NotFound."""
    trip = load_owned_trip(actor.id, trip_id)
    with atomic(lock=trip_lock(trip.id)):
        trip = load_owned_trip(actor.id, trip_id)
        db.session.delete(trip)

