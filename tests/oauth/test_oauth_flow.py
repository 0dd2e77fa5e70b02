"""The OAuth 2.1 flow driven over HTTP: sign-in link from the outbox, consent, code + PKCE, refresh rotation,
revocation; and every refusal on the way."""
import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from oauth.services.resource import McpInsufficientScope, McpUnauthorized, mcp_principal

REDIRECT = "http://127.0.0.1:33418/callback"


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def outbox_link(app) -> str:
    from pathlib import Path

    newest = max((Path(app.instance_path) / "outbox").glob("*.eml"), key=lambda p: p.stat().st_mtime_ns)
    return re.search(r"http://\S+/login/(\S+)", newest.read_text()).group(0)


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


def sign_in(app, client, email="rider@example.org", next_url=None):
    page = client.get("/login" + (f"?{urlencode({'next': next_url})}" if next_url else "")).get_data(as_text=True)
    form = {"email": email, "csrf_token": csrf_of(page)}
    if next_url:
        form["next"] = next_url
    assert client.post("/login", data=form).status_code == 200
    path = urlsplit(outbox_link(app)).path
    confirm = client.get(path)
    assert confirm.status_code == 200  # shown, not spent
    return client.post(path, data={"csrf_token": csrf_of(confirm.get_data(as_text=True))})


@pytest.fixture
def registered(client):
    response = client.post("/oauth/register", json={"client_name": "Test Agent", "redirect_uris": [REDIRECT],
                                                    "token_endpoint_auth_method": "none"})
    assert response.status_code == 201
    return response.get_json()["client_id"]


def authorize_url(client_id, challenge, **extra):
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT, "state": "st-1",
             "scope": "trips:read trips:write", "code_challenge": challenge, "code_challenge_method": "S256",
             "resource": "http://127.0.0.1:8000/mcp", **extra}
    return "/oauth/authorize?" + urlencode({k: v for k, v in query.items() if v is not None})


def consent(client, url):
    page = client.get(url)
    assert page.status_code == 200, page.get_data(as_text=True)[:300]
    html = page.get_data(as_text=True)
    return html, {"csrf_token": csrf_of(html),
                  "decision_token": re.search(r'name="decision_token" value="([^"]+)"', html).group(1)}


def approve(client, url, decision="approve"):
    _, form = consent(client, url)
    return client.post(url, data={**form, "decision": decision})


def code_from(response, issuer="http://127.0.0.1:8000") -> str:
    assert response.status_code == 302, response.get_data(as_text=True)[:300]
    query = parse_qs(urlsplit(response.headers["Location"]).query)
    assert query["state"] == ["st-1"] and query["iss"] == [issuer]
    return query["code"][0]


def exchange(client, client_id, code, verifier, **extra):
    form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "client_id": client_id,
            "code_verifier": verifier, "resource": "http://127.0.0.1:8000/mcp", **extra}
    return client.post("/oauth/token", data={k: v for k, v in form.items() if v is not None})


def refresh(client, client_id, token):
    return client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": token,
                                             "client_id": client_id})


def mcp_user(app, token, scope=None):
    with app.test_request_context("/mcp", headers={"Authorization": f"Bearer {token}"}):
        return mcp_principal(scope).user.email


def full_flow(app, client, client_id):
    sign_in(app, client)
    verifier, challenge = pkce()
    code = code_from(approve(client, authorize_url(client_id, challenge)))
    response = exchange(client, client_id, code, verifier)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def test_metadata_documents(client):
    # Never derived from the Host: another name this server answers for (loopback, in development) changes nothing,
    # and a name it does not answer for is refused (app.py, the Host allow-list).
    assert client.get("/.well-known/oauth-authorization-server", headers={"Host": "attacker.example"}).status_code == 400
    asm = client.get("/.well-known/oauth-authorization-server", headers={"Host": "localhost:9999"}).get_json()
    assert asm["issuer"] == "http://127.0.0.1:8000" and asm["token_endpoint"].startswith("http://127.0.0.1:8000/")
    assert asm["code_challenge_methods_supported"] == ["S256"] and asm["authorization_response_iss_parameter_supported"]
    assert asm["registration_endpoint"].endswith("/oauth/register") and asm["revocation_endpoint"]
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        prm = client.get(path, headers={"Host": "[::1]:9999"})
        assert prm.get_json()["resource"] == "http://127.0.0.1:8000/mcp"
        assert prm.get_json()["scopes_supported"] == ["trips:read", "trips:write"]
        assert prm.headers["Access-Control-Allow-Origin"] == "*"


def test_registered_client_full_flow_and_refresh_rotation(app, client, registered):
    tokens = full_flow(app, client, registered)
    assert tokens["token_type"].lower() == "bearer" and tokens["expires_in"] == 900
    assert tokens["scope"] == "trips:read trips:write" and tokens["refresh_token"].startswith("btp_rt_")
    assert mcp_user(app, tokens["access_token"], "trips:write") == "rider@example.org"
    assert client.get("/api/trips", headers={"Authorization": f"Bearer {tokens['access_token']}"}).status_code == 401
    rotated = refresh(client, registered, tokens["refresh_token"])
    assert rotated.status_code == 200
    new = rotated.get_json()
    assert new["refresh_token"] != tokens["refresh_token"]
    assert mcp_user(app, new["access_token"]) == "rider@example.org"
    reused = refresh(client, registered, tokens["refresh_token"])  # a stolen copy comes back
    assert reused.status_code == 400 and reused.get_json()["error"] == "invalid_grant"
    with pytest.raises(McpUnauthorized):
        mcp_user(app, new["access_token"])  # the whole family is revoked
    assert refresh(client, registered, new["refresh_token"]).status_code == 400


@pytest.fixture
def cimd_allowed(app, monkeypatch):
    """The test-only switch for plain-http loopback documents; BTP itself is served as localhost here so
    that the fake's 127.0.0.1 is not BTP's own host (which is always refused)."""
    monkeypatch.setitem(app.config, "CIMD_ALLOW_INSECURE_LOOPBACK", True)
    monkeypatch.setitem(app.config, "BTP_BASE_URL", "http://localhost:8000")
    monkeypatch.setitem(app.config, "MCP_RESOURCE", "http://localhost:8000/mcp")


def test_metadata_document_client(app, client, fake_cimd, cimd_allowed):
    client_id = fake_cimd.add_client("/agent.json", client_name="Doc Agent", redirect_uris=[REDIRECT])
    sign_in(app, client)
    verifier, challenge = pkce()
    url = authorize_url(client_id, challenge, resource="http://localhost:8000/mcp")
    html, _ = consent(client, url)
    assert "Doc Agent" in html and "127.0.0.1" in html and "on this device" in html
    code = code_from(approve(client, url), issuer="http://localhost:8000")
    tokens = exchange(client, client_id, code, verifier, resource="http://localhost:8000/mcp")
    assert tokens.status_code == 200
    assert fake_cimd.requests_to("/agent.json") == 1  # cached for its max-age


def test_a_bad_metadata_document_is_refused_without_details(app, client, fake_cimd, cimd_allowed):
    client_id = fake_cimd.url("/liar.json")
    fake_cimd.serve("/liar.json", {"client_id": "https://other.example/x.json", "client_name": "Liar",
                                   "redirect_uris": [REDIRECT]})
    sign_in(app, client)
    response = client.get(authorize_url(client_id, pkce()[1]))
    assert response.status_code == 400 and "could not be resolved" in response.get_data(as_text=True)
    assert "other.example" not in response.get_data(as_text=True)


def test_unauthenticated_authorize_goes_to_login_and_back(app, client, registered):
    url = authorize_url(registered, pkce()[1])
    response = client.get(url)
    assert response.status_code == 302 and urlsplit(response.headers["Location"]).path == "/login"
    back = sign_in(app, client, next_url=url)
    assert back.status_code == 302 and back.headers["Location"].endswith(url)


def test_deny_returns_access_denied_with_iss(app, client, registered):
    sign_in(app, client)
    response = approve(client, authorize_url(registered, pkce()[1]), decision="deny")
    query = parse_qs(urlsplit(response.headers["Location"]).query)
    assert query["error"] == ["access_denied"] and query["iss"] == ["http://127.0.0.1:8000"]
    assert query["state"] == ["st-1"] and "code" not in query


def test_a_trailing_slash_on_the_resource_is_tolerated(app, client, registered):
    sign_in(app, client)
    verifier, challenge = pkce()
    url = authorize_url(registered, challenge, resource="http://127.0.0.1:8000/mcp/")
    response = exchange(client, registered, code_from(approve(client, url)), verifier,
                        resource="http://127.0.0.1:8000/mcp/")
    assert response.status_code == 200


def test_an_unregistered_redirect_is_never_followed(app, client, registered):
    sign_in(app, client)
    url = authorize_url(registered, pkce()[1]).replace("33418", "33418%2Fevil").replace("127.0.0.1", "evil.example")
    response = client.get(url)
    assert response.status_code == 400 and "Location" not in response.headers
    assert "evil.example" not in response.get_data(as_text=True)


def test_code_exchange_refusals(app, client, registered):
    sign_in(app, client)
    verifier, challenge = pkce()
    code = code_from(approve(client, authorize_url(registered, challenge)))
    wrong = exchange(client, registered, code, "x" * 50)
    assert wrong.status_code == 400 and wrong.get_json()["error"] == "invalid_grant"
    other_target = exchange(client, registered, code, verifier, resource="https://elsewhere.example/mcp")
    assert other_target.status_code == 400 and other_target.get_json()["error"] == "invalid_target"
    redirect = exchange(client, registered, code, verifier, redirect_uri="http://127.0.0.1:1/other")
    assert redirect.status_code == 400
    good = exchange(client, registered, code, verifier)
    assert good.status_code == 200
    replay = exchange(client, registered, code, verifier)
    assert replay.status_code == 400 and replay.get_json()["error"] == "invalid_grant"
    with pytest.raises(McpUnauthorized):  # what the first exchange bought is revoked
        mcp_user(app, good.get_json()["access_token"])


@pytest.mark.parametrize("grant_type", ["password", "client_credentials", "implicit"])
def test_other_grants_are_refused(client, registered, grant_type):
    response = client.post("/oauth/token", data={"grant_type": grant_type, "client_id": registered,
                                                 "username": "a", "password": "b"})
    assert response.status_code == 400 and response.get_json()["error"] == "unsupported_grant_type"


def test_consent_post_needs_csrf_and_a_fresh_decision_for_this_exact_request(app, client, registered):
    sign_in(app, client)
    verifier, challenge = pkce()
    url = authorize_url(registered, challenge)
    _, form = consent(client, url)
    no_csrf = client.post(url, data={"decision_token": form["decision_token"], "decision": "approve"})
    assert no_csrf.status_code == 200 and "Allow" in no_csrf.get_data(as_text=True)  # asked again
    changed = client.post(authorize_url(registered, challenge, scope="trips:read"),
                          data={**form, "decision": "approve"})
    assert changed.status_code == 200  # the decision does not travel to another request
    other_challenge = client.post(authorize_url(registered, pkce()[1]), data={**form, "decision": "approve"})
    assert other_challenge.status_code == 200
    assert client.post(url, data={**form, "decision": "approve"}).status_code == 302
    replay = client.post(url, data={**form, "decision": "approve"})
    assert replay.status_code == 200  # spent: asked again


def test_revoked_grant_stops_its_tokens_at_once(app, client, registered):
    tokens = full_flow(app, client, registered)
    account = client.get("/account").get_data(as_text=True)
    assert "Test Agent" in account and "not used yet" in account
    grant_id = re.search(r"/account/agents/([^/]+)/revoke", account).group(1)
    client.post(f"/account/agents/{grant_id}/revoke", data={"csrf_token": csrf_of(account)})
    with pytest.raises(McpUnauthorized):
        mcp_user(app, tokens["access_token"])
    assert refresh(client, registered, tokens["refresh_token"]).status_code == 400
    assert "Test Agent" not in client.get("/account").get_data(as_text=True)


def test_revocation_endpoint(app, client, registered):
    tokens = full_flow(app, client, registered)
    response = client.post("/oauth/revoke", data={"token": tokens["refresh_token"], "client_id": registered})
    assert response.status_code == 200
    with pytest.raises(McpUnauthorized):
        mcp_user(app, tokens["access_token"])  # a refresh token takes its family with it
    unknown = client.post("/oauth/revoke", data={"token": "btp_rt_nothing", "client_id": registered})
    assert unknown.status_code == 200  # RFC 7009 §2.2


def test_resource_side_answers(app):
    with app.test_request_context("/mcp"):
        with pytest.raises(McpUnauthorized) as no_token:
            mcp_principal()
    assert no_token.value.token_sent is False
    with app.test_request_context("/mcp", headers={"Authorization": "Bearer btp_at_nope"}):
        with pytest.raises(McpUnauthorized) as bad:
            mcp_principal()
    assert bad.value.token_sent is True
    from oauth.services.resource import challenge

    with app.test_request_context("/mcp"):
        assert challenge() == ('Bearer resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-'
                               'resource/mcp", scope="trips:read trips:write"')
        assert challenge("invalid_token").startswith('Bearer error="invalid_token", ')


def test_scope_is_enforced_on_the_resource(app, client, registered):
    sign_in(app, client)
    verifier, challenge = pkce()
    code = code_from(approve(client, authorize_url(registered, challenge, scope="trips:read")))
    token = exchange(client, registered, code, verifier).get_json()["access_token"]
    assert mcp_user(app, token, "trips:read") == "rider@example.org"
    with pytest.raises(McpInsufficientScope) as refused:
        mcp_user(app, token, "trips:write")
    assert refused.value.scope == "trips:write"


@pytest.mark.parametrize("body,error", [
    ({"client_name": "x", "redirect_uris": ["http://localhost:3000/cb"]}, "invalid_redirect_uri"),
    ({"client_name": "x", "redirect_uris": ["https://a.example/cb#frag"]}, "invalid_redirect_uri"),
    ({"client_name": "x", "redirect_uris": []}, "invalid_redirect_uri"),
    ({"client_name": "x", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"},
     "invalid_client_metadata"),
    ({"client_name": "x", "redirect_uris": [REDIRECT], "grant_types": ["password"]}, "invalid_client_metadata"),
    ({"client_name": "", "redirect_uris": [REDIRECT]}, "invalid_client_metadata"),
    ("not an object", "invalid_client_metadata"),
])
def test_registration_refusals(client, body, error):
    response = client.post("/oauth/register", json=body)
    assert response.status_code == 400 and response.get_json()["error"] == error


def test_registration_accepts_app_schemes(client):
    response = client.post("/oauth/register", json={"client_name": "Cursor", "redirect_uris": [
        "cursor://anysphere.cursor-mcp/oauth/callback", "http://[::1]:9000/cb"]})
    assert response.status_code == 201 and response.get_json()["token_endpoint_auth_method"] == "none"


def test_token_endpoint_is_rate_limited_per_ip(client, registered):
    for _ in range(60):
        client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x", "client_id": registered})
    refused = client.post("/oauth/token", data={"grant_type": "refresh_token", "refresh_token": "x",
                                                "client_id": registered})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert refused.mimetype.endswith("json")


def test_the_consent_page_keeps_its_own_policy_and_gets_the_other_security_headers(app, client, registered):
    sign_in(app, client)
    page = client.get(authorize_url(registered, pkce()[1]))
    assert page.status_code == 200
    policies = page.headers.getlist("Content-Security-Policy")
    assert len(policies) == 1 and "form-action 'self' " in policies[0]  # the page's own, not replaced or doubled
    assert page.headers.getlist("X-Content-Type-Options") == ["nosniff"]
    assert page.headers.getlist("Referrer-Policy") == ["no-referrer"]
