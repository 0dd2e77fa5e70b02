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
import os
import weakref

import redis as redis_lib

from trips.core.epochs import READ_KEY_TTL_S, READ_KEYS_LUA
from trips.core.limits import DEFAULTS, configured
from trips.errors import Msg, N_, Plural, RateLimited

log = logging.getLogger(__name__)

KEY_PREFIX = "btp:rl"

# bucket -> (hits allowed, window in seconds): the defaults; trips.core.limits is the registry and its configuration.
LIMITS = DEFAULTS

# KEYS = the sorted sets, judged in order, then the string keys to read (ARGV[1] says how many); ARGV = that count,
# window in ms and limit for each sorted set, one unique member (also the value a missing read key is given, so
# never a value it had before), then the expiry in seconds given to a read key created here. Returns {0, 0, values} when every hit is recorded;
# {i, ms until the oldest counted hit of KEYS[i] leaves its window, values} when KEYS[i] refuses: the hits of the keys
# before it stay recorded, none after it is made (as one call per key, in order, stopping at the first refusal,
# would leave them), in one round trip. `values` are the read keys' values, in order (trips/core/epochs.py).
# A set is trimmed (its hits older than the window dropped) when it holds `limit` hits or more, and otherwise once in 64
# hits: the count that decides is always the trimmed one, while a hit that is not refused costs three commands (ZCARD,
# ZADD, PEXPIRE), not four; the read keys are read with one MGET. A set holds at most its window's hits and 63 older
# ones. (Measured on the 2-core bench machine: 25 against 45-50 us of Redis CPU per script, 50-59 against 61-78 us
# with the machine idle between calls, as at one client.)
_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nread = tonumber(ARGV[1])
local sets = #KEYS - nread
local member = ARGV[2 * sets + 2]
""" + READ_KEYS_LUA + """for i = 1, sets do
  local key = KEYS[i]
  local window = tonumber(ARGV[2 * i])
  local limit = tonumber(ARGV[2 * i + 1])
  local count = redis.call('ZCARD', key)
  if count >= limit or count % 64 == 63 then
    count = count - redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
    if count >= limit then
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      return {i, tonumber(oldest[2]) + window - now, values}
    end
  end
  redis.call('ZADD', key, now, member)
  redis.call('PEXPIRE', key, window)
end
return {0, 0, values}
"""
_scripts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # client -> the script registered with it


def _key(bucket: str, key: str) -> str:
    return f"{KEY_PREFIX}:{bucket}:{key}"


_PER = {1: N_("rate.per_second"), 60: N_("rate.per_minute"), 3600: N_("rate.per_hour"), 86400: N_("rate.per_day")}


def _per(window_s: int) -> Msg:
    return Msg(_PER[window_s]) if window_s in _PER else Plural("rate.per_seconds", window_s)


def _script(redis: redis_lib.Redis):
    """The budgets' script of `redis` (redis-py's Script: EVALSHA, loaded again on NOSCRIPT), registered once."""
    script = _scripts.get(redis)
    if script is None:
        script = _scripts[redis] = redis.register_script(_SCRIPT)
    return script


UNREAD = None  # what `hits` returns when Redis was not asked or could not answer
Reads = tuple  # of string keys read in the same round trip (trips/core/epochs.py)


def hits(redis: redis_lib.Redis | None, budgets: list[tuple[str, str, int, int]], reads: Reads = ()) -> tuple | None:
    """Count one hit in each (bucket, key, limit, window_s) of `budgets`, in order, in one Redis round trip:
    each allows at most `limit` hits in any `window_s` seconds.

    `reads` = string keys: the same round trip reads them (setting a missing one to a value never used before,
    for READ_KEY_TTL_S) and returns their values as a tuple in the same order, whether the hits were refused or
    not; UNREAD (None) when Redis is missing or unreachable.

    A refused hit is not counted, and neither are the ones after it (those before it are). Raises RateLimited
    (retry_after = whole seconds, at least 1, until the oldest counted hit leaves the window; `bucket` = the
    bucket that refused; `read` = the values read) at the first budget that is spent; ValueError for a limit or
    window below 1. A missing or unreachable Redis lets the hits through (logged): see the module docstring."""
    call = _prepare(redis, budgets, reads)
    if call is None:
        return UNREAD
    keys, args = call
    try:
        reply = _script(redis)(keys=keys, args=args)
    except (redis_lib.RedisError, OSError) as exc:
        log.warning("rate limit %s: Redis unavailable, not enforced: %s", _what(budgets, reads), exc)
        return UNREAD
    return _outcome(budgets, reply)

def _what(budgets, reads) -> str:
    return budgets[0][0] if budgets else reads[0]


def _prepare(redis, budgets, reads) -> tuple[list, list] | None:
    """(keys, args) of the script for these budgets, or None when there is nothing to ask (no Redis: logged)."""
    if any(limit < 1 or window_s < 1 for _, _, limit, window_s in budgets):
        raise ValueError("limit and window_s must be at least 1")
    if not budgets and not reads:
        return None
    if redis is None:
        log.warning("rate limit %s: no Redis configured, not enforced", _what(budgets, reads))
        return None
    args = [len(reads), *(n for _, _, limit, window_s in budgets for n in (window_s * 1000, limit)),
            os.urandom(16).hex(), READ_KEY_TTL_S]  # the unique member: 128 random bits
    return [*(_key(b, k) for b, k, _, _ in budgets), *reads], args


def _outcome(budgets, reply) -> tuple:
    refused, wait_ms, values = reply
    values = tuple(v.decode() if isinstance(v, bytes) else v for v in values or ())
    if int(refused) == 0:
        return values
    bucket, _, limit, window_s = budgets[int(refused) - 1]
    retry_after = max(1, math.ceil(int(wait_ms) / 1000))
    exc = RateLimited("refusal.rate_limited", retry_after, limit=int(limit), per=_per(window_s), wait=retry_after)
    exc.bucket, exc.read = bucket, values
    raise exc


def hit(redis: redis_lib.Redis | None, bucket: str, key: str, limit: int, window_s: int) -> None:
    """Count one hit for `key` in `bucket`, allowing at most `limit` hits in any `window_s` seconds (`hits` with
    one budget). Raises RateLimited or ValueError as `hits`; a missing or unreachable Redis lets it through."""
    hits(redis, [(bucket, key, limit, window_s)])


def limit(redis: redis_lib.Redis | None, bucket: str, key: str) -> None:
    """`hit` with the limit and window configured for `bucket` (trips.core.limits: the default or BTP_LIMIT_*).

    Raises RateLimited when the limit is reached, KeyError for a bucket missing from the registry."""
    limit_all(redis, [(bucket, key)])


def limit_all(redis: redis_lib.Redis | None, pairs: list[tuple[str, str]], reads: Reads = ()) -> tuple | None:
    """`hits` for several (bucket, key) pairs with their configured limits, in order, in one round trip (the MCP
    endpoint: the client address and the agent's budgets together, and the epochs read beside them). Raises
    RateLimited (`bucket` says which) at the first that is spent, KeyError for a bucket missing from the
    registry. Returns what `hits` returns for `reads`."""
    return hits(redis, [(bucket, key, *configured(bucket)) for bucket, key in pairs], reads)


__all__ = ["KEY_PREFIX", "LIMITS", "UNREAD", "Reads", "hit", "hits", "limit", "limit_all"]
