"""The MCP endpoint's live tokens, remembered per process and still revocable at once.

Looking a bearer token up costs a database round trip on every tool call. A process remembers the tokens it
found live (by their SHA-256, with the user's row as read then) under the *token epoch*: a random value kept in
Redis (`EPOCH_KEY`) and replaced after every committed write to the tokens or the accounts. A remembered token is
believed only once the request has read the epoch, in the round trip that counts its budgets (trips/core/
ratelimit.py `reads`), and found it unchanged; otherwise the token is looked up again before anything is answered.
The epoch is one of trips/core/epochs.py's, which replaces it.

Why a revocation holds at once, on every process and instance sharing the Redis:
- the epoch is replaced *after* the revoking transaction commits (epochs.py: its connection is back in the
  pool), and the revoking request answers after that, so any request that starts later reads the new value;
- a remembered token records the epoch read *before* the database lookup that found it live: a revocation
  committed after that lookup replaces the epoch after it too, so the token is looked up again;
- values are random (uuid4), never a counter: a Redis restarted empty, or an epoch set again, never reads as a
  value some process remembered. A missing epoch is created by the reader (the script sets it when absent);
- with Redis unreachable nothing is believed: every request looks its token up (as before this cache);
- an epoch that could not be replaced (Redis down at that moment) is retried in the background every half
  second, and no token is believed longer than BTP_TOKEN_CACHE_S (60 s by default; 0 turns the cache off), which
  also bounds a change made to the tables by hand, outside BTP.

Which writes replace it: any UPDATE or DELETE on `access_token` or `user_account` (a revocation, an account
deleted, its language changed), seen on the connection (epochs.py `_note_statement`, a before_cursor_execute
listener), so a new code path cannot forget it. Issuing a token (INSERT) changes nothing a remembered token says.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import inspect as sa_inspect
from sqlalchemy.orm import make_transient_to_detached

from trips.core.epochs import DEFAULT_MAX_AGE_S, TOKEN_KEY as EPOCH_KEY, on_replaced  # noqa: F401 (re-exported)
from trips.core.ratelimit import hits

SIZE = 4096


@dataclass(frozen=True, slots=True)
class Remembered:
    user: object  # a detached copy of the User row, shared by a worker's threads and only ever read: each request
    # merges it into its own session (merge(load=False) copies it, the copy is never attached)
    user_id: str
    scopes: frozenset[str]
    client_id: str | None
    audience: str
    expires_at: datetime
    epoch: str
    until: float  # time.monotonic() after which it is looked up again whatever the epoch


_cache: OrderedDict[str, Remembered] = OrderedDict()
_lock = threading.Lock()


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
    values = hits(redis, [], (EPOCH_KEY,)) if redis is not None else None
    return values[0] if values else None


on_replaced(EPOCH_KEY, clear)  # a write of this process to the tokens or the accounts: it believes nothing it kept
