"""Plain helpers that make users, tokens and trips for tests."""
from __future__ import annotations

import secrets

from oauth.kernel.tokens import API_AUDIENCE, create_user, issue_token
from trips.core.db import atomic

BOTH = "trips:read trips:write"


def make_user(email: str | None = None):
    with atomic():
        return create_user(email or f"rider-{secrets.token_hex(4)}@example.org")


def make_token(user, scope: str = BOTH, audience: str = API_AUDIENCE, ttl: int = 3600) -> str:
    with atomic():
        return issue_token(user, audience, scope, ttl)


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def idem(key: str | None = None) -> dict:
    return {"Idempotency-Key": key or secrets.token_hex(16)}
