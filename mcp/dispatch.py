"""The JSON-RPC methods of both eras, and how a tool call runs: scope → budgets → the trip's ownership and
lock (lock-carrying tools) → arguments → tool. The tools are the app's registry (mcp/endpoint.py init_app).

Refusals inside a tool are tool results with `isError: true` and a structured error; an unknown tool is
-32602; anything unexpected is -32603 without its text (logged with the request id).
"""
from __future__ import annotations

import json
import logging
import secrets

from flask import current_app

from trips.core.redis_client import REDIS_DOWN, get_redis, unavailable as redis_unavailable
from mcp.arguments import check_arguments
from trips.core.text import Floored, clean_answer, quote
from mcp.protocol import (
    HANDSHAKE_VERSIONS, INSUFFICIENT_SCOPE, INSTRUCTIONS, INTERNAL_ERROR, INVALID_PARAMS, LATEST_HANDSHAKE,
    META_CAPABILITIES, META_SERVER, METHOD_NOT_FOUND, MODERN_VERSIONS, SERVER_INFO, Fragment, Message, RpcError,
    Spliced, SplicedList, encode_once, encoded, error_envelope, kept_form, parse_message, result_envelope,
)
from mcp.tools import Registry
from mcp.tools.base import CallContext, Content
from mcp.confirmation import ConfirmationRequired, InputRequired
from oauth.services.resource import McpUnauthorized, confirm, epoch_to_read, touch_grant
from trips.core import i18n
from trips.core.db import db
from trips.core.observability import current_request_id
from trips.errors import DomainError, Invalid, RateLimited
from trips.guards import admit
from trips.core.metrics import counted_tool_calls
from trips.core.ratelimit import limit_all

log = logging.getLogger(__name__)
TOOLS_TTL_MS = 300_000


def registry() -> Registry:
    """The tools this app serves (mcp/endpoint.py init_app): BTP's thirteen; a test app mounts fixtures instead."""
    return current_app.extensions["mcp.tools"]


class _Served:
    """The names of the tools served, for the metrics' bounded label set."""

    def __contains__(self, name) -> bool:
        return name in registry().by_name


_UNSEEN = object()


def tool_of(message: Message):
    """The tool a tools/call names, or None: looked up once per message (the endpoint's checks and the call ask)."""
    tool = message.__dict__.get("_tool", _UNSEEN)
    if tool is _UNSEEN:
        name = message.params.get("name") if message.method == "tools/call" else None
        tool = message.__dict__["_tool"] = registry().by_name.get(name) if isinstance(name, str) else None
    return tool


def required_scope(message: Message) -> str | None:
    tool = tool_of(message)
    return tool.scope if tool else None


def _modern(result: dict) -> dict:
    return {"resultType": "complete", **result, "_meta": {META_SERVER: SERVER_INFO}}


def discover(message, ex) -> dict:
    return _modern({"supportedVersions": list(MODERN_VERSIONS), "capabilities": {"tools": {"listChanged": False}},
                    "instructions": INSTRUCTIONS, "ttlMs": 3_600_000, "cacheScope": "public"})


def initialize(message, ex) -> dict:
    asked = message.params.get("protocolVersion")
    version = asked if asked in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
    return {"protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO, "instructions": INSTRUCTIONS}


def ping(message, ex) -> dict:
    return {}


def tools_list(message, ex) -> dict:
    # The list depends on the token's scopes: private to it. Each tool's listing is built once per era (Tool.listing).
    tools = [tool.listing(ex.version) for tool in registry().tools if tool.scope in ex.principal.scopes]
    return _modern({"tools": tools, "ttlMs": TOOLS_TTL_MS, "cacheScope": "private"}) if ex.modern \
        else {"tools": tools}


def _tool_result(structured: dict, is_error: bool, modern: bool) -> dict:
    """A tool result. A refusal carries its `{"error": …}` JSON in the text block only, never as
    `structuredContent`: clients that validate structured content against the outputSchema throw on a refusal
    shape, so the agent would never read "Trip not found"; the text block is what every client shows."""
    structured = clean_answer(structured)
    if is_error:  # small, and read back by the metrics (tool_outcome): a plain result
        result = {"content": [{"type": "text", "text": json.dumps(structured, ensure_ascii=False,
                                                                  separators=(",", ":"))}], "isError": True}
        return _modern(result) if modern else result
    if isinstance(structured, Floored):  # a kept answer: its whole result is encoded once per era, and kept
        return kept_form(structured, ("result", modern), lambda: encoded(_success(structured, modern)))
    return _success(structured, modern)


def _success(structured: dict, modern: bool) -> dict:
    # One encoding for both forms (mcp/protocol.py Fragment): the text block carries the structured content's
    # JSON text, as the specification asks, spliced into the answer as a string.
    as_json, as_text = encode_once(structured)
    result = Spliced({"content": SplicedList([Spliced({"type": "text", "text": Fragment(as_text)})]),
                      "isError": False, "structuredContent": Fragment(as_json)})
    return Spliced(_modern(result)) if modern else result


def refusal(exc: DomainError) -> dict:
    """A refusal's `{"error": …}` in the reader's language (the token's account's: trips/core/i18n.py)."""
    locale = i18n.current_locale()
    error = {"code": exc.code, "message": i18n.say(exc.text, locale)}
    if isinstance(exc, Invalid):
        error["fields"] = {name: i18n.say(said, locale) for name, said in exc.errors.items()}
    if isinstance(exc, RateLimited):
        error["retryAfter"] = exc.retry_after
    return {"error": error}


@counted_tool_calls(_Served())  # btp_tool_calls_total{tool, outcome} on /metrics
def tools_call(message, ex) -> dict:
    tool = tool_of(message)
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {quote(message.params.get('name'))}.")
    if tool.scope not in ex.principal.scopes:  # judged per message (a batch reaches here)
        raise RpcError(INSUFFICIENT_SCOPE, "insufficient_scope: the access token lacks the scope this tool needs.",
                       {"error": "insufficient_scope", "scope": tool.scope})
    i18n.current_locale()  # the reader's language, settled before a write commits (after, it may cost a query)
    declared = message.meta.get(META_CAPABILITIES)  # an object on the modern leg (classify); anything elsewhere
    ctx = CallContext(principal=ex.principal, tool=tool.name, modern=ex.modern,
                      client_capabilities=declared if isinstance(declared, dict) else {},
                      input_responses=message.params.get("inputResponses"),
                      request_state=message.params.get("requestState"))
    try:
        reads = tool.reads(ctx, message.params.get("arguments")) if tool.reads else ()
        ctx.read_values = _spend_budget(ex, tool, reads)  # the epochs a kept answer stands on (mcp/kept.py)
        admitted = _admit(tool, message.params.get("arguments"), ex.principal)  # noqa: F841  (see _admit)
        answer = tool.run(ctx, _checked(tool, ctx, message.params.get("arguments")))
    except ConfirmationRequired as challenge:
        return _tool_result(challenge.answer, False, ex.modern)
    except InputRequired as ask:
        asked = {"resultType": "input_required", "inputRequests": ask.requests, "requestState": ask.state}
        return {**{k: v for k, v in asked.items() if v is not None}, "_meta": {META_SERVER: SERVER_INFO}}
    except DomainError as exc:
        return _tool_result(refusal(exc), True, ex.modern)
    except REDIS_DOWN:  # nothing written (writes take their Redis lock first): a refusal to retry, not -32603
        return _tool_result(refusal(redis_unavailable()), True, ex.modern)
    touch_grant(ex.principal)
    if isinstance(answer, Content):  # content blocks of its own (the conformance fixtures' images, audio …)
        result = {"content": clean_answer(answer.blocks), "isError": answer.is_error}
        return _modern(result) if ex.modern else result
    return _tool_result(answer, False, ex.modern)


def _checked(tool, ctx, arguments) -> dict:
    """`check_arguments`; a refusal first spends what the tool's `on_refused` names (its RateLimited wins)."""
    try:
        return check_arguments(tool, arguments)
    except Invalid:
        if tool.on_refused is not None:
            tool.on_refused(ctx)
        raise


def _admit(tool, arguments, principal) -> None:
    """docs/RULES.md "Write guards": before a lock-carrying tool's arguments are judged, the trip it
    names must be the caller's and not started. Raises NotFound (someone else's id answers exactly like an
    unknown one) or Locked. An id that is absent or not a string is left to the argument checks.

    Returns the trip admitted (None when nothing was): the caller holds it while the tool runs, so the session's
    identity map (weak references) keeps it and the write's fail-fast pass does not read it again."""
    trip_id = arguments.get(tool.locked_trip) if tool.locked_trip and isinstance(arguments, dict) else None
    if isinstance(trip_id, str):
        return admit(principal.user.id, trip_id)
    return None


class AddressRefused(Exception):
    """The client address is over its limit (counted with the agent's budgets): the endpoint answers HTTP 429.
    Not a tool call's outcome: it is neither counted nor answered as a tool result."""

    uncounted = True

    def __init__(self, cause: RateLimited):
        super().__init__("mcp_address")
        self.cause = cause


def _budget_pairs(ex, tool) -> list[tuple[str, str]]:
    key = f"{ex.principal.user_id}|{ex.principal.client_id or 'cli'}"
    address, ex.address = getattr(ex, "address", None), None
    pairs = [("mcp_address", address)] if address is not None else []
    return pairs + [("mcp_calls", key)] + ([("mcp_writes", key)] if tool.writes else [])


def _spend_budget(ex, tool, reads=()) -> tuple | None:
    """The client address's hit when the endpoint left it for here (mcp/endpoint.py Exchange.address), then the
    agent's budgets (trips/core/limits.py, BTP_LIMIT_MCP_CALLS / _WRITES), the token epoch while the caller's
    token is a remembered one (oauth/services/resource.py confirm) and the tool's own `reads`: one Redis round trip, before
    the tool runs. Returns the values of `reads` (None when Redis could not be asked). Raises AddressRefused,
    RateLimited for the agent's budgets, McpUnauthorized for a token no longer live."""
    token = epoch_to_read()
    try:
        values = limit_all(get_redis(), _budget_pairs(ex, tool), token + tuple(reads))
    except RateLimited as exc:
        if getattr(exc, "bucket", None) == "mcp_address":
            raise AddressRefused(exc) from None
        read = getattr(exc, "read", None)
        confirm(read[0] if read and token else None)  # a revoked token hears 401, not its budget's refusal
        raise
    if values is None:
        confirm(None)
        return None
    confirm(values[0] if token else None)
    return values[1:] if token else values


MODERN = {"server/discover": discover, "tools/list": tools_list, "tools/call": tools_call}
LEGACY = {"initialize": initialize, "ping": ping, "tools/list": tools_list, "tools/call": tools_call}
LEGACY_NOTIFICATIONS = {"notifications/initialized", "notifications/cancelled"}


def handle(message: Message, ex) -> tuple[dict | None, int]:
    """(JSON-RPC answer or None for a notification, HTTP status)."""
    if message.is_notification:
        return None, 202
    methods = MODERN if ex.modern else LEGACY
    method = methods.get(message.method)
    if method is None:
        error = RpcError(METHOD_NOT_FOUND, f"Method not found: {quote(message.method)}.",
                         http_status=404 if ex.modern else 200)
        return error_envelope(message.id, error), error.http_status
    try:
        return result_envelope(message.id, method(message, ex)), 200
    except RpcError as error:
        return error_envelope(message.id, error), error.http_status
    except (AddressRefused, McpUnauthorized):  # answered by the endpoint: 429, or 401 for a token found revoked
        raise
    except Exception:
        return _internal(message.id, quote(message.method)), 200


def handle_raw(item, ex) -> dict | None:
    """One element of a 2025-03-26 batch, judged on its own and its own unit of work: whatever it raises, it
    answers -32603 and its siblings are untouched (each write already commits in its own atomic() block; the
    session is rolled back after every element, so a failed read cannot poison the next one). Raises nothing."""
    message_id = item.get("id") if isinstance(item, dict) else None
    try:
        message = parse_message(item)
        if message.method == "initialize":
            return error_envelope(message.id, RpcError(-32600, "initialize cannot be part of a batch."))
        answer, _ = handle(message, ex)
        return answer
    except RpcError as error:
        return error_envelope(message_id, error)
    except McpUnauthorized:  # the whole request is refused (401), not one element
        raise
    except Exception:
        return _internal(message_id, "a batch element")
    finally:
        _end_unit_of_work()


def _end_unit_of_work() -> None:
    try:
        db.session.rollback()
    except Exception:  # the database itself is gone: the next element will say so on its own
        log.warning("could not roll back after a batch element", exc_info=True)


def _internal(message_id, what: str) -> dict:
    # The request's own id: the client's message, the X-Request-Id header and the log line agree.
    request_id = current_request_id() or secrets.token_hex(8)
    log.exception("MCP %s failed (request %s)", what, request_id)
    return error_envelope(message_id, RpcError(INTERNAL_ERROR, f"Internal error (request {request_id})."))
