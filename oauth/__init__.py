"""Accounts, tokens and (from step 3) the OAuth 2.1 authorization server."""
from flask import Flask


def init_app(app: Flask) -> None:
    from oauth import models  # noqa: F401  (tables known to migrations)
    from oauth.cli import tokens_cli, users_cli

    app.cli.add_command(users_cli)
    app.cli.add_command(tokens_cli)
