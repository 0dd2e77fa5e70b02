"""The humans' pages: sign in by e-mail link, sign out, the account with its connected agents."""
from __future__ import annotations

from functools import lru_cache

from babel import Locale
from flask import Blueprint, redirect, render_template, request, url_for

from oauth.services import accounts
from oauth.services.session import csrf_ok, csrf_token, current_user, login_user, logout_user, safe_next
from oauth.kernel.tokens import audience_name, personal_tokens, revoke_personal_token
from oauth.web.export import export_answer
from trips.core.db import atomic
from trips.errors import Conflict, Invalid, NotFound, RateLimited
from oauth.services.consent import SCOPE_WORDS
from trips.core import i18n
from trips.core.i18n import LOCALES, N_

bp = Blueprint("pages", __name__)
# The pages' words are keys of pages.po (trips/core/i18n.py), written in the reader's language by the templates.
EXPIRED = N_("login.form_expired")
NO_ADDRESS = N_("login.no_address")
TOO_MANY = N_("login.too_many")
LINK_INVALID = (N_("login.link_invalid_title"), N_("login.link_invalid"))
UNCONFIRMED = N_("delete.unconfirmed")


@lru_cache(maxsize=1)
def languages() -> tuple[tuple[str, str], ...]:
    """The languages offered on /account, each named in itself by CLDR ("English", "Français"). Made on the first
    /account page, not at import: Babel's locale data weighs on a worker, and an API call never needs it."""
    return tuple((code, Locale.parse(code).display_name.capitalize()) for code in LOCALES)


@bp.after_request
def _no_store(response):
    # Every page here is one person's (their address, their agents, their tokens, a sign-in link): no cache,
    # shared or the browser's own, may keep a copy (RFC 9111 §5.2.2.5).
    response.headers["Cache-Control"] = "no-store"
    return response


def _form_error(template: str, status: int, **context):
    return render_template(template, csrf=csrf_token(), **context), status


@bp.get("/login")
def login():
    return render_template("login.html", csrf=csrf_token(), next=safe_next(request.args.get("next")))


@bp.post("/login")
def login_post():
    next_url = safe_next(request.form.get("next"))
    if not csrf_ok(request.form.get("csrf_token")):
        return _form_error("login.html", 400, next=next_url, error=EXPIRED)
    email = request.form.get("email", "")
    try:
        accounts.request_login_link(email, next_url, request.remote_addr or "?")
    except Invalid:
        return _form_error("login.html", 422, next=next_url, error=NO_ADDRESS)
    except RateLimited as exc:
        page, status = _form_error("login.html", 429, next=next_url, error=TOO_MANY)
        return page, status, {"Retry-After": str(exc.retry_after)}
    # The same answer whether the address has an account or not.
    return render_template("login_sent.html", minutes=int(accounts.LINK_TTL.total_seconds() // 60))


@bp.get("/login/<token>")
def login_link(token):
    # Shown, not spent: mail scanners open links; signing in takes the button below.
    try:
        accounts.peek_login_link(token)
    except NotFound:
        return _link_invalid()
    return render_template("login_confirm.html", token=token, csrf=csrf_token())


@bp.post("/login/<token>")
def login_link_post(token):
    # The form's CSRF token ties the sign-in to this browser: another site cannot sign it into an account
    # of the other site's choosing (login CSRF).
    if not csrf_ok(request.form.get("csrf_token")):
        return render_template("login_confirm.html", token=token, csrf=csrf_token()), 400
    try:
        user, next_url = accounts.consume_login_link(token)
    except NotFound:
        return _link_invalid()
    login_user(user)
    return redirect(safe_next(next_url) or url_for(".account"))


def _link_invalid():
    title, detail = LINK_INVALID
    return render_template("error.html", status=404, title_key=title, detail_key=detail), 404


@bp.post("/logout")
def logout():
    if csrf_ok(request.form.get("csrf_token")):
        logout_user()
    return redirect(url_for(".login"))


@bp.get("/account")
def account():
    user = current_user()
    if user is None:
        return redirect(url_for(".login", next=request.path))
    agents = [(grant, client, accounts.client_host(grant.client_id, client))
              for grant, client in accounts.connected_agents(user)]
    tokens = [(row, audience_name(row.audience)) for row in personal_tokens(user)]
    return render_template("account.html", user=user, agents=agents, tokens=tokens, csrf=csrf_token(),
                           scope_words=SCOPE_WORDS, languages=languages())


@bp.post("/account/locale")
def set_locale():
    # The language alerts are rendered in (trips/core/i18n.py); "" follows the browser's (REST Accept-Language).
    user = current_user()
    if user is None or not csrf_ok(request.form.get("csrf_token")):
        return redirect(url_for(".account"))
    try:
        accounts.set_locale(user, request.form.get("locale") or None)
    except Invalid:
        return redirect(url_for(".account"))  # not offered by the form: the page shows the choice kept
    return redirect(url_for(".account"))


@bp.post("/account/agents/<grant_id>/revoke")
def revoke_agent(grant_id):
    user = current_user()
    if user is None or not csrf_ok(request.form.get("csrf_token")):
        return redirect(url_for(".account"))
    try:
        accounts.revoke_agent(user, grant_id)
    except NotFound:
        pass  # already gone: the page shows what is left
    return redirect(url_for(".account"))


@bp.post("/account/tokens/<token_id>/revoke")
def revoke_token(token_id):
    user = current_user()
    if user is None or not csrf_ok(request.form.get("csrf_token")):
        return redirect(url_for(".account"))
    try:
        with atomic():
            revoke_personal_token(token_id, user)
    except NotFound:
        pass  # already revoked, expired or not this person's: the page shows what is left
    return redirect(url_for(".account"))


@bp.get("/account/export")
def export_account():
    # The REST export's twin for the signed-in session: a plain link on /account downloads it.
    user = current_user()
    if user is None:
        return redirect(url_for(".login", next=request.full_path.rstrip("?")))
    return export_answer(user, request.args.get("format"))


@bp.get("/account/delete")
def delete_account():
    user = current_user()
    if user is None:
        return redirect(url_for(".login", next=request.path))
    return render_template("account_delete.html", user=user, csrf=csrf_token())


@bp.post("/account/delete")
def delete_account_post():
    user = current_user()
    if user is None:
        return redirect(url_for(".login"))
    if not csrf_ok(request.form.get("csrf_token")) or request.form.get("confirm") != "yes":
        return _form_error("account_delete.html", 400, user=user,
                           error=UNCONFIRMED)
    i18n.pin(i18n.normalize(user.locale) or i18n.current_locale())  # the farewell in the account's language
    accounts.delete_account(user)
    logout_user()
    return render_template("account_deleted.html")


@bp.route("/account/email/<token>", methods=["GET", "POST"])
def email_change(token):
    # The link mailed to the new address: shown, not spent (mail scanners open links); the button changes it.
    # The form's CSRF token ties the change to the browser that opened the link.
    try:
        _, address = accounts.peek_email_change(token)
        if request.method == "GET" or not csrf_ok(request.form.get("csrf_token")):
            status = 200 if request.method == "GET" else 400
            return render_template("email_change.html", token=token, address=address, csrf=csrf_token()), status
        accounts.confirm_email_change(token)
    except NotFound:  # invalid, spent or expired: the words of a 404 page (it has no key of its own)
        return render_template("error.html", status=404), 404
    except Conflict:  # the address was taken meanwhile
        return render_template("error.html", status=409), 409
    return render_template("email_change.html", address=address, done=True)
