"""The MCP endpoint's remembered tokens (oauth/services/live_tokens.py): a token found live is not looked up again while the
token epoch in Redis is unchanged, and every way a token stops being live still holds on the very next request —
a revocation seen by another process only through the epoch, Redis restarted empty, Redis down, an expiry, the
age limit, a write by hand through the session."""
import json
import time

import pytest
import redis as redis_lib
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from oauth.services import live_tokens
from oauth.kernel.models import AccessToken
from oauth.kernel.tokens import hash_token, issue_token, revoke_personal_tokens
from tests.factories import make_user
from tests.mcp_helpers import call, mcp_token, modern
from trips.core import epochs, ratelimit
from trips.core.db import atomic, db, utcnow


@pytest.fixture
def agent(app, ctx):
    live_tokens.clear()
    user = make_user("remembered@example.org")
    return user, mcp_token(app, user)


@pytest.fixture
def lookups():
    """The statements that read access_token while the test runs, on any app's engine."""
    seen = []

    def statement(conn, cursor, text, parameters, context, executemany):
        if "FROM access_token" in text and text.lstrip().upper().startswith("SELECT"):
            seen.append(text)

    event.listen(Engine, "before_cursor_execute", statement)
    yield seen
    event.remove(Engine, "before_cursor_execute", statement)


def list_status(client, token) -> int:
    return modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}}).status_code


def as_another_process_remembers(token):
    """What the cache of a process that did not make the change holds: its entries as they were before it."""
    assert hash_token(token) in live_tokens._cache
    return dict(live_tokens._cache)


def restore(snapshot):
    with live_tokens._lock:
        live_tokens._cache.clear()
        live_tokens._cache.update(snapshot)


def test_a_remembered_token_is_not_looked_up_again(client, agent, lookups):
    _, token = agent
    assert not call(client, token, "list_trips")["isError"]
    assert len(lookups) == 1
    for _ in range(3):
        assert not call(client, token, "list_trips")["isError"]
    assert len(lookups) == 1, "looked up again while the epoch stood still"
    assert hash_token(token) in live_tokens._cache


def test_a_revocation_made_elsewhere_holds_through_the_epoch_alone(client, agent, redis_client):
    user, token = agent
    assert not call(client, token, "list_trips")["isError"]
    elsewhere = as_another_process_remembers(token)
    before = redis_client.get(live_tokens.EPOCH_KEY)
    with atomic():
        db.session.execute(sa.update(AccessToken).where(AccessToken.user_id == user.id).values(revoked_at=utcnow()))
    after = redis_client.get(live_tokens.EPOCH_KEY)
    assert after and after != before  # replaced after the commit
    restore(elsewhere)  # this process now remembers the token as the other process still does
    assert hash_token(token) in live_tokens._cache
    response = modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}})
    assert response.status_code == 401 and "invalid_token" in response.headers["WWW-Authenticate"]
    assert hash_token(token) not in live_tokens._cache


def test_a_personal_token_revoked_elsewhere_is_refused(app, client, ctx):
    live_tokens.clear()
    user = make_user("personal@example.org")
    token = mcp_token(app, user, client_id=None)
    assert list_status(client, token) == 200
    elsewhere = as_another_process_remembers(token)
    with atomic():
        assert revoke_personal_tokens(user) == 1
    restore(elsewhere)
    assert list_status(client, token) == 401


def test_every_kind_of_call_confirms_a_remembered_token(client, agent):
    """tools/list and a refused argument reach no tool budget: their address hit reads the epoch instead."""
    user, token = agent
    assert not call(client, token, "list_trips")["isError"]
    elsewhere = as_another_process_remembers(token)
    with atomic():
        db.session.execute(sa.update(AccessToken).where(AccessToken.user_id == user.id).values(revoked_at=utcnow()))
    for method, params in (("tools/list", {}), ("tools/call", {"name": "no_such_tool", "arguments": {}}),
                           ("tools/call", {"name": "get_trip", "arguments": {"id": 7}})):
        restore(elsewhere)
        assert modern(client, token, method, params).status_code == 401, method


def test_a_redis_restarted_empty_believes_nothing(client, agent, redis_client):
    user, token = agent
    assert not call(client, token, "list_trips")["isError"]
    elsewhere = as_another_process_remembers(token)
    # Revoked while this process's Redis forgot everything: no epoch to compare with.
    with atomic():
        db.session.execute(sa.update(AccessToken).where(AccessToken.user_id == user.id).values(revoked_at=utcnow()))
    redis_client.flushdb()
    restore(elsewhere)
    assert list_status(client, token) == 401
    assert redis_client.get(live_tokens.EPOCH_KEY)  # made anew by the reader, never an old value


def test_with_redis_down_every_request_looks_its_token_up(fresh_app, agent, lookups):
    user, token = agent
    down = fresh_app(REDIS_URL="redis://127.0.0.1:9/0")  # nothing listens there
    client = down.test_client()
    with down.app_context():
        live_tokens.clear()
        statuses = [list_status(client, token) for _ in range(3)]
        assert len(lookups) == 3 and not live_tokens._cache, "remembered without an epoch"
        with atomic():
            db.session.execute(sa.update(AccessToken).where(AccessToken.user_id == user.id)
                               .values(revoked_at=utcnow()))
        assert list_status(client, token) == 401
    assert statuses == [200] * 3  # a read needs no Redis: budgets are not enforced meanwhile


def test_a_remembered_token_expires_on_time_without_a_lookup(app, client, ctx, lookups):
    live_tokens.clear()
    user = make_user("brief@example.org")
    with atomic():
        token = issue_token(user, app.config["MCP_RESOURCE"], "trips:read", 1, client_id="brief")
    assert list_status(client, token) == 200
    time.sleep(1.1)
    assert list_status(client, token) == 401


def test_no_token_is_believed_longer_than_the_age_limit(app, client, agent, lookups, monkeypatch):
    _, token = agent
    monkeypatch.setitem(app.config, "BTP_TOKEN_CACHE_S", 0.3)
    assert list_status(client, token) == 200 and list_status(client, token) == 200
    assert len(lookups) == 1
    time.sleep(0.4)
    assert list_status(client, token) == 200
    assert len(lookups) == 2


def test_the_cache_can_be_turned_off(app, client, agent, lookups, monkeypatch):
    _, token = agent
    monkeypatch.setitem(app.config, "BTP_TOKEN_CACHE_S", 0)
    assert [list_status(client, token) for _ in range(3)] == [200] * 3
    assert len(lookups) == 3 and not live_tokens._cache


def test_a_change_to_the_account_is_read_anew(client, agent):
    """The language is read with the token: changing it replaces the epoch, so the next answer speaks it."""
    user, token = agent
    assert not call(client, token, "list_trips")["isError"]
    with atomic():
        db.session.merge(user).locale = "fr"
    assert not live_tokens._cache
    assert not call(client, token, "list_trips")["isError"]
    assert live_tokens._cache[hash_token(token)].user.locale == "fr"


def test_writes_to_other_tables_leave_the_epoch_alone(client, agent, redis_client):
    user, token = agent
    assert not call(client, token, "list_trips")["isError"]
    epoch = redis_client.get(live_tokens.EPOCH_KEY)
    assert not call(client, token, "create_trip", {"sourceUrl": "https://www.komoot.com/tour/123"})["isError"]
    with atomic():  # a new token is an INSERT: nothing a remembered token says changes
        issue_token(user, "api", "trips:read", 60)
    assert redis_client.get(live_tokens.EPOCH_KEY) == epoch
    assert hash_token(token) in live_tokens._cache


def test_the_budgets_round_trip_reads_the_epoch_and_creates_it_when_missing(redis_client):
    key = "btp:test-epoch"
    other = "btp:test-epoch-other"
    (first,) = ratelimit.hits(redis_client, [("b", "k", 5, 60)], (key,))
    assert first and redis_client.get(key).decode() == first  # made by its reader
    again, made = ratelimit.hits(redis_client, [("b", "k", 5, 60)], (key, other))
    assert again == first and made not in (None, first)  # a value never used before (the call's own member)
    assert ratelimit.hits(redis_client, [], (other, key)) == (made, first)
    assert 0 < redis_client.ttl(key) <= epochs.READ_KEY_TTL_S  # a key made by its reader expires on its own
    assert ratelimit.hits(redis_client, [("b", "k", 5, 60)]) == ()  # answered, nothing to read
    with pytest.raises(ratelimit.RateLimited) as refused:
        for _ in range(10):
            ratelimit.hits(redis_client, [("b", "k", 5, 60)], (key,))
    assert refused.value.read == (first,) and refused.value.bucket == "b"
    assert redis_client.zcard("btp:rl:b:k") == 5
    assert ratelimit.hits(redis_lib.Redis(port=9), [("b", "k", 5, 60)], (key,)) is None


def test_the_budgets_script_is_loaded_again_when_redis_forgot_it(redis_client):
    key = "btp:test-epoch-2"
    ratelimit.hits(redis_client, [("b2", "k", 3, 60)], (key,))  # the script known to Redis
    redis_client.script_flush()  # as after a restart: the next EVALSHA answers NOSCRIPT, asked again in full
    (first,) = ratelimit.hits(redis_client, [("b2", "k", 3, 60)], (key,))
    assert first and redis_client.zcard("btp:rl:b2:k") == 2  # counted once, not failed open
    assert ratelimit.hits(redis_client, [("b2", "k", 3, 60)], (key,)) == (first,)
    with pytest.raises(ratelimit.RateLimited) as refused:
        ratelimit.hits(redis_client, [("b2", "k", 3, 60)], (key,))
    assert refused.value.read == (first,) and redis_client.zcard("btp:rl:b2:k") == 3
    assert ratelimit.hits(None, [("b2", "k", 2, 60)]) is None


def test_a_spent_budget_outranks_the_tools_own_refusal(app, client, agent, monkeypatch):
    """When the budgets refuse, the refusal is the answer, not the tool's (an unknown trip here), and a remembered
    token found revoked is a 401 whatever the tool would read."""
    user, token = agent
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_calls", (1, 60))
    first = call(client, token, "get_trip", {"id": "no-such-trip"})
    assert json.loads(first["content"][0]["text"])["error"]["code"] == "not_found"
    second = call(client, token, "get_trip", {"id": "no-such-trip"})
    assert json.loads(second["content"][0]["text"])["error"]["code"] == "rate_limited"
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_calls", (100, 60))
    elsewhere = as_another_process_remembers(token)
    with atomic():
        db.session.execute(sa.update(AccessToken).where(AccessToken.user_id == user.id).values(revoked_at=utcnow()))
    restore(elsewhere)
    assert modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}}).status_code == 401


def test_a_remembered_tokens_account_is_loaded_only_when_used():
    from oauth.kernel.principal import Principal

    loads = []

    class Account:
        id, locale = "u1", "de"

    def load():
        loads.append(1)
        return Account()

    lazy = Principal(scopes=frozenset({"trips:read"}), user_id="u1", load_user=load, locale="fr")
    assert lazy.user_id == "u1" and lazy.locale == "fr" and not loads  # as read with the token: nothing loaded
    assert lazy.user.locale == "de" and lazy.user.id == "u1" and len(loads) == 1
    assert lazy.locale == "de"  # once loaded, the account's own
    lazy.user
    assert len(loads) == 1
    with pytest.raises(ValueError):
        Principal(scopes=frozenset(), load_user=load)  # neither its user nor its id
    assert Principal(user=Account(), scopes=frozenset()).locale == "de"
