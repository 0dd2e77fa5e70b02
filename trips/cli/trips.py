"""`flask trips import EMAIL FILE.gpx` and `flask purge`."""
from datetime import timedelta

import click
import sqlalchemy as sa
from flask.cli import AppGroup, with_appcontext

from oauth.kernel.models import AccessToken, AuthorizationCode, LoginLink, RefreshToken

from trips.core.db import utcnow
from oauth.kernel.tokens import user_by_email_or_404
from trips.core.db import atomic, db
from trips.errors import DomainError, Invalid
from trips.models import IdempotencyRecord
from trips.services.idempotency import IDEMPOTENCY_TTL
from trips.services.trips import import_gpx

trips_cli = AppGroup("trips", help="Manage trips.")


@trips_cli.command("import")
@click.argument("email")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def trips_import(email, path):
    """Create a trip for EMAIL from the GPX file PATH."""
    try:
        user = user_by_email_or_404(email)
        with open(path, "rb") as fh:
            trip = import_gpx(user, fh, {})
    except DomainError as exc:
        detail = "; ".join(f"{k}: {v}" for k, v in exc.errors.items()) if isinstance(exc, Invalid) else exc.message
        raise click.ClickException(detail) from None
    click.echo(f"{trip.id} {len(trip.stages)} days {sum(s.distance for s in trip.stages):.1f} km")


@click.command("purge")
@with_appcontext
def purge_command():
    """Delete expired idempotency records, sign-in links, codes, and tokens dead for more than a day."""
    now, day = utcnow(), timedelta(days=1)
    with atomic():
        keys = db.session.execute(sa.delete(IdempotencyRecord).where(IdempotencyRecord.created_at < now - IDEMPOTENCY_TTL))
        tokens = 0
        for model in (AccessToken, RefreshToken):
            tokens += db.session.execute(sa.delete(model).where(sa.or_(
                model.expires_at < now - day, model.revoked_at < now - day))).rowcount
        links = db.session.execute(sa.delete(LoginLink).where(LoginLink.expires_at < now - day)).rowcount
        codes = db.session.execute(sa.delete(AuthorizationCode).where(AuthorizationCode.expires_at < now - day)).rowcount
    click.echo(f"purged {keys.rowcount} idempotency records, {tokens} tokens, {links} sign-in links, {codes} codes")
