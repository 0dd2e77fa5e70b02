"""Accounts, tokens, the OAuth 2.1 authorization server and the humans' pages, by floor: kernel/ (tables, tokens,
the principal), services/ (the server, accounts, mail, consent), web/ (endpoints, pages, REST twins, CLI)."""
