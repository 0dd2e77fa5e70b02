"""Public links to a trip: one active link per trip, an 8-character URL-safe code, revocation immediate."""
from __future__ import annotations

import re
import secrets

import sqlalchemy as sa
from flask import current_app

from oauth.kernel.models import User

from trips.core.db import utcnow
from trips.core.db import atomic, db
from trips.errors import N_, NotFound
from trips.guards import load_owned_trip, trip_lock
from trips.models import Trip, TripShare

CODE = re.compile(r"[A-Za-z0-9_-]{8}")
NO_SHARE = N_("refusal.no_share")
SHARE_NOT_FOUND = N_("refusal.share_not_found")


def share_url(share: TripShare) -> str:
    return f"{current_app.config['BTP_BASE_URL']}/s/{share.short_code}"


def active_share(trip_id: str) -> TripShare | None:
    return db.session.scalar(sa.select(TripShare).where(TripShare.trip_id == trip_id, TripShare.revoked_at.is_(None)))


def _new_code() -> str:
    while True:  # 48 random bits: a collision is rare, and checked
        code = secrets.token_urlsafe(6)
        if db.session.scalar(sa.select(TripShare.id).where(TripShare.short_code == code)) is None:
            return code


def share_trip(actor: User, trip_id: str) -> tuple[TripShare, bool]:
    """The trip's active link, created if there is none. Returns (share, created). Works on a started trip.

    Raises NotFound alike for an unknown trip and someone else's.
    """
    load_owned_trip(actor.id, trip_id)
    with atomic(lock=trip_lock(str(trip_id).lower())):
        trip = load_owned_trip(actor.id, trip_id)
        share = active_share(trip.id)
        if share is not None:
            return share, False
        share = TripShare(trip_id=trip.id, short_code=_new_code())
        db.session.add(share)
    return share, True


def get_share(actor: User, trip_id: str) -> TripShare:
    """Raises NotFound for an unknown or foreign trip, and when the trip has no active link."""
    trip = load_owned_trip(actor.id, trip_id)
    share = active_share(trip.id)
    if share is None:
        raise NotFound(NO_SHARE)
    return share


def unshare_trip(actor: User, trip_id: str, confirm=None) -> TripShare:
    """Revoke the active link at once (anyone holding it gets a 404). Works on a started trip.

    Guards: ownership → an active link → confirmation (MCP). Raises NotFound as get_share.
    """
    trip = get_share(actor, trip_id).trip
    if confirm is not None:
        confirm(trip)
    with atomic(lock=trip_lock(trip.id)):
        share = get_share(actor, trip_id)
        share.revoked_at = utcnow()
    return share


def shared_trip(code: str) -> Trip:
    """The trip behind an active code. Raises NotFound for a malformed, unknown or revoked code."""
    if not CODE.fullmatch(code or ""):
        raise NotFound(SHARE_NOT_FOUND)
    trip = db.session.scalar(sa.select(Trip).join(TripShare).where(
        TripShare.short_code == code, TripShare.revoked_at.is_(None)))
    if trip is None:
        raise NotFound(SHARE_NOT_FOUND)
    return trip
