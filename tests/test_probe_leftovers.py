"""Issue 23 item 4, the probe's leftovers: registration while Redis is away, Cache-Control on bearer answers, the
text floor on the public GPX, the Host allow-list."""
import io

import pytest
import sqlalchemy as sa

from oauth.models import OAuthClient
from tests.factories import auth
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import mcp_token, modern
from trips.core.db import db
from trips.services.trips import import_gpx

REDIRECT = "http://127.0.0.1:5555/callback"
AWAY = "redis://127.0.0.1:9/0"  # nothing listens there
BIDI = "\u202e\u2066"  # RIGHT-TO-LEFT OVERRIDE, LEFT-TO-RIGHT ISOLATE: they reorder what a reader sees
TITLE = f"Tour{BIDI} de la Drôme"
GPX = gpx_from_points(make_points(1200, step_m=100.0), name="Ride")


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


# --- Cache-Control: no-store on every answer to a bearer token -------------------------------------------------

@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(GPX), {"startDate": "2031-06-01", "endDate": "2031-06-02",
                                                  "title": TITLE})


def test_every_bearer_answer_is_no_store(app, client, rider, trip):
    user, headers = rider
    answers = {
        "trips": client.get("/api/trips", headers=headers),
        "trip": client.get(f"/api/trips/{trip.id}", headers=headers),
        "route (ETag)": client.get(f"/api/trips/{trip.id}/route", headers=headers),
        "gpx": client.get(f"/api/trips/{trip.id}.gpx", headers=headers),
        "me": client.get("/api/users/me", headers=headers),
        "tokens": client.get("/api/users/me/tokens", headers=headers),
        "geocode": client.get("/api/geocode/search?q=Lyon", headers=headers),
        "unknown token": client.get("/api/trips", headers=auth("btp_at_invented")),
        "mcp": modern(client, mcp_token(app, user), "tools/list"),
        "mcp unknown token": modern(client, "btp_at_invented", "tools/list"),
        "lowercase scheme": client.get("/api/trips", headers={
            "Authorization": headers["Authorization"].replace("Bearer", "bearer")}),
    }
    assert {name: r.headers.get("Cache-Control") for name, r in answers.items()} == \
        {name: "no-store" for name in answers}
    assert answers["trips"].status_code == 200 and answers["mcp"].status_code == 200
    assert answers["unknown token"].status_code == 401


def test_answers_without_a_bearer_token_keep_their_own_caching(client, rider, trip):
    _, headers = rider
    code = client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]
    assert client.get("/api/openapi.json").headers["Cache-Control"].startswith("public, max-age=")
    assert client.get(f"/s/{code}.gpx").headers["Cache-Control"] == "private, no-cache"
    assert client.get(f"/api/s/{code}/route").headers["Cache-Control"] == "private, no-cache"
    basic = client.get("/api/openapi.json", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert basic.headers["Cache-Control"].startswith("public, max-age=")  # only a bearer token makes it private


# --- the text floor on the public GPX ----------------------------------------------------------------------------

def test_the_public_gpx_carries_no_bidi_or_control_characters(client, rider, trip):
    from trips.core.db import atomic
    from trips.models import Stage

    _, headers = rider
    with atomic():
        stage = db.session.get(Stage, trip.stages[0].id)
        stage.label = f"Valence{BIDI}\x07 → Die"
        stage.selected_accommodation = {"name": f"Hôtel{BIDI} du Lac", "lat": 45.0, "lon": 5.0, "type": "hotel"}
    code = client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]
    shared = client.get(f"/s/{code}.gpx").get_data(as_text=True)
    assert "<name>Tour de la Drôme</name>" in shared and "Day 1: Valence → Die" in shared
    assert "<name>Hôtel du Lac</name>" in shared
    assert not any(c in shared for c in BIDI + "\x07")
    # The owner's own file carries the stored words as they are (REST gives stored text unchanged); the floor
    # is what made the difference above.
    own = client.get(f"/api/trips/{trip.id}.gpx", headers=headers).get_data(as_text=True)
    assert TITLE in own and f"Hôtel{BIDI} du Lac" in own
