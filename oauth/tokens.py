"""Issuing and checking opaque bearer tokens (stored as SHA-256, never in clear)."""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

import sqlalchemy as sa

from oauth.models import AccessToken, User, utcnow
from oauth.scopes import SCOPES
from trips.db import db
from trips.errors import Invalid, NotFound

ACCESS_PREFIX = "btp_at_"
API_AUDIENCE = "api"
DEFAULT_TTL = 3600
MAX_TTL = 365 * 24 * 3600


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def normalize_email(email: str) -> str:
    return (email or "").strip().lower()


def find_user(email: str) -> User | None:
    return db.session.scalar(sa.select(User).where(User.email == normalize_email(email)))


def create_user(email: str) -> User:
    """Raises Invalid when the address is malformed or already taken."""
    email = normalize_email(email)
    if len(email) > 254 or email.count("@") != 1 or not all(email.split("@")) or any(c.isspace() for c in email):
        raise Invalid({"email": "must be an e-mail address"})
    if find_user(email):
        raise Invalid({"email": "an account with this address exists already"})
    user = User(email=email)
    db.session.add(user)
    db.session.flush()
    return user


def parse_scope(scope: str) -> str:
    """Raises Invalid when the scope is empty or names an unknown scope."""
    requested = scope.split()
    unknown = [s for s in requested if s not in SCOPES]
    if not requested or unknown:
        raise Invalid({"scope": f"must be one or more of: {' '.join(SCOPES)}"})
    return " ".join(s for s in SCOPES if s in requested)


def issue_token(user: User, audience: str, scope: str, ttl: int = DEFAULT_TTL, client_id: str | None = None) -> str:
    """Store a new token for `user` and return it in clear (the only time it exists in clear).

    Raises Invalid on an unknown scope or a TTL outside 1 s … 1 year.
    """
    if not 0 < ttl <= MAX_TTL:
        raise Invalid({"ttl": f"must be between 1 and {MAX_TTL} seconds"})
    token = ACCESS_PREFIX + secrets.token_urlsafe(32)
    db.session.add(AccessToken(
        token_hash=hash_token(token), prefix=token[: len(ACCESS_PREFIX) + 4], user_id=user.id,
        client_id=client_id, audience=audience, scope=parse_scope(scope),
        expires_at=utcnow() + timedelta(seconds=ttl),
    ))
    db.session.flush()
    return token


def lookup_token(token: str, audience: str) -> AccessToken | None:
    """The live token of that audience, or None (unknown, expired, revoked or issued for another audience)."""
    if not token or len(token) > 200 or not token.startswith(ACCESS_PREFIX):
        return None
    row = db.session.scalar(sa.select(AccessToken).where(AccessToken.token_hash == hash_token(token)))
    if row is None or row.revoked_at is not None or row.expires_at <= utcnow() or row.audience != audience:
        return None
    return row


def user_by_email_or_404(email: str) -> User:
    user = find_user(email)
    if user is None:
        raise NotFound("No account with this e-mail address.")
    return user
