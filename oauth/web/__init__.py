"""oauth's web edge: the authorization endpoints, the humans' pages, the REST twins and the CLI (wiring.py)."""
