"""The fixture tools the conformance scenarios call by name (the reference "everything server" set), served by
the test-only app in fixture_app.py through BTP's own transport and dispatcher. Test code only.

Each tool does what its scenario's "Server Implementation Requirements" text asks (conformance 0.2.0-alpha.12,
dist/index.js); the ones that need a server-to-client stream (progress, logging, handshake-era sampling and
elicitation) are absent or answer plainly, and are listed in expected_failures.json with the reason.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import wave

from flask import current_app

from mcp.confirmation import InputRequired
from mcp.protocol import INVALID_PARAMS, MISSING_CAPABILITY, RpcError
from mcp.tools.base import Content, Tool

NO_ARGUMENTS = {"type": "object", "properties": {}, "additionalProperties": False}
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


def _wav() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    return base64.b64encode(buffer.getvalue()).decode()


def text(value: str, is_error: bool = False) -> Content:
    return Content([{"type": "text", "text": value}], is_error)


def tool(name: str, run, input_schema: dict | None = None) -> Tool:
    return Tool(name=name, title=name.replace("_", " "), description=f"Conformance fixture {name}.",
                scope="trips:read", input_schema=input_schema or NO_ARGUMENTS, output_schema=None, run=run,
                annotations={"readOnlyHint": True})


# --- content -------------------------------------------------------------------------------------------------
def simple_text(ctx, args):
    return text("This is a simple text response for testing.")


def image(ctx, args):
    return Content([{"type": "image", "data": PNG, "mimeType": "image/png"}])


def audio(ctx, args):
    return Content([{"type": "audio", "data": _wav(), "mimeType": "audio/wav"}])


def embedded(ctx, args):
    return Content([{"type": "resource", "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain",
                                                      "text": "This is an embedded resource content."}}])


def mixed(ctx, args):
    return Content([{"type": "text", "text": "Multiple content types test:"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                                                      "mimeType": "application/json",
                                                      "text": json.dumps({"test": "data", "value": 123})}}])


def error(ctx, args):
    return text("This tool intentionally returns an error for testing", is_error=True)


def plain(message: str):
    return lambda ctx, args: text(message)


# --- capabilities and input_required (SEP-2575, SEP-2322) -------------------------------------------------------
def missing_capability(ctx, args):
    if not isinstance(ctx.client_capabilities.get("sampling"), dict):
        raise RpcError(MISSING_CAPABILITY, "This tool needs the client's sampling capability.",
                       {"requiredCapabilities": {"sampling": {}}}, http_status=400)
    return text("sampling is declared")


ASK_NAME = {"method": "elicitation/create", "params": {
    "message": "What is your name?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}},
                                                         "required": ["name"]}}}
ASK_CAPITAL = {"method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "What is the capital of France?"}}],
    "maxTokens": 100}}
ASK_GREETING = {"method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}], "maxTokens": 50}}
ASK_ROOTS = {"method": "roots/list", "params": {}}


def _answer(ctx, key: str) -> dict | None:
    """The client's answer to input request `key`, when it is an object (anything else is asked again)."""
    responses = ctx.input_responses if isinstance(ctx.input_responses, dict) else {}
    answer = responses.get(key)
    return answer if isinstance(answer, dict) else None


def _accepted_field(ctx, key: str, field: str):
    answer = _answer(ctx, key) or {}
    content = answer.get("content") if answer.get("action") == "accept" else None
    return content.get(field) if isinstance(content, dict) else None


def _seal(data: dict) -> str:
    body = base64.urlsafe_b64encode(json.dumps(data, sort_keys=True).encode()).decode()
    mac = hmac.new(current_app.config["SECRET_KEY"].encode(), body.encode(), hashlib.sha256).hexdigest()
    return f"{body}.{mac}"


def _open(state) -> dict:
    """The sealed state's data. Raises RpcError(-32602) when it is absent, altered or not ours."""
    if isinstance(state, str) and state.count(".") == 1:
        body, mac = state.split(".")
        good = hmac.new(current_app.config["SECRET_KEY"].encode(), body.encode(), hashlib.sha256).hexdigest()
        if hmac.compare_digest(mac, good):
            return json.loads(base64.urlsafe_b64decode(body))
    raise RpcError(INVALID_PARAMS, "requestState failed its integrity check.")


def elicit_name(ctx, args):
    name = _accepted_field(ctx, "user_name", "name")
    if not isinstance(name, str):
        raise InputRequired({"user_name": ASK_NAME}, None)
    return text(f"Hello, {name}!")


def sample_capital(ctx, args):
    answer = _answer(ctx, "capital_question")
    if answer is None:
        raise InputRequired({"capital_question": ASK_CAPITAL}, None)
    content = answer.get("content") if isinstance(answer.get("content"), dict) else {}
    return text(f"The model said: {content.get('text', '')}")


def list_roots(ctx, args):
    answer = _answer(ctx, "client_roots")
    if answer is None or not isinstance(answer.get("roots"), list):
        raise InputRequired({"client_roots": ASK_ROOTS}, None)
    uris = [r.get("uri") for r in answer["roots"] if isinstance(r, dict)]
    return text(f"Roots: {', '.join(map(str, uris)) or 'none'}")


def request_state(ctx, args):
    confirm = {"method": "elicitation/create", "params": {"message": "Please confirm", "requestedSchema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}
    if ctx.request_state is None or _answer(ctx, "confirm") is None:
        raise InputRequired({"confirm": confirm}, _seal({"tool": "request_state"}))
    _open(ctx.request_state)
    return text("state-ok: the request state came back intact.")


def multiple_inputs(ctx, args):
    keys = ("user_name", "greeting", "client_roots")
    if ctx.request_state is None or any(_answer(ctx, key) is None for key in keys):
        raise InputRequired({"user_name": ASK_NAME, "greeting": ASK_GREETING, "client_roots": ASK_ROOTS},
                            _seal({"tool": "multiple_inputs"}))
    _open(ctx.request_state)
    return text("All three answers arrived.")


def multi_round(ctx, args):
    ask_color = {"method": "elicitation/create", "params": {"message": "Step 2: What is your favorite color?",
                                                            "requestedSchema": {"type": "object", "properties": {
                                                                "color": {"type": "string"}}, "required": ["color"]}}}
    ask_step1 = {"method": "elicitation/create", "params": {**ASK_NAME["params"],
                                                            "message": "Step 1: What is your name?"}}
    if ctx.request_state is None:
        raise InputRequired({"step1": ask_step1}, _seal({"round": 1}))
    state = _open(ctx.request_state)
    if state.get("round") == 1:
        name = _accepted_field(ctx, "step1", "name")
        if not isinstance(name, str):
            raise InputRequired({"step1": ask_step1}, ctx.request_state)
        raise InputRequired({"step2": ask_color}, _seal({"round": 2, "name": name}))
    color = _accepted_field(ctx, "step2", "color")
    if not isinstance(color, str):
        raise InputRequired({"step2": ask_color}, ctx.request_state)
    return text(f"{state.get('name')} likes {color}.")


def tampered(ctx, args):
    if ctx.request_state is None:
        raise InputRequired({"user_name": ASK_NAME}, _seal({"tool": "tampered"}))
    _open(ctx.request_state)
    return text("The request state is intact.")


def capabilities(ctx, args):
    declared = ctx.client_capabilities
    asks = {}
    if isinstance(declared.get("elicitation"), dict):
        asks["user_name"] = ASK_NAME
    if isinstance(declared.get("sampling"), dict):
        asks["capital_question"] = ASK_CAPITAL
    if isinstance(declared.get("roots"), dict):
        asks["client_roots"] = ASK_ROOTS
    if not asks:
        return text("The client declared nothing to ask through.")
    if all(_answer(ctx, key) is not None for key in asks):
        return text("Every declared capability answered.")
    raise InputRequired(asks, None)


def streaming_elicitation(ctx, args):
    if _answer(ctx, "user_name") is None and ctx.can_elicit:
        raise InputRequired({"user_name": ASK_NAME}, None)
    return text("Nothing else to ask.")


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                   "contactMethod": {"type": "string", "enum": ["phone", "email"]}, "phone": {"type": "string"},
                   "email": {"type": "string"}},
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]}, "else": {"required": ["email"]}, "additionalProperties": False,
}

FIXTURES = (
    tool("test_simple_text", simple_text),
    tool("test_image_content", image),
    tool("test_audio_content", audio),
    tool("test_embedded_resource", embedded),
    tool("test_multiple_content_types", mixed),
    tool("test_error_handling", error),
    tool("test_tool_with_progress", plain("Done (BTP sends no progress notifications).")),
    tool("test_tool_with_logging", plain("Done (BTP sends no log notifications).")),
    tool("test_logging_tool", plain("Done; nothing was logged to the client.")),
    tool("test_missing_capability", missing_capability),
    tool("test_streaming_elicitation", streaming_elicitation),
    tool("test_input_required_result_elicitation", elicit_name),
    tool("test_input_required_result_sampling", sample_capital),
    tool("test_input_required_result_list_roots", list_roots),
    tool("test_input_required_result_request_state", request_state),
    tool("test_input_required_result_multiple_inputs", multiple_inputs),
    tool("test_input_required_result_multi_round", multi_round),
    tool("test_input_required_result_tampered_state", tampered),
    tool("test_input_required_result_capabilities", capabilities),
    tool("json_schema_2020_12_tool", plain("ok"), JSON_SCHEMA_2020_12),
    tool("test_header_param", lambda ctx, args: text(f"region={args.get('region')}"), {
        "type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}),
)
