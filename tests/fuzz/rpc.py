"""Posting to /mcp in process and judging what comes back: never a 500, never -32603, a refusal writes
nothing and names no unbounded value."""
from __future__ import annotations

import json

from tests.fuzz.support import OUTCOMES, assert_bounded_message
from tests.mcp_helpers import MODERN

INTERNAL_ERROR = -32603
MESSAGE_MAX = 600  # no refusal sentence grows with the input: the longest fixed one is about 300 characters
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def headers(token: str | None, method: str = "tools/call", name: str | None = None, **extra) -> dict:
    sent = {"Authorization": f"Bearer {token}" if token else None, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN, "Mcp-Method": method,
            "Mcp-Name": name}
    sent.update(extra)
    return {k: v for k, v in sent.items() if v is not None}


def on_the_wire(value: str) -> str:
    """A header value as a WSGI server hands it over: its UTF-8 bytes read as Latin-1, on one line."""
    return value.encode("utf-8", "surrogatepass").decode("latin-1").replace("\r", " ").replace("\n", " ")


def call_body(name, arguments, rpc_id=7) -> dict:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META}}


def _messages(node, found: list) -> list:
    """Every "message" string anywhere in an answer, and every field message of a refusal."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("message", "error_description", "detail") and isinstance(value, str):
                found.append(value)
            elif key == "fields" and isinstance(value, dict):
                found.extend(v for v in value.values() if isinstance(v, str))
            else:
                _messages(value, found)
    elif isinstance(node, list):
        for item in node:
            _messages(item, found)
    return found


def _refusal_of(answer) -> dict | None:
    """The refusal an answer carries (a JSON-RPC error or an isError tool result), or None for a success."""
    if not isinstance(answer, dict):
        return {"error": "not an object"}
    if "error" in answer:
        assert answer["error"].get("code") != INTERNAL_ERROR, f"-32603: {json.dumps(answer)[:300]}"
        return answer
    result = answer.get("result")
    assert isinstance(result, dict), answer
    if result.get("isError"):
        assert "structuredContent" not in result, result
        text = result["content"][0]["text"]
        return json.loads(text)
    return None


def _without_id(answer):
    """An answer without its JSON-RPC id: the id is the caller's own, echoed as sent (JSON-RPC 2.0 §5)."""
    return {k: v for k, v in answer.items() if k != "id"} if isinstance(answer, dict) else answer


def _is_challenge(answer) -> bool:
    """A confirmation challenge or a request for the human's input: a success that writes nothing."""
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        return False
    if result.get("resultType") == "input_required":
        return True
    structured = result.get("structuredContent") or {}
    declined = str(structured.get("result", "")).startswith("Nothing was done")  # mcp/confirmation.py DECLINED
    return "confirmationToken" in structured or declined


def judge(response, ledger, before, what: str, kind: str | None = None) -> str:
    """Check one /mcp answer. Returns "refused", "challenged", "accepted" or "mixed" (a batch with both), and
    counts it under `kind` for the session's summary."""
    outcome = _judge(response, ledger, before, what)
    if kind:
        OUTCOMES[(kind, outcome)] += 1
    return outcome


def _judge(response, ledger, before, what: str) -> str:
    assert response.status_code < 500, f"{what}: HTTP {response.status_code} {response.data[:300]!r}"
    raw = response.get_data(as_text=True)
    if response.status_code == 202:
        assert not raw.strip(), raw[:300]
        ledger.assert_unchanged(before, what)  # notifications are not run
        return "refused"
    if response.status_code >= 400:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        assert_bounded_message(raw if body is None else json.dumps(_without_id(body)), what)
        for message in _messages(body, []):
            assert len(message) <= MESSAGE_MAX, f"{what}: a {len(message)}-character message"
        ledger.assert_unchanged(before, what)
        return "refused"
    body = json.loads(raw)
    answers = body if isinstance(body, list) else [body]
    refusals = [_refusal_of(a) for a in answers]
    outcome = set()
    for answer, refusal in zip(answers, refusals):
        if refusal is not None:
            text = json.dumps(_without_id(refusal), ensure_ascii=False)
            assert_bounded_message(text, what)
            for message in _messages(refusal, []):
                assert len(message) <= MESSAGE_MAX, f"{what}: a {len(message)}-character message: {message[:200]}"
            outcome.add("refused")
        else:
            outcome.add("challenged" if _is_challenge(answer) else "accepted")
    if outcome <= {"refused", "challenged"}:
        ledger.assert_unchanged(before, what)
    if len(outcome) == 1:
        return outcome.pop()
    return "mixed" if "accepted" in outcome else "refused"
