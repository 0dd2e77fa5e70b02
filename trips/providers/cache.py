"""The one Redis cache for third-party answers: a key namespace, a TTL, JSON values by default.

Best effort: a Redis that is away or an entry that cannot be read is logged and treated as a miss, so a
provider answers (more slowly) without its cache, never fails because of it.
"""
from __future__ import annotations

import json
import logging
import zlib
from typing import Any, Callable

import redis as redis_lib

log = logging.getLogger(__name__)


def _json_dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


class Cache:
    """Values under `{namespace}:{key}` for `ttl` seconds. `encode`/`decode` default to JSON; `decode` may
    raise ValueError, TypeError, KeyError or zlib.error for an entry it cannot read. `label` names the cache
    in the logs ("route cache unavailable on read")."""

    def __init__(self, client: redis_lib.Redis | None, namespace: str, ttl: int, *, label: str,
                 encode: Callable[[Any], bytes] = _json_dumps, decode: Callable[[bytes], Any] = json.loads):
        self.client = client
        self.namespace = namespace
        self.ttl = ttl
        self.label = label
        self.encode = encode
        self.decode = decode

    def key(self, key: str) -> str:
        return f"{self.namespace}:{key}"

    def get(self, key: str) -> Any | None:
        if self.client is None:
            return None
        try:
            blob = self.client.get(self.key(key))
            return self.decode(blob) if blob is not None else None
        except (redis_lib.RedisError, OSError) as exc:
            log.warning("%s cache unavailable on read: %s", self.label, exc)
        except (ValueError, TypeError, KeyError, UnicodeDecodeError, zlib.error) as exc:
            log.warning("%s cache entry %s unreadable: %s", self.label, self.key(key), exc)
        return None

    def set(self, key: str, value: Any) -> None:
        if self.client is None:
            return
        try:
            self.client.set(self.key(key), self.encode(value), ex=self.ttl)
        except (redis_lib.RedisError, OSError) as exc:
            log.warning("%s cache unavailable on write: %s", self.label, exc)
