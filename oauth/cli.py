"""`flask users create EMAIL` and `flask tokens issue EMAIL --audience api|mcp --scope … [--ttl S]`."""
import click
from flask import current_app
from flask.cli import AppGroup

from oauth.tokens import API_AUDIENCE, DEFAULT_TTL, create_user, issue_token, user_by_email_or_404
from trips.db import atomic
from trips.errors import DomainError, Invalid

users_cli = AppGroup("users", help="Manage accounts.")
tokens_cli = AppGroup("tokens", help="Issue bearer tokens.")


def _fail(exc: DomainError):
    detail = "; ".join(f"{k}: {v}" for k, v in exc.errors.items()) if isinstance(exc, Invalid) else exc.message
    raise click.ClickException(detail)


@users_cli.command("create")
@click.argument("email")
def users_create(email):
    """Create an account for EMAIL."""
    try:
        with atomic():
            user = create_user(email)
    except DomainError as exc:
        _fail(exc)
    click.echo(f"created {user.email} ({user.id})")


@tokens_cli.command("issue")
@click.argument("email")
@click.option("--audience", type=click.Choice(["api", "mcp"]), required=True)
@click.option("--scope", required=True, help='e.g. "trips:read trips:write"')
@click.option("--ttl", type=int, default=DEFAULT_TTL, show_default=True, help="lifetime in seconds")
def tokens_issue(email, audience, scope, ttl):
    """Print a new bearer token for EMAIL on stdout (nothing else)."""
    target = API_AUDIENCE if audience == "api" else current_app.config["MCP_RESOURCE"]
    try:
        with atomic():
            token = issue_token(user_by_email_or_404(email), target, scope, ttl)
    except DomainError as exc:
        _fail(exc)
    click.echo(token)
