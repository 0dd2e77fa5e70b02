"""A stand-in MCP server that answers a refusal the way BTP must not: `isError: true` WITH
`structuredContent: {"error": …}`, next to BTP's real tool listing (its real outputSchemas). The negative control
of the TypeScript-client tests: against it the SDK and the Inspector must reject the refusal, which shows that
their passing against BTP means something. Initialize era only (2025-11-25, plain JSON answers), loopback only."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mcp.tools import TOOLS

OLD_REFUSAL = {"error": {"code": "not_found", "message": "Trip not found."}}


def _answer(message: dict) -> dict | None:
    """The JSON-RPC answer to one message (None for a notification)."""
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None
    if method == "initialize":
        result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": False}},
                  "serverInfo": {"name": "old-refusal-stub", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [tool.listing() for tool in TOOLS]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(OLD_REFUSAL)}], "structuredContent": OLD_REFUSAL,
                  "isError": True}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        answer = _answer(json.loads(self.rfile.read(length) or b"{}"))
        if answer is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - no server-initiated stream (2025-11-25 transport: 405 is allowed)
        self.send_response(405)
        self.send_header("Allow", "POST")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_DELETE = do_GET  # noqa: N815

    def log_message(self, *args):  # keep the test output quiet
        pass


@contextmanager
def old_refusal_server():
    """Serve on a free loopback port; yields the /mcp URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
