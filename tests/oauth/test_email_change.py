"""Changing the account's e-mail address (POST /api/users/me/email-change): a signed, single-use link that expires
in 30 minutes is mailed to the new address; its page changes the address with one button; every token of the account
is revoked first, its agents' (their grants stay) and its personal ones, and the old address is told. Refused: a
taken address, an address the mailer cannot send to (before any budget is spent), an expired, replayed or forged
link, a link asked from an address the account no longer has."""
import re
import time
from email import message_from_bytes, policy
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from itsdangerous import TimestampSigner

from oauth.kernel.models import AccessToken, Grant, OAuthClient, User
from oauth.kernel.tokens import issue_token
from tests.factories import auth, make_token, make_user
from tests.oauth.test_oauth_flow import csrf_of
from trips.core.db import atomic, db

URL = "/api/users/me/email-change"
MCP = "http://127.0.0.1:8000/mcp"


def mails(app) -> list:
    folder = Path(app.instance_path) / "outbox"
    files = sorted(folder.glob("*.eml"), key=lambda p: p.stat().st_mtime_ns) if folder.exists() else []
    return [message_from_bytes(p.read_bytes(), policy=policy.default) for p in files]


def link_path(message) -> str:
    return urlsplit(re.search(r"http://\S+/account/email/\S+", message.get_content()).group(0)).path


def confirm(client, path):
    page = client.get(path)
    assert page.status_code == 200, page.get_data(as_text=True)
    return client.post(path, data={"csrf_token": csrf_of(page.get_data(as_text=True))})


def agent_token(user) -> str:
    client_id = "https://agent.example/client.json"
    with atomic():
        db.session.add(OAuthClient(client_id=client_id, kind="metadata", client_name="Agent", redirect_uris=[]))
        db.session.add(Grant(user_id=user.id, client_id=client_id, scope="trips:read"))
        return issue_token(user, MCP, "trips:read", client_id=client_id)


def email_of(user_id) -> str:
    db.session.rollback()
    return db.session.get(User, user_id).email


def test_the_new_address_confirms_and_the_old_one_is_told(app, client, rider):
    user, headers = rider
    agent = agent_token(user)
    assert client.post("/mcp", headers=auth(agent), json={}).status_code != 401  # alive before the change
    asked = client.post(URL, json={"email": "  New.Me@Example.org "}, headers=headers)
    assert asked.status_code == 202 and asked.get_json() == {"sentTo": "new.me@example.org", "expiresInSeconds": 1800}
    (mail,) = mails(app)
    assert mail["To"] == "new.me@example.org" and "30 minutes" in mail.get_content()
    path = link_path(mail)
    assert client.get(path).status_code == 200 and email_of(user.id) == "rider@example.org"  # shown, not spent
    assert app.test_client().post(path).status_code == 400  # another site's form: no CSRF token of this browser
    done = confirm(client, path)
    assert done.status_code == 200 and "new.me@example.org" in done.get_data(as_text=True)
    assert email_of(user.id) == "new.me@example.org"
    told = mails(app)[-1]
    assert told["To"] == "rider@example.org" and "n…@example.org" in told.get_content()
    assert "new.me@example.org" not in told.get_content()
    # the agent's token is revoked, its grant stays
    row = db.session.scalar(sa.select(AccessToken).where(AccessToken.client_id.is_not(None)))
    assert row.revoked_at is not None and db.session.scalar(sa.select(sa.func.count()).select_from(Grant)) == 1
    assert client.post("/mcp", headers=auth(agent), json={}).status_code == 401
    fresh = make_token(db.session.get(User, user.id))  # `tokens issue` for the new address
    assert client.get("/api/users/me", headers=auth(fresh)).get_json()["email"] == "new.me@example.org"


def test_a_change_revokes_the_personal_tokens_too(app, client, rider):
    # They were issued to the person at the old address, as the agents were allowed by them (README "Changing the
    # e-mail address"); another account's tokens are untouched.
    user, headers = rider
    mcp_personal = make_token(user, audience=MCP)
    other = auth(make_token(make_user("bystander@example.org")))
    assert client.get("/api/users/me", headers=headers).status_code == 200
    client.post(URL, json={"email": "moved@example.org"}, headers=headers)
    assert confirm(client, link_path(mails(app)[0])).status_code == 200
    refused = client.get("/api/users/me", headers=headers)
    assert refused.status_code == 401 and "revoked" in refused.get_json()["detail"]
    assert client.post("/mcp", headers=auth(mcp_personal), json={}).status_code == 401
    db.session.rollback()
    live = db.session.scalars(sa.select(AccessToken).where(AccessToken.user_id == user.id,
                                                           AccessToken.revoked_at.is_(None))).all()
    assert live == [] and client.get("/api/users/me", headers=other).status_code == 200


def test_a_link_works_once(app, client, rider):
    user, headers = rider
    client.post(URL, json={"email": "once@example.org"}, headers=headers)
    path = link_path(mails(app)[0])
    assert confirm(client, path).status_code == 200
    assert client.get(path).status_code == 404
    # even after changing back, the first link stays spent
    client.post(URL, json={"email": "rider@example.org"}, headers=auth(make_token(db.session.get(User, user.id))))
    assert confirm(client, link_path(mails(app)[-1])).status_code == 200 and email_of(user.id) == "rider@example.org"
    replay = client.get(path)
    assert replay.status_code == 404 and email_of(user.id) == "rider@example.org"


def test_an_expired_link_changes_nothing(app, client, rider, monkeypatch):
    user, headers = rider
    real = TimestampSigner.get_timestamp
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda self: int(time.time()) - 31 * 60)
    client.post(URL, json={"email": "late@example.org"}, headers=headers)
    monkeypatch.setattr(TimestampSigner, "get_timestamp", real)
    path = link_path(mails(app)[0])
    assert client.get(path).status_code == 404 and email_of(user.id) == "rider@example.org"


def test_a_forged_or_older_link_is_refused(app, client, rider):
    user, headers = rider
    client.post(URL, json={"email": "first@example.org"}, headers=headers)
    client.post(URL, json={"email": "second@example.org"}, headers=headers)
    first, second = (link_path(m) for m in mails(app))
    tampered = first[:-3] + ("AAA" if not first.endswith("AAA") else "BBB")
    assert client.get(tampered).status_code == 404
    assert confirm(client, second).status_code == 200
    assert client.get(first).status_code == 404  # asked from an address the account no longer has
    assert email_of(user.id) == "second@example.org"


def test_a_taken_address_is_told_to_its_owner_not_to_the_asker(app, client, rider):
    _, headers = rider
    make_user("taken@example.org")
    asked = client.post(URL, json={"email": "taken@example.org"}, headers=headers)
    assert asked.status_code == 202  # the same answer: an app cannot probe who has an account
    (mail,) = mails(app)
    assert mail["To"] == "taken@example.org" and "/account/email/" not in mail.get_content()


def test_taken_between_the_mail_and_the_click(app, client, rider):
    user, headers = rider
    client.post(URL, json={"email": "race@example.org"}, headers=headers)
    path = link_path(mails(app)[0])
    page = client.get(path)
    make_user("race@example.org")
    refused = client.post(path, data={"csrf_token": csrf_of(page.get_data(as_text=True))})
    assert refused.status_code == 409 and email_of(user.id) == "rider@example.org"


@pytest.mark.parametrize("body, field", [
    ({"email": "not an address"}, "email"), ({"email": "a@b@c"}, "email"), ({"email": "x" * 250 + "@ex.org"}, "email"),
    ({"email": "rider@example.org"}, "email"), ({}, "email"), ({"email": "a@ex.org", "name": "x"}, "name"),
])
def test_bad_bodies_are_named_and_nothing_is_sent(app, client, rider, body, field):
    _, headers = rider
    response = client.post(URL, json=body, headers=headers)
    assert response.status_code == 422 and field in response.get_json()["errors"]
    assert "not an address" not in response.get_data(as_text=True) and mails(app) == []


UNDELIVERABLE = [
    "x@[127.0.0.1]", "x@[IPv6:::1]", "é@ü.test", "a@ü.test", "é@example.org", '"a b"@example.org',
    '"x"@example.org', "x@127.0.0.1", "x@localhost", ".x@example.org", "x.@example.org", "x..y@example.org",
    "x@-bad.example.org", "x@bad-.example.org", "x@exa_mple.org", "x@example..org", "x@.example.org",
    "x" * 65 + "@example.org", "x@" + "a" * 64 + ".example.org", "x\\y@example.org", "x@example.org.",
]


@pytest.mark.parametrize("address", UNDELIVERABLE)
def test_an_address_the_mailer_cannot_send_to_is_refused_before_any_budget(app, client, rider, redis_client,
                                                                         address):
    _, headers = rider
    # More tries than the address's budget (5 mails in 15 minutes): none is counted, so none is refused for it.
    answers = [client.post(URL, json={"email": address}, headers=headers) for _ in range(6)]
    assert [a.status_code for a in answers] == [422] * 6, answers[-1].get_data(as_text=True)
    assert list(answers[0].get_json()["errors"]) == ["email"] and mails(app) == []
    assert address not in answers[0].get_data(as_text=True)  # never echoed
    assert not redis_client.keys("btp:rl:login_email:*")
    assert client.post(URL, json={"email": "next@example.org"}, headers=headers).status_code == 202


def test_the_refusal_says_what_the_mailer_takes_in_the_reader_s_language(client, rider):
    _, headers = rider
    english = client.post(URL, json={"email": "é@ü.test"}, headers=headers).get_json()["errors"]["email"]
    french = client.post(URL, json={"email": "é@ü.test"},
                         headers={**headers, "Accept-Language": "fr"}).get_json()["errors"]["email"]
    assert "ASCII" in english and "xn--" in english and "send mail" in english
    assert "ASCII" in french and "xn--" in french and english != french


@pytest.mark.parametrize("address", ["x@[127.0.0.1]", "é@ü.test"])
def test_the_sign_in_form_refuses_them_alike(app, client, redis_client, address):
    from tests.oauth.test_oauth_flow import csrf_of

    page = client.get("/login")
    answer = client.post("/login", data={"email": address, "csrf_token": csrf_of(page.get_data(as_text=True))})
    assert answer.status_code == 422 and mails(app) == [] and not redis_client.keys("btp:rl:login_*")


@pytest.mark.parametrize("address", ["o'brien+trips@example.org", "a.b-c_d@xn--bcher-kva.example", "x@a.b.co",
                                     "UPPER@Example.ORG"])
def test_plain_addresses_of_every_shape_are_taken(app, client, rider, address):
    _, headers = rider
    asked = client.post(URL, json={"email": address}, headers=headers)
    assert asked.status_code == 202 and asked.get_json()["sentTo"] == address.lower()
    assert mails(app)[0]["To"] == address.lower()


def test_a_read_token_cannot_ask_and_the_mails_are_limited(app, client, rider):
    user, headers = rider
    assert client.post(URL, json={"email": "x@example.org"}, headers=auth(make_token(user, "trips:read"))).status_code == 403
    answers = [client.post(URL, json={"email": "flood@example.org"}, headers=headers).status_code for _ in range(6)]
    assert answers == [202] * 5 + [429] and len(mails(app)) == 5


def test_a_mail_server_down_is_said_and_nothing_is_sent(app, client, rider, monkeypatch):
    _, headers = rider
    monkeypatch.setitem(app.config, "BTP_MAIL_URL", "smtp://127.0.0.1:9")  # the discard port: nobody listens
    response = client.post(URL, json={"email": "later@example.org"}, headers=headers)
    assert response.status_code == 502 and "mail could not be sent" in response.get_json()["detail"]
    assert mails(app) == []
