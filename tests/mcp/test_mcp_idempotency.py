"""mcp.idempotency: create_trip's derived key and the explicit idempotencyKey argument."""
import re
import time

import pytest

from mcp.idempotency import check_explicit_key, derived_keys
from trips.errors import Invalid

KEY = re.compile(r"[A-Za-z0-9_-]{16,255}")
T0 = 300 * 5_000_000 + 10  # 10 s into a bucket
ARGS = {"sourceUrl": "https://www.komoot.com/tour/1", "maxDistancePerDay": 95, "pacing": {"b": 1, "a": [2, 1]}}


def keys(args=ARGS, now=T0, user="user-1", tool="create_trip"):
    return derived_keys(user, tool, args, now=now)


def test_keys_are_well_formed_and_distinct():
    current, previous = keys()
    assert KEY.fullmatch(current) and KEY.fullmatch(previous) and current != previous
    assert current.startswith("mcp-")


def test_the_same_call_in_any_key_order_gives_the_same_keys():
    reordered = {"pacing": {"a": [2, 1], "b": 1}, "maxDistancePerDay": 95, "sourceUrl": ARGS["sourceUrl"]}
    assert keys(reordered) == keys()
    assert keys({**ARGS, "idempotencyKey": "k" * 16, "confirmationToken": "0" * 32}) == keys()
    assert keys(now=T0 + 289) == keys()


@pytest.mark.parametrize("change", [
    dict(args={**ARGS, "sourceUrl": "https://www.komoot.com/tour/2"}), dict(args={**ARGS, "maxDistancePerDay": 96}),
    dict(args={**ARGS, "pacing": {"b": 1, "a": [1, 2]}}), dict(args={"sourceUrl": ARGS["sourceUrl"]}),
    dict(user="user-2"), dict(tool="other_tool")])
def test_a_different_call_gives_different_keys(change):
    assert set(keys(**change)).isdisjoint(keys())


def test_a_retry_just_past_the_boundary_finds_the_first_key():
    first_current, _ = keys()
    current, previous = keys(now=T0 + 301)
    assert previous == first_current and current != first_current


def test_an_hour_later_it_is_a_new_call():
    assert set(keys(now=T0 + 3600)).isdisjoint(keys())


def test_now_defaults_to_the_clock():
    before = derived_keys("user-1", "create_trip", ARGS, now=time.time())[0]
    assert before in derived_keys("user-1", "create_trip", ARGS)


@pytest.mark.parametrize("value", ["a" * 16, "A-b_c" * 51, "0123456789abcdefABCDEF-_"])
def test_a_valid_explicit_key_is_returned(value):
    assert check_explicit_key(value) == value


@pytest.mark.parametrize("value", ["short", "a" * 15, "a" * 256, "a" * 16 + "\n", "a" * 16 + " ", "é" * 16,
                                   "a" * 15 + "!", "ａ" * 16, None, 12345678901234567890, ["a" * 16], ""])
def test_a_malformed_explicit_key_is_refused_without_being_repeated(value):
    with pytest.raises(Invalid) as caught:
        check_explicit_key(value)
    assert list(caught.value.errors) == ["idempotencyKey"]
    assert '"idempotencyKey" argument' in caught.value.message
    if isinstance(value, str) and value:
        assert value not in caught.value.message and value not in str(caught.value.errors["idempotencyKey"])
