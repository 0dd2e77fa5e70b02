"""Two BTP instances (gunicorn on two ports, as behind a load balancer) sharing the database and Redis: a
confirmation minted on one is spent on the other, and a revocation on one holds on the other at once — the
very next request there is refused, whatever either instance remembers of the token."""
import pytest
import sqlalchemy as sa

from mcp.confirmation_tokens import TOKEN_PREFIX
from oauth.kernel.models import AccessToken, Grant, OAuthClient
from oauth.kernel.tokens import hash_token
from tests.factories import auth, make_token, make_user
from tests.faults.stack import HttpClient, nodes
from tests.mcp_helpers import call, mcp_token, modern, payload
from tests.trips.services.test_pipeline import reload
from tests.trips.api.test_trips_api import seed_trip
from trips.core.db import atomic, db

pytestmark = pytest.mark.slow
WORKERS = 2  # per instance: a cache in one process must not answer for another either
WARM = 4 * WORKERS  # calls before a revocation: every process of the other instance has seen the token
AGENT = "https://agent.example/client.json"


@pytest.fixture(scope="module")
def instances(app_config, tmp_path_factory):
    """(one, other): the same configuration (database, Redis, secret, public URL), two ports."""
    with nodes(app_config, tmp_path_factory.mktemp("instances"), ("one", "other"), workers=WORKERS) as (one, other):
        yield HttpClient(one.url), HttpClient(other.url)


def connect_agent(app, user) -> tuple[str, str]:
    """What the consent flow stores for an agent: its client, the grant, an MCP token. Returns (grant id, token)."""
    with atomic():
        db.session.add(OAuthClient(client_id=AGENT, kind="metadata", client_name="Agent", redirect_uris=[]))
        db.session.add(Grant(user_id=user.id, client_id=AGENT, scope="trips:read trips:write"))
    token = mcp_token(app, user, client_id=AGENT)
    return db.session.scalar(sa.select(Grant.id).where(Grant.user_id == user.id)), token


def test_a_confirmation_minted_on_one_instance_is_spent_on_the_other(app, ctx, instances, redis_client):
    one, other = instances
    user = make_user()
    token = mcp_token(app, user)
    first, second = seed_trip(user).id, seed_trip(user, title="Second").id

    challenge = payload(call(one, token, "delete_trip", {"id": first}))
    assert challenge["confirmationRequired"] is True and reload(first) is not None
    done = call(other, token, "delete_trip", {"id": first, "confirmationToken": challenge["confirmationToken"]})
    assert done["isError"] is False, payload(done)
    assert reload(first) is None
    assert one.get(f"/api/trips/{first}", headers=auth(make_token(user))).status_code == 404

    # Spent on the other instance by an attempt that does not match it: refused here afterwards, nothing deleted.
    minted = payload(call(one, token, "delete_trip", {"id": second}))["confirmationToken"]
    assert redis_client.exists(TOKEN_PREFIX + minted) == 1
    mismatch = {"id": second, "version": 1, "maxDistancePerDay": 95, "confirmationToken": minted}
    assert call(other, token, "update_trip_settings", mismatch)["isError"] is True
    assert redis_client.exists(TOKEN_PREFIX + minted) == 0
    assert call(one, token, "delete_trip", {"id": second, "confirmationToken": minted})["isError"] is True
    assert reload(second) is not None


def test_a_disconnected_agent_is_refused_on_the_other_instance_at_once(app, ctx, instances, measured):
    one, other = instances
    user = make_user()
    owner = auth(make_token(user))
    grant_id, token = connect_agent(app, user)
    for _ in range(WARM):
        assert call(other, token, "list_trips")["isError"] is False

    assert one.delete(f"/api/users/me/authorized-applications/{grant_id}", headers=owner).status_code == 204
    after = [modern(other, token, "tools/call", {"name": "list_trips", "arguments": {}}) for _ in range(WARM)]
    assert [a.status_code for a in after] == [401] * WARM, [a.get_data(as_text=True) for a in after]
    assert "Bearer" in after[0].headers["WWW-Authenticate"]
    assert modern(one, token, "tools/call", {"name": "list_trips", "arguments": {}}).status_code == 401
    measured("agent disconnected on one instance → refused on the other (the next request)", after[0].seconds)
    # The owner's own token was not touched.
    assert other.get("/api/trips", headers=owner).status_code == 200


def test_a_revoked_personal_token_is_refused_on_the_other_instance_at_once(app, ctx, instances):
    one, other = instances
    user = make_user()
    owner, doomed = make_token(user), make_token(user)
    doomed_id = db.session.scalar(sa.select(AccessToken.id).where(AccessToken.token_hash == hash_token(doomed)))
    for _ in range(WARM):
        assert other.get("/api/trips", headers=auth(doomed)).status_code == 200

    assert one.delete(f"/api/users/me/tokens/{doomed_id}", headers=auth(owner)).status_code == 204
    after = [other.get("/api/trips", headers=auth(doomed)) for _ in range(WARM)]
    assert [a.status_code for a in after] == [401] * WARM, [a.get_data(as_text=True) for a in after]
    assert after[0].mimetype == "application/problem+json"
    assert other.get("/api/trips", headers=auth(owner)).status_code == 200


def test_an_edit_on_one_instance_shows_on_every_process_of_the_other_at_once(app, ctx, instances):
    """get_trip and list_trips answers are kept per process under the trips epochs (trips/core/epochs.py): every
    process of the other instance has kept both, the edit is made on one, and the very next reads there show it."""
    one, other = instances
    user = make_user()
    token = mcp_token(app, user)
    trip_id = seed_trip(user, title="Before").id
    for _ in range(WARM):  # every process of the other instance keeps both answers
        digest = payload(call(other, token, "get_trip", {"id": trip_id}))
        assert payload(call(other, token, "list_trips"))["member"][0]["title"] == "Before"
    renamed = one.patch(f"/api/trips/{trip_id}", json={"title": "After"},
                        headers={**auth(make_token(user)), "If-Match": f'"{digest["version"]}"'})
    assert renamed.status_code == 200, renamed.get_data(as_text=True)
    for _ in range(WARM):
        assert payload(call(other, token, "list_trips"))["member"][0]["title"] == "After"
        assert payload(call(other, token, "get_trip", {"id": trip_id}))["title"] == "After"
