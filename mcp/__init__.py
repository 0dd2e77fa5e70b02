"""The MCP endpoint at /mcp (step 4 of the plan): transport, JSON-RPC protocol, the thirteen tools."""
