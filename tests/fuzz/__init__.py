"""Hypothesis-driven fuzzing of every place hostile input enters BTP (docs/RELIABILITY.md): the JSON-RPC envelope
of POST /mcp, every tool's arguments (generated from its published inputSchema), the REST bodies under /api
and the GPX parser. Each case is bounded in time; the run prints how many cases it made ("fuzz: N cases")."""
