"""A 401 says in words what was wrong with the token sent (RFC 6750 §3 error_description, and the body): expired,
revoked, issued for another audience (named); anything else is "unknown or malformed", so nobody learns which
tokens exist. `flask tokens issue` names the audience it used on stderr."""
import sqlalchemy as sa

from oauth.kernel.models import AccessToken
from oauth.kernel.tokens import revoke_personal_token
from tests.factories import auth, make_token, make_user
from tests.mcp_helpers import mcp_token, modern
from trips.core.db import atomic, db, utcnow

UNKNOWN = "The token is unknown or malformed."


def _rest(client, token):
    response = client.get("/api/trips", headers=auth(token) if token else {})
    assert response.status_code == 401 and response.mimetype == "application/problem+json"
    return response.get_json()["detail"], response.headers["WWW-Authenticate"]


def _expire(token_prefix: str) -> None:
    with atomic():
        db.session.execute(sa.update(AccessToken).where(AccessToken.prefix == token_prefix)
                           .values(expires_at=utcnow()))


def _row(token: str) -> AccessToken:
    return db.session.scalar(sa.select(AccessToken).where(AccessToken.prefix == token[:11]))


def test_rest_401_says_why(app, client, ctx):
    user = make_user()
    expired, revoked = make_token(user), make_token(user)
    _expire(expired[:11])
    with atomic():
        revoke_personal_token(_row(revoked).id)
    agent = mcp_token(app, user)
    said = {name: _rest(client, token) for name, token in {
        "none": None, "invented": "btp_at_" + "x" * 43, "malformed": "hello", "expired": expired,
        "revoked": revoked, "mcp": agent}.items()}
    assert said["none"] == ("A bearer token is required (an Authorization: Bearer header).", 'Bearer realm="btp"')
    assert said["invented"][0] == said["malformed"][0] == UNKNOWN
    assert said["expired"][0] == "The token has expired." and said["revoked"][0] == "The token was revoked."
    assert said["mcp"][0] == ("The token was issued for another audience (http://127.0.0.1:8000/mcp); this resource "
                              "takes tokens issued for api.")
    for name in ("invented", "expired", "revoked", "mcp"):
        detail, challenge = said[name]
        assert challenge == f'Bearer realm="btp", error="invalid_token", error_description="{detail}"'


def test_a_token_of_someone_else_tells_nothing_more_than_an_invented_one(app, client, ctx):
    """Another user's live token is simply live for its holder; a value no token has is unknown whatever
    exists beside it."""
    other = make_token(make_user())
    near = other[:-1] + ("A" if other[-1] != "A" else "B")  # one character off a real token
    assert _rest(client, near)[0] == UNKNOWN == _rest(client, "btp_at_" + "y" * 43)[0]


def test_mcp_401_says_why_also_for_a_token_it_remembered(app, client, ctx):
    user = make_user()
    token = mcp_token(app, user)
    assert modern(client, token, "tools/list").status_code == 200  # looked up, then remembered live
    with atomic():
        _row(token).revoked_at = utcnow()
    refused = modern(client, token, "tools/list")
    assert refused.status_code == 401 and refused.get_json() == {
        "error": "invalid_token", "error_description": "The token was revoked."}
    assert 'error_description="The token was revoked."' in refused.headers["WWW-Authenticate"]


def test_a_token_made_for_another_port_names_both_audiences(app, client, fresh_app):
    """The probe's case: `tokens issue` run without the server's BTP_PORT. The CLI says which audience it used
    (stderr, stdout stays the token), and the server says it expected another. (No app context pushed here: the
    CLI runner would run the command in the one pushed.)"""
    with app.app_context():
        make_user("ada@example.org")
    elsewhere = fresh_app(BTP_PORT="9000")
    result = elsewhere.test_cli_runner().invoke(args=["tokens", "issue", "ada@example.org", "--audience", "mcp",
                                                      "--scope", "trips:read"])
    assert result.exit_code == 0 and result.stdout.startswith("btp_at_") and result.stdout.count("\n") == 1
    assert result.stderr.startswith("audience: http://127.0.0.1:9000/mcp (the MCP resource of BTP_BASE_URL ")
    refused = modern(client, result.stdout.strip(), "tools/list")
    assert refused.status_code == 401
    assert refused.get_json()["error_description"] == (
        "The token was issued for another audience (http://127.0.0.1:9000/mcp); this resource takes tokens issued "
        "for http://127.0.0.1:8000/mcp.")
    api = app.test_cli_runner().invoke(args=["tokens", "issue", "ada@example.org", "--audience", "api",
                                             "--scope", "trips:read"])
    assert api.stderr.startswith("audience: api") and api.stdout.strip().startswith("btp_at_")


def test_a_description_stays_inside_its_quoted_string():
    from oauth.kernel.principal import challenge_text

    assert challenge_text('a "quoted" \\ value … é\r\n') == "a ?quoted? ? value ? ???"
