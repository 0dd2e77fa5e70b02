"""The official MCP conformance suite against BTP and against a fixture app on the same transport (tests only:
nothing under tests/ is importable by the product)."""
