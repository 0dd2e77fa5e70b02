"""The account's data (docs/RULES.md "Account export"): everything BTP holds about the account as JSON, or with the
trips' GPX in a ZIP; never a secret, never another account's data; by bearer token or the signed-in session."""
import io
import json
import zipfile

import pytest
import sqlalchemy as sa

from oauth.kernel.models import AccessToken, Grant, OAuthClient, RefreshToken
from oauth.kernel.tokens import hash_token, issue_token
from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.oauth.test_oauth_flow import sign_in
from tests.trips.api.test_openapi import Conformance
from trips.core.db import atomic, db
from trips.models import Stage
from trips.route.gpx import parse_gpx
from trips.services import sharing
from trips.services.trips import import_gpx

AGENT = "https://agent.example/client.json"


@pytest.fixture
def account(app, rider):
    """The rider with two trips (one shared, one night chosen), an agent with its token and a personal token; beside
    them a stranger with a trip and tokens of their own. Returns the rider, their REST headers and every
    plaintext token made."""
    user, headers = rider
    first = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Vercors")),
                       {"startDate": "2031-06-01", "endDate": "2031-06-03"})
    import_gpx(user, io.BytesIO(gpx_from_points(make_points(900), name="Vercors")), {})  # the same title twice
    with atomic():
        day = db.session.query(Stage).filter_by(trip_id=first.id, position=0).one()
        day.selected_accommodation = {"name": "Gîte du Col", "type": "guest_house", "lat": day.end_lat,
                                      "lon": day.end_lon}
        db.session.add(OAuthClient(client_id=AGENT, kind="metadata", client_name="Agent", redirect_uris=[]))
        db.session.add(Grant(user_id=user.id, client_id=AGENT, scope="trips:read"))
        agent_token = issue_token(user, app.config["MCP_RESOURCE"], "trips:read", client_id=AGENT)
    sharing.share_trip(user, first.id)
    stranger = make_user("stranger@example.org")
    import_gpx(stranger, io.BytesIO(gpx_from_points(make_points(900), name="Stranger's own ride")), {})
    secrets = [headers["Authorization"].split()[1], agent_token, make_token(user, "trips:read"), make_token(stranger)]
    return user, headers, secrets, first


def hashes() -> list[str]:
    return [*db.session.scalars(sa.select(AccessToken.token_hash)), *db.session.scalars(sa.select(RefreshToken.token_hash))]


def no_secret(text: str, secrets: list[str]) -> None:
    assert not [s for s in secrets if s in text], "a token's plaintext is in the export"
    assert not [h for h in hashes() if h in text], "a token's hash is in the export"
    assert not [hash_token(s) for s in secrets if hash_token(s) in text]


def test_the_export_holds_the_account_and_no_secret(app, client, account):
    user, headers, secrets, first = account
    doc = client.get("/api/openapi.json").get_json()
    url = "/api/users/me/export"
    response = Conformance(app, doc).check(client.get(url, headers=headers), "get", url)
    assert response.status_code == 200 and response.headers["Cache-Control"] == "no-store"
    assert "attachment" in response.headers["Content-Disposition"]
    text = response.get_data(as_text=True)
    no_secret(text, secrets)
    data = json.loads(text)
    assert data["account"]["email"] == "rider@example.org" and data["account"]["userId"] == user.id
    assert [t["title"] for t in data["trips"]] == ["Vercors", "Vercors"]
    shared = next(t for t in data["trips"] if t["id"] == first.id)
    assert len(shared["stages"]) == 3 and shared["stages"][0]["selectedAccommodation"]["name"] == "Gîte du Col"
    assert [s["revokedAt"] for s in shared["shares"]] == [None] and shared["shares"][0]["url"].endswith(
        "/s/" + shared["shares"][0]["shortCode"])
    assert [(a["name"], a["scopes"]) for a in data["agents"]] == [("Agent", ["trips:read"])]
    prefixes = {t["prefix"] for t in data["tokens"]["access"]}  # what names a token to its owner, as /account shows
    assert all(any(s.startswith(p) for p in prefixes) for s in secrets[:3])
    assert len(data["tokens"]["access"]) == 3 and {t["clientId"] for t in data["tokens"]["access"]} == {None, AGENT}
    assert "stranger" not in text.lower() and "Stranger's own ride" not in text


def test_the_zip_holds_the_json_and_each_trip_s_gpx(client, account):
    user, headers, secrets, first = account
    response = client.get("/api/users/me/export?format=zip", headers=headers)
    assert response.status_code == 200 and response.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.data))
    names = sorted(archive.namelist())
    assert names[0] == "account.json" and len(names) == 3 and "trips/Vercors.gpx" in names
    assert len([n for n in names if n.startswith("trips/Vercors-")]) == 1  # the second of one title: by its id
    everything = "".join(archive.read(n).decode() for n in names)
    no_secret(everything, secrets)
    assert "Stranger's own ride" not in everything
    data = json.loads(archive.read("account.json"))
    assert len(data["trips"]) == 2
    for name in names[1:]:
        assert parse_gpx(archive.read(name)).points.shape[0] > 2


def test_an_unknown_format_is_refused_by_its_name(app, client, account):
    doc = client.get("/api/openapi.json").get_json()
    url = "/api/users/me/export?format=pdf"
    response = Conformance(app, doc).check(client.get(url, headers=account[1]), "get", url)
    assert response.status_code == 422 and "format" in response.get_json()["errors"]


def test_the_export_needs_a_token_that_reads(client, account):
    assert client.get("/api/users/me/export").status_code == 401
    assert client.get("/api/users/me/export", headers=auth(make_token(account[0], "trips:write"))).status_code == 403


def test_another_account_exports_only_its_own(client, account):
    stranger = db.session.scalar(sa.select(type(account[0])).where(type(account[0]).email == "stranger@example.org"))
    text = client.get("/api/users/me/export", headers=auth(make_token(stranger))).get_data(as_text=True)
    data = json.loads(text)
    assert [t["title"] for t in data["trips"]] == ["Stranger's own ride"]
    assert "rider@example.org" not in text and "Vercors" not in text and "Gîte du Col" not in text
    assert data["agents"] == [] and len(data["tokens"]["access"]) == 2


def test_the_account_page_links_the_export_for_its_session(app, client, account):
    assert client.get("/account/export").status_code == 302  # signed out: to the sign-in page
    assert "/login" in client.get("/account/export").headers["Location"]
    sign_in(app, client)  # the rider, by e-mail link
    page = client.get("/account").get_data(as_text=True)
    assert 'href="/account/export"' in page and 'href="/account/export?format=zip"' in page
    response = client.get("/account/export")
    assert response.status_code == 200 and response.mimetype == "application/json"
    data = response.get_json()
    assert data["account"]["email"] == "rider@example.org" and len(data["trips"]) == 2
    no_secret(response.get_data(as_text=True), account[2])
    zipped = client.get("/account/export?format=zip")
    assert zipped.status_code == 200 and "account.json" in zipfile.ZipFile(io.BytesIO(zipped.data)).namelist()
