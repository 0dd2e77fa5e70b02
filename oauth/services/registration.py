"""Dynamic client registration (RFC 7591) for public clients: a name, redirect URIs, `none` auth, and the two
grants BTP serves. Metadata BTP does not understand is ignored, as §2 asks; what it does understand is checked."""
from __future__ import annotations

import logging
import secrets
import time

from oauth.kernel.models import OAuthClient
from oauth.kernel.redirects import check_redirect_uri
from trips.core.db import atomic, db
from trips.core.redis_client import get_redis

log = logging.getLogger(__name__)
GRANTS = {"authorization_code", "refresh_token"}
MAX_REDIRECT_URIS = 10


def _error(code: str, description: str) -> tuple[int, dict]:
    return 400, {"error": code, "error_description": description}


def register_client(body) -> tuple[int, dict]:
    """Validate and store a registration. Returns (HTTP status, JSON body) per RFC 7591 §3.2.

    Raises redis ConnectionError or TimeoutError (answered 503 `temporarily_unavailable`, trips/core/problems.py)
    when Redis cannot be reached: the per-address limit fails open, so nothing is written while it is away."""
    if not isinstance(body, dict):
        return _error("invalid_client_metadata", "The registration must be a JSON object.")
    uris = body.get("redirect_uris")
    if not isinstance(uris, list) or not 1 <= len(uris) <= MAX_REDIRECT_URIS \
            or not all(isinstance(u, str) for u in uris):
        return _error("invalid_redirect_uri", f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs.")
    for uri in uris:
        reason = check_redirect_uri(uri)
        if reason:
            log.info("registration refused a redirect URI: %s", reason)
            return _error("invalid_redirect_uri", "A redirect URI must be https, loopback http on 127.0.0.1 or "
                                                  "[::1], or a native app's private-use scheme, without fragment.")
    name = body.get("client_name", "Unnamed application")
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > 128:
        return _error("invalid_client_metadata", "client_name must be a non-empty string of at most 128 "
                                                 "characters.")
    if body.get("token_endpoint_auth_method", "none") != "none":
        return _error("invalid_client_metadata", "Only public clients are registered: "
                                                 "token_endpoint_auth_method must be none.")
    grant_types = body.get("grant_types", ["authorization_code", "refresh_token"])
    # items checked as strings first: set() needs them hashable
    if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types) \
            or not set(grant_types) <= GRANTS or "authorization_code" not in grant_types:
        return _error("invalid_client_metadata", "grant_types may only be authorization_code and refresh_token.")
    if body.get("response_types", ["code"]) != ["code"]:
        return _error("invalid_client_metadata", "response_types may only be code.")
    name = "".join(c for c in name.strip() if c.isprintable())
    client = OAuthClient(client_id="btp_client_" + secrets.token_urlsafe(24), kind="registered",
                         client_name=name, redirect_uris=list(dict.fromkeys(uris)))
    get_redis().ping()  # the limit let this through unenforced if Redis is away: no client written then
    with atomic():
        db.session.add(client)
    return 201, {
        "client_id": client.client_id, "client_id_issued_at": int(time.time()),
        "client_name": client.client_name, "redirect_uris": client.redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
