"""Accounts, tokens, the OAuth 2.1 authorization server and the humans' pages (web.py wires them into the app)."""
