"""Weighted budgets kept in Redis: an amount of work (km of route to draw) per key in a sliding window, for the
work a request causes rather than the request itself (a unit hit each: trips/core/ratelimit.py).

Each (bucket, key) is a sorted set `btp:wb:{bucket}:{key}` whose members are the spent amounts (`{random}:{amount}`),
scored by their time in milliseconds on Redis's clock. One script drops the spends older than the window, adds up
the rest and either records the new amount or refuses it, so concurrent callers never overshoot. A key holds at
most one member per accepted spend within its window, and expires one window after its last spend.

As the rate limits, a missing or unreachable Redis lets the work through (logged): see trips/core/ratelimit.py.
"""
from __future__ import annotations

import logging
import math
import os

import redis as redis_lib

from trips.core.limits import configured
from trips.errors import Msg, N_, Plural, RateLimited

log = logging.getLogger(__name__)

KEY_PREFIX = "btp:wb"

# KEYS[1] = the set; ARGV = window in ms, limit, amount, a unique member prefix. Returns {1, 0, used before} when
# the amount is recorded; {0, ms until enough of the oldest spends leave the window, used} when it is refused.
_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window, limit, amount = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local spent = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local used = 0
for i = 1, #spent, 2 do
  used = used + tonumber(string.match(spent[i], ':(.+)$'))
end
if used + amount > limit then
  local freed, need = 0, used + amount - limit
  for i = 1, #spent, 2 do
    freed = freed + tonumber(string.match(spent[i], ':(.+)$'))
    if freed >= need then
      return {0, tonumber(spent[i + 1]) + window - now, tostring(used)}
    end
  end
  return {0, window, tostring(used)}
end
redis.call('ZADD', KEYS[1], now, ARGV[4] .. ':' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], window)
return {1, 0, tostring(used)}
"""
_SCRIPT_ATTR = "_btp_work_budget_script"

_PER = {60: N_("rate.per_minute"), 3600: N_("rate.per_hour"), 86400: N_("rate.per_day")}


def per(window_s: int) -> Msg:
    """The window in words ("per hour")."""
    return Msg(_PER[window_s]) if window_s in _PER else Plural("rate.per_seconds", window_s)


def _script(redis: redis_lib.Redis):
    script = getattr(redis, _SCRIPT_ATTR, None)
    if script is None:
        script = redis.register_script(_SCRIPT)
        setattr(redis, _SCRIPT_ATTR, script)
    return script


def spend(redis: redis_lib.Redis | None, bucket: str, key: str, amount: float, refusal: str) -> None:
    """Spend `amount` of `bucket`'s configured budget (trips/core/limits.py: COUNT is the amount allowed in any
    SECONDS) for `key`.

    Raises RateLimited with `refusal` (a catalogue key given limit, per, amount and wait) and Retry-After = whole
    seconds until enough earlier spends leave the window; ValueError for a negative amount. An amount larger
    than the whole budget is the caller's to refuse first (it would never pass). Missing or unreachable Redis:
    let through, logged."""
    if amount < 0 or not math.isfinite(amount):
        raise ValueError("amount must be a finite number of at least 0")
    limit, window_s = configured(bucket)
    if redis is None:
        log.warning("work budget %s: no Redis configured, not enforced", bucket)
        return
    try:
        done, wait_ms, _ = _script(redis)(keys=[f"{KEY_PREFIX}:{bucket}:{key}"],
                                          args=[window_s * 1000, limit, round(amount, 3), os.urandom(8).hex()])
    except (redis_lib.RedisError, OSError) as exc:
        log.warning("work budget %s: Redis unavailable, not enforced: %s", bucket, exc)
        return
    if int(done) == 0:
        wait = max(1, math.ceil(int(wait_ms) / 1000))
        refused = RateLimited(refusal, wait, limit=limit, per=per(window_s), amount=round(amount), wait=wait)
        refused.bucket = bucket  # type: ignore[attr-defined]  # the bucket that refused, as ratelimit says it
        raise refused


__all__ = ["KEY_PREFIX", "per", "spend"]
