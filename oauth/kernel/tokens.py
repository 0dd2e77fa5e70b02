"""Issuing and checking opaque bearer tokens (stored as SHA-256, never in clear)."""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from functools import lru_cache

import sqlalchemy as sa
from flask import current_app

from oauth.kernel.models import AccessToken, User

from trips.core.db import utcnow
from oauth.kernel.scopes import SCOPES
from trips.core.db import db
from trips.errors import Invalid, Msg, N_, NotFound

ACCESS_PREFIX = "btp_at_"
API_AUDIENCE = "api"
DEFAULT_TTL = 3600
MAX_TTL = 365 * 24 * 3600
TOKEN_NOT_FOUND = N_("refusal.no_such_token")


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
        raise Invalid({"email": Msg("field.not_an_address")})
    if find_user(email):
        raise Invalid({"email": Msg("field.address_taken")})
    user = User(email=email)
    db.session.add(user)
    db.session.flush()
    return user


def parse_scope(scope: str) -> str:
    """Raises Invalid when the scope is empty or names an unknown scope."""
    requested = scope.split()
    unknown = [s for s in requested if s not in SCOPES]
    if not requested or unknown:
        raise Invalid({"scope": Msg("field.scopes", scopes=" ".join(SCOPES))})
    return " ".join(s for s in SCOPES if s in requested)


def issue_token(user: User, audience: str, scope: str, ttl: int = DEFAULT_TTL, client_id: str | None = None) -> str:
    """Store a new token for `user` and return it in clear (the only time it exists in clear).

    Raises Invalid on an unknown scope or a TTL outside 1 s … 1 year.
    """
    if not 0 < ttl <= MAX_TTL:
        raise Invalid({"ttl": Msg("field.ttl", most=MAX_TTL)})
    token = ACCESS_PREFIX + secrets.token_urlsafe(32)
    db.session.add(AccessToken(
        token_hash=hash_token(token), prefix=token[: len(ACCESS_PREFIX) + 4], user_id=user.id,
        client_id=client_id, audience=audience, scope=parse_scope(scope),
        expires_at=utcnow() + timedelta(seconds=ttl),
    ))
    db.session.flush()
    return token


def well_formed(token: str | None) -> bool:
    """Could be one of ours: not empty, at most 200 characters, with our prefix (anything else is never looked up)."""
    return bool(token) and len(token) <= 200 and token.startswith(ACCESS_PREFIX)


def live_token(token: str, audience: str) -> tuple[AccessToken, User] | None:
    """(the live token of that audience, its user), or None (unknown, expired, revoked or issued for another
    audience): one indexed query (the unique token_hash index, the user joined on its primary key). REST requests
    run it every time; the MCP endpoint for a token it does not remember live (oauth/services/live_tokens.py), so a
    revocation (or an expiry) holds on the very next request whichever process or instance serves it."""
    if not well_formed(token):
        return None
    found = db.session.execute(_live_statement(), {"token_hash": hash_token(token)}).first()
    if found is None:
        return None
    row, user = found
    if row.revoked_at is not None or row.expires_at <= utcnow() or row.audience != audience:
        return None
    return row, user


@lru_cache(maxsize=1)
def _live_statement():
    """The token lookup, built once (every request runs it: the statement and its cache key are not rebuilt)."""
    return (sa.select(AccessToken, User).join(User, User.id == AccessToken.user_id)
            .where(AccessToken.token_hash == sa.bindparam("token_hash")))


def user_by_email_or_404(email: str) -> User:
    user = find_user(email)
    if user is None:
        raise NotFound("refusal.no_such_account")
    return user


# Personal tokens: the ones `flask tokens issue` makes (no OAuth client; up to a year). Agents' tokens are
# stopped with their grant (accounts.revoke_agent), so they are neither listed nor revoked one by one here.
def _live_personal(now):
    return sa.and_(AccessToken.client_id.is_(None), AccessToken.revoked_at.is_(None), AccessToken.expires_at > now)


def personal_tokens(user: User) -> list[AccessToken]:
    """The user's live personal tokens, newest first."""
    return list(db.session.scalars(
        sa.select(AccessToken).where(AccessToken.user_id == user.id, _live_personal(utcnow()))
        .order_by(AccessToken.issued_at.desc(), AccessToken.id)))


def revoke_personal_token(token_id: str, user: User | None = None) -> AccessToken:
    """Revoke one live personal token at once: the next request with it is refused (live_token checks
    `revoked_at`; the commit replaces the MCP token epoch). With `user`, only one of that user's. The caller commits.

    Raises NotFound alike for an unknown id, another user's token, an agent's token, and a token already
    revoked or expired (nothing tells a caller which tokens exist).
    """
    row = db.session.get(AccessToken, token_id) if isinstance(token_id, str) and len(token_id) <= 36 else None
    now = utcnow()
    if row is None or row.client_id is not None or row.revoked_at is not None or row.expires_at <= now \
            or (user is not None and row.user_id != user.id):
        raise NotFound(TOKEN_NOT_FOUND)
    row.revoked_at = now
    db.session.flush()
    return row


def revoke_personal_tokens(user: User) -> int:
    """Revoke every live personal token of `user`; returns how many. The caller commits."""
    result = db.session.execute(
        sa.update(AccessToken).where(AccessToken.user_id == user.id, _live_personal(utcnow()))
        .values(revoked_at=utcnow()).execution_options(synchronize_session=False))
    return result.rowcount


def audience_name(audience: str) -> str:
    """`api` or `mcp` for the two audiences of this deployment, else the stored value (an older base URL)."""
    if audience == API_AUDIENCE:
        return "api"
    return "mcp" if audience == current_app.config["MCP_RESOURCE"] else audience
