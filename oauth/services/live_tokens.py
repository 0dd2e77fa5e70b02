"""The MCP endpoint's live tokens, remembered per process and still revocable at once.

A process remembers the tokens it found live under the *token epoch* (trips/core/epochs.py), replaced after every
committed UPDATE or DELETE of a token or an account. A remembered token is believed only when the request reads the
epoch unchanged; read before the lookup and replaced after the revoking commit, it makes a revocation hold at once
everywhere. Without Redis nothing is believed, and nothing longer than BTP_TOKEN_CACHE_S.
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
