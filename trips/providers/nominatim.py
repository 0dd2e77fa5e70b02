"""Nominatim place search through the hardened client, cached in Redis (docs/CACHES.md). The per-user budget (bucket
"geocode") is spent only when the cache misses, just before the upstream call. Refusals and outages raise
Unavailable, never an empty list: an empty list means "no such place".
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass
from typing import Any

import redis as redis_lib

from trips.core import ratelimit
from trips.core.i18n import N_
from trips.errors import Unavailable
from trips.providers import http
from trips.providers.cache import Cache

log = logging.getLogger(__name__)

MAX_TEXT = 200
CACHE_TTL_SECONDS = 24 * 3600
CACHE_PREFIX = "btp:geocode:search"

REFUSED = N_("refusal.place_search_refused")
UNAVAILABLE = N_("refusal.place_search_unavailable")
_NAME_FIELDS = ("city", "town", "village", "hamlet", "municipality")


@dataclass
class GeocodeConfig:
    """`nominatim_url` is the server's base URL (None: offline gazetteer). `timeout` bounds connecting, each
    read, and the whole answer; `max_bytes` caps the answer's size."""

    nominatim_url: str | None
    user_agent: str = "BTP/1.0 (bike trip planner; operator contact in BTP_BASE_URL)"
    timeout: float = 10.0
    max_bytes: int = 1024 * 1024

    def policy(self) -> http.HttpPolicy:
        # Asked inside a rider's request: no retry, no redirect, the whole answer within `timeout` seconds.
        return http.HttpPolicy(user_agent=self.user_agent, timeout=self.timeout, deadline=self.timeout,
                               max_bytes=self.max_bytes)


# --- the search --------------------------------------------------------------------------------------------

def search(query: str, count: int, config: GeocodeConfig, redis: redis_lib.Redis | None, user_key: str) -> list[dict]:
    """Members for `query` (validated), from the cache or Nominatim.

    Raises RateLimited on a cache miss over the user's budget, Unavailable on any upstream failure."""
    cache = Cache(redis, CACHE_PREFIX, CACHE_TTL_SECONDS, label="geocode")
    key = hashlib.sha256(f"{count}\n{query.casefold()}".encode()).hexdigest()
    cached = cache.get(key)
    if isinstance(cached, list):
        return cached
    ratelimit.limit(redis, "geocode", user_key)
    hits = _fetch(config, {"q": query, "format": "jsonv2", "limit": str(count), "addressdetails": "1"})
    if not isinstance(hits, list):
        log.warning("nominatim: answer is not a list (%s)", type(hits).__name__)
        raise Unavailable(UNAVAILABLE)
    members = [m for m in (_member(h) for h in hits[:count]) if m is not None]
    cache.set(key, members)
    return members


def _fetch(config: GeocodeConfig, params: dict[str, str]) -> Any:
    """GET {nominatim_url}/search and decode its JSON. Redirects are not followed.

    Raises Unavailable(REFUSED) on a 4xx answer, Unavailable(UNAVAILABLE) on a redirect, a 5xx or other
    non-200 answer, a transport error or timeout, an answer over max_bytes, or JSON that cannot be read."""
    try:
        answer = http.HttpClient(config.nominatim_url, config.policy()).request("GET", "/search", params=params)
    except http.HttpFailure as exc:
        log.warning("nominatim: %s", exc.kind)
        raise Unavailable(UNAVAILABLE) from exc
    if answer.status != 200:
        log.warning("nominatim: status %d", answer.status)
        raise Unavailable(REFUSED if 400 <= answer.status < 500 else UNAVAILABLE)
    try:
        return json.loads(answer.body)
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("nominatim: unreadable JSON")
        raise Unavailable(UNAVAILABLE) from exc


def _text(value: Any) -> str:
    return value.strip()[:MAX_TEXT] if isinstance(value, str) else ""


def _coordinate(value: Any, bound: float) -> float | None:
    """Nominatim sends coordinates as decimal strings; accept those and plain numbers within ±bound."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) and abs(number) <= bound else None


def _member(hit: Any) -> dict | None:
    """One Nominatim jsonv2 result as a member; None when it has no usable coordinates or name."""
    if not isinstance(hit, dict):
        return None
    lat, lon = _coordinate(hit.get("lat"), 90.0), _coordinate(hit.get("lon"), 180.0)
    display = _text(hit.get("display_name"))
    address = hit.get("address") if isinstance(hit.get("address"), dict) else {}
    names = [_text(address.get(f)) for f in _NAME_FIELDS] + [_text(hit.get("name")), display.split(",")[0].strip()]
    name = next((n for n in names if n), "")
    kind = _text(hit.get("addresstype")) or _text(hit.get("type")) or "place"
    if lat is None or lon is None or not name:
        return None
    return {"name": name, "lat": lat, "lon": lon, "displayName": display or name, "type": kind}
