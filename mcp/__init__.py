"""The MCP endpoint at /mcp: transport (both protocol eras, endpoint.py), JSON-RPC protocol, the thirteen tools."""
