"""Drive an MCP server with the official MCP Python SDK client (`mcp` 2.3.0) and print what it saw.

Runs inside the SDK's own virtual environment (`.venv-mcp-sdk`), never BTP's: BTP's top-level package `mcp/`
would shadow the SDK's. It imports only the SDK and the standard library.

    python client_script.py --url http://127.0.0.1:PORT/mcp --token TOKEN --mode auto|legacy|2026-07-28 \
        --plan plan.json

The plan is a JSON list of steps, run in order after `list_tools`:

    {"tool": "get_trip", "arguments": {"id": "..."}, "save": "trip"}
    {"tool": "edit_stages", "arguments": {"tripId": "...", "version": "${trip.version}"}}

- `save` (optional) names the step's `structuredContent`; later steps refer to it as `${name}` or to a field
  inside it as `${name.a.b.0.c}` (dotted path: object keys, or list indexes for lists).
- An argument value that is exactly one placeholder ("${trip.version}") is replaced by the saved value with its
  JSON type (an integer stays an integer); a placeholder inside a longer string is interpolated as text.
  Placeholders are resolved in nested objects and lists too. An unknown name or a missing path is an error.
- The run stops after the first step whose result has `isError` true: later steps depend on it.

Prints ONE JSON document on stdout and exits 0:

    {"protocolVersion": "...", "connectMs": n, "tools": [names],
     "results": [{"step", "tool", "isError", "structuredContent", "text", "ms"}],
     "httpErrors": [{"request", "mcpMethod", "status", "wwwAuthenticate", "body"}]}

`httpErrors` lists every HTTP answer >= 400 the SDK received (a legacy client's GET stream or DELETE may
legitimately get 405). On an exception it prints {"error": repr, ...what was gathered so far} and exits 1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)((?:\.[A-Za-z0-9_-]+)*)\}")
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 30.0


class PlanError(Exception):
    """The plan refers to something no earlier step saved."""


def lookup(saved: dict[str, Any], name: str, path: str) -> Any:
    if name not in saved:
        raise PlanError(f"${{{name}{path}}}: no earlier step saved {name!r} (saved: {sorted(saved)})")
    value = saved[name]
    for part in filter(None, path.split(".")):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise PlanError(f"${{{name}{path}}}: {part!r} not found in {json.dumps(value)[:300]}")
    return value


def resolve(value: Any, saved: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: resolve(v, saved) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, saved) for v in value]
    if not isinstance(value, str):
        return value
    whole = PLACEHOLDER.fullmatch(value)
    if whole:
        return lookup(saved, whole.group(1), whole.group(2))

    def text(match: re.Match) -> str:
        found = lookup(saved, match.group(1), match.group(2))
        return found if isinstance(found, str) else json.dumps(found)

    return PLACEHOLDER.sub(text, value)


def describe(result) -> dict[str, Any]:
    texts = [block.text for block in result.content if getattr(block, "type", None) == "text"]
    return {"isError": bool(result.is_error), "structuredContent": result.structured_content,
            "text": texts[0] if len(texts) == 1 else texts or None}


async def run(url: str, token: str, mode: str, plan: list[dict[str, Any]], report: dict[str, Any]) -> None:
    async def note_refusal(response: httpx2.Response) -> None:
        # The SDK reports an HTTP refusal as a bare "Server returned an error response": keep what it was.
        if response.status_code >= 400:
            await response.aread()
            report["httpErrors"].append({
                "request": f"{response.request.method} {response.request.url.path}",
                "mcpMethod": response.request.headers.get("mcp-method"), "status": response.status_code,
                "wwwAuthenticate": response.headers.get("www-authenticate"), "body": response.text[:500]})

    began = time.monotonic()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(CONNECT_TIMEOUT, read=READ_TIMEOUT),
                              event_hooks={"response": [note_refusal]})
    async with http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode,
                          read_timeout_seconds=READ_TIMEOUT) as client:
            report["protocolVersion"] = client.protocol_version
            report["connectMs"] = round((time.monotonic() - began) * 1000)
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                report["tools"] += [tool.name for tool in page.tools]
                cursor = page.next_cursor
                if cursor is None:
                    break
            saved: dict[str, Any] = {}
            for index, step in enumerate(plan):
                arguments = resolve(step.get("arguments", {}), saved)
                started = time.monotonic()
                result = await client.call_tool(step["tool"], arguments)
                entry = {"step": index, "tool": step["tool"], **describe(result),
                         "ms": round((time.monotonic() - started) * 1000)}
                report["results"].append(entry)
                if entry["isError"]:
                    break
                if step.get("save"):
                    saved[step["save"]] = entry["structuredContent"]


def unwrap(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups, as anyio task groups raise them."""
    while len(getattr(exc, "exceptions", ())) == 1:
        exc = exc.exceptions[0]
    return exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--mode", required=True, choices=["auto", "legacy", "2026-07-28"])
    parser.add_argument("--plan", required=True, help="a JSON file: a list of steps")
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"protocolVersion": None, "tools": [], "results": [], "httpErrors": []}
    try:
        with open(args.plan, encoding="utf-8") as fh:
            plan = json.load(fh)
        asyncio.run(run(args.url, args.token, args.mode, plan, report))
    except BaseException as exc:  # whatever happened, the caller gets one JSON document
        print(json.dumps({"error": repr(unwrap(exc)), **report}, default=str))
        return 1
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
