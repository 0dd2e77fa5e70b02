"""Sign-in by e-mail link, the account page, account deletion, and the REST twins of connected agents."""
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from oauth.kernel.models import AccessToken, Grant, LoginLink, User
from tests.factories import auth, make_token, make_user
from tests.oauth.test_oauth_flow import csrf_of, full_flow, outbox_link, sign_in
from trips.core.db import atomic, db


def outbox(app) -> list[Path]:
    folder = Path(app.instance_path) / "outbox"
    return sorted(folder.glob("*.eml")) if folder.exists() else []


def ask_link(client, email):
    page = client.get("/login").get_data(as_text=True)
    return client.post("/login", data={"email": email, "csrf_token": csrf_of(page)})


def test_same_answer_whether_the_address_exists_or_not(app, client, ctx):
    make_user("known@example.org")
    known = ask_link(client, "known@example.org")
    unknown = ask_link(client, "UNKNOWN@example.org")
    assert known.status_code == unknown.status_code == 200
    assert known.get_data() == unknown.get_data()
    assert len(outbox(app)) == 2


def test_a_link_signs_in_once_and_creates_the_account(app, client, ctx):
    ask_link(client, "New.Rider@Example.org")
    link = outbox_link(app)
    path = link.split("http://127.0.0.1:8000")[1]
    confirm = client.get(path)
    assert confirm.status_code == 200 and db.session.scalar(sa.select(sa.func.count()).select_from(User)) == 0
    forged = app.test_client()  # another site posting the form: it has no CSRF token of this browser
    assert forged.post(path).status_code == 400 and forged.get("/account").status_code == 302
    signed_in = client.post(path, data={"csrf_token": csrf_of(confirm.get_data(as_text=True))})
    assert signed_in.status_code == 302 and signed_in.headers["Location"] == "/account"
    cookie = signed_in.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie  # loopback base URL
    assert "new.rider@example.org" in client.get("/account").get_data(as_text=True)
    fresh = csrf_of(client.get("/login").get_data(as_text=True))  # signing in renewed the session's token
    assert client.post(path, data={"csrf_token": fresh}).status_code == 404  # single use
    assert client.get(path).status_code == 404


def test_an_expired_link_does_nothing(app, client, ctx):
    from datetime import timedelta

    from trips.core.db import utcnow

    ask_link(client, "late@example.org")
    path = "/login/" + outbox_link(app).rsplit("/", 1)[1]
    csrf = csrf_of(client.get(path).get_data(as_text=True))
    with atomic():
        db.session.execute(sa.update(LoginLink).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert client.post(path, data={"csrf_token": csrf}).status_code == 404
    assert client.get("/account").status_code == 302


def test_login_refusals(app, client, ctx):
    page = client.get("/login").get_data(as_text=True)
    assert client.post("/login", data={"email": "x@example.org"}).status_code == 400  # no CSRF token
    assert client.post("/login", data={"email": "not an address", "csrf_token": csrf_of(page)}).status_code == 422
    for _ in range(5):
        ask_link(client, "spam@example.org")
    limited = ask_link(client, "spam@example.org")
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert len(outbox(app)) == 5


def test_next_is_kept_only_when_it_stays_on_this_site(app, client, ctx):
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        client.get("/login")
        page = client.get("/login?next=" + target).get_data(as_text=True)
        assert 'name="next"' not in page


def test_sign_out_and_pages_security_headers(app, client, ctx):
    sign_in(app, client)
    account = client.get("/account")
    assert "frame-ancestors 'none'" in account.headers["Content-Security-Policy"]
    assert client.post("/logout", data={"csrf_token": "wrong"}).status_code == 302
    assert client.get("/account").status_code == 200  # a forged sign-out does nothing
    client.post("/logout", data={"csrf_token": csrf_of(account.get_data(as_text=True))})
    assert client.get("/account").status_code == 302


def test_cookies_are_secure_behind_https(tmp_path, redis_server):
    from app import create_app

    secure = create_app({"BTP_BASE_URL": "https://btp.example.org", "BTP_INSTANCE_DIR": str(tmp_path),
                         "DATABASE_URL": f"sqlite:///{tmp_path}/x.db", "REDIS_URL": redis_server,
                         "BTP_SECRET_KEY": "k"}, environ={})
    assert secure.config["SESSION_COOKIE_SECURE"] is True and secure.config["SESSION_COOKIE_SAMESITE"] == "Lax"


def test_delete_account_asks_then_removes_everything(app, client, ctx):
    from tests.oauth.test_oauth_flow import REDIRECT

    registered = client.post("/oauth/register", json={"client_name": "Agent", "redirect_uris": [REDIRECT]})
    tokens = full_flow(app, client, registered.get_json()["client_id"])
    page = client.get("/account/delete").get_data(as_text=True)
    unconfirmed = client.post("/account/delete", data={"csrf_token": csrf_of(page)})
    assert unconfirmed.status_code == 400 and db.session.scalar(sa.select(sa.func.count()).select_from(User)) == 1
    done = client.post("/account/delete", data={"csrf_token": csrf_of(page), "confirm": "yes"})
    assert done.status_code == 200
    db.session.rollback()
    for model in (User, Grant, AccessToken):
        assert db.session.scalar(sa.select(sa.func.count()).select_from(model)) == 0
    from oauth.services.resource import McpUnauthorized
    from tests.oauth.test_oauth_flow import mcp_user

    with pytest.raises(McpUnauthorized):
        mcp_user(app, tokens["access_token"])
    assert client.get("/account").status_code == 302


def test_rest_twins_of_connected_agents(app, client, ctx):
    from tests.oauth.test_oauth_flow import REDIRECT

    registered = client.post("/oauth/register", json={"client_name": "Agent", "redirect_uris": [REDIRECT]})
    full_flow(app, client, registered.get_json()["client_id"])
    owner = db.session.scalar(sa.select(User).where(User.email == "rider@example.org"))
    headers = auth(make_token(owner))
    me = client.get("/api/users/me", headers=headers).get_json()
    assert me["email"] == "rider@example.org"
    apps = client.get("/api/users/me/authorized-applications", headers=headers).get_json()["member"]
    assert [a["name"] for a in apps] == ["Agent"] and apps[0]["scopes"] == ["trips:read", "trips:write"]
    assert apps[0]["lastUsedAt"] is None and apps[0]["host"] is None
    grant_id = apps[0]["id"]
    stranger = auth(make_token(make_user()))
    theirs = client.get(f"/api/users/me/authorized-applications/{grant_id}", headers=stranger)
    nobody = client.get("/api/users/me/authorized-applications/0192f000-0000-7000-8000-000000000000", headers=stranger)
    assert theirs.status_code == nobody.status_code == 404
    assert {k: v for k, v in theirs.get_json().items() if k != "instance"} == \
        {k: v for k, v in nobody.get_json().items() if k != "instance"}
    assert client.delete(f"/api/users/me/authorized-applications/{grant_id}", headers=stranger).status_code == 404
    assert client.delete(f"/api/users/me/authorized-applications/{grant_id}", headers=headers).status_code == 204
    assert client.delete(f"/api/users/me/authorized-applications/{grant_id}", headers=headers).status_code == 404
    assert client.get("/api/users/me/authorized-applications", headers=headers).get_json()["member"] == []


def test_an_agent_is_listed_while_only_its_refresh_token_lives(app, client, ctx):
    from datetime import timedelta

    from trips.core.db import utcnow
    from tests.oauth.test_oauth_flow import REDIRECT

    registered = client.post("/oauth/register", json={"client_name": "Agent", "redirect_uris": [REDIRECT]})
    full_flow(app, client, registered.get_json()["client_id"])
    with atomic():
        db.session.execute(sa.update(AccessToken).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert "Agent" in client.get("/account").get_data(as_text=True)
    from oauth.kernel.models import RefreshToken

    with atomic():
        db.session.execute(sa.update(RefreshToken).values(expires_at=utcnow() - timedelta(seconds=1)))
    assert re.search(r"No application can use your account", client.get("/account").get_data(as_text=True))


def test_personal_tokens_are_listed_and_revoked_from_the_account_page(app, client, ctx):
    sign_in(app, client)
    owner = db.session.scalar(sa.select(User).where(User.email == "rider@example.org"))
    token, kept = make_token(owner, ttl=365 * 24 * 3600), make_token(owner, scope="trips:read")
    theirs = make_token(make_user("someone@example.org"))
    page = client.get("/account").get_data(as_text=True)
    assert token[:11] + "…" in page and kept[:11] + "…" in page and token not in page and token[11:] not in page
    assert theirs[:11] + "…" not in page and "for the REST API" in page
    ids = re.findall(r"/account/tokens/([^/]+)/revoke", page)
    assert len(ids) == 2
    own = db.session.scalar(sa.select(AccessToken.id).where(AccessToken.prefix == token[:11]))
    assert client.post(f"/account/tokens/{own}/revoke").status_code == 302  # no CSRF token: nothing happens
    assert client.get("/api/trips", headers=auth(token)).status_code == 200
    assert client.post(f"/account/tokens/{own}/revoke", data={"csrf_token": csrf_of(page)}).status_code == 302
    assert client.get("/api/trips", headers=auth(token)).status_code == 401  # at once
    assert client.get("/api/trips", headers=auth(kept)).status_code == 200
    assert client.post(f"/account/tokens/{own}/revoke", data={"csrf_token": csrf_of(page)}).status_code == 302
    other = db.session.scalar(sa.select(AccessToken.id).where(AccessToken.prefix == theirs[:11]))
    assert client.post(f"/account/tokens/{other}/revoke", data={"csrf_token": csrf_of(page)}).status_code == 302
    assert client.get("/api/trips", headers=auth(theirs)).status_code == 200  # another person's: untouched
    after = client.get("/account").get_data(as_text=True)
    assert token[:11] + "…" not in after and kept[:11] + "…" in after


def test_rest_twins_of_personal_tokens(app, client, ctx):
    owner = make_user("rider@example.org")
    headers, other = auth(make_token(owner)), make_token(owner, scope="trips:read")
    stranger = auth(make_token(make_user()))
    listed = client.get("/api/users/me/tokens", headers=headers).get_json()["member"]
    assert len(listed) == 2 and {t["audience"] for t in listed} == {"api"}
    assert set(listed[0]) == {"id", "prefix", "audience", "scopes", "createdAt", "expiresAt"}
    assert other not in str(listed) and headers["Authorization"][7:] not in str(listed)
    target = next(t["id"] for t in listed if t["scopes"] == ["trips:read"])
    theirs = client.delete(f"/api/users/me/tokens/{target}", headers=stranger)
    nobody = client.delete("/api/users/me/tokens/0192f000-0000-7000-8000-000000000000", headers=stranger)
    assert theirs.status_code == nobody.status_code == 404
    assert {k: v for k, v in theirs.get_json().items() if k != "instance"} == \
        {k: v for k, v in nobody.get_json().items() if k != "instance"}
    assert client.get("/api/trips", headers=auth(other)).status_code == 200
    assert client.delete(f"/api/users/me/tokens/{target}", headers=auth(other)).status_code == 403  # read-only
    assert client.delete(f"/api/users/me/tokens/{target}", headers=headers).status_code == 204
    assert client.get("/api/trips", headers=auth(other)).status_code == 401
    assert client.delete(f"/api/users/me/tokens/{target}", headers=headers).status_code == 404
    assert [t["scopes"] for t in client.get("/api/users/me/tokens", headers=headers).get_json()["member"]] == \
        [["trips:read", "trips:write"]]


def test_personal_pages_are_never_stored(app, client, ctx):
    from tests.oauth.test_oauth_flow import REDIRECT, authorize_url, pkce

    pages = [client.get("/login"), ask_link(client, "rider@example.org")]
    path = "/login/" + outbox_link(app).rsplit("/", 1)[1]
    confirm = client.get(path)
    pages += [confirm, client.get("/login/not-a-link"),
              client.post(path, data={"csrf_token": csrf_of(confirm.get_data(as_text=True))})]
    registered = client.post("/oauth/register", json={"client_name": "Agent", "redirect_uris": [REDIRECT]})
    pages += [client.get("/account"), client.get("/account/delete"),
              client.get(authorize_url(registered.get_json()["client_id"], pkce()[1]))]
    assert [p.status_code for p in pages] == [200, 200, 200, 404, 302, 200, 200, 200]
    assert "Allow" in pages[-1].get_data(as_text=True)  # the consent page itself
    assert all(p.headers["Cache-Control"] == "no-store" for p in pages)
    discovery = client.get("/.well-known/oauth-authorization-server")
    assert discovery.headers["Cache-Control"] == "public, max-age=3600"  # public documents keep their caching


def test_a_session_is_saved_only_when_read_changed_or_holding_something(app, client, ctx):
    from tests.mcp_helpers import mcp_token, modern

    agent = modern(client, mcp_token(app, make_user("agent@example.org")), "tools/list")  # no cookie, no session
    assert agent.status_code == 200
    assert "Set-Cookie" not in agent.headers and "Cookie" not in agent.headers.get("Vary", "")
    looked = app.test_client().get("/account")  # read (who is signed in?) and still empty: Vary, no cookie
    assert looked.status_code == 302 and "Cookie" in looked.headers["Vary"] and "Set-Cookie" not in looked.headers
    page = client.get("/login")  # the page reads the session (its CSRF token): a new cookie, and Vary: Cookie
    assert "Cookie" in page.headers["Vary"] and "session=" in page.headers["Set-Cookie"]
    sign_in(app, client)
    account = client.get("/account")
    assert "Cookie" in account.headers["Vary"]
    out = client.post("/logout", data={"csrf_token": csrf_of(account.get_data(as_text=True))})
    cookie = out.headers.get("Set-Cookie", "")  # emptied: the cookie is removed (expired) or replaced
    assert "session=" in cookie
    assert client.get("/account").status_code == 302


@pytest.mark.parametrize("locale, said", [
    ("en", "expires on 7 Jun 2027 at 2:05\u202fPM UTC"), ("fr", "expire le 7 juin 2027 à 14:05 UTC"),
])
def test_the_account_page_says_when_a_token_expires_date_and_time(app, client, ctx, locale, said):
    # The page cannot know the browser's time zone (no script runs under its Content-Security-Policy): it names UTC.
    from datetime import datetime

    sign_in(app, client)
    owner = db.session.scalar(sa.select(User).where(User.email == "rider@example.org"))
    token = make_token(owner)
    with atomic():
        db.session.execute(sa.update(AccessToken).where(AccessToken.prefix == token[:11])
                           .values(expires_at=datetime(2027, 6, 7, 14, 5, 30)))
    page = client.get("/account", headers={"Accept-Language": locale}).get_data(as_text=True)
    assert said in page, re.findall(r"<p class=\"muted\">[^<]*", page)
