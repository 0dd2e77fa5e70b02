"""A loopback reverse proxy that adds `Authorization: Bearer <token>` to every request it forwards.

The conformance suite has no option to send a token in server mode; BTP has no switch to turn authentication
off, and must not grow one. So the suite talks to this proxy, which is BTP's public address (BTP_BASE_URL),
as nginx would be in production. Everything else goes through untouched, Host and Origin included, so the
suite's DNS-rebinding probes reach BTP as they were sent.
"""
from __future__ import annotations

import http.client
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# RFC 9110 §7.6.1: connection-specific fields are not forwarded.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
              "content-length"}


def _handler(target: str, token: str):
    upstream = urlsplit(target)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP | {"authorization"}}
            headers["Authorization"] = f"Bearer {token}"
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            try:
                connection.request(self.command, self.path, body=body or None, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
            except OSError as exc:
                self.send_error(502, f"upstream unreachable: {exc}")
                return
            finally:
                connection.close()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the suite gave up on this answer (its timeouts)
                pass

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = _forward

        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

    return Forward


@contextmanager
def bearer_proxy(target: str, token: str, port: int = 0):
    """Serve on 127.0.0.1:`port` (0: any free port); yields the proxy's base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(target, token))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
