"""mcp.confirmation_tokens: canonical arguments, single-use tokens bound to the call, sealed request states."""
import threading
import time

import pytest

from mcp import confirmation_tokens
from mcp.confirmation_tokens import Binding, canonical, mint, open_state, seal_state, spend

SECRET = "test-secret-key"
ARGS = {"tripId": "trip-1", "version": 3, "maxDistancePerDay": 95, "options": {"b": [2, 1], "a": None}}


def binding(user="user-1", client="client-1", tool="update_trip_settings", **changes):
    return Binding.of(user, client, tool, {**ARGS, **changes})


def test_canonical_sorts_keys_at_every_level_keeps_list_order_and_drops_the_token():
    assert canonical({"b": 1, "a": {"d": [3, {"z": 1, "y": 2}], "c": "é"}, "confirmationToken": "x"}) == \
        '{"a":{"c":"é","d":[3,{"y":2,"z":1}]},"b":1}'
    assert canonical({"b": [1, 2]}) != canonical({"b": [2, 1]})
    assert canonical({"version": 3, "idempotencyKey": "k" * 16}) == '{"idempotencyKey":"kkkkkkkkkkkkkkkk","version":3}'
    assert canonical({"version": 3, "x": 1}, exclude=("version",)) == '{"x":1}'
    assert canonical({"nested": {"confirmationToken": "x"}}) == '{"nested":{"confirmationToken":"x"}}'


def test_canonical_refuses_non_json_values():
    with pytest.raises(ValueError):
        canonical({"x": float("nan")})
    with pytest.raises(TypeError):
        canonical({"x": object()})


def test_the_binding_digest_depends_on_every_part():
    base = binding()
    reordered = Binding.of("user-1", "client-1", "update_trip_settings", dict(reversed(list(ARGS.items()))))
    assert reordered.digest == base.digest
    assert Binding.of("user-1", "client-1", "update_trip_settings", {**ARGS, "confirmationToken": "0" * 32}).digest \
        == base.digest
    others = [binding(user="user-2"), binding(client="client-2"), binding(client=None), binding(tool="delete_trip"),
              binding(tripId="trip-2"), binding(version=4), binding(maxDistancePerDay=96),
              binding(maxDistancePerDay="95"), binding(options={"b": [1, 2], "a": None})]
    assert len({b.digest for b in others} | {base.digest}) == len(others) + 1
    assert len(base.digest) == 64


def test_a_token_confirms_its_call_once(redis_client):
    token = mint(redis_client, binding())
    assert len(token) == 32 and token == token.lower() and int(token, 16) >= 0
    assert 295 <= redis_client.ttl(confirmation_tokens.TOKEN_PREFIX + token) <= 300
    reordered = Binding.of("user-1", "client-1", "update_trip_settings", dict(reversed(list(ARGS.items()))))
    assert spend(redis_client, token, reordered) is True
    assert spend(redis_client, token, binding()) is False  # replay
    assert redis_client.dbsize() == 0


def test_tokens_are_random_even_for_the_same_binding(redis_client):
    assert len({mint(redis_client, binding()) for _ in range(50)}) == 50


@pytest.mark.parametrize("other", [
    dict(maxDistancePerDay=120), dict(tripId="trip-2"), dict(tool="unshare_trip"), dict(user="user-2"),
    dict(client="client-2"), dict(version=4)])
def test_a_mismatch_is_refused_and_spends_the_token(redis_client, other):
    token = mint(redis_client, binding())
    assert spend(redis_client, token, binding(**other)) is False
    assert spend(redis_client, token, binding()) is False  # spent by the failed attempt


def test_an_invented_token_is_refused(redis_client):
    mint(redis_client, binding())
    assert spend(redis_client, "0123456789abcdef0123456789abcdef", binding()) is False


@pytest.mark.parametrize("token", [None, 42, "", "short", "0123456789ABCDEF0123456789ABCDEF",
                                   "0123456789abcdef0123456789abcdef0", "0123456789abcdef0123456789abcdeg",
                                   "0123456789abcdef0123456789abcde\n", "*"])
def test_a_malformed_token_is_refused_without_touching_redis(token):
    class NoRedis:
        def __getattr__(self, name):
            raise AssertionError(f"Redis touched: {name}")

    assert spend(NoRedis(), token, binding()) is False


def test_a_token_expires(redis_client):
    token = mint(redis_client, binding(), ttl=1)
    time.sleep(1.1)
    assert spend(redis_client, token, binding()) is False


def test_concurrent_spends_have_exactly_one_winner(redis_server):
    import redis as redis_lib

    clients = [redis_lib.Redis.from_url(redis_server) for _ in range(10)]
    token = mint(clients[0], binding())
    barrier, results = threading.Barrier(10), []

    def attempt(client):
        barrier.wait()
        results.append(spend(client, token, binding()))

    threads = [threading.Thread(target=attempt, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for client in clients:
        client.close()
    assert sorted(results) == [False] * 9 + [True]


def test_a_sealed_state_opens_once_for_its_binding(redis_client):
    state = seal_state(SECRET, binding())
    assert open_state(redis_client, SECRET, state, binding()) is True
    assert open_state(redis_client, SECRET, state, binding()) is False  # replay


def test_a_sealed_state_for_another_binding_is_refused_and_used_up(redis_client):
    state = seal_state(SECRET, binding())
    assert open_state(redis_client, SECRET, state, binding(tool="delete_trip")) is False
    assert open_state(redis_client, SECRET, state, binding()) is False


def test_a_tampered_or_foreign_state_is_refused(redis_client):
    state = seal_state(SECRET, binding())
    body, _, signature = state.rpartition(".")
    # Flip a middle character of the signature: the last base64 character carries bits the decoder ignores.
    middle = len(body) + 1 + len(signature) // 2
    flipped = state[:middle] + ("A" if state[middle] != "A" else "B") + state[middle + 1:]
    tampered = [flipped, "x" + state, body + ".", state + "x",
                "", "not-a-state", None, 42]
    for value in tampered:
        assert open_state(redis_client, SECRET, value, binding()) is False, value
    assert open_state(redis_client, "another-secret", state, binding()) is False
    from itsdangerous import URLSafeTimedSerializer
    other_salt = URLSafeTimedSerializer(SECRET).dumps({"b": binding().digest, "n": "0" * 32, "t": 300})
    assert open_state(redis_client, SECRET, other_salt, binding()) is False
    assert open_state(redis_client, SECRET, state, binding()) is True  # the refusals above did not use it


def test_a_sealed_state_expires(redis_client, monkeypatch):
    state = seal_state(SECRET, binding(), ttl=60)
    real = time.time()
    monkeypatch.setattr(confirmation_tokens, "_now", lambda: real + 30)
    assert open_state(redis_client, SECRET, seal_state(SECRET, binding(), ttl=60), binding()) is True
    monkeypatch.setattr(confirmation_tokens, "_now", lambda: real + 62)
    assert open_state(redis_client, SECRET, state, binding()) is False


def test_a_sealed_state_expires_in_real_time(redis_client):
    state = seal_state(SECRET, binding(), ttl=1)
    time.sleep(1.1)
    assert open_state(redis_client, SECRET, state, binding()) is False


def test_seal_state_refuses_an_unbounded_ttl():
    for ttl in (0, -1, confirmation_tokens.MAX_STATE_TTL + 1):
        with pytest.raises(ValueError):
            seal_state(SECRET, binding(), ttl=ttl)
