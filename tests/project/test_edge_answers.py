"""Registration while Redis is away, Cache-Control on bearer answers, the text floor on the public GPX, the Host
allow-list."""
import io

import pytest
import sqlalchemy as sa

from oauth.kernel.models import OAuthClient
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


# --- the Host allow-list ------------------------------------------------------------------------------------------

PUBLIC = "https://btp.example.org"


def _get(app, path, host, remote="127.0.0.1", **headers):
    return app.test_client().get(path, headers={"Host": host, **headers}, environ_base={"REMOTE_ADDR": remote})


def _refused(response) -> bool:
    return response.status_code == 400 and response.mimetype == "text/plain" \
        and response.get_data() == b"This server does not answer for that host name.\n"


def test_development_answers_its_own_host_and_loopback_names_only(app):
    for host in ("127.0.0.1:8000", "localhost", "LOCALHOST:5000", "[::1]:8000", "127.0.0.2", "localhost."):
        assert _get(app, "/api/openapi.json", host).status_code == 200, host
    for host in ("evil.example", "127.0.0.1.evil.example", "127.evil.example", "localhost.evil.example", "[::2]"):
        refused = _get(app, "/api/openapi.json", host)
        assert _refused(refused), host
        assert host.encode() not in refused.get_data()  # the value sent is never echoed
    assert _refused(_get(app, "/healthz", "evil.example"))  # probes too: from loopback, a loopback name


@pytest.fixture
def production(fresh_app):
    return fresh_app(BTP_ENV="production", BTP_BASE_URL=PUBLIC)


def test_production_answers_only_its_public_host(production):
    for host in ("btp.example.org", "BTP.example.org:443", "btp.example.org."):
        assert _get(production, "/api/openapi.json", host).status_code == 200, host
    for host in ("localhost", "127.0.0.1:8000", "www.btp.example.org", "btp.example.org.evil.example"):
        assert _refused(_get(production, "/api/openapi.json", host)), host


def test_production_probes_answer_on_the_node_address_and_loopback(production):
    assert _get(production, "/healthz", "127.0.0.1:8000").status_code == 200
    assert _get(production, "/metrics", "localhost:8000").status_code == 200  # loopback: no token needed
    assert _get(production, "/healthz", "btp.example.org", remote="203.0.113.9").status_code == 200
    # A load balancer's probe, or Prometheus scraping a node by its address (README "Scaling out")
    assert _get(production, "/readyz", "10.0.0.11:8000", remote="10.0.0.2").status_code in (200, 503)
    assert not _refused(_get(production, "/metrics", "[fd00::11]:8000", remote="10.0.0.2"))  # its own rules next
    assert _refused(_get(production, "/healthz", "evil.example"))
    assert _refused(_get(production, "/healthz", "10.0.0.11.evil.example"))
    assert _refused(_get(production, "/api/openapi.json", "10.0.0.11:8000"))  # only the probes take an address


def test_a_loopback_public_url_answers_every_loopback_name_in_production(fresh_app):
    local = fresh_app(BTP_ENV="production", BTP_BASE_URL="http://127.0.0.1:8000")
    assert _get(local, "/api/openapi.json", "localhost").status_code == 200
    assert _refused(_get(local, "/api/openapi.json", "evil.example"))


def test_behind_trusted_proxies_the_forwarded_host_is_checked(fresh_app, production):
    proxied = fresh_app(BTP_ENV="production", BTP_BASE_URL=PUBLIC, BTP_TRUSTED_PROXIES="1")
    inner = "10.0.0.11:8000"  # the node's own address, as a proxy that forwards the Host in X-Forwarded-Host sends
    assert _get(proxied, "/api/openapi.json", inner, **{"X-Forwarded-Host": "btp.example.org"}).status_code == 200
    assert _refused(_get(proxied, "/api/openapi.json", inner, **{"X-Forwarded-Host": "evil.example"}))
    # nginx as deploy/nginx.conf sets it: Host $host, X-Forwarded-Host cleared
    assert _get(proxied, "/api/openapi.json", "btp.example.org", **{"X-Forwarded-For": "203.0.113.9"}).status_code == 200
    # Without a trusted proxy nobody's X-Forwarded-Host is believed
    assert _refused(_get(production, "/api/openapi.json", "evil.example", **{"X-Forwarded-Host": "btp.example.org"}))
