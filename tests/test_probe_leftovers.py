"""Issue 23 item 4, the probe's leftovers: registration while Redis is away, Cache-Control on bearer answers, the
text floor on the public GPX, the Host allow-list."""
import sqlalchemy as sa

from oauth.models import OAuthClient
from trips.core.db import db

REDIRECT = "http://127.0.0.1:5555/callback"
AWAY = "redis://127.0.0.1:9/0"  # nothing listens there


def _clients(app) -> int:
    with app.app_context():
        return db.session.scalar(sa.select(sa.func.count()).select_from(OAuthClient))


def test_registration_is_refused_while_redis_is_away_and_writes_nothing(app, fresh_app):
    down = fresh_app(REDIS_URL=AWAY)
    refused = down.test_client().post("/oauth/register", json={"client_name": "Agent", "redirect_uris": [REDIRECT]})
    assert refused.status_code == 503 and refused.get_json()["error"] == "temporarily_unavailable"
    assert refused.headers["Retry-After"] == "5" and refused.headers["Cache-Control"] == "no-store"
    assert _clients(app) == 0
    # The same request with Redis there is registered: the refusal was Redis's absence, nothing else.
    made = app.test_client().post("/oauth/register", json={"client_name": "Agent", "redirect_uris": [REDIRECT]})
    assert made.status_code == 201 and _clients(app) == 1


def test_a_malformed_registration_is_refused_as_before_while_redis_is_away(app, fresh_app):
    down = fresh_app(REDIS_URL=AWAY)
    refused = down.test_client().post("/oauth/register", json={"redirect_uris": "not a list"})
    assert refused.status_code == 400 and refused.get_json()["error"] == "invalid_redirect_uri"
    assert _clients(app) == 0
