"""Idempotent creation (docs/RULES.md "Idempotent creation"): the same key and body answer the first result for 24 h."""
from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from trips.core.redis_client import get_redis
from oauth.kernel.models import User
from trips.core.db import atomic, db, utcnow
from trips.core.ratelimit import limit
from trips.errors import BadRequest, Conflict
from trips.models import IdempotencyRecord, Trip

IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9_-]{16,255}")
IDEMPOTENCY_TTL = timedelta(hours=24)


def digest(data) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def idempotent(actor: User, operation: str, key: str | None, digest: str, build) -> tuple[Trip, bool]:
    """Run `build` once per (user, operation, key); a replay answers the first result."""
    if key is None:
        raise BadRequest("refusal.idempotency_key_required")
    if not IDEMPOTENCY_KEY.fullmatch(key):
        raise BadRequest("refusal.idempotency_key_malformed")
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
        raise Conflict("refusal.idempotency_key_reused")
    if record.trip_id is None:
        raise Conflict("refusal.idempotency_trip_deleted")
    return db.session.get(Trip, record.trip_id)


def created_before(actor: User, data, idempotency_key: str, operation: str = "create_trip") -> Trip | None:
    """The trip an earlier request with this key and body created (within 24 h), or None.

    Raises Conflict when the key was used with another body.
    """
    with atomic():
        return _replay(actor, operation, idempotency_key, digest(data))
