"""Accounts and bearer tokens. The OAuth server (step 3) reuses these tables."""
from __future__ import annotations

from datetime import datetime, timezone

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from trips.db import db, new_id


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class User(db.Model):
    __tablename__ = "user_account"

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    # Stored lower-cased: the unique index then makes e-mail addresses case-insensitive.
    email: Mapped[str] = mapped_column(sa.String(254), unique=True, nullable=False)
    locale: Mapped[str] = mapped_column(sa.String(5), nullable=False, default="en")
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
    audience: Mapped[str] = mapped_column(sa.String(2048), nullable=False)
    scope: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    issued_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False)
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime, nullable=True)

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(self.scope.split())
