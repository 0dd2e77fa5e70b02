"""Calling /mcp the way clients do, in both eras."""
import base64
import itertools
import json

from tests.factories import make_token

MODERN = "2026-07-28"
_ids = itertools.count(1)


def mcp_token(app, user, scope="trips:read trips:write", client_id="test-client") -> str:
    from oauth.kernel.tokens import issue_token
    from trips.core.db import atomic

    with atomic():
        return issue_token(user, app.config["MCP_RESOURCE"], scope, 3600, client_id=client_id)


def modern(client, token, method, params=None, *, headers=None, caps=None, name_header=None):
    params = dict(params or {})
    params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                       "io.modelcontextprotocol/clientCapabilities": caps or {}}
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params}
    sent = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        sent["Mcp-Name"] = name_header if name_header is not None else params["name"]
    sent.update(headers or {})
    return client.post("/mcp", data=json.dumps(body), headers={k: v for k, v in sent.items() if v is not None})


def legacy(client, token, method, params=None, *, version="2025-11-25", notification=False):
    body = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if not notification:
        body["id"] = next(_ids)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "*/*",
               "MCP-Protocol-Version": version}
    return client.post("/mcp", data=json.dumps(body), headers={k: v for k, v in headers.items() if v is not None})


def call(client, token, tool, arguments=None, **kwargs):
    """A modern tools/call; returns the result object (asserts a JSON-RPC result came back)."""
    response = modern(client, token, "tools/call", {"name": tool, "arguments": arguments or {}}, **kwargs)
    body = response.get_json()
    assert "result" in body, body
    return body["result"]


def payload(result: dict) -> dict:
    """What a tool answered: structuredContent on success; a refusal's JSON lives in its text block only."""
    if result.get("isError"):
        assert "structuredContent" not in result, result
        return json.loads(result["content"][0]["text"])
    return result["structuredContent"]


def b64(value: str) -> str:
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


__all__ = ["MODERN", "b64", "call", "legacy", "make_token", "mcp_token", "modern", "payload"]
