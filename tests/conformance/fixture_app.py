"""A test-only app: BTP's own factory, transport and dispatcher, serving the conformance fixtures instead of the
thirteen tools (mcp/endpoint.py serve_tools). It lives under tests/ so the product can never import it."""
from __future__ import annotations

import threading
from contextlib import contextmanager

from werkzeug.serving import WSGIRequestHandler, make_server

from app import create_app
from mcp.endpoint import serve_tools
from mcp.tools import Registry
from tests.conformance.fixtures import FIXTURES


def fixture_app(config: dict):
    """The app for `config` (the test configuration), its /mcp serving FIXTURES."""
    app = create_app(config, environ={})
    serve_tools(app, Registry(FIXTURES))
    return app


class _Quiet(WSGIRequestHandler):
    def log_request(self, *args, **kwargs):  # the app's own access log already says it
        pass


@contextmanager
def served(app):
    """Serve `app` on a free loopback port in this process (threaded); yields its base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
