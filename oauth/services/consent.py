"""The consent decision: single use, and bound to the exact request it was made for.

The consent form carries a signed decision token naming the user and a digest of the request (client,
redirect URI, scopes, PKCE challenge, resource). A POST whose request no longer matches asks again; a token
is spent on first use (Redis SET NX, so any worker sees it).
"""
from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import current_app
from itsdangerous import BadSignature, URLSafeTimedSerializer

from trips.core.redis_client import get_redis
from oauth.kernel.redirects import is_loopback_or_app
from oauth.kernel.scopes import SCOPES
from trips.core.i18n import N_

DECISION_TTL = 600
# What each scope lets an application do, as page keys (pages.po): the consent and account pages say it in the
# reader's language. tests/trips/core/test_i18n.py holds it to oauth/kernel/scopes.py's list.
SCOPE_WORDS = {"trips:read": N_("scope.trips_read"), "trips:write": N_("scope.trips_write")}
SALT = "btp-consent-decision"


def request_digest(grant) -> str:
    payload = grant.request.payload
    bound = {
        "client_id": grant.client.client_id, "redirect_uri": grant.redirect_uri,
        "scope": sorted((grant.request.scope or "").split()),
        "code_challenge": payload.data.get("code_challenge"),
        "resource": (payload.data.get("resource") or "").rstrip("/"),
    }
    return hashlib.sha256(json.dumps(bound, sort_keys=True).encode()).hexdigest()


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=SALT)


def issue_decision_token(user, grant) -> str:
    return _serializer().dumps({"u": user.id, "d": request_digest(grant), "n": secrets.token_urlsafe(16)})


def spend_decision_token(token: str | None, user, grant) -> bool:
    """True when the token was issued to this user for exactly this request and was never used before."""
    try:
        data = _serializer().loads(token or "", max_age=DECISION_TTL)
    except BadSignature:
        return False
    if data.get("u") != user.id or data.get("d") != request_digest(grant):
        return False
    return bool(get_redis().set(f"btp:consent:{data['n']}", 1, nx=True, ex=DECISION_TTL + 60))


@dataclass(frozen=True)
class ConsentView:
    """What the consent page shows: only values the server resolved, never the request's own words."""

    client_name: str
    client_host: str | None
    redirect_target: str
    redirect_warning: bool
    scopes: list[tuple[str, str]]  # (scope, its page key)


def consent_view(grant) -> ConsentView:
    client = grant.client
    host = urlsplit(client.client_id).hostname if client.kind == "metadata" else None
    target = urlsplit(grant.redirect_uri)
    shown = f"{target.scheme}://{target.netloc}" if target.netloc else f"{target.scheme}:"
    scopes = [(s, SCOPE_WORDS[s]) for s in (grant.request.scope or "").split() if s in SCOPES and s in SCOPE_WORDS]
    return ConsentView(client.client_name, host, shown, is_loopback_or_app(grant.redirect_uri), scopes)
