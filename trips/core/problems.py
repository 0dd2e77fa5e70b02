"""Errors answered: RFC 9457 problem documents on the machine endpoints, an HTML page elsewhere, with one table
from domain errors to statuses; the JSON body reader and the headers every answer carries."""
from __future__ import annotations

import hashlib
import json
import logging

from flask import Flask, Response, current_app, render_template, request
from werkzeug.exceptions import HTTPException

from trips import errors
from trips.errors import Msg
from trips.core import i18n, jsonio
from trips.core.i18n import N_
from trips.core.redis_client import REDIS_DOWN, unavailable

log = logging.getLogger(__name__)

STATUS = {  # looked up in order: subclasses first
    errors.InvalidQuery: 400,
    errors.NotFound: 404,
    errors.Locked: 423,
    errors.PreconditionRequired: 428,
    errors.PreconditionFailed: 412,
    errors.Conflict: 409,
    errors.RateLimited: 429,
    errors.ServiceUnavailable: 503,
    errors.Unavailable: 502,
    errors.Invalid: 422,
    errors.BadRequest: 400,
}
# A problem's title: the status's, in the reader's language (RFC 9457 §3.1.4 lets it change for localisation only).
TITLES = {
    400: N_("api.status.400"), 401: N_("api.status.401"), 403: N_("api.status.403"), 404: N_("api.status.404"),
    405: N_("api.status.405"), 406: N_("api.status.406"), 408: N_("api.status.408"), 409: N_("api.status.409"),
    412: N_("api.status.412"), 413: N_("api.status.413"), 415: N_("api.status.415"), 422: N_("api.status.422"),
    423: N_("api.status.423"), 428: N_("api.status.428"), 429: N_("api.status.429"), 500: N_("api.status.500"),
    502: N_("api.status.502"), 503: N_("api.status.503"),
}
# What the HTTP layer itself refuses (werkzeug's statuses), said in the reader's language; any other status its
# general sentence.
HTTP_DETAILS = {
    400: N_("api.http.400"), 404: N_("api.http.404"), 405: N_("api.http.405"), 406: N_("api.http.406"),
    408: N_("api.http.408"), 413: N_("api.http.413"), 415: N_("api.http.415"), 429: N_("api.http.429"),
}
OTHER_DETAIL = N_("api.http.other")
# What a REST caller is told about the precondition header specifically (the domain speaks of versions).
HEADER_HINTS: dict[type, str] = {errors.PreconditionRequired: N_("api.hint.if_match")}


# Machine endpoints answer JSON; everything else is a human's page and answers HTML.
JSON_PATHS = ("/api/", "/mcp", "/oauth/token", "/oauth/revoke", "/oauth/register", "/.well-known/")


def problem(status: int, detail: Msg | str, **extra) -> Response:
    """An RFC 9457 problem document for `status` (an HTML error page outside the machine paths): its title and
    `detail` (a Msg, or a key) in the reader's language (trips/core/i18n.py current_locale)."""
    if not request.path.startswith(JSON_PATHS):  # a human's page: an HTML answer
        html = render_template("error.html", status=status)  # its words are the status's, in the reader's language
        return current_app.response_class(html, status=status, mimetype="text/html")
    locale = i18n.current_locale()
    title = i18n.say(TITLES.get(status, N_("api.status.other")), locale)
    body = {"type": "about:blank", "title": title, "status": status, "detail": i18n.say(detail, locale),
            "instance": request.path[:2048], **extra}
    response = current_app.response_class(json.dumps(body), status=status, mimetype="application/problem+json")
    response.headers["Cache-Control"] = "no-store"
    return response


def json_body():
    """The request's JSON object. Raises BadRequest when it is not JSON."""
    if not request.is_json:
        raise errors.BadRequest("api.body_not_json")
    try:
        data = jsonio.loads(request.get_data(cache=True))  # the app's loader, with its own refusal
    except jsonio.InvalidText as exc:  # a lone surrogate: not Unicode text (RFC 8259 §8.2, RFC 7493 §2.1)
        raise errors.BadRequest(exc.text) from None
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        data = None
    if data is None:
        raise errors.BadRequest("api.body_invalid_json")
    return data


def conditional_json(payload: dict) -> Response:
    """A JSON answer with a strong ETag of its content; 304 when If-None-Match matches (RFC 9110 §13.1.2)."""
    body = json.dumps(payload, separators=(",", ":"))
    response = current_app.response_class(body, mimetype="application/json")
    response.set_etag(hashlib.sha256(body.encode()).hexdigest()[:32])
    response.headers["Cache-Control"] = "private, no-cache"
    response.make_conditional(request)  # in place: it returns the response itself
    return response


def _domain_error(exc: errors.DomainError):
    status = next(v for k, v in STATUS.items() if isinstance(exc, k))
    locale = i18n.current_locale()
    extra = {"errors": {k: i18n.say(v, locale) for k, v in exc.errors.items()}} \
        if isinstance(exc, errors.Invalid) else {}
    hint = HEADER_HINTS.get(type(exc))
    detail = Msg("api.with_hint", said=exc.text, hint=Msg(hint)) if hint else exc.text
    response = problem(status, detail, **extra)
    if isinstance(exc, (errors.RateLimited, errors.ServiceUnavailable)):
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


# The OAuth endpoints answer errors in RFC 6749 §5.2 form; `temporarily_unavailable` is RFC 6749 §4.1.2.1's code.
OAUTH_JSON_PATHS = ("/oauth/token", "/oauth/revoke", "/oauth/register")


def _redis_down(exc: Exception):
    """Redis unreachable: 503 with Retry-After (RFC 9110 §15.6.4), a problem document, or on the OAuth endpoints
    an RFC 6749 error body. Nothing was written: every write takes its Redis lock before touching the database."""
    log.warning("Redis unreachable on %s %s: %s", request.method, request.path, exc)
    refusal = unavailable()
    if not request.path.startswith(OAUTH_JSON_PATHS):
        return _domain_error(refusal)
    body = {"error": "temporarily_unavailable", "error_description": refusal.message}  # RFC 6749: English
    response = current_app.response_class(json.dumps(body), status=503, mimetype="application/json")
    response.headers.update({"Retry-After": str(refusal.retry_after), "Cache-Control": "no-store"})
    return response


def _http_error(exc: HTTPException):
    status = exc.code or 500
    return problem(status, Msg(HTTP_DETAILS.get(status, OTHER_DETAIL), status=str(status)))


def _unexpected(exc: Exception):
    if isinstance(exc, HTTPException):
        return _http_error(exc)
    # The route rule, never the path: a path can carry a share code or an id that is nobody's business in a log.
    log.exception("unexpected error on %s %s", request.method, request.url_rule.rule if request.url_rule else "?")
    return problem(500, Msg("api.http.500"))


# Pages send no script and may not be framed (clickjacking); API answers are never framed either.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


_SECURITY_ITEMS = tuple((name.lower(), name, value) for name, value in SECURITY_HEADERS.items())


def _security_headers(response: Response) -> Response:
    # The ones the answer does not set itself, its names read in one pass: werkzeug's Headers finds a missing name
    # only by raising a KeyError.
    headers = response.headers
    present = {name.lower() for name in headers.keys()}
    for lowered, name, value in _SECURITY_ITEMS:
        if lowered not in present:
            headers.add(name, value)
    return response


def register(app: Flask) -> None:
    app.after_request(_security_headers)
    app.register_error_handler(errors.DomainError, _domain_error)
    for redis_error in REDIS_DOWN:
        app.register_error_handler(redis_error, _redis_down)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
