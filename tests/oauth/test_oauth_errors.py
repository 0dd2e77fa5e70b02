"""Authorization errors (oauth.services.authorize_errors): back to the client only when the redirect can be trusted
(known client, exact registered URI, a person who approved it before), else BTP's own page; fixed wording,
nothing of the request reflected (RFC 9700 §4.11.2)."""
from urllib.parse import parse_qs, unquote_plus, urlsplit

import pytest
import sqlalchemy as sa

from oauth.services.authorize_errors import WORDING
from oauth.services.server import PKCE_REQUIRED, REDIRECT_UNREGISTERED, SCOPE_REQUIRED
from tests.oauth.test_oauth_flow import REDIRECT, approve, authorize_url, csrf_of, full_flow, pkce, sign_in

HOSTILE = "<script>x"
ISSUER = "http://127.0.0.1:8000"

# (what changes in a good request, the error, the fixed description)
TRUSTABLE = [
    ({"response_type": HOSTILE}, "unsupported_response_type", WORDING["unsupported_response_type"]),
    ({"response_type": "token"}, "unsupported_response_type", WORDING["unsupported_response_type"]),
    ({"code_challenge": None, "code_challenge_method": None}, "invalid_request", PKCE_REQUIRED),
    ({"code_challenge_method": None}, "invalid_request", PKCE_REQUIRED),
    ({"code_challenge_method": "plain"}, "invalid_request", PKCE_REQUIRED),
    ({"code_challenge_method": HOSTILE}, "invalid_request", PKCE_REQUIRED),
    ({"scope": None}, "invalid_scope", SCOPE_REQUIRED),
    ({"scope": "trips:admin " + HOSTILE}, "invalid_scope", WORDING["invalid_scope"]),
    ({"resource": "https://elsewhere.example/" + HOSTILE}, "invalid_target", WORDING["invalid_target"]),
]
# Never trustable: the client is unknown, or the redirect is not one it registered.
UNTRUSTABLE = [
    ({"client_id": HOSTILE}, "invalid_client", WORDING["invalid_client"]),
    ({"redirect_uri": "https://evil.example/phish?" + HOSTILE}, "invalid_request", REDIRECT_UNREGISTERED),
    # authlib lets a loopback URI change its port (RFC 8252 §7.3); trust needs the exact URI. (scope=None added)
    ({"redirect_uri": REDIRECT.replace("33418", "33419")}, "invalid_scope", SCOPE_REQUIRED),
]


@pytest.fixture
def registered(client):
    response = client.post("/oauth/register", json={"client_name": "Test Agent", "redirect_uris": [REDIRECT]})
    return response.get_json()["client_id"]


def url_with(client_id, change):
    change = dict(change)
    return authorize_url(change.pop("client_id", client_id), pkce()[1], **change)


def assert_page(response, error, description):
    """BTP's own page: 400, no Location, the fixed words, nothing hostile."""
    body = response.get_data(as_text=True)
    assert response.status_code == 400 and "Location" not in response.headers
    assert response.headers["Cache-Control"] == "no-store"
    assert "<script" not in body and "&lt;script" not in body and "x3cscript" not in body.lower()
    assert "evil.example" not in body and "elsewhere" not in body and "trips:admin" not in body
    assert f"Error code: {error}" in body and description.replace("'", "&#39;") in body


def assert_back_to_client(response, error, description):
    assert response.status_code == 302 and response.headers["Cache-Control"] == "no-store"
    location = response.headers["Location"]
    assert location.startswith(REDIRECT + "?") and "<script" not in unquote_plus(location)
    assert "elsewhere" not in location and "admin" not in location
    query = parse_qs(urlsplit(location).query)
    assert query == {"error": [error], "error_description": [description], "state": ["st-1"], "iss": [ISSUER]}


@pytest.mark.parametrize("change,error,description", TRUSTABLE + UNTRUSTABLE[:2])
def test_an_unapproved_client_gets_no_redirect(app, client, registered, change, error, description):
    sign_in(app, client)
    assert_page(client.get(url_with(registered, change)), error, description)


@pytest.mark.parametrize("change,error,description", TRUSTABLE)
def test_a_previously_approved_client_gets_the_error_back(app, client, registered, change, error, description):
    full_flow(app, client, registered)
    assert_back_to_client(client.get(url_with(registered, change)), error, description)


@pytest.mark.parametrize("change,error,description", UNTRUSTABLE)
def test_an_approval_never_vouches_for_an_unknown_client_or_another_address(app, client, registered, change,
                                                                             error, description):
    full_flow(app, client, registered)
    response = client.get(url_with(registered, {"scope": None, **change}))  # invalid in any case
    assert_page(response, error, description)


def test_the_consent_page_posts_errors_alike(app, client, registered):
    sign_in(app, client)
    form = {"csrf_token": csrf_of(client.get("/login").get_data(as_text=True)), "decision": "approve"}
    assert_page(client.post(url_with(registered, {"response_type": HOSTILE}), data=form),
                "unsupported_response_type", WORDING["unsupported_response_type"])


def test_only_an_approval_in_force_by_this_person_counts(app, client, registered):
    full_flow(app, client, registered)
    other = app.test_client()
    sign_in(app, other, email="someone.else@example.org")
    assert_page(other.get(url_with(registered, {"scope": None})), "invalid_scope", SCOPE_REQUIRED)
    account = client.get("/account").get_data(as_text=True)
    grant_id = account.split("/account/agents/", 1)[1].split("/", 1)[0]
    client.post(f"/account/agents/{grant_id}/revoke", data={"csrf_token": csrf_of(account)})
    assert_page(client.get(url_with(registered, {"scope": None})), "invalid_scope", SCOPE_REQUIRED)


def test_an_approval_whose_tokens_all_ended_no_longer_counts(app, client, registered, ctx):
    from datetime import timedelta

    from oauth.kernel.models import AccessToken, RefreshToken

    from trips.core.db import utcnow
    from trips.core.db import atomic, db

    full_flow(app, client, registered)
    with atomic():
        for model in (AccessToken, RefreshToken):
            db.session.execute(sa.update(model).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert_page(client.get(url_with(registered, {"scope": None})), "invalid_scope", SCOPE_REQUIRED)


def test_a_denial_goes_back_to_an_unapproved_client_with_fixed_words(app, client, registered):
    sign_in(app, client)
    response = approve(client, url_with(registered, {}), decision="deny")
    assert response.status_code == 302 and response.headers["Cache-Control"] == "no-store"
    query = parse_qs(urlsplit(response.headers["Location"]).query)
    assert query["error"] == ["access_denied"] and query["iss"] == [ISSUER] and query["state"] == ["st-1"]
    assert "code" not in query


def test_signed_out_errors_only_lead_to_the_sign_in_page(client, registered):
    response = client.get(url_with(registered, {"response_type": HOSTILE}))
    assert response.status_code == 302 and urlsplit(response.headers["Location"]).path == "/login"
    assert not response.headers["Location"].startswith(REDIRECT)
