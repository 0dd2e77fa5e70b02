"""Where an authorization-endpoint error goes, and what it says.

Anyone can register a client, so sending every error back to the client would make the endpoint an open redirector
(RFC 9700 §4.11.2). An error goes back only when the redirect URI is exactly one the known client registered and
the signed-in person's approval of that client is in force; else BTP's own page shows it (400). The wording is
ours, fixed per error: authlib's quotes the request.
"""
from __future__ import annotations

from authlib.common.urls import add_params_to_uri
from authlib.oauth2.rfc6749.errors import OAuth2Error
from flask import current_app, redirect, render_template

from oauth.services import accounts
from oauth.kernel.models import OAuthClient
from oauth.kernel.redirects import check_redirect_uri
from oauth.services.server import (PKCE_REQUIRED, REDIRECT_REQUIRED, REDIRECT_UNREGISTERED, SCOPE_REQUIRED,
                          InvalidTargetError, authorization_server)
from trips.core.db import db
from trips.core.i18n import N_

CLIENT_UNRESOLVED = "The client identifier could not be resolved."
GENERIC = "The authorization request cannot be processed."
WORDING = {
    "invalid_request": "The authorization request is malformed or incomplete.",
    "invalid_client": CLIENT_UNRESOLVED,
    "unauthorized_client": "This client may not make this kind of authorization request.",
    "unsupported_response_type": "Only response_type=code is supported.",
    "invalid_scope": "The scopes asked for are not ones this server offers (trips:read, trips:write).",
    "invalid_target": InvalidTargetError.description,
}
OUR_OWN = frozenset({PKCE_REQUIRED, SCOPE_REQUIRED, REDIRECT_UNREGISTERED, REDIRECT_REQUIRED})
# BTP's page says each fixed sentence in the reader's language: its page key (pages.po, whose English entry is the
# sentence itself: tests/pages/test_i18n_pages.py); the client is sent the English sentence.
PAGE_WORDS = {
    WORDING["invalid_request"]: N_("oauth.invalid_request"), CLIENT_UNRESOLVED: N_("oauth.invalid_client"),
    WORDING["unauthorized_client"]: N_("oauth.unauthorized_client"),
    WORDING["unsupported_response_type"]: N_("oauth.unsupported_response_type"),
    WORDING["invalid_scope"]: N_("oauth.invalid_scope"), WORDING["invalid_target"]: N_("oauth.invalid_target"),
    GENERIC: N_("oauth.generic"), PKCE_REQUIRED: N_("oauth.pkce_required"),
    SCOPE_REQUIRED: N_("oauth.scope_required"), REDIRECT_UNREGISTERED: N_("oauth.redirect_unregistered"),
    REDIRECT_REQUIRED: N_("oauth.redirect_required"),
}


def wording(error: OAuth2Error) -> str:
    """A fixed sentence for this error: our own description when it is one of ours, else the table's."""
    if error.description in OUR_OWN:
        return error.description
    return WORDING.get(error.error, GENERIC)


def trusted_redirect(user, payload) -> str | None:
    """The redirect URI an error may go back to (see the module docstring), or None. Raises nothing."""
    client_id = payload.client_id
    client = db.session.get(OAuthClient, client_id) if client_id and len(client_id) <= 2048 else None
    if client is None:
        return None
    uri = payload.redirect_uri or client.get_default_redirect_uri()
    if not uri or uri not in client.redirect_uris or check_redirect_uri(uri) is not None:
        return None
    return uri if accounts.has_approved(user, client.client_id) else None


def error_page(error: str, description: str):
    reason = PAGE_WORDS.get(description, PAGE_WORDS[GENERIC])
    return render_template("oauth_error.html", error=error, reason=reason), 400


def authorize_error(error: OAuth2Error, user):
    """The answer to an invalid authorization request from a signed-in `user`: back to a trusted client
    with `error`, a fixed `error_description`, the client's `state` and `iss` (RFC 9207), else BTP's page."""
    payload = authorization_server().create_oauth2_request(None).payload
    description = wording(error)
    uri = trusted_redirect(user, payload)
    if uri is None:
        return error_page(error.error, description)
    params = {"error": error.error, "error_description": description}
    if payload.state:
        params["state"] = payload.state  # the client's own value, returned to the client only (RFC 6749 §4.1.2.1)
    params["iss"] = current_app.config["BTP_BASE_URL"]
    return redirect(add_params_to_uri(uri, params), 302)
