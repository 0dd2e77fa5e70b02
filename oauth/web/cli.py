"""`flask users create EMAIL`, `flask tokens issue EMAIL --audience api|mcp --scope … [--ttl S]`,
`flask tokens list EMAIL`, `flask tokens revoke ID` and `flask tokens revoke --all EMAIL`."""
import click
import sqlalchemy as sa
from flask import current_app
from flask.cli import AppGroup

from oauth.kernel.models import AccessToken
from oauth.kernel.tokens import (API_AUDIENCE, DEFAULT_TTL, audience_name, create_user, hash_token, issue_token,
                                 personal_tokens, revoke_personal_token, revoke_personal_tokens, user_by_email_or_404)
from trips.core.db import atomic, db
from trips.errors import DomainError, Invalid
from trips.core.text import quote

users_cli = AppGroup("users", help="Manage accounts.")
tokens_cli = AppGroup("tokens", help="Issue, list and revoke personal bearer tokens.")


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
@click.option("--ttl", type=int, default=DEFAULT_TTL, show_default=True, help="lifetime in seconds (one hour unless told)")
def tokens_issue(email, audience, scope, ttl):
    """Print a new bearer token for EMAIL on stdout (nothing else); its audience, then when it expires, go to stderr.

    An `mcp` token is for this configuration's MCP resource, {BTP_BASE_URL}/mcp: a server started with another
    BTP_BASE_URL (or, without one, another BTP_HOST or BTP_PORT) refuses it as issued for another audience."""
    target = API_AUDIENCE if audience == "api" else current_app.config["MCP_RESOURCE"]
    try:
        with atomic():
            token = issue_token(user_by_email_or_404(email), target, scope, ttl)
            expires = db.session.scalar(sa.select(AccessToken.expires_at)
                                        .where(AccessToken.token_hash == hash_token(token)))
    except DomainError as exc:
        _fail(exc)
    click.echo(token)
    if audience == "mcp":
        click.echo(f"audience: {target} (the MCP resource of BTP_BASE_URL {current_app.config['BTP_BASE_URL']}; "
                   "a server with another BTP_BASE_URL, or BTP_HOST/BTP_PORT, refuses it)", err=True)
    else:
        click.echo("audience: api (the REST API under /api of any server on this database)", err=True)
    click.echo(f"expires: {_when(expires)} (UTC; --ttl SECONDS sets another lifetime)", err=True)


def _when(value) -> str:
    return value.isoformat(timespec="seconds") + "Z"


@tokens_cli.command("list")
@click.argument("email")
def tokens_list(email):
    """List the live personal tokens of EMAIL (never their secret), one a line, tab-separated.

    BTP does not record when a personal token was last used. Connected applications are listed and
    disconnected on /account.
    """
    try:
        rows = personal_tokens(user_by_email_or_404(email))
    except DomainError as exc:
        _fail(exc)
    if not rows:
        click.echo("no live personal tokens")
        return
    click.echo("id\tprefix\taudience\tscopes\tcreated\texpires")
    for row in rows:
        click.echo("\t".join((row.id, row.prefix + "…", audience_name(row.audience), row.scope,
                              _when(row.issued_at), _when(row.expires_at))))


@tokens_cli.command("revoke")
@click.argument("token_id", required=False)
@click.option("--all", "everyone_of", metavar="EMAIL", help="revoke every live personal token of EMAIL")
def tokens_revoke(token_id, everyone_of):
    """Revoke the personal token TOKEN_ID (an id from `tokens list`), or with --all EMAIL every one of that
    account's. It takes effect at once: the next request with it is answered 401."""
    if (token_id is None) == (everyone_of is None):
        raise click.UsageError("give either a token ID or --all EMAIL")
    try:
        with atomic():
            if token_id is not None:
                revoke_personal_token(token_id)
            else:
                count = revoke_personal_tokens(user_by_email_or_404(everyone_of))
    except DomainError as exc:
        if token_id is not None:
            raise click.ClickException(f"{exc.message} ({quote(token_id)})") from None
        _fail(exc)
    click.echo(f"revoked {token_id}" if token_id is not None else f"revoked {count} personal token(s)")
