"""Who is calling: the bearer token of a REST request (audience `api` only)."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps

import re

import sqlalchemy as sa
from flask import g, request

from oauth.kernel.models import AccessToken, User
from oauth.kernel.tokens import API_AUDIENCE, hash_token, live_token, well_formed
from trips.core.db import db, utcnow
from trips.core.problems import problem
from trips.core.text import bounded
from trips.errors import Msg, N_


class Principal:
    """The caller: its account, the token's scopes and client. `user_id` is the account's id as read with the
    token: what the budgets, the grant's last use and the access log key on, without reading the account again
    after a write's commit has expired it. Given `load_user` instead of `user`, the account is loaded on first use
    (a remembered token's account merged into the session: oauth/services/resource.py), so a request that never needs
    more than its id never opens a database session."""

    __slots__ = ("_user", "_load_user", "_locale", "scopes", "client_id", "user_id")

    def __init__(self, user: User | None = None, scopes: frozenset[str] = frozenset(), client_id: str | None = None,
                 user_id: str | None = None, load_user: Callable[[], User] | None = None,
                 locale: str | None = None):
        if user is None and (load_user is None or user_id is None):
            raise ValueError("a principal needs its user, or its user's id and how to load it")
        self._user, self._load_user, self._locale = user, load_user, locale
        self.scopes, self.client_id = scopes, client_id
        self.user_id = user_id if user_id is not None else user.id

    @property
    def user(self) -> User:
        if self._user is None:
            self._user = self._load_user()
        return self._user

    @property
    def locale(self) -> str | None:
        """The account's language: as read with the token until the account is loaded (`locale`), then its own."""
        return self._user.locale if self._user is not None or self._load_user is None else self._locale


class Unauthorized(Exception):
    """No live `api` token; `reason` says why in words (`refusal_reason`), None when no token was sent."""

    def __init__(self, reason: Msg | None = None):
        super().__init__(str(reason or "unauthorized"))
        self.reason = reason


NO_TOKEN = N_("refusal.token_missing")
UNKNOWN = N_("refusal.token_unknown")
_NOT_IN_CHALLENGE = re.compile(r'[^\x20-\x21\x23-\x5b\x5d-\x7e]')  # RFC 6750 §3 error_description's characters


def refusal_reason(token: str | None, audience: str) -> Msg:
    """Why `token` is not a live token for `audience`, in words for whoever holds it (a Msg: REST's problem says it
    in the reader's language, RFC 6750 §3's error_description in English): expired, revoked, or issued for another
    audience (named). Only the holder of a token can
    learn this about it: any other value is "unknown or malformed", whether or not some other token exists.
    Asked only on the way to a 401 (one indexed query)."""
    if not token:
        return Msg(NO_TOKEN)
    row = db.session.scalar(sa.select(AccessToken).where(AccessToken.token_hash == hash_token(token))) \
        if well_formed(token) else None
    if row is None:
        return Msg(UNKNOWN)
    if row.revoked_at is not None:
        return Msg("refusal.token_revoked")
    if row.expires_at <= utcnow():
        return Msg("refusal.token_expired")
    if row.audience != audience:
        return Msg("refusal.token_audience", theirs=bounded(row.audience, 120), ours=bounded(audience, 120))
    return Msg(UNKNOWN)  # live by now: it was not when it was looked up


def challenge_text(reason: Msg | str) -> str:
    """`reason` in English as an error_description may carry it inside a WWW-Authenticate quoted string (RFC 6750
    §3: ASCII only)."""
    return _NOT_IN_CHALLENGE.sub("?", str(reason))


class InsufficientScope(Exception):
    def __init__(self, scope: str):
        super().__init__(scope)
        self.scope = scope


def bearer_token() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def require_api_scope(scope: str):
    """Decorator for /api views: a live `api` token carrying `scope`, exposed as g.principal."""

    def decorator(view):
        @wraps(view)
        def wrapped(*args, **kwargs):
            token = bearer_token()
            found = live_token(token or "", API_AUDIENCE)
            if found is None:
                raise Unauthorized(refusal_reason(token, API_AUDIENCE) if token else None)
            row, user = found
            if scope not in row.scopes:
                raise InsufficientScope(scope)
            g.principal = Principal(user=user, scopes=row.scopes, client_id=row.client_id)
            return view(*args, **kwargs)

        return wrapped

    return decorator


def _unauthorized(exc: Unauthorized):
    response = problem(401, exc.reason or Msg(NO_TOKEN))
    response.headers["WWW-Authenticate"] = 'Bearer realm="btp"' if exc.reason is None else \
        f'Bearer realm="btp", error="invalid_token", error_description="{challenge_text(exc.reason)}"'
    return response


def _insufficient_scope(exc: InsufficientScope):
    response = problem(403, Msg("refusal.scope_missing", scope=exc.scope))
    response.headers["WWW-Authenticate"] = f'Bearer error="insufficient_scope", scope="{exc.scope}"'
    return response


def _no_store(response):
    # An answer to a bearer token is that account's (trips, tokens, places searched): no cache keeps it, shared or
    # the client's own (RFC 6750 §5.3 and RFC 9111 §5.2.2.5), whatever the view set (a GPX, a route with its ETag:
    # a client may still send If-None-Match itself).
    if request.environ.get("HTTP_AUTHORIZATION", "")[:7].lower() == "bearer ":
        response.headers["Cache-Control"] = "no-store"
    return response


def register_errors(app) -> None:
    """The REST answers of a missing or weak bearer token (RFC 6750 §3): 401 and 403 problem documents; and
    `Cache-Control: no-store` on every answer to a request that carries a bearer token (REST, /mcp, /metrics)."""
    app.register_error_handler(Unauthorized, _unauthorized)
    app.register_error_handler(InsufficientScope, _insufficient_scope)
    app.after_request(_no_store)
