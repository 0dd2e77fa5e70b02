"""OAuth endpoints: discovery (RFC 8414, RFC 9728), authorize with consent, token, revocation, registration."""
from __future__ import annotations

import logging
from datetime import timedelta
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749.errors import OAuth2Error
from flask import Blueprint, current_app, jsonify, redirect, render_template, request, url_for

from trips.core.redis_client import get_redis
from oauth.services.authorize_errors import CLIENT_UNRESOLVED, authorize_error, error_page
from oauth.services.cimd import CimdError, fetch_client_metadata, is_metadata_client_id
from oauth.services.consent import consent_view, issue_decision_token, spend_decision_token
from oauth.kernel.models import OAuthClient
from trips.core.db import utcnow
from oauth.services.registration import register_client
from oauth.kernel.scopes import SCOPES
from oauth.services.server import authorization_server
from oauth.services.session import csrf_ok, csrf_token, current_user
from oauth.kernel.tokens import hash_token
from trips.core.db import atomic, db
from trips.core.problems import SECURITY_HEADERS
from trips.core.ratelimit import limit

log = logging.getLogger(__name__)
bp = Blueprint("oauth", __name__)


def _issuer() -> str:
    return current_app.config["BTP_BASE_URL"]  # from configuration, never from the Host header


def _public_json(document: dict):
    response = jsonify(document)
    response.headers["Cache-Control"] = "public, max-age=3600"
    response.headers["Access-Control-Allow-Origin"] = "*"
    return response


@bp.get("/.well-known/oauth-authorization-server")
def authorization_server_metadata():
    issuer = _issuer()
    return _public_json({
        "issuer": issuer, "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token", "registration_endpoint": f"{issuer}/oauth/register",
        "revocation_endpoint": f"{issuer}/oauth/revoke", "scopes_supported": list(SCOPES),
        "response_types_supported": ["code"], "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    })


@bp.get("/.well-known/oauth-protected-resource")
@bp.get("/.well-known/oauth-protected-resource/mcp")
def protected_resource_metadata():
    return _public_json({
        "resource": current_app.config["MCP_RESOURCE"], "authorization_servers": [_issuer()],
        "scopes_supported": list(SCOPES), "bearer_methods_supported": ["header"],
    })


def _ensure_client(client_id: str | None, user) -> None:
    """Resolve a metadata-document client (on authorize only, for a signed-in user). Raises CimdError."""
    if not client_id or len(client_id) > 2048:
        return
    row = db.session.get(OAuthClient, client_id)
    if row is not None and (row.kind == "registered" or row.metadata_expires_at > utcnow()):
        return
    allow_loopback = current_app.config.get("CIMD_ALLOW_INSECURE_LOOPBACK", False)  # tests only
    if not is_metadata_client_id(client_id, allow_insecure_loopback=allow_loopback):
        return  # unknown and not a document: authlib answers invalid_client
    limit(get_redis(), "cimd_user", user.id)
    limit(get_redis(), "cimd_host", urlsplit(client_id).hostname or "?")
    meta = fetch_client_metadata(client_id, own_host=urlsplit(_issuer()).hostname,
                                 allow_insecure_loopback=allow_loopback)
    with atomic():
        row = db.session.get(OAuthClient, client_id) or OAuthClient(client_id=client_id, kind="metadata")
        row.client_name, row.redirect_uris = meta.client_name, list(meta.redirect_uris)
        row.metadata_expires_at = utcnow() + timedelta(seconds=meta.expires_in)
        db.session.add(row)


@bp.after_request
def _authorize_no_store(response):
    # The consent page, its errors and its redirects are one person's: no cache may keep them
    # (RFC 9111 §5.2.2.5); the discovery documents keep their public caching.
    if request.endpoint == "oauth.authorize":
        response.headers["Cache-Control"] = "no-store"
    return response


@bp.route("/oauth/authorize", methods=["GET", "POST"])
def authorize():
    user = current_user()
    if user is None:
        return redirect(url_for("pages.login", next=request.full_path))
    limit(get_redis(), "oauth_authorize", user.id)
    try:
        _ensure_client(request.args.get("client_id"), user)
        grant = authorization_server().get_consent_grant(end_user=user)
    except CimdError as exc:
        log.info("client metadata document refused: %s", exc)
        return error_page("invalid_client", CLIENT_UNRESOLVED)
    except OAuth2Error as error:
        return authorize_error(error, user)
    if request.method == "POST":
        decided = _consent_decision(user, grant)
        if decided is not None:
            with atomic():
                return authorization_server().create_authorization_response(
                    grant=grant, grant_user=user if decided == "approve" else None)
    page = render_template("consent.html", view=consent_view(grant), csrf=csrf_token(),
                           decision=issue_decision_token(user, grant), action=request.full_path)
    return page, 200, {"Content-Security-Policy": _consent_policy(grant.redirect_uri)}


def _consent_policy(redirect_uri: str) -> str:
    """The pages' policy, with the client's return address allowed as a form target: browsers apply
    form-action to the redirect that follows the decision (CSP 3 §6.4.2)."""
    parts = urlsplit(redirect_uri)
    target = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    return SECURITY_HEADERS["Content-Security-Policy"].replace("form-action 'self'", f"form-action 'self' {target}")


def _consent_decision(user, grant) -> str | None:
    """The consent POST's chain: CSRF → a decision token for exactly this request, unspent → the choice.
    None sends the human back to the consent page (a changed or replayed decision asks again)."""
    form = request.form
    if not csrf_ok(form.get("csrf_token")) or form.get("decision") not in ("approve", "deny"):
        return None
    if not spend_decision_token(form.get("decision_token"), user, grant):
        return None
    return form["decision"]


def _client_ip() -> str:
    return request.remote_addr or "?"


@bp.post("/oauth/token")
def token():
    limit(get_redis(), "oauth_token", _client_ip())
    lock = None
    if request.form.get("grant_type") == "refresh_token":
        lock = f"refresh:{hash_token(request.form.get('refresh_token', ''))}"  # one rotation at a time
    elif request.form.get("grant_type") == "authorization_code":
        lock = f"code:{hash_token(request.form.get('code', ''))}"
    with atomic(lock=lock, lock_timeout=5):
        return authorization_server().create_token_response()


@bp.post("/oauth/revoke")
def revoke():
    limit(get_redis(), "oauth_token", _client_ip())
    with atomic():
        return authorization_server().create_endpoint_response("revocation")


@bp.post("/oauth/register")
def register():
    limit(get_redis(), "oauth_register", _client_ip())
    status, body = register_client(request.get_json(silent=True))
    response = jsonify(body)
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response
