"""The MCP endpoint at /mcp: transport (both protocol eras), JSON-RPC protocol, the thirteen tools."""
from flask import Flask


def init_app(app: Flask, registry) -> None:
    """Serve /mcp on `app` with `registry` (mcp.tools.Registry): what tools/list lists and tools/call runs."""
    from mcp.endpoint import bp

    serve_tools(app, registry)
    app.register_blueprint(bp)


def serve_tools(app: Flask, registry) -> None:
    """The tools `app`'s /mcp serves from now on (the same transport and dispatcher whatever they are)."""
    app.extensions["mcp.tools"] = registry
