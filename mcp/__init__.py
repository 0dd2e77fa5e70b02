"""The MCP endpoint at /mcp: transport (both protocol eras), JSON-RPC protocol, the thirteen tools."""
from flask import Flask


def init_app(app: Flask) -> None:
    from mcp.endpoint import bp

    app.register_blueprint(bp)
