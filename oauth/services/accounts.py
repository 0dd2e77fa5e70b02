"""Humans' account use cases: sign-in links, connected agents, the e-mail address and its change, account deletion."""
from __future__ import annotations

import hashlib
import logging
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from flask import current_app
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from marshmallow import RAISE, Schema, fields, validate

from trips.core.redis_client import get_redis
from oauth.services.mail import MailConfig, MailError, check_address, send_mail
from oauth.kernel.models import AccessToken, AuthorizationCode, Grant, LoginLink, OAuthClient, RefreshToken, User
from trips.core.db import utcnow
from oauth.services.server import revoke_client_for_user
from oauth.kernel.tokens import create_user, find_user, hash_token, normalize_email
from trips.core.db import atomic, db
from trips.errors import Conflict, Invalid, Msg, NotFound, Unavailable
from trips.core import i18n
from trips.core.i18n import LOCALES, N_
from trips.core.ratelimit import limit

log = logging.getLogger(__name__)
LINK_TTL = timedelta(minutes=15)
LINK_INVALID = N_("refusal.sign_in_link_invalid")
AGENT_NOT_FOUND = N_("refusal.no_such_agent")


def mail_config() -> MailConfig:
    conf = current_app.config
    host = urlsplit(conf["BTP_BASE_URL"]).hostname
    return MailConfig(url=conf.get("BTP_MAIL_URL"), outbox_dir=Path(current_app.instance_path) / "outbox",
                      sender=f"BTP <no-reply@{host if host and '.' in host else 'btp.invalid'}>")


def checked_address(email, field: str = "email") -> str:
    """`email` normalised (trimmed, lower-cased). Raises Invalid naming `field` (never echoing the value) unless it
    is one plain address of at most 254 characters that the mailer sends to (oauth/services/mail.py
    `check_address`): callers check it before they count a mail against any budget."""
    address = normalize_email(email) if isinstance(email, str) else ""
    if len(address) > 254 or address.count("@") != 1 or not all(address.split("@")) \
            or any(c.isspace() or not c.isprintable() for c in address):
        raise Invalid({field: Msg("field.not_an_address")})
    try:
        check_address(address)
    except ValueError:
        raise Invalid({field: Msg("mail.undeliverable")}) from None
    return address


def request_login_link(email: str, next_url: str | None, ip: str) -> None:
    """Send a one-time sign-in link. The caller answers the same whether the address has an account or not.

    Raises Invalid (not an e-mail address) and RateLimited (per address and per IP).
    """
    address = checked_address(email)
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
        raise Invalid({"locale": Msg("field.one_of", choices=", ".join(LOCALES))})
    with atomic():
        user.locale = locale


def delete_account(user: User) -> None:
    """Delete the account: every token, grant, trip and share goes with it (foreign keys cascade)."""
    with atomic():
        db.session.delete(db.session.get(User, user.id))
    log.info("account %s deleted", user.id)


def client_host(client_id: str, client: OAuthClient | None) -> str | None:
    return urlsplit(client_id).hostname if client is not None and client.kind == "metadata" else None


# --- the e-mail address, changed by a link sent to the new one ------------------------------------------------
EMAIL_CHANGE_TTL = timedelta(minutes=30)
EMAIL_CHANGE_SALT = "btp.email-change"
EMAIL_CHANGE_INVALID = N_("refusal.email_change_link_invalid")
EMAIL_TAKEN = N_("refusal.email_taken")
_SPENT_KEY = "btp:email-change:spent:"


class EmailChange(Schema):
    """POST /api/users/me/email-change: the new address. Documented by trips/api/openapi.py."""

    class Meta:
        unknown = RAISE

    email = fields.String(required=True, validate=validate.Length(min=3, max=254))


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt=EMAIL_CHANGE_SALT)


def request_email_change(user: User, email) -> str:
    """Mail a link to the new address; following it (and pressing the button there) changes the account's address.
    The link is signed, works for EMAIL_CHANGE_TTL, once, and only while the account still has the address it was asked
    from. Returns the new address (normalised). When another account already uses it, that address is told so
    instead (no link), and the caller gets the same answer: an app cannot learn who has an account.

    Raises Invalid (`email`: not an address, or the account's own), RateLimited (mails per address) and
    Unavailable (the mail could not be sent: nothing was)."""
    address = checked_address(email)
    if address == user.email:
        raise Invalid({"email": Msg("field.same_address")})
    limit(get_redis(), "login_email", address)  # the mails any one address receives, sign-in links included
    other = find_user(address)
    if other is not None:  # told in that account's language: the requester's browser says nothing of its owner
        subject, text = _mail(i18n.normalize(other.locale) or i18n.DEFAULT, N_("mail.taken_subject"), N_("mail.taken_text"),
                              N_("mail.taken_not_you"))
    else:
        token = _serializer().dumps({"u": user.id, "from": user.email, "to": address})
        link = f"{current_app.config['BTP_BASE_URL']}/account/email/{token}"
        locale = _locale_of(user)
        minutes = int(EMAIL_CHANGE_TTL.total_seconds() // 60)
        subject = i18n.t("mail.change_subject", locale)
        text = "\n\n".join((i18n.t("mail.greeting", locale), i18n.tn("mail.change_open", minutes, locale,
                                                                    address=address),
                             link, i18n.t("mail.change_not_you", locale))) + "\n"
    try:
        send_mail(mail_config(), address, subject, text)
    except MailError as exc:
        log.warning("e-mail change of account %s: the link could not be sent: %s", user.id, exc)
        raise Unavailable("refusal.mail_unavailable") from None
    return address


def peek_email_change(token: str) -> tuple[User, str]:
    """(the account, its new address) of a link still good. Raises NotFound (bad signature, expired, spent, or the
    account's address is no longer the one it was asked from)."""
    try:
        claim = _serializer().loads(token or "", max_age=int(EMAIL_CHANGE_TTL.total_seconds()))
    except (BadSignature, SignatureExpired):  # SignatureExpired is a BadSignature; named for the reader
        raise NotFound(EMAIL_CHANGE_INVALID) from None
    user = db.session.get(User, claim.get("u")) if isinstance(claim, dict) and isinstance(claim.get("u"), str) else None
    if user is None or user.email != claim.get("from") or get_redis().exists(_spent(token)):
        raise NotFound(EMAIL_CHANGE_INVALID)
    return user, claim["to"]


def _spent(token: str) -> str:
    return _SPENT_KEY + hashlib.sha256(token.encode()).hexdigest()


def confirm_email_change(token: str) -> User:
    """Change the address: every token of the account is revoked first, its agents' (OAuth clients') and its
    personal ones (`flask tokens issue`), and every unused code: all were given to the person at the old address
    (README "Changing the e-mail address"). The agents' grants stay (docs/RULES.md "OAuth grants": the tokens carry
    the truth); then the old address is told. Raises NotFound (see `peek_email_change`; a replayed link too) and
    Conflict (another account took the address meanwhile)."""
    _, address = peek_email_change(token)
    try:
        with atomic(lock=f"email-change:{address}"):  # one change towards an address at a time
            user, old = _change(token)
    except IntegrityError:  # an account made for that address by a sign-in meanwhile (the unique index)
        raise Conflict(EMAIL_TAKEN) from None
    _tell_the_old_address(user, old, address)
    return user


def _change(token: str) -> tuple[User, str]:
    """Inside the unit of work: the checks again, the link spent, every token revoked, the address set.
    Returns (the account, its old address)."""
    user, address = peek_email_change(token)
    if find_user(address) is not None:
        raise Conflict(EMAIL_TAKEN)
    # Spent before the write: a link can never be used twice, even when the write fails (ask again then).
    if not get_redis().set(_spent(token), "1", nx=True, ex=int(EMAIL_CHANGE_TTL.total_seconds()) + 60):
        raise NotFound(EMAIL_CHANGE_INVALID)
    old, now = user.email, utcnow()
    for model in (AccessToken, RefreshToken):
        db.session.execute(sa.update(model).where(model.user_id == user.id, model.revoked_at.is_(None))
                           .values(revoked_at=now).execution_options(synchronize_session=False))
    db.session.execute(sa.delete(AuthorizationCode).where(AuthorizationCode.user_id == user.id))
    user.email = address
    return user, old


def _tell_the_old_address(user: User, old: str, address: str) -> None:
    try:
        send_mail(mail_config(), old, *_mail(_locale_of(user), N_("mail.changed_subject"), N_("mail.changed_text"),
                                             N_("mail.changed_not_you"), address=_masked(address)))
    except (MailError, ValueError) as exc:  # the change is made; the notice failing must not undo or hide it
        log.warning("e-mail change of account %s: the old address could not be told: %s", user.id, exc)
    log.info("account %s changed its e-mail address", user.id)


def _locale_of(user: User) -> str:
    """The language of a mail about `user`'s account: its own choice, else the page's (trips/core/i18n.py)."""
    return i18n.normalize(user.locale) or i18n.current_locale()


def _mail(locale: str, subject: str, text: str, not_you: str, **params) -> tuple[str, str]:
    """A notice's subject and text in `locale`: the greeting, the sentence, what to do if it was not you."""
    body = (i18n.t("mail.greeting", locale), i18n.t(text, locale, **params), i18n.t(not_you, locale))
    return i18n.t(subject, locale), "\n\n".join(body) + "\n"


def _masked(address: str) -> str:
    local, _, domain = address.partition("@")
    return f"{local[:1]}…@{domain}"
