"""Per-key sliding-window rate limits kept in Redis, shared by every gunicorn worker and RQ process.

Each (bucket, key) pair is a sorted set `btp:rl:{bucket}:{key}` whose members are the accepted hits, scored by
their time in milliseconds. One Lua script drops the hits older than the window, counts the rest and either
records the new hit or refuses it, so concurrent callers can never overshoot the limit. The clock is Redis's
own (`TIME`), so workers on hosts with skewed clocks still agree. Every accepted hit pushes the key's expiry
to one window ahead: an idle key disappears on its own.

If Redis cannot be reached, `hit` lets the request through and logs a warning (fail open). The limits protect
the service and third parties from bursts; they are not a security boundary. Refusing every trip creation or
place search because the limiter's store is down would turn a Redis hiccup into a full outage, whereas
letting requests through for that time costs at most a burst (and the upstream geocoder keeps its own limit).
"""
from __future__ import annotations

import logging
import math
import uuid

import redis as redis_lib

from trips.errors import RateLimited
from trips.core.limits import DEFAULTS, configured

log = logging.getLogger(__name__)

KEY_PREFIX = "btp:rl"

# bucket -> (hits allowed, window in seconds): the defaults; trips.core.limits is the registry and its configuration.
LIMITS = DEFAULTS

# KEYS[1] = the sorted set; ARGV = window in ms, limit, unique member.
# Returns {1, 0} when the hit is recorded, {0, ms until the oldest counted hit leaves the window} when refused.
_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, 0}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(oldest[2]) + window - now}
"""


def _key(bucket: str, key: str) -> str:
    return f"{KEY_PREFIX}:{bucket}:{key}"


def _per(window_s: int) -> str:
    named = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}
    return named.get(window_s) or f"{window_s} seconds"


def hit(redis: redis_lib.Redis | None, bucket: str, key: str, limit: int, window_s: int) -> None:
    """Count one hit for `key` in `bucket`, allowing at most `limit` hits in any `window_s` seconds.

    A refused hit is not counted. Raises RateLimited (retry_after = whole seconds, at least 1, until the oldest
    counted hit leaves the window) when the limit is reached; ValueError for a limit or window below 1.
    A missing or unreachable Redis lets the hit through (logged): see the module docstring."""
    if limit < 1 or window_s < 1:
        raise ValueError("limit and window_s must be at least 1")
    if redis is None:
        log.warning("rate limit %s: no Redis configured, not enforced", bucket)
        return
    try:
        script = redis.register_script(_SCRIPT)
        allowed, wait_ms = script(keys=[_key(bucket, key)], args=[window_s * 1000, limit, uuid.uuid4().hex])
    except (redis_lib.RedisError, OSError) as exc:
        log.warning("rate limit %s: Redis unavailable, not enforced: %s", bucket, exc)
        return
    if int(allowed) == 1:
        return
    retry_after = max(1, math.ceil(int(wait_ms) / 1000))
    raise RateLimited(
        f"Too many requests: at most {limit} per {_per(window_s)}. Try again in {retry_after} s.",
        retry_after,
    )


def limit(redis: redis_lib.Redis | None, bucket: str, key: str) -> None:
    """`hit` with the limit and window configured for `bucket` (trips.core.limits: the default or BTP_LIMIT_*).

    Raises RateLimited when the limit is reached, KeyError for a bucket missing from the registry."""
    allowed, window_s = configured(bucket)
    hit(redis, bucket, key, allowed, window_s)


__all__ = ["KEY_PREFIX", "LIMITS", "hit", "limit"]
