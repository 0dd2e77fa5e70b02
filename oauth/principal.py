"""Who is calling: the bearer token of a REST request (audience `api` only)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import wraps

from flask import g, request

from oauth.models import User
from oauth.tokens import API_AUDIENCE, live_token


@dataclass(frozen=True)
class Principal:
    user: User
    scopes: frozenset[str]
    client_id: str | None = None
    # The user's id as read with the token: what the budgets, the grant's last use and the access log key on,
    # without reading the account again after a write's commit has expired it.
    user_id: str | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.user_id is None:
            object.__setattr__(self, "user_id", self.user.id)


class Unauthorized(Exception):
    pass


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
            found = live_token(bearer_token() or "", API_AUDIENCE)
            if found is None:
                raise Unauthorized()
            row, user = found
            if scope not in row.scopes:
                raise InsufficientScope(scope)
            g.principal = Principal(user=user, scopes=row.scopes, client_id=row.client_id)
            return view(*args, **kwargs)

        return wrapped

    return decorator
