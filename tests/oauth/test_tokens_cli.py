"""`flask tokens list EMAIL`, `flask tokens revoke ID` and `flask tokens revoke --all EMAIL`: personal tokens
(made by `flask tokens issue`) are listed without their secret and stop at once when revoked."""
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from oauth.kernel.models import AccessToken

from trips.core.db import utcnow
from oauth.kernel.tokens import hash_token, issue_token
from tests.factories import auth, make_token, make_user
from trips.core.db import atomic, db


@pytest.fixture
def runner(app, ctx):
    return app.test_cli_runner()


def issue(runner, email, audience="api", scope="trips:read trips:write", ttl="3600") -> str:
    result = runner.invoke(args=["tokens", "issue", email, "--audience", audience, "--scope", scope, "--ttl", ttl])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def rows(output: str) -> list[list[str]]:
    return [line.split("\t") for line in output.splitlines()[1:]]


def token_id(token: str) -> str:
    db.session.rollback()
    return db.session.scalar(sa.select(AccessToken.id).where(AccessToken.token_hash == hash_token(token)))


def test_list_shows_live_personal_tokens_without_their_secret(app, runner):
    user = make_user("ada@example.org")
    api = issue(runner, "ada@example.org", ttl=str(365 * 24 * 3600))
    mcp = issue(runner, "ada@example.org", audience="mcp", scope="trips:read")
    with atomic():  # an agent's token (OAuth) is stopped with its grant, not listed here
        issue_token(user, "api", "trips:read", client_id="https://agent.example/client.json")
    make_token(make_user("other@example.org"))
    result = runner.invoke(args=["tokens", "list", "ADA@example.org"])
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == "id\tprefix\taudience\tscopes\tcreated\texpires"
    listed = rows(result.output)
    assert [(r[2], r[3]) for r in listed] == [("mcp", "trips:read"), ("api", "trips:read trips:write")]
    assert {r[0] for r in listed} == {token_id(api), token_id(mcp)}
    assert all(r[1].startswith("btp_at_") and r[1].endswith("…") and len(r[1]) == 12 for r in listed)
    assert api not in result.output and mcp not in result.output and api[12:] not in result.output
    created, expires = (datetime.fromisoformat(value.removesuffix("Z")) for value in listed[1][4:6])
    assert listed[1][5].endswith("Z") and expires - created - timedelta(days=365) < timedelta(seconds=5)


def test_list_refusals_and_an_empty_list(runner):
    unknown = runner.invoke(args=["tokens", "list", "nobody@example.org"])
    assert unknown.exit_code != 0 and "No account" in unknown.output
    make_user("ada@example.org")
    assert runner.invoke(args=["tokens", "list", "ada@example.org"]).output == "no live personal tokens\n"


def test_revoke_takes_effect_at_once_and_only_once(runner, client):
    make_user("ada@example.org")
    token, kept = issue(runner, "ada@example.org"), issue(runner, "ada@example.org")
    assert client.get("/api/trips", headers=auth(token)).status_code == 200
    ident = token_id(token)
    done = runner.invoke(args=["tokens", "revoke", ident])
    assert done.exit_code == 0 and done.output == f"revoked {ident}\n"
    assert client.get("/api/trips", headers=auth(token)).status_code == 401  # the very next request
    assert client.get("/api/trips", headers=auth(kept)).status_code == 200
    twice = runner.invoke(args=["tokens", "revoke", ident])
    unknown = runner.invoke(args=["tokens", "revoke", "0192f000-0000-7000-8000-000000000000"])
    assert twice.exit_code == unknown.exit_code == 1
    assert twice.output.split(" (")[0] == unknown.output.split(" (")[0] == "Error: No live personal token with this id."
    assert [r[0] for r in rows(runner.invoke(args=["tokens", "list", "ada@example.org"]).output)] == [token_id(kept)]


def test_an_agents_token_and_an_expired_one_cannot_be_revoked_here(runner, client):
    user = make_user("ada@example.org")
    with atomic():
        agent = issue_token(user, "api", "trips:read", client_id="https://agent.example/client.json")
        short = issue_token(user, "api", "trips:read")
        db.session.execute(sa.update(AccessToken).where(AccessToken.token_hash == hash_token(short))
                           .values(expires_at=utcnow() - timedelta(seconds=1)))
    for token in (agent, short):
        result = runner.invoke(args=["tokens", "revoke", token_id(token)])
        assert result.exit_code == 1 and "No live personal token" in result.output
    assert client.get("/api/trips", headers=auth(agent)).status_code == 200


def test_revoke_all_stops_every_personal_token_of_one_account(runner, client):
    user = make_user("ada@example.org")
    mine = [issue(runner, "ada@example.org"), issue(runner, "ada@example.org", audience="mcp", scope="trips:read")]
    with atomic():
        agent = issue_token(user, "api", "trips:read", client_id="https://agent.example/client.json")
    theirs = make_token(make_user("other@example.org"))
    result = runner.invoke(args=["tokens", "revoke", "--all", "Ada@Example.org"])
    assert result.exit_code == 0 and result.output == "revoked 2 personal token(s)\n"
    assert client.get("/api/trips", headers=auth(mine[0])).status_code == 401
    assert client.get("/api/trips", headers=auth(theirs)).status_code == 200
    assert client.get("/api/trips", headers=auth(agent)).status_code == 200
    again = runner.invoke(args=["tokens", "revoke", "--all", "ada@example.org"])
    assert again.exit_code == 0 and again.output == "revoked 0 personal token(s)\n"
    assert runner.invoke(args=["tokens", "revoke", "--all", "nobody@example.org"]).exit_code == 1


@pytest.mark.parametrize("args", [[], ["some-id", "--all", "ada@example.org"]])
def test_revoke_wants_exactly_one_target(runner, args):
    result = runner.invoke(args=["tokens", "revoke", *args])
    assert result.exit_code == 2 and "either a token ID or --all EMAIL" in result.output


def test_a_hostile_id_is_not_echoed_in_full(runner):
    result = runner.invoke(args=["tokens", "revoke", "\u202e" + "x" * 5000])
    assert result.exit_code == 1 and "\u202e" not in result.output and len(result.output) < 200


def test_issue_says_when_the_token_expires_on_stderr(runner):
    make_user("ada@example.org")
    before = utcnow().replace(microsecond=0)
    result = runner.invoke(args=["tokens", "issue", "ada@example.org", "--audience", "api", "--scope", "trips:read"])
    assert result.exit_code == 0 and result.stdout.strip().startswith("btp_at_")  # stdout: the token alone
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("expires: ")]
    expires = datetime.fromisoformat(line.split()[1].removesuffix("Z"))
    assert timedelta(seconds=3599) <= expires - before <= timedelta(seconds=3602)  # one hour unless --ttl says
    longer = runner.invoke(args=["tokens", "issue", "ada@example.org", "--audience", "api", "--scope", "trips:read",
                                 "--ttl", "86400"])
    assert "expires: " in longer.stderr and "expires: " not in longer.stdout
