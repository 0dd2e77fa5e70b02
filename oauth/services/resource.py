"""The protected-resource side of /mcp (RFC 6750, RFC 9728): only tokens whose audience is the MCP resource.

`mcp_principal` is what the MCP endpoint calls; the 401/403 answers carry the challenge MCP clients follow
to discover this server (resource_metadata) and to step up scopes.
"""
from __future__ import annotations

import json
import time

from flask import current_app, g

from trips.core.redis_client import get_redis
from oauth.kernel.models import Grant
from trips.core.db import utcnow
from oauth.kernel.principal import NO_TOKEN, UNKNOWN, Principal, bearer_token, challenge_text, refusal_reason
from oauth.kernel.scopes import SCOPES
from oauth.services import live_tokens
from oauth.kernel.tokens import hash_token, live_token, well_formed
from trips.core import metrics
from trips.core.db import atomic, db
from trips.errors import Msg

LAST_USED_EVERY = 300  # seconds: the grant's "last used" is stamped at most this often
_ASKED: dict[tuple[str, str], float] = {}  # (user, client) -> until when this process need not ask Redis again


class McpUnauthorized(Exception):
    """No token, or not a live token for the MCP resource; `reason` says why (oauth/kernel/principal.py
    refusal_reason), None when no token was sent."""

    uncounted = True  # not a tool call's outcome (a remembered token found revoked is refused before it runs)

    def __init__(self, token_sent: bool, reason: Msg | None = None):
        super().__init__("unauthorized")
        self.token_sent = token_sent
        self.reason = reason


class McpInsufficientScope(Exception):
    def __init__(self, scope: str):
        super().__init__(scope)
        self.scope = scope


def challenge(error: str | None = None, scope: str | None = None, description: str | None = None) -> str:
    """The WWW-Authenticate value: where to discover us, which scopes to ask, and the error if any (with its
    description, RFC 6750 §3)."""
    base = current_app.config["BTP_BASE_URL"]
    parts = [f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"',
             f'scope="{scope or " ".join(SCOPES)}"']
    if error:
        parts[:0] = [f'error="{error}"'] + ([f'error_description="{challenge_text(description)}"']
                                            if description else [])
    return "Bearer " + ", ".join(parts)


def mcp_principal(required_scope: str | None = None) -> Principal:
    """The caller of /mcp. Raises McpUnauthorized (error="invalid_token" only when a token was sent, RFC 6750
    §3.1) and McpInsufficientScope (403, naming the missing scope).

    A token this process remembers live (oauth/services/live_tokens.py) is not looked up: the request must then read the
    token epoch before it answers or runs a tool (`confirm`, called with the budgets' round trip)."""
    token = bearer_token()
    config = current_app.config
    audience = config["MCP_RESOURCE"]
    max_age = config.get("BTP_TOKEN_CACHE_S", live_tokens.DEFAULT_MAX_AGE_S)
    if token and max_age > 0 and well_formed(token):
        token_hash = hash_token(token)
        entry = live_tokens.recall(token_hash, audience, utcnow())
        if entry is not None:
            g.btp_unconfirmed = (token, token_hash, entry.epoch)
            # merged into the session when first used (no query: the row as read with the token)
            return _principal(required_scope, None, entry.scopes, entry.client_id, user_id=entry.user_id,
                              load_user=lambda: db.session.merge(entry.user, load=False), locale=entry.user.locale)
        epoch = live_tokens.read_epoch(get_redis())  # before the lookup: see oauth/services/live_tokens.py
        found = live_token(token, audience)
        if found is not None:
            live_tokens.remember(token_hash, found[0], found[1], epoch, max_age)
    else:
        found = live_token(token, audience) if token else None
    if found is None:
        raise McpUnauthorized(token is not None, refusal_reason(token, audience) if token else None)
    row, user = found
    return _principal(required_scope, user, row.scopes, row.client_id)


def _principal(required_scope, user, scopes, client_id, user_id=None, load_user=None, locale=None) -> Principal:
    if required_scope and required_scope not in scopes:
        raise McpInsufficientScope(required_scope)
    principal = g.principal = Principal(user=user, scopes=scopes, client_id=client_id, user_id=user_id,
                                        load_user=load_user, locale=locale)
    return principal  # g: the access log names the user (trips/core/observability.py)


def confirm(epoch: str | None) -> None:
    """Believe the remembered token of this request if `epoch` (read from Redis in this request; None when it
    could not be read) is the one it was remembered under; else look it up again. Raises McpUnauthorized when it
    is no longer live. Does nothing when the token was looked up in this request already. (A token still live is
    served with the account as remembered for this one request: another process's change to the account's
    language shows from the next one.)"""
    pending = g.pop("btp_unconfirmed", None)
    if pending is None:
        return
    token, token_hash, remembered = pending
    if epoch is not None and epoch == remembered:
        return
    live_tokens.forget(token_hash)
    found = live_token(token, current_app.config["MCP_RESOURCE"])
    if found is None:
        g.pop("principal", None)
        raise McpUnauthorized(True, refusal_reason(token, current_app.config["MCP_RESOURCE"]))
    live_tokens.remember(token_hash, found[0], found[1], epoch,
                         current_app.config.get("BTP_TOKEN_CACHE_S", live_tokens.DEFAULT_MAX_AGE_S))


def confirm_now() -> None:
    """`confirm` with an epoch read on its own: for an answer that reached no budget (a safety net)."""
    if "btp_unconfirmed" in g:
        confirm(live_tokens.read_epoch(get_redis()))


def epoch_to_read() -> tuple:
    """What the budgets' round trip reads for the token (trips/core/ratelimit.py `reads`): its epoch while this
    request's token is not yet believed, else nothing."""
    return (live_tokens.EPOCH_KEY,) if "btp_unconfirmed" in g else ()


def touch_grant(principal: Principal) -> None:
    """Stamp the grant's last use after a successful call, at most once per window; never fails the call."""
    if not principal.client_id:
        return
    user_id, client_id = principal.user_id, principal.client_id
    if _ASKED.get((user_id, client_id), 0.0) > time.monotonic():
        return  # this process saw the window taken lately: no Redis command, the request's counters may wait
    key = f"btp:grant-used:{user_id}:{client_id}"

    def stamp(first_in_window) -> None:
        if len(_ASKED) >= 10_000:
            _ASKED.clear()
        # Taken by us: not before the window ends. Taken by another process: its window started up to
        # LAST_USED_EVERY ago, so ask again in half of one (the stamp is at most half a window late).
        _ASKED[(user_id, client_id)] = time.monotonic() + (LAST_USED_EVERY if first_in_window else LAST_USED_EVERY / 2)
        if not first_in_window:
            return
        try:
            with atomic():
                db.session.query(Grant).filter(Grant.user_id == user_id, Grant.client_id == client_id,
                                               Grant.revoked_at.is_(None)).update({"last_used_at": utcnow()})
        except Exception:  # a bookkeeping write must not fail the agent's call
            current_app.logger.warning("could not stamp the last use of a grant", exc_info=True)

    # In a request: the window's key is set in the round trip that records the request's metrics, after the view.
    if metrics.join_last_round_trip(lambda pipe: pipe.set(key, 1, nx=True, ex=LAST_USED_EVERY), stamp):
        return
    try:
        stamp(get_redis().set(key, 1, nx=True, ex=LAST_USED_EVERY))
    except Exception:
        current_app.logger.warning("could not stamp the last use of a grant", exc_info=True)


def _unauthorized(exc: McpUnauthorized):
    # The reason is the token's own (expired, revoked, another audience), told only to whoever sent that token;
    # any other value is "unknown or malformed": a caller learns nothing about which tokens exist.
    # OAuth's error_description is English (RFC 6750 §3: ASCII only; no account is known yet).
    if not exc.token_sent:
        body = {"error": "unauthorized", "error_description": str(Msg(NO_TOKEN))}
    else:
        body = {"error": "invalid_token", "error_description": str(exc.reason or Msg(UNKNOWN))}
    response = current_app.response_class(json.dumps(body), status=401, mimetype="application/json")
    response.headers["WWW-Authenticate"] = challenge("invalid_token", description=body["error_description"]) \
        if exc.token_sent else challenge()
    return response


def _insufficient_scope(exc: McpInsufficientScope):
    response = current_app.response_class(
        '{"error":"insufficient_scope","error_description":"This token lacks the scope ' + exc.scope + '."}',
        status=403, mimetype="application/json")
    response.headers["WWW-Authenticate"] = challenge("insufficient_scope", exc.scope)
    return response


def register_errors(app) -> None:
    app.register_error_handler(McpUnauthorized, _unauthorized)
    app.register_error_handler(McpInsufficientScope, _insufficient_scope)
