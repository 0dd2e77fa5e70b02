"""Accounts and bearer tokens. The OAuth server (oauth/services/server.py) reuses these tables."""
from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from oauth.kernel.redirects import redirect_matches
from oauth.kernel.scopes import SCOPES
from trips.core.db import db, new_id, utcnow


class User(db.Model):
    __tablename__ = "user_account"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    # Stored lower-cased: the unique index then makes e-mail addresses case-insensitive.
    email: Mapped[str] = mapped_column(sa.String(254), unique=True, nullable=False)
    # The language chosen on /account (trips/core/i18n.py LOCALES); null = not chosen: Accept-Language, else English.
    locale: Mapped[str | None] = mapped_column(sa.String(5), nullable=True)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)


class AccessToken(db.Model):
    """A bearer token. Only its SHA-256 is stored; `prefix` is the first characters, for humans and logs."""

    __tablename__ = "access_token"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True, nullable=False)
    prefix: Mapped[str] = mapped_column(sa.String(16), nullable=False)
    user_id: Mapped[str] = mapped_column(
        sa.ForeignKey("user_account.id", ondelete="CASCADE"), index=True, nullable=False
    )
    client_id: Mapped[str | None] = mapped_column(sa.String(2048), nullable=True)
    # The grant a token belongs to (one authorization and its refreshes): revoked together on reuse.
    family_id: Mapped[str | None] = mapped_column(sa.String(36), index=True)
    audience: Mapped[str] = mapped_column(sa.String(2048), nullable=False)
    scope: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    issued_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False)
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime, nullable=True)

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.scope.split())

    def check_client(self, client) -> bool:
        return self.client_id == client.get_client_id()


class OAuthClient(db.Model):
    """An OAuth client: a Client ID Metadata Document URL (`kind` "metadata") or a registered one (RFC 7591)."""

    __tablename__ = "oauth_client"

    client_id: Mapped[str] = mapped_column(sa.String(2048), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16), nullable=False)  # "metadata" | "registered"
    client_name: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    redirect_uris: Mapped[list] = mapped_column(sa.JSON, nullable=False)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    # A metadata document is fetched again once this passes (its max-age, clamped to 5 min … 24 h).
    metadata_expires_at: Mapped[datetime | None] = mapped_column(sa.DateTime)

    # authlib's ClientMixin: public clients (no secret), authorization code + refresh token only.
    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if len(self.redirect_uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        return " ".join(s for s in SCOPES if s in (scope or "").split())

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_matches(self.redirect_uris, redirect_uri)

    def check_client_secret(self, client_secret: str) -> bool:
        return False

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


class AuthorizationCode(db.Model):
    """A single-use authorization code (stored hashed), bound to its request (RFC 6749 §4.1, RFC 7636)."""

    __tablename__ = "oauth_authorization_code"

    code_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    client_id: Mapped[str] = mapped_column(sa.ForeignKey("oauth_client.client_id", ondelete="CASCADE"),
                                           nullable=False)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False)
    redirect_uri: Mapped[str] = mapped_column(sa.String(2048), nullable=False)
    scope: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    code_challenge: Mapped[str] = mapped_column(sa.String(128), nullable=False)
    code_challenge_method: Mapped[str] = mapped_column(sa.String(8), nullable=False)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False)
    # Set once exchanged: a second exchange is refused and revokes what the first one issued (RFC 6749 §4.1.2).
    used_at: Mapped[datetime | None] = mapped_column(sa.DateTime)
    family_id: Mapped[str | None] = mapped_column(sa.String(36))

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


class RefreshToken(db.Model):
    """A refresh token (stored hashed). Rotated on every use; a used one presented again revokes its family."""

    __tablename__ = "oauth_refresh_token"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    token_hash: Mapped[str] = mapped_column(sa.String(64), unique=True, nullable=False)
    family_id: Mapped[str] = mapped_column(sa.String(36), index=True, nullable=False)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False)
    client_id: Mapped[str] = mapped_column(sa.String(2048), nullable=False)
    scope: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    issued_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(sa.DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime)

    def check_client(self, client) -> bool:
        return self.client_id == client.get_client_id()

    def get_scope(self) -> str:
        return self.scope


class Grant(db.Model):
    """What a user let a client do: dates and scopes. The tokens carry the truth (docs/RULES.md "OAuth grants")."""

    __tablename__ = "oauth_grant"
    __table_args__ = (
        sa.Index("uq_oauth_grant_live", "user_id", "client_id", unique=True,
                 postgresql_where=sa.text("revoked_at IS NULL"), sqlite_where=sa.text("revoked_at IS NULL")),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False)
    client_id: Mapped[str] = mapped_column(sa.String(2048), nullable=False)
    scope: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    authorized_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(sa.DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime)


class LoginLink(db.Model):
    """A one-time sign-in link sent by e-mail (stored hashed, 15 minutes)."""

    __tablename__ = "login_link"

    token_hash: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    email: Mapped[str] = mapped_column(sa.String(254), nullable=False)
    next_url: Mapped[str | None] = mapped_column(sa.String(4096))
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False)
    used_at: Mapped[datetime | None] = mapped_column(sa.DateTime)
