"""REST twins of the account pages: who am I (and my language), the applications I authorized, my personal
tokens."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request

from oauth.services import accounts
from oauth.kernel.principal import require_api_scope
from oauth.kernel.tokens import audience_name, personal_tokens, revoke_personal_token
from oauth.web.export import export_answer
from trips.core.db import atomic
from trips.core.problems import json_body
from trips.core.validation import load

bp = Blueprint("users_api", __name__, url_prefix="/api/users/me")


def _iso(value):
    return value.isoformat() + "Z" if value is not None else None


def _agent(grant, client) -> dict:
    return {"id": grant.id, "name": client.client_name if client else grant.client_id,
            "host": accounts.client_host(grant.client_id, client), "scopes": grant.scope.split(),
            "authorizedAt": _iso(grant.authorized_at), "lastUsedAt": _iso(grant.last_used_at)}


def _me(user) -> dict:
    return {"userId": user.id, "email": user.email, "locale": user.locale}


@bp.get("")
@require_api_scope("trips:read")
def me():
    return jsonify(_me(g.principal.user))


@bp.patch("")
@require_api_scope("trips:write")
def update_me():
    # The /account form's twin: the language alerts are rendered in (null: Accept-Language, else English).
    changes = load(accounts.AccountUpdate(), json_body())
    accounts.set_locale(g.principal.user, changes["locale"])
    return jsonify(_me(g.principal.user))


@bp.get("/export")
@require_api_scope("trips:read")
def export():
    # Everything BTP holds about the account (docs/RULES.md "Account export"); the /account page links its twin.
    return export_answer(g.principal.user, request.args.get("format"))


@bp.get("/authorized-applications")
@require_api_scope("trips:read")
def applications():
    return jsonify({"member": [_agent(grant, client) for grant, client in accounts.connected_agents(g.principal.user)]})


@bp.get("/authorized-applications/<grant_id>")
@require_api_scope("trips:read")
def application(grant_id):
    return jsonify(_agent(*accounts.agent_of(g.principal.user, grant_id)))


@bp.delete("/authorized-applications/<grant_id>")
@require_api_scope("trips:write")
def revoke_application(grant_id):
    accounts.revoke_agent(g.principal.user, grant_id)
    return "", 204


def _token(row) -> dict:
    # Never the secret: its first characters (as stored for humans) name it.
    return {"id": row.id, "prefix": row.prefix, "audience": audience_name(row.audience), "scopes": row.scope.split(),
            "createdAt": _iso(row.issued_at), "expiresAt": _iso(row.expires_at)}


@bp.get("/tokens")
@require_api_scope("trips:read")
def tokens():
    return jsonify({"member": [_token(row) for row in personal_tokens(g.principal.user)]})


@bp.delete("/tokens/<token_id>")
@require_api_scope("trips:write")
def revoke_token(token_id):
    with atomic():
        revoke_personal_token(token_id, g.principal.user)
    return "", 204
