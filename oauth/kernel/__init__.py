"""oauth's kernel: its tables, token rules, scopes, redirect rules and the request's principal."""
