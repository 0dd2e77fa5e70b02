"""POST /mcp: the HTTP rules of both protocol eras, as an ordered pipeline, then the dispatcher.

Stateless in both eras (no session ids): any gunicorn worker answers any request.
"""
from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, current_app, request

from trips.core.redis_client import get_redis
from mcp import dispatch
from mcp.protocol import (
    BATCH_VERSION, HANDSHAKE_VERSIONS, HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, META_CAPABILITIES,
    META_VERSION, MODERN_VERSIONS, PARSE_ERROR, UNSUPPORTED_VERSION, Message, RpcError, encode, encode_batch,
    error_envelope, parse_message,
)
from oauth.kernel.principal import Principal
from oauth.services.resource import (
    McpInsufficientScope, McpUnauthorized, challenge, confirm, confirm_now, epoch_to_read, mcp_principal,
)
from trips.core import jsonio
from trips.errors import RateLimited
from trips.core.ratelimit import limit_all

bp = Blueprint("mcp", __name__)
MAX_BATCH = 100


def init_app(app: Flask, registry) -> None:
    """Serve /mcp on `app` with `registry` (mcp.tools.Registry): what tools/list lists and tools/call runs."""
    serve_tools(app, registry)
    app.register_blueprint(bp)


def serve_tools(app: Flask, registry) -> None:
    """The tools `app`'s /mcp serves from now on (the same transport and dispatcher whatever they are)."""
    app.extensions["mcp.tools"] = registry


@dataclass
class Exchange:
    """One HTTP request to /mcp as it goes down the pipeline."""

    headers: object = None  # the request's headers (read through Flask's `request` proxy once, not per header)
    principal: Principal | None = None
    body: object = None
    messages: list[Message] = field(default_factory=list)
    batch: bool = False
    modern: bool = False
    version: str | None = None
    # The client address whose hit is not counted yet: it is counted with the agent's budgets in one round trip
    # when the request is a tools/call that reaches them (mcp/dispatch.py), else on its own (`settle_address`)
    # before any answer, so an address over its limit is answered 429 whatever else the request holds.
    address: str | None = None


def _allowed_origins() -> frozenset[str]:
    """The Origins allowed, from the app's configuration: worked out once per configuration."""
    config = current_app.config
    return _origins(config["BTP_BASE_URL"], config.get("BTP_ALLOWED_ORIGINS", ""))


@lru_cache(maxsize=8)
def _origins(base_url: str, allowed: str) -> frozenset[str]:
    base = urlsplit(base_url)
    extra = [o.strip().rstrip("/") for o in allowed.split(",") if o.strip()]
    return frozenset({f"{base.scheme}://{base.netloc}", *extra})


def check_origin(ex: Exchange) -> None:
    """DNS-rebinding protection: a browser's Origin must be ours or allowed (2026-07-28 transport, MUST)."""
    origin = ex.headers.get("Origin")
    if origin is not None and origin.rstrip("/") not in _allowed_origins():
        raise _http(403, {"error": "forbidden", "error_description": "This Origin is not allowed."})


def limit_address(ex: Exchange) -> None:
    # Per client address (trips/core/limits.py "mcp_address"; behind nginx the address is the real client's:
    # BTP_TRUSTED_PROXIES), judged before any answer is given: see Exchange.address.
    ex.address = request.remote_addr or "?"


def settle_address(ex: Exchange) -> None:
    """Count the client address's hit now, unless it was counted already, reading the token epoch in the same
    round trip while the caller's token is a remembered one (oauth/services/resource.py confirm). Raises _HttpAnswer (429)
    when the address is over its limit, McpUnauthorized when the remembered token is no longer live."""
    address, ex.address = ex.address, None
    reads = epoch_to_read()
    if address is None and not reads:
        return
    try:
        values = limit_all(get_redis(), [("mcp_address", address)] if address is not None else [], reads)
    except RateLimited as exc:
        raise address_refused(exc) from None
    confirm(values[0] if values and reads else None)


def address_refused(exc: RateLimited) -> _HttpAnswer:
    return _http(429, {"error": "rate_limited", "error_description": "Too many requests from this address."},
                 {"Retry-After": str(exc.retry_after)})


def _budgets_with_the_call(ex: Exchange) -> bool:
    """True when the request is one tools/call the dispatcher will spend the agent's budgets for at once (a served
    tool, in the token's scopes): the address is then counted with them (dispatch._spend_budget)."""
    if ex.batch or ex.messages[0].is_notification or ex.messages[0].method != "tools/call":
        return False
    tool = dispatch.tool_of(ex.messages[0])
    return tool is not None and tool.scope in ex.principal.scopes


def authenticate(ex: Exchange) -> None:
    ex.principal = mcp_principal()  # raises McpUnauthorized: one 401 body whatever the cause


def check_content_type(ex: Exchange) -> None:
    # The header as every client sends it is taken as it is; anything else is parsed (parameters, case, spaces)
    if ex.headers.get("Content-Type") != "application/json" and request.mimetype != "application/json":
        raise _http(415, {"error": "unsupported_media_type", "error_description": "Send application/json."})


def parse_body(ex: Exchange) -> None:
    try:
        ex.body = jsonio.loads(request.get_data(cache=False) or b"")  # lone surrogates refused (-32700)
    except (ValueError, RecursionError) as exc:
        reason = exc.message if isinstance(exc, jsonio.InvalidText) else "the body is not valid JSON."
        raise RpcError(PARSE_ERROR, f"Parse error: {reason}", http_status=400) from None
    ex.batch = isinstance(ex.body, list)
    if ex.batch:
        if not ex.body or len(ex.body) > MAX_BATCH:
            raise RpcError(INVALID_REQUEST, f"A batch holds 1 to {MAX_BATCH} messages.", http_status=400)
        return
    ex.messages = [parse_message(ex.body)]


def classify(ex: Exchange) -> None:
    """The era of the request: a `_meta` version claim makes it modern; otherwise the handshake era."""
    header = (ex.headers.get("MCP-Protocol-Version") or "").strip() or None
    if ex.batch:
        if (header or BATCH_VERSION) != BATCH_VERSION:
            raise RpcError(INVALID_REQUEST, "Batches are only accepted on protocol version 2025-03-26.",
                           http_status=400)
        ex.version = BATCH_VERSION
        return
    message = ex.messages[0]
    claim = message.meta.get(META_VERSION)
    if claim is None:
        if header in MODERN_VERSIONS:
            raise RpcError(INVALID_PARAMS, f"Missing params._meta[{META_VERSION!r}].", http_status=400)
        if header is not None and header not in HANDSHAKE_VERSIONS:
            raise RpcError(UNSUPPORTED_VERSION, "Unsupported protocol version.",
                           {"supported": [*MODERN_VERSIONS, *HANDSHAKE_VERSIONS], "requested": header[:40]}, 400)
        ex.version = header or BATCH_VERSION  # a client without the header speaks 2025-03-26
        return
    # The header must mirror the claim before the claim is judged (SEP-2243: a mismatch is -32020, whatever the
    # versions; the conformance suite sends a supported header with an unsupported claim and expects -32020).
    _mirror(header, claim, "MCP-Protocol-Version")
    if claim not in MODERN_VERSIONS:
        raise RpcError(UNSUPPORTED_VERSION, "Unsupported protocol version.",
                       {"supported": list(MODERN_VERSIONS), "requested": str(claim)[:40]}, 400)
    ex.modern, ex.version = True, claim
    _mirror((ex.headers.get("Mcp-Method") or "").strip() or None, message.method, "Mcp-Method")
    if message.method == "tools/call":
        _mirror(decode_header(ex.headers.get("Mcp-Name")), message.params.get("name"), "Mcp-Name")
        _mirror_params(message, ex.headers)
    if not isinstance(message.meta.get(META_CAPABILITIES), dict):
        raise RpcError(INVALID_PARAMS, f"Missing params._meta[{META_CAPABILITIES!r}].", http_status=400)


def decode_header(value: str | None) -> str | None:
    """A header value, whitespace trimmed, the base64 sentinel `=?base64?…?=` decoded (SEP-2243)."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return "\x00invalid"
    return value


def _mirror_params(message: Message, headers) -> None:
    """SEP-2243: an argument whose schema names `x-mcp-header: X` is mirrored in `Mcp-Param-X` whenever it is
    present and not null (decoded like every mirror; integers compare numerically, booleans as true/false).
    Raises RpcError(-32020) when that header is missing or disagrees."""
    tool, arguments = dispatch.tool_of(message), message.params.get("arguments")
    if tool is None or not isinstance(arguments, dict):
        return
    for prop, suffix in _mirrored(tool):
        value = arguments.get(prop)
        if value is None:
            continue
        header = decode_header(headers.get(f"Mcp-Param-{suffix}"))
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, int) and header is not None and re.fullmatch(r"-?[0-9]{1,18}", header):
            header = int(header)
        _mirror(header, value, f"Mcp-Param-{suffix}")


_MIRRORED: dict[int, tuple] = {}


def _mirrored(tool) -> tuple[tuple[str, str], ...]:
    """((argument, header suffix), …) of the arguments whose schema names `x-mcp-header`: read once per tool."""
    known = _MIRRORED.get(id(tool))
    if known is None or known[0] is not tool:
        pairs = tuple((prop, schema["x-mcp-header"]) for prop, schema in tool.input_schema.get("properties", {}).items()
                      if isinstance(schema, dict) and isinstance(schema.get("x-mcp-header"), str))
        known = _MIRRORED[id(tool)] = (tool, pairs)
    return known[1]


def _mirror(header, body_value, name: str) -> None:
    if header is None or header != body_value:
        raise RpcError(HEADER_MISMATCH, f"The {name} header is missing or does not match the body.",
                       http_status=400)


def scope_of_single_call(ex: Exchange) -> None:
    """A POST carrying one tools/call whose tool needs a scope the token lacks: HTTP 403 with the step-up
    challenge (RFC 6750 §3.1), in every era, as the SDKs step up on a 403 `insufficient_scope`, never on a JSON-RPC
    error. Raises McpInsufficientScope. A 2025-03-26 batch is left to the dispatcher: one status would refuse its
    allowed siblings (docs/RULES.md "MCP answers")."""
    if ex.batch:
        return
    scope = dispatch.required_scope(ex.messages[0])
    if scope and scope not in ex.principal.scopes:
        raise McpInsufficientScope(scope)


PIPELINE = (check_origin, limit_address, authenticate, check_content_type, parse_body, classify,
            scope_of_single_call)


class _HttpAnswer(Exception):
    def __init__(self, response: Response):
        super().__init__(response.status)
        self.response = response


def _http(status: int, body: dict, headers: dict | None = None) -> _HttpAnswer:
    response = Response(json.dumps(body), status=status, mimetype="application/json", headers=headers or {})
    return _HttpAnswer(response)


def _json(payload, status: int = 200) -> Response:
    return Response(encode(payload), status=status, mimetype="application/json")


@bp.post("/mcp")
def mcp_post():
    ex = Exchange(headers=request.headers)
    try:
        try:
            for step in PIPELINE:
                step(ex)
        except (_HttpAnswer, RpcError, McpInsufficientScope, McpUnauthorized):
            settle_address(ex)  # an address over its limit is answered 429 first, as before any other check
            raise
        if not _budgets_with_the_call(ex):
            settle_address(ex)
    except _HttpAnswer as answer:
        return answer.response
    except RpcError as error:
        return _json(error_envelope(None if not ex.messages else ex.messages[0].id, error), error.http_status)
    except McpInsufficientScope as exc:
        response = _json({"error": "insufficient_scope",
                          "error_description": f"This call needs the scope {exc.scope}."}, 403)
        response.headers["WWW-Authenticate"] = challenge("insufficient_scope", exc.scope)
        return response
    if ex.batch:
        confirm_now()  # settled above: nothing left to read, unless Redis could not be asked
        answers = [dispatch.handle_raw(item, ex) for item in ex.body]
        answers = [a for a in answers if a is not None]
        return Response(encode_batch(answers), mimetype="application/json") if answers else Response(status=202)
    try:
        answer, status = dispatch.handle(ex.messages[0], ex)
    except dispatch.AddressRefused as refused:
        return address_refused(refused.cause).response
    confirm_now()  # every path above confirmed a remembered token already; an answer never goes out unconfirmed
    return Response(status=202) if answer is None else _json(answer, status)


@bp.route("/mcp", methods=["GET", "DELETE"])
def mcp_other():
    # Stateless in both eras: no server-to-client stream to open, no session to end.
    return Response(status=405, headers={"Allow": "POST"})
