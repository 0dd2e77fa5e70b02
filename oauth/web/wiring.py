"""oauth's web edge, wired into the app: the session cookie, the authorization server, the error answers of a
missing or weak token (REST and /mcp), the blueprints (endpoints, pages, REST twins) and the `flask users` and
`flask tokens` commands, and the pages' language (the session's account's choice, trips/core/i18n.py)."""
from datetime import timedelta
from urllib.parse import urlsplit

from flask import Flask, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from oauth.web import api
from oauth.web import pages
from oauth.kernel import principal
from oauth.services import resource
from oauth.web import views
from oauth.web.cli import tokens_cli, users_cli
from oauth.services.server import init_server
from oauth.services.session import SESSION_DAYS, SessionCookies, current_user
from trips.core import i18n


def _account_locale() -> str | None:
    """The signed-in person's chosen language on a page; None when nobody is, or the database cannot say (an
    error page is then written in the browser's language rather than failing too). Without a session cookie the
    session is not opened at all: an answer that never read it must not vary on Cookie."""
    if current_app.config["SESSION_COOKIE_NAME"] not in request.cookies:
        return None
    try:
        user = current_user()
    except SQLAlchemyError:
        return None
    return user.locale if user is not None else None


def init_app(app: Flask) -> None:
    base = urlsplit(app.config["BTP_BASE_URL"])
    app.config.update(
        SESSION_COOKIE_NAME="btp_session", SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=base.scheme == "https",  # Secure whenever the public URL is https
        PERMANENT_SESSION_LIFETIME=timedelta(days=SESSION_DAYS),
    )
    app.session_interface = SessionCookies()
    i18n.register(app)
    i18n.account_locale(_account_locale)
    init_server(app)
    principal.register_errors(app)
    resource.register_errors(app)
    app.register_blueprint(views.bp)
    app.register_blueprint(pages.bp)
    app.register_blueprint(api.bp)
    app.cli.add_command(users_cli)
    app.cli.add_command(tokens_cli)
