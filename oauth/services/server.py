"""The OAuth 2.1 authorization server, built on authlib: authorization code with PKCE S256 and refresh
tokens (rotated, reuse revokes the family), nothing else. Tokens are opaque and stored as SHA-256.
"""
from __future__ import annotations

import secrets
from datetime import timedelta

import sqlalchemy as sa
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import grants
from authlib.oauth2.rfc6749.errors import InvalidRequestError, InvalidScopeError, OAuth2Error
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter
from flask import current_app

from oauth.kernel.models import AccessToken, AuthorizationCode, Grant, OAuthClient, RefreshToken, User

from trips.core.db import utcnow
from oauth.kernel.scopes import SCOPES
from oauth.kernel.tokens import ACCESS_PREFIX, hash_token
from trips.core.db import db, new_id

ACCESS_TTL = 15 * 60
REFRESH_TTL = 30 * 24 * 3600
CODE_TTL = 120
REFRESH_PREFIX = "btp_rt_"
CODE_PREFIX = "btp_ac_"
# Our own descriptions: fixed sentences, never a request value (oauth.services.authorize_errors shows only these).
PKCE_REQUIRED = "PKCE is required: send a code_challenge with code_challenge_method=S256."
SCOPE_REQUIRED = "An authorization request must name the scopes it asks for."
REDIRECT_UNREGISTERED = "The redirect_uri is not one this client registered."
REDIRECT_REQUIRED = "A redirect_uri is required."


class InvalidTargetError(OAuth2Error):
    """RFC 8707 §2: the requested resource is not one this server issues tokens for."""

    error = "invalid_target"
    description = "This authorization server issues tokens for one resource, and it is not the one requested."


def check_resource(value: str | None) -> None:
    """`resource` may be absent or name the MCP endpoint (a trailing slash tolerated). Raises InvalidTargetError."""
    if value is None:
        return
    if value.rstrip("/") != current_app.config["MCP_RESOURCE"]:
        raise InvalidTargetError()


class S256Only(CodeChallenge):
    """PKCE is required, with S256 only (OAuth 2.1 §7.5.2): `plain` and missing challenges are refused."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"

    def validate_code_challenge(self, grant, redirect_uri):
        data = grant.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError(PKCE_REQUIRED)
        super().validate_code_challenge(grant, redirect_uri)


class AuthorizationRules:
    """BTP's rules on the authorization request, checked once the redirect URI is known (so errors go back
    to the client): scopes must be named (MCP clients learn them from the metadata), the resource is ours."""

    def __call__(self, grant):
        grant.register_hook("after_validate_authorization_request_payload", self.check)

    @staticmethod
    def check(grant, redirect_uri):
        if not grant.request.payload.scope:
            raise InvalidScopeError(SCOPE_REQUIRED)
        check_resource(grant.request.payload.data.get("resource"))


class TokenResource:
    """The token request's `resource`, when present, must be ours too (RFC 8707 §2.2)."""

    def __call__(self, grant):
        grant.register_hook("after_validate_token_request", lambda grant, *_: check_resource(
            grant.request.form.get("resource")))


class CodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    @staticmethod
    def validate_authorization_redirect_uri(request, client):
        # authlib's own message quotes the caller's URI back; ours does not.
        uri = request.payload.redirect_uri
        if uri and not client.check_redirect_uri(uri):
            raise InvalidRequestError(REDIRECT_UNREGISTERED)
        uri = uri or client.get_default_redirect_uri()
        if not uri:
            raise InvalidRequestError(REDIRECT_REQUIRED)
        return uri

    def generate_authorization_code(self) -> str:
        return CODE_PREFIX + secrets.token_urlsafe(32)

    def save_authorization_code(self, code, request):
        payload = request.payload
        db.session.add(AuthorizationCode(
            code_hash=hash_token(code), client_id=request.client.client_id, user_id=request.user.id,
            redirect_uri=payload.redirect_uri or request.client.get_default_redirect_uri(), scope=request.scope,
            code_challenge=payload.data["code_challenge"], code_challenge_method="S256",
            expires_at=utcnow() + timedelta(seconds=CODE_TTL)))
        db.session.flush()

    def query_authorization_code(self, code, client):
        row = db.session.get(AuthorizationCode, hash_token(code or ""))
        if row is None or row.client_id != client.client_id:
            return None
        if row.used_at is not None:  # a replayed code: what it bought is revoked (RFC 6749 §4.1.2)
            revoke_family(row.family_id)
            return None
        return None if row.expires_at <= utcnow() else row

    def delete_authorization_code(self, authorization_code):
        authorization_code.used_at = utcnow()

    def authenticate_user(self, authorization_code):
        return db.session.get(User, authorization_code.user_id)


class RotatingRefreshGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation on every use (OAuth 2.1 §4.3.1 for public clients)

    def authenticate_refresh_token(self, refresh_token):
        row = db.session.scalar(sa.select(RefreshToken).where(RefreshToken.token_hash == hash_token(refresh_token)))
        if row is None:
            return None
        if row.used_at is not None or row.revoked_at is not None:
            revoke_family(row.family_id)  # reuse: someone holds a copy; the whole family goes
            return None
        return None if row.expires_at <= utcnow() else row

    def authenticate_user(self, refresh_token):
        return db.session.get(User, refresh_token.user_id)

    def revoke_old_credential(self, refresh_token):
        refresh_token.used_at = refresh_token.revoked_at = utcnow()


class Revocation(RevocationEndpoint):
    """RFC 7009 for public clients: the client names itself; a refresh token takes its family with it."""

    CLIENT_AUTH_METHODS = ["none"]

    def query_token(self, token_string, token_type_hint):
        digest = hash_token(token_string or "")
        access = db.session.scalar(sa.select(AccessToken).where(AccessToken.token_hash == digest))
        return access or db.session.scalar(sa.select(RefreshToken).where(RefreshToken.token_hash == digest))

    def revoke_token(self, token, request):
        if isinstance(token, RefreshToken):
            revoke_family(token.family_id)
        else:
            token.revoked_at = token.revoked_at or utcnow()


class Issuer(IssuerParameter):
    def get_issuer(self) -> str:
        return current_app.config["BTP_BASE_URL"]


def revoke_family(family_id: str | None) -> None:
    """Revoke every access and refresh token of one grant family."""
    if not family_id:
        return
    now = utcnow()
    for model in (AccessToken, RefreshToken):
        db.session.execute(sa.update(model).where(model.family_id == family_id, model.revoked_at.is_(None))
                           .values(revoked_at=now).execution_options(synchronize_session=False))


def revoke_client_for_user(user_id: str, client_id: str) -> None:
    """Stop everything a client holds for a user at once: access and refresh tokens, unused codes."""
    now = utcnow()
    for model in (AccessToken, RefreshToken):
        db.session.execute(sa.update(model).where(model.user_id == user_id, model.client_id == client_id,
                                                  model.revoked_at.is_(None))
                           .values(revoked_at=now).execution_options(synchronize_session=False))
    db.session.execute(sa.delete(AuthorizationCode).where(AuthorizationCode.user_id == user_id,
                                                          AuthorizationCode.client_id == client_id))


def _query_client(client_id):
    return db.session.get(OAuthClient, client_id) if client_id and len(client_id) <= 2048 else None


def _save_token(token: dict, request) -> None:
    """Store the new tokens (hashed), in the family of the code or refresh token they come from, and
    record the grant (docs/RULES.md "OAuth grants": the row carries dates and scopes; the tokens carry the truth)."""
    user, client = request.user, request.client
    previous = getattr(request, "refresh_token", None)
    family = previous.family_id if previous is not None else new_id()
    code = getattr(request, "authorization_code", None)
    if code is not None:
        code.family_id = family
    now = utcnow()
    access = token["access_token"]
    db.session.add(AccessToken(
        token_hash=hash_token(access), prefix=access[:len(ACCESS_PREFIX) + 4], user_id=user.id,
        client_id=client.client_id, family_id=family, audience=current_app.config["MCP_RESOURCE"],
        scope=token["scope"], expires_at=now + timedelta(seconds=token["expires_in"])))
    if token.get("refresh_token"):
        db.session.add(RefreshToken(
            token_hash=hash_token(token["refresh_token"]), family_id=family, user_id=user.id,
            client_id=client.client_id, scope=token["scope"], expires_at=now + timedelta(seconds=REFRESH_TTL)))
    record_grant(user.id, client.client_id, token["scope"])


def record_grant(user_id: str, client_id: str, scope: str) -> None:
    """Upsert the live grant: the scopes follow the latest issuance, the first authorization date stays."""
    grant = db.session.scalar(sa.select(Grant).where(Grant.user_id == user_id, Grant.client_id == client_id,
                                                     Grant.revoked_at.is_(None)))
    if grant is None:
        db.session.add(Grant(user_id=user_id, client_id=client_id, scope=scope))
    else:
        grant.scope = scope
    db.session.flush()


def _token_generator() -> BearerTokenGenerator:
    return BearerTokenGenerator(
        access_token_generator=lambda **_: ACCESS_PREFIX + secrets.token_urlsafe(32),
        refresh_token_generator=lambda **_: REFRESH_PREFIX + secrets.token_urlsafe(32),
        expires_generator=lambda client, grant_type: ACCESS_TTL,
    )


def init_server(app) -> None:
    """One authorization server per app (grants and hooks are registered on the instance)."""
    app.config["OAUTH2_SCOPES_SUPPORTED"] = list(SCOPES)
    server = AuthorizationServer(app, query_client=_query_client, save_token=_save_token)
    server.register_token_generator("default", _token_generator())
    server.register_grant(CodeGrant, [S256Only(required=True), AuthorizationRules(), TokenResource()])
    server.register_grant(RotatingRefreshGrant, [TokenResource()])
    server.register_endpoint(Revocation)
    server.register_extension(Issuer())
    app.extensions["btp_oauth"] = server


def authorization_server() -> AuthorizationServer:
    return current_app.extensions["btp_oauth"]
