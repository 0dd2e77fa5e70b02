"""Humans' account use cases: sign-in links, connected agents, account deletion."""
from __future__ import annotations

import logging
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import sqlalchemy as sa
from flask import current_app
from marshmallow import RAISE, Schema, fields, validate

from trips.core.redis_client import get_redis
from oauth.mail import MailConfig, send_mail
from oauth.models import AccessToken, Grant, LoginLink, OAuthClient, RefreshToken, User
from trips.core.db import utcnow
from oauth.server import revoke_client_for_user
from oauth.tokens import create_user, find_user, hash_token, normalize_email
from trips.core.db import atomic, db
from trips.errors import Invalid, NotFound
from trips.core import i18n
from trips.core.i18n import LOCALES
from trips.core.ratelimit import limit

log = logging.getLogger(__name__)
LINK_TTL = timedelta(minutes=15)
LINK_INVALID = "This sign-in link is invalid, was already used, or has expired. Ask for a new one."
AGENT_NOT_FOUND = "No such connected application."


def mail_config() -> MailConfig:
    conf = current_app.config
    host = urlsplit(conf["BTP_BASE_URL"]).hostname
    return MailConfig(url=conf.get("BTP_MAIL_URL"), outbox_dir=Path(current_app.instance_path) / "outbox",
                      sender=f"BTP <no-reply@{host if host and '.' in host else 'btp.invalid'}>")


def request_login_link(email: str, next_url: str | None, ip: str) -> None:
    """Send a one-time sign-in link. The caller answers the same whether the address has an account or not.

    Raises Invalid (not an e-mail address) and RateLimited (per address and per IP).
    """
    address = normalize_email(email)
    if len(address) > 254 or address.count("@") != 1 or not all(address.split("@")) \
            or any(c.isspace() or not c.isprintable() for c in address):
        raise Invalid({"email": "must be an e-mail address"})
    limit(get_redis(), "login_ip", ip)
    limit(get_redis(), "login_email", address)
    token = secrets.token_urlsafe(32)
    with atomic():
        db.session.add(LoginLink(token_hash=hash_token(token), email=address, next_url=next_url,
                                 expires_at=utcnow() + LINK_TTL))
    link = f"{current_app.config['BTP_BASE_URL']}/login/{token}"
    subject, text = login_mail(link, _mail_locale(address))
    send_mail(mail_config(), address, subject, text)


def _mail_locale(address: str) -> str:
    """The sign-in mail's language: the account's choice when the address has one, else the page's (the
    browser's, trips/core/i18n.py). The page answers the same either way; only the mailbox sees the difference."""
    user = find_user(address)
    return i18n.normalize(user.locale if user is not None else None) or i18n.current_locale()


def login_mail(link: str, locale: str) -> tuple[str, str]:
    """The sign-in mail's subject and text in `locale` (pages.po `mail.*`)."""
    minutes = int(LINK_TTL.total_seconds() // 60)
    body = (i18n.t("mail.greeting", locale), i18n.tn("mail.open_link", minutes, locale), link,
            i18n.t("mail.not_you", locale))
    return i18n.t("mail.subject", locale), "\n\n".join(body) + "\n"


def peek_login_link(token: str) -> LoginLink:
    """The link, unused and unexpired. Raises NotFound."""
    row = db.session.get(LoginLink, hash_token(token or ""))
    if row is None or row.used_at is not None or row.expires_at <= utcnow():
        raise NotFound(LINK_INVALID)
    return row


def consume_login_link(token: str) -> tuple[User, str | None]:
    """Spend the link (once) and return (user, where to go next); an unknown address gets an account.

    Raises NotFound when the link is unknown, used or expired.
    """
    with atomic(lock=f"login:{hash_token(token or '')}"):
        row = peek_login_link(token)
        row.used_at = utcnow()
        user = find_user(row.email) or create_user(row.email)
        next_url = row.next_url
    return user, next_url


def _live_grant():
    """The condition on Grant rows that are in force: not revoked, and backed by a live access or refresh
    token (the tokens carry the truth, docs/RULES.md "OAuth grants")."""
    now = utcnow()
    return sa.and_(Grant.revoked_at.is_(None), sa.or_(
        sa.exists().where(AccessToken.user_id == Grant.user_id, AccessToken.client_id == Grant.client_id,
                          AccessToken.revoked_at.is_(None), AccessToken.expires_at > now),
        sa.exists().where(RefreshToken.user_id == Grant.user_id, RefreshToken.client_id == Grant.client_id,
                          RefreshToken.revoked_at.is_(None), RefreshToken.expires_at > now),
    ))


def connected_agents(user: User) -> list[tuple[Grant, OAuthClient | None]]:
    """Grants in force (see `_live_grant`), newest first, with their client when it is still known."""
    rows = db.session.execute(
        sa.select(Grant, OAuthClient).outerjoin(OAuthClient, OAuthClient.client_id == Grant.client_id)
        .where(Grant.user_id == user.id, _live_grant()).order_by(Grant.authorized_at.desc())
    ).all()
    return [(grant, client) for grant, client in rows]


def has_approved(user: User, client_id: str) -> bool:
    """True when the user approved this client before and the approval is still in force (the account page
    lists it). A disconnected client, or one whose tokens all ended, is a stranger again."""
    return db.session.scalar(sa.select(sa.exists().where(
        Grant.user_id == user.id, Grant.client_id == client_id, _live_grant()))) is True


def agent_of(user: User, grant_id: str) -> tuple[Grant, OAuthClient | None]:
    """One of the user's live grants. Raises NotFound alike for another user's grant and an unknown id."""
    for grant, client in connected_agents(user):
        if grant.id == str(grant_id):
            return grant, client
    raise NotFound(AGENT_NOT_FOUND)


def revoke_agent(user: User, grant_id: str) -> None:
    """Stop a connected application at once: its tokens and codes for this user. Raises NotFound."""
    grant, _ = agent_of(user, grant_id)
    with atomic():
        grant = db.session.get(Grant, grant.id)
        revoke_client_for_user(user.id, grant.client_id)
        grant.revoked_at = utcnow()


class AccountUpdate(Schema):
    """PATCH /api/users/me, the /account form's twin: the reader's language; null follows the request's
    Accept-Language, else English (trips/core/i18n.py). Documented by trips/api/openapi.py."""

    class Meta:
        unknown = RAISE

    locale = fields.String(required=True, allow_none=True, validate=validate.OneOf(LOCALES))


def set_locale(user: User, locale: str | None) -> None:
    """The reader's language (trips/core/i18n.py LOCALES), or None to follow the browser's. Raises Invalid naming
    `locale` when it is not one of them (the value is not echoed)."""
    if locale is not None and locale not in LOCALES:
        raise Invalid({"locale": f"must be one of: {', '.join(LOCALES)}"})
    with atomic():
        user.locale = locale


def delete_account(user: User) -> None:
    """Delete the account: every token, grant, trip and share goes with it (foreign keys cascade)."""
    with atomic():
        db.session.delete(db.session.get(User, user.id))
    log.info("account %s deleted", user.id)


def client_host(client_id: str, client: OAuthClient | None) -> str | None:
    return urlsplit(client_id).hostname if client is not None and client.kind == "metadata" else None
