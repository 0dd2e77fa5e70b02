"""The humans' browser session: who is signed in, and the CSRF token of their forms.

Flask's signed cookie session (HttpOnly, SameSite=Lax, Secure outside loopback: see oauth/web/wiring.py). A
session names the user and the moment they signed in; deleting the account ends it everywhere.
"""
from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from flask import g, session
from flask.sessions import SecureCookieSessionInterface

from oauth.kernel.models import User

from trips.core.db import utcnow
from trips.core.db import db

SESSION_DAYS = 30


class SessionCookies(SecureCookieSessionInterface):
    """Flask's signed cookie session, its signer made once per set of keys instead of on every request (an agent's
    request carries no cookie, yet Flask builds the signer to find that out)."""

    _made: tuple | None = None

    def get_signing_serializer(self, app):
        keys = (app.secret_key, tuple(app.config["SECRET_KEY_FALLBACKS"] or ()))
        made = self._made
        if made is None or made[0] != keys:
            made = self._made = (keys, super().get_signing_serializer(app))
        return made[1]

    def open_session(self, app, request):
        # A request without any cookie (every agent's) has no session to read: Flask would parse the missing header
        # to find that out. A new, empty session, as Flask gives when its cookie is absent.
        if "HTTP_COOKIE" not in request.environ and self.get_signing_serializer(app) is not None:
            return self.session_class()
        return super().open_session(app, request)

    def save_session(self, app, session, response):
        # A session nobody read or changed and that holds nothing (every agent's request) has nothing to save: Flask
        # would read its cookie settings first to find that out. Anything else is Flask's own saving.
        if not session and not session.accessed and not session.modified:
            return
        super().save_session(app, session, response)


def current_user() -> User | None:
    user_id = g.session_user_id = session.get("uid")  # the access log names who the page read (observability)
    return db.session.get(User, user_id) if user_id else None


def login_user(user: User) -> None:
    session.clear()  # a fresh session on sign-in: no fixation
    session.permanent = True
    session["uid"] = g.session_user_id = user.id
    session["at"] = utcnow().isoformat()
    session["csrf"] = secrets.token_urlsafe(32)


def logout_user() -> None:
    session.clear()
    g.session_user_id = None


def csrf_token() -> str:
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return session["csrf"]


def csrf_ok(value: str | None) -> bool:
    expected = session.get("csrf")
    return bool(expected and value and hmac.compare_digest(expected, value))


def safe_next(url: str | None) -> str | None:
    """A same-site relative path to go back to after sign-in, or None (never another site)."""
    if not url or len(url) > 4096 or not url.startswith("/") or url.startswith("//") or "\\" in url:
        return None
    parts = urlsplit(url)
    return url if not parts.scheme and not parts.netloc else None
