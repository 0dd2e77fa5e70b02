"""trips.core.ratelimit: a sliding window per key in Redis, atomic across threads and processes."""
import logging
import threading
import time

import pytest
import redis as redis_lib
from redis.backoff import NoBackoff
from redis.retry import Retry

from trips.core import i18n, ratelimit
from trips.errors import RateLimited


def test_allows_the_limit_then_refuses_with_retry_after(redis_client):
    for _ in range(10):
        ratelimit.hit(redis_client, "trip_create", "user-1", 10, 60)
    with pytest.raises(RateLimited) as caught:
        ratelimit.hit(redis_client, "trip_create", "user-1", 10, 60)
    assert 59 <= caught.value.retry_after <= 60
    assert i18n.say(caught.value.text, "en") == f"Too many requests: at most 10 per minute. Try again in {caught.value.retry_after} s."
    assert caught.value.code == "rate_limited"


def test_refused_hits_are_not_counted_and_the_window_slides(redis_client):
    ratelimit.hit(redis_client, "b", "k", 2, 1)
    time.sleep(0.5)
    ratelimit.hit(redis_client, "b", "k", 2, 1)
    for _ in range(5):  # refused: must not extend the wait
        with pytest.raises(RateLimited) as caught:
            ratelimit.hit(redis_client, "b", "k", 2, 1)
        assert caught.value.retry_after == 1
    time.sleep(0.6)  # the first hit has left the window, the second has not
    ratelimit.hit(redis_client, "b", "k", 2, 1)
    with pytest.raises(RateLimited):
        ratelimit.hit(redis_client, "b", "k", 2, 1)
    assert redis_client.zcard("btp:rl:b:k") == 2


def test_retry_after_counts_from_the_oldest_counted_hit(redis_client):
    ratelimit.hit(redis_client, "b", "k", 1, 2)
    time.sleep(1.1)
    with pytest.raises(RateLimited) as caught:
        ratelimit.hit(redis_client, "b", "k", 1, 2)
    assert caught.value.retry_after == 1
    assert "at most 1 per 2 seconds" in i18n.say(caught.value.text, "en")


def test_keys_and_buckets_are_independent(redis_client):
    ratelimit.hit(redis_client, "geocode", "alice", 1, 60)
    ratelimit.hit(redis_client, "geocode", "bob", 1, 60)
    ratelimit.hit(redis_client, "trip_create", "alice", 1, 60)
    with pytest.raises(RateLimited):
        ratelimit.hit(redis_client, "geocode", "alice", 1, 60)
    assert sorted(k.decode() for k in redis_client.keys("btp:rl:*")) == [
        "btp:rl:geocode:alice", "btp:rl:geocode:bob", "btp:rl:trip_create:alice"]


def test_keys_expire_on_their_own(redis_client):
    ratelimit.hit(redis_client, "b", "k", 5, 2)
    ttl_ms = redis_client.pttl("btp:rl:b:k")
    assert 0 < ttl_ms <= 2000


def test_concurrent_hits_never_exceed_the_limit(redis_client):
    start = threading.Barrier(8)
    outcomes: list[bool] = []
    lock = threading.Lock()

    def worker():
        start.wait()
        for _ in range(10):
            try:
                ratelimit.hit(redis_client, "b", "shared", 25, 60)
                ok = True
            except RateLimited:
                ok = False
            with lock:
                outcomes.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outcomes) == 80
    assert outcomes.count(True) == 25
    assert redis_client.zcard("btp:rl:b:shared") == 25


def test_limit_uses_the_configured_buckets(redis_client):
    assert ratelimit.LIMITS["trip_create"] == (10, 60) and ratelimit.LIMITS["geocode"] == (30, 60)
    for _ in range(30):
        ratelimit.limit(redis_client, "geocode", "u")
    with pytest.raises(RateLimited) as caught:
        ratelimit.limit(redis_client, "geocode", "u")
    assert "at most 30 per minute" in i18n.say(caught.value.text, "en")
    redis_client.delete(f"{ratelimit.KEY_PREFIX}:geocode:u")
    ratelimit.limit(redis_client, "geocode", "u")


def test_unreachable_redis_fails_open(caplog):
    down = redis_lib.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, socket_timeout=0.2,
                           retry=Retry(NoBackoff(), 0))
    with caplog.at_level(logging.WARNING, logger="trips.core.ratelimit"):
        for _ in range(3):
            ratelimit.hit(down, "b", "k", 1, 60)
        ratelimit.hit(None, "b", "k", 1, 60)
    assert "Redis unavailable" in caplog.text


def test_rejects_a_nonsense_limit(redis_client):
    with pytest.raises(ValueError):
        ratelimit.hit(redis_client, "b", "k", 0, 60)


# ------------------------------------------------------------------ redis-py's pooled client, as BTP relies on it
def _killer(client):
    pool = client.connection_pool
    return redis_lib.Redis(connection_pool=redis_lib.ConnectionPool(connection_class=pool.connection_class,
                                                                    **pool.connection_kwargs))


def test_a_connection_the_server_closed_is_made_again_and_the_hit_counted(redis_client):
    ratelimit.hit(redis_client, "b", "k", 100, 60)
    killer = _killer(redis_client)
    assert killer.client_kill_filter(_type="normal", skipme=True) >= 1  # as a Redis restart closes them
    killer.close()
    time.sleep(0.05)
    assert ratelimit.hits(redis_client, [("b", "k", 100, 60)], ("epoch-key",)) is not None  # not failed open
    assert redis_client.zcard("btp:rl:b:k") == 2


def test_an_answer_interrupted_mid_read_is_never_read_as_the_next_one(redis_client, monkeypatch):
    ratelimit.hit(redis_client, "b", "k", 100, 60)
    connection_class = redis_client.connection_pool.connection_class
    real_read = connection_class.read_response

    def interrupted(self, *args, **kwargs):
        # The interrupt lands inside redis-py's own read (its parser's), as a signal would: what redis-py does with
        # a connection whose answer was left half read is what is held.
        monkeypatch.setattr(connection_class, "read_response", real_read)
        parser = self._parser

        def cut(*_args, **_kwargs):
            del parser.read_response  # once: the parser's own method again
            raise KeyboardInterrupt

        parser.read_response = cut
        return real_read(self, *args, **kwargs)

    monkeypatch.setattr(connection_class, "read_response", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ratelimit.hits(redis_client, [("b", "k", 100, 60)], ("e",))
    values = ratelimit.hits(redis_client, [("b", "k", 100, 60)], ("e",))
    assert values == (redis_client.get("e").decode(),)  # this call's answer, not the interrupted one's
    assert redis_client.zcard("btp:rl:b:k") == 3


def test_a_forked_child_counts_on_its_own_connection(redis_client):
    import os

    ratelimit.hit(redis_client, "b", "k", 100, 60)
    pid = os.fork()
    if pid == 0:  # the child: the pool makes it its own connection (redis-py checks the pid)
        code = 1
        try:
            ratelimit.hit(redis_client, "b", "k", 100, 60)
            code = 0 if redis_client.zcard("btp:rl:b:k") == 2 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ratelimit.hit(redis_client, "b", "k", 100, 60)  # the parent's connection still answers the parent
    assert redis_client.zcard("btp:rl:b:k") == 3


def test_a_set_is_trimmed_within_64_hits_and_old_hits_never_count(redis_client):
    # 1000 hits allowed per second: the set keeps at most its window's hits and 63 older ones (trimmed once in 64
    # hits, not on every hit); the verdict always counts the trimmed set.
    key = "btp:rl:trim:k"
    for _ in range(70):
        ratelimit.hit(redis_client, "trim", "k", 1000, 1)
    time.sleep(0.6)
    ratelimit.hit(redis_client, "trim", "k", 1000, 1)  # keeps the key alive (each hit sets its expiry a window ahead)
    time.sleep(0.5)  # the first 70 have left the window, the 71st has not
    sizes = []
    for _ in range(100):
        ratelimit.hit(redis_client, "trim", "k", 1000, 1)
        sizes.append(redis_client.zcard(key))
    assert sizes[0] == 72  # not trimmed on every hit: 70 old, 1 in the window, this one
    assert sizes[55] == 71 + 56 and sizes[56] == 1 + 57  # at 127 = 63 mod 64 it is trimmed: the 70 old ones go
    assert max(sizes) <= 71 + 56
    # a full set is always trimmed before it is judged: the hits that left the window never refuse
    for _ in range(2):
        ratelimit.hit(redis_client, "full", "k", 3, 1)
    time.sleep(0.6)
    ratelimit.hit(redis_client, "full", "k", 3, 1)  # 3 of 3, the key kept alive
    time.sleep(0.5)  # the first two have left the window
    for _ in range(2):
        ratelimit.hit(redis_client, "full", "k", 3, 1)
    with pytest.raises(RateLimited):
        ratelimit.hit(redis_client, "full", "k", 3, 1)
