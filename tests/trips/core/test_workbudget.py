"""Weighted budgets (trips/core/workbudget.py): amounts add up in a sliding window per key on a real Redis, a spend
that would pass the budget is refused (and not recorded) with the wait until enough earlier spends leave the window,
and an unreachable Redis lets the work through."""
import pytest
import redis as redis_lib

from trips.core import workbudget
from trips.core.limits import DEFAULTS
from trips.errors import RateLimited

LIMIT, WINDOW_S = DEFAULTS["route_km"]


def test_amounts_add_up_until_the_budget_refuses(redis_client):
    workbudget.spend(redis_client, "route_km", "u1", LIMIT * 0.6, "refusal.route_km_spent")
    with pytest.raises(RateLimited) as refused:
        workbudget.spend(redis_client, "route_km", "u1", LIMIT * 0.6, "refusal.route_km_spent")
    assert 1 <= refused.value.retry_after <= WINDOW_S and refused.value.bucket == "route_km"
    workbudget.spend(redis_client, "route_km", "u1", LIMIT * 0.4, "refusal.route_km_spent")  # the refusal kept nothing
    with pytest.raises(RateLimited):
        workbudget.spend(redis_client, "route_km", "u1", 1, "refusal.route_km_spent")
    workbudget.spend(redis_client, "route_km", "u2", LIMIT, "refusal.route_km_spent")  # each key its own
    assert redis_client.pttl(f"{workbudget.KEY_PREFIX}:route_km:u1") > 0  # an idle key goes by itself


def test_the_wait_is_until_enough_of_the_oldest_spends_leave(redis_client):
    key = f"{workbudget.KEY_PREFIX}:route_km:u3"
    redis_client.zadd(key, {f"a:{LIMIT / 2}": 0})  # spent at the epoch: long out of the window
    workbudget.spend(redis_client, "route_km", "u3", LIMIT, "refusal.route_km_spent")
    assert redis_client.zcard(key) == 1  # the old spend dropped, the new one kept


def test_a_negative_amount_is_a_bug_and_an_unreachable_redis_lets_work_through(redis_client):
    with pytest.raises(ValueError):
        workbudget.spend(redis_client, "route_km", "u4", -1, "refusal.route_km_spent")
    away = redis_lib.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    workbudget.spend(away, "route_km", "u4", LIMIT * 10, "refusal.route_km_spent")
    workbudget.spend(None, "route_km", "u4", LIMIT * 10, "refusal.route_km_spent")
