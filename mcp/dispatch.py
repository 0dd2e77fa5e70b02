"""The JSON-RPC methods of both eras, and how a tool call runs: scope → budgets → arguments → tool.

Refusals inside a tool are tool results with `isError: true` and a structured error; an unknown tool is
-32602; anything unexpected is -32603 without its text (logged with the request id).
"""
from __future__ import annotations

import json
import logging
import secrets

from jobs import get_redis
from mcp.arguments import check_arguments
from trips.text import clean_answer, quote
from mcp.protocol import (
    HANDSHAKE_VERSIONS, INSUFFICIENT_SCOPE, INSTRUCTIONS, INTERNAL_ERROR, INVALID_PARAMS, LATEST_HANDSHAKE,
    META_SERVER, METHOD_NOT_FOUND, MODERN_VERSIONS, SERVER_INFO, Message, RpcError, error_envelope,
    parse_message, result_envelope,
)
from mcp.tools import BY_NAME, TOOLS
from mcp.tools.base import CallContext
from mcp.confirm import ConfirmationRequired, InputRequired
from oauth.resource import touch_grant
from trips.errors import DomainError, Invalid, RateLimited
from trips.ratelimit import hit

log = logging.getLogger(__name__)
CALL_BUDGET = (60, 60)   # tool calls per minute per (user, client)
WRITE_BUDGET = (20, 60)  # of which writes
TOOLS_TTL_MS = 300_000


def required_scope(message: Message) -> str | None:
    if message.method != "tools/call":
        return None
    tool = BY_NAME.get(message.params.get("name"))
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
    # The list depends on the token's scopes: private to it. The text of every tool is a constant.
    tools = [tool.listing() for tool in TOOLS if tool.scope in ex.principal.scopes]
    return _modern({"tools": tools, "ttlMs": TOOLS_TTL_MS, "cacheScope": "private"}) if ex.modern \
        else {"tools": tools}


def _tool_result(structured: dict, is_error: bool, modern: bool) -> dict:
    """A tool result. A refusal carries its `{"error": …}` JSON in the text block only, never as
    `structuredContent`: the specification asks structured content to conform to the tool's outputSchema, and
    clients that validate it (the TypeScript SDK, the Inspector) throw on a refusal shape the schema does not
    admit, so the agent would never read "Trip not found". Widening every output schema to admit the refusal
    would double tools/list and blur what a success looks like; the text block is what every client shows."""
    structured = clean_answer(structured)
    result = {"content": [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}], "isError": is_error}
    if not is_error:
        result["structuredContent"] = structured
    return _modern(result) if modern else result


def refusal(exc: DomainError) -> dict:
    error = {"code": exc.code, "message": exc.message}
    if isinstance(exc, Invalid):
        error["fields"] = exc.errors
    if isinstance(exc, RateLimited):
        error["retryAfter"] = exc.retry_after
    return {"error": error}


def tools_call(message, ex) -> dict:
    name = message.params.get("name")
    tool = BY_NAME.get(name) if isinstance(name, str) else None
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {quote(name)}.")
    if tool.scope not in ex.principal.scopes:  # judged per message (a batch reaches here)
        raise RpcError(INSUFFICIENT_SCOPE, "insufficient_scope: the access token lacks the scope this tool needs.",
                       {"error": "insufficient_scope", "scope": tool.scope})
    ctx = CallContext(principal=ex.principal, tool=tool.name, modern=ex.modern,
                      client_capabilities=message.meta.get("io.modelcontextprotocol/clientCapabilities") or {},
                      input_responses=message.params.get("inputResponses"),
                      request_state=message.params.get("requestState"))
    try:
        _spend_budget(ex.principal, tool)
        answer = tool.run(ctx, check_arguments(tool, message.params.get("arguments")))
    except ConfirmationRequired as challenge:
        return _tool_result(challenge.answer, False, ex.modern)
    except InputRequired as ask:
        return {"resultType": "input_required", "inputRequests": ask.requests, "requestState": ask.state,
                "_meta": {META_SERVER: SERVER_INFO}}
    except DomainError as exc:
        return _tool_result(refusal(exc), True, ex.modern)
    touch_grant(ex.principal)
    return _tool_result(answer, False, ex.modern)


def _spend_budget(principal, tool) -> None:
    key = f"{principal.user.id}|{principal.client_id or 'cli'}"
    hit(get_redis(), "mcp_calls", key, *CALL_BUDGET)
    if tool.writes:
        hit(get_redis(), "mcp_writes", key, *WRITE_BUDGET)


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
    except Exception:
        request_id = secrets.token_hex(8)
        log.exception("MCP %s failed (request %s)", message.method, request_id)
        return error_envelope(message.id, RpcError(INTERNAL_ERROR, f"Internal error (request {request_id}).")), 200


def handle_raw(item, ex) -> dict | None:
    """One element of a 2025-03-26 batch, judged on its own."""
    try:
        message = parse_message(item)
    except RpcError as error:
        return error_envelope(item.get("id") if isinstance(item, dict) else None, error)
    if message.method == "initialize":
        return error_envelope(message.id, RpcError(-32600, "initialize cannot be part of a batch."))
    answer, _ = handle(message, ex)
    return answer
