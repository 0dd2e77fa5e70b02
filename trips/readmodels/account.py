"""Everything BTP holds about an account, for its owner (docs/RULES.md "Account export"): the profile, the trips with
their days, choices and share links, the connected agents and the tokens' metadata, as JSON; with the trips as GPX
files beside it in a ZIP. Never a secret: no token, no token's hash, no sign-in link."""
from __future__ import annotations

import io
import json
import re
import zipfile
from datetime import datetime, timezone

import sqlalchemy as sa

from oauth.kernel.models import AccessToken, Grant, OAuthClient, RefreshToken, User
from oauth.kernel.tokens import audience_name
from oauth.services.accounts import client_host
from trips.core.db import db
from trips.errors import Invalid, Msg
from trips.models import Trip, TripShare
from trips.readmodels.trip import trip_detail
from trips.route.gpx_export import iter_gpx
from trips.services.gpx_days import day_exports
from trips.services.sharing import share_url

FORMATS = ("json", "zip")


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.replace(tzinfo=None).isoformat() + "Z"


def export_format(value: str | None) -> str:
    """The format asked for (json by default). Raises Invalid naming `format` for another one."""
    if value is None or value in FORMATS:
        return value or "json"
    raise Invalid({"format": Msg("field.one_of", choices=", ".join(FORMATS))})


def _trips(user: User) -> list[Trip]:
    return list(db.session.scalars(sa.select(Trip).where(Trip.user_id == user.id).order_by(Trip.created_at)))


def _shares(trip: Trip) -> list[dict]:
    rows = db.session.scalars(sa.select(TripShare).where(TripShare.trip_id == trip.id).order_by(TripShare.created_at))
    return [{"shortCode": s.short_code, "url": share_url(s), "createdAt": _iso(s.created_at),
             "revokedAt": _iso(s.revoked_at)} for s in rows]


def _trip(trip: Trip) -> dict:
    """The trip as REST reads it, with what only its owner's export adds: the days' stored choices are in its
    stages (selectedAccommodation), its share links, active or revoked, beside."""
    return {**trip_detail(trip), "title": trip.title, "locale": trip.locale, "shares": _shares(trip)}


def _agents(user: User) -> list[dict]:
    rows = db.session.execute(sa.select(Grant, OAuthClient).outerjoin(
        OAuthClient, OAuthClient.client_id == Grant.client_id).where(Grant.user_id == user.id)
        .order_by(Grant.authorized_at)).all()
    return [{"id": g.id, "clientId": g.client_id, "name": c.client_name if c else None, "host": client_host(g.client_id, c),
             "scopes": g.scope.split(), "authorizedAt": _iso(g.authorized_at), "lastUsedAt": _iso(g.last_used_at),
             "revokedAt": _iso(g.revoked_at)} for g, c in rows]


def _tokens(user: User) -> dict:
    """The tokens' metadata: what names one to its owner (its id, the first characters people see), never the
    token nor its hash."""
    access = db.session.scalars(sa.select(AccessToken).where(AccessToken.user_id == user.id)
                                .order_by(AccessToken.issued_at, AccessToken.id))
    refresh = db.session.scalars(sa.select(RefreshToken).where(RefreshToken.user_id == user.id)
                                 .order_by(RefreshToken.issued_at, RefreshToken.id))
    return {
        "access": [{"id": t.id, "prefix": t.prefix, "clientId": t.client_id, "audience": audience_name(t.audience),
                    "scopes": t.scope.split(), "issuedAt": _iso(t.issued_at), "expiresAt": _iso(t.expires_at),
                    "revokedAt": _iso(t.revoked_at)} for t in access],
        "refresh": [{"id": t.id, "clientId": t.client_id, "scopes": t.scope.split(), "issuedAt": _iso(t.issued_at),
                     "expiresAt": _iso(t.expires_at), "usedAt": _iso(t.used_at), "revokedAt": _iso(t.revoked_at)}
                    for t in refresh],
    }


def account_data(user: User) -> dict:
    return {
        "exportedAt": _iso(datetime.now(timezone.utc)),
        "account": {"userId": user.id, "email": user.email, "locale": user.locale, "createdAt": _iso(user.created_at)},
        "trips": [_trip(trip) for trip in _trips(user)],
        "agents": _agents(user), "tokens": _tokens(user),
    }


def _gpx_name(trip: Trip, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", trip.title or "trip").strip("-")[:60] or "trip"
    name = f"trips/{base}.gpx"
    if name in taken:  # two trips of one title: the id tells them apart
        name = f"trips/{base}-{trip.id}.gpx"
    taken.add(name)
    return name


def account_zip(user: User, data: dict) -> bytes:
    """`data` (account_data) as account.json and each trip's GPX under trips/, in one ZIP."""
    out, taken = io.BytesIO(), set()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("account.json", json.dumps(data, ensure_ascii=False, indent=1))
        for trip in _trips(user):
            gpx = b"".join(iter_gpx(trip.title, day_exports(trip), speed_kmh=trip.average_speed))
            archive.writestr(_gpx_name(trip, taken), gpx)
    return out.getvalue()
