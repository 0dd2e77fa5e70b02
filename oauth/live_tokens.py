"""The MCP endpoint's live tokens, remembered per process and still revocable at once.

Looking a bearer token up costs a database round trip on every tool call. A process remembers the tokens it
found live (by their SHA-256, with the user's row as read then) under the *token epoch*: a random value kept in
Redis (`EPOCH_KEY`) and replaced after every committed write to the tokens or the accounts. A remembered token is
believed only once the request has read the epoch, in the round trip that counts its budgets (trips/core/
ratelimit.py `read`), and found it unchanged; otherwise the token is looked up again before anything is answered.

Why a revocation holds at once, on every process and instance sharing the Redis:
- the epoch is replaced *after* the revoking transaction commits (`_after_checkin`: its connection is back in
  the pool), and the revoking request answers after that, so any request that starts later reads the new value;
- a remembered token records the epoch read *before* the database lookup that found it live: a revocation
  committed after that lookup replaces the epoch after it too, so the token is looked up again;
- values are random (uuid4), never a counter: a Redis restarted empty, or an epoch set again, never reads as a
  value some process remembered. A missing epoch is created by the reader (the script sets it when absent);
- with Redis unreachable nothing is believed: every request looks its token up (as before this cache);
- an epoch that could not be replaced (Redis down at that moment) is retried in the background every half
  second, and no token is believed longer than BTP_TOKEN_CACHE_S (60 s by default; 0 turns the cache off), which
  also bounds a change made to the tables by hand, outside BTP.

Which writes replace it: any UPDATE or DELETE on `access_token` or `user_account` (a revocation, an account
deleted, its language changed), seen on the connection (`_note_statement`, a before_cursor_execute listener), so
a new code path cannot forget it. Issuing a token (INSERT) changes nothing a remembered token says.
"""
from __future__ import annotations

import re
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

import redis as redis_lib
from sqlalchemy import event
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import make_transient_to_detached

EPOCH_KEY = "btp:token-epoch"
DEFAULT_MAX_AGE_S = 60.0
SIZE = 4096

_WRITES_AUTH = re.compile(r'^\s*(UPDATE|DELETE\s+FROM)\s+"?(access_token|user_account)\b', re.IGNORECASE)
_SEEN: dict[str, bool] = {}


@dataclass(frozen=True, slots=True)
class Remembered:
    user: object  # a detached copy of the User row (merged into each request's session without a query)
    user_id: str
    scopes: frozenset[str]
    client_id: str | None
    audience: str
    expires_at: datetime
    epoch: str
    until: float  # time.monotonic() after which it is looked up again whatever the epoch


_cache: OrderedDict[str, Remembered] = OrderedDict()
_lock = threading.Lock()


def new_epoch() -> str:
    return uuid.uuid4().hex


def recall(token_hash: str, audience: str, now: datetime) -> Remembered | None:
    """The remembered live token, if any and neither expired nor too old (not yet believed: see `confirmed`)."""
    entry = _cache.get(token_hash)
    if entry is None:
        return None
    if entry.audience != audience or entry.expires_at <= now or entry.until <= time.monotonic():
        forget(token_hash)
        return None
    return entry


def remember(token_hash: str, row, user, epoch: str | None, max_age_s: float) -> None:
    """Remember a token just found live, under the epoch read before it was looked up (None: not remembered)."""
    if epoch is None or max_age_s <= 0:
        return
    copy = type(user)(**{attr.key: getattr(user, attr.key) for attr in sa_inspect(type(user)).column_attrs})
    make_transient_to_detached(copy)
    entry = Remembered(copy, user.id, row.scopes, row.client_id, row.audience, row.expires_at, epoch,
                       time.monotonic() + max_age_s)
    with _lock:
        _cache[token_hash] = entry
        _cache.move_to_end(token_hash)
        while len(_cache) > SIZE:
            _cache.popitem(last=False)


def forget(token_hash: str) -> None:
    with _lock:
        _cache.pop(token_hash, None)


def clear() -> None:
    with _lock:
        _cache.clear()


def read_epoch(redis) -> str | None:
    """The current epoch (created when missing), or None when Redis cannot be asked: one round trip. For a token
    not remembered, read before it is looked up."""
    if redis is None:
        return None
    try:
        value = _get_or_set(redis)(keys=[EPOCH_KEY], args=[new_epoch()])
    except (redis_lib.RedisError, OSError):
        return None
    return value.decode() if isinstance(value, bytes) else value


_GET_OR_SET = "local v = redis.call('GET', KEYS[1]) if not v then v = ARGV[1] redis.call('SET', KEYS[1], v) end return v"


def _get_or_set(redis):
    script = getattr(redis, "_btp_epoch_script", None)
    if script is None:
        script = redis.register_script(_GET_OR_SET)
        redis._btp_epoch_script = script
    return script


# --- replacing the epoch after a committed write to the tokens or the accounts ------------------------------------
_WRITTEN = "btp_auth_written"  # on the connection's pool record: the Redis to tell once it is back in the pool
_retry: dict = {}  # Redis client whose epoch could not be replaced yet -> until when to try (time.monotonic())
_retry_lock = threading.Lock()
_retrier: threading.Thread | None = None


def _writes_auth(statement: str) -> bool:
    known = _SEEN.get(statement)
    if known is None:
        known = bool(_WRITES_AUTH.match(statement))
        if len(_SEEN) < 4096:
            _SEEN[statement] = known
    return known


@event.listens_for(Engine, "before_cursor_execute")
def _note_statement(conn, cursor, statement, parameters, context, executemany):
    if statement[:1] in "UuDd \n" and _writes_auth(statement):
        conn.info[_WRITTEN] = _redis_of_app()


def _redis_of_app() -> tuple:
    """(the app's Redis client or False, how long its processes may believe a remembered token)."""
    from flask import current_app, has_app_context

    if not has_app_context():
        return False, 0.0  # no app, no Redis to tell (tokens are remembered in app requests only)
    from jobs import get_redis

    max_age_s = float(current_app.config.get("BTP_TOKEN_CACHE_S", DEFAULT_MAX_AGE_S))
    try:
        return get_redis() or False, max_age_s
    except Exception:  # no Redis configured
        return False, max_age_s


@event.listens_for(Engine, "checkin")
def _after_checkin(dbapi_connection, record):
    # A connection comes back to the pool after its transaction committed (a session's commit, engine.begin()) or
    # rolled back (a needless new epoch, which only costs one lookup per remembered token): after the commit, never
    # before, so no reader can remember a token under the new epoch as the database still shows it live.
    written = record.info.pop(_WRITTEN, None)
    if written is None:
        return
    clear()  # this process believes nothing it remembered
    redis, max_age_s = written
    if redis is not False and not _bump(redis):
        _retry_later(redis, max_age_s)


def _bump(redis) -> bool:
    try:
        redis.set(EPOCH_KEY, new_epoch())
        return True
    except (redis_lib.RedisError, OSError):
        return False


def _retry_later(redis, max_age_s: float) -> None:
    """Try again every half second until it works, or until no process can still believe a token it remembered
    before the write (max_age_s from now): then the new epoch no longer matters."""
    global _retrier
    with _retry_lock:
        _retry[redis] = max(_retry.get(redis, 0.0), time.monotonic() + max_age_s)
        if _retrier is None or not _retrier.is_alive():
            _retrier = threading.Thread(target=_retry_loop, args=(_retry,), name="token-epoch", daemon=True)
            _retrier.start()


def _retry_loop(waiting: dict) -> None:
    while True:
        time.sleep(0.5)
        with _retry_lock:
            pending = list(waiting.items())
        for redis, until in pending:
            if _bump(redis) or time.monotonic() > until:
                with _retry_lock:
                    if waiting.get(redis) == until:
                        del waiting[redis]
        with _retry_lock:
            if not waiting:
                return
