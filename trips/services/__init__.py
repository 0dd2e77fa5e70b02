"""The use cases of trips, one module per family. REST views and MCP tools are thin adapters over them."""
