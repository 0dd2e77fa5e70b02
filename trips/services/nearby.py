"""Places near a GPS fix, from the imported map only (offline): what a rider on the road asks ("water within 2 km").

The answer says how much of the circle the map covers (`full`, `partial`, `none`: then `pois` is null), so no place
found never reads as "there is none" where BTP has no map (docs/RULES.md "Map coverage").
"""
from __future__ import annotations

from marshmallow import RAISE, fields, validate

from oauth.kernel.models import User
from trips.core import i18n
from trips.core.db import db
from trips.core.i18n import N_
from trips.enrich.accommodations import OSM_TYPES
from trips.errors import Invalid, InvalidQuery
from trips.guards import load_owned_trip
from trips.osm import geometry as G
from trips.osm import queries as Q
from trips.osm.tags import KINDS
from trips.core.validation import FromText, Number, Whole, load

DEFAULT_RADIUS_M, MIN_RADIUS_M, MAX_RADIUS_M = 2000, 50, 20_000
DEFAULT_LIMIT, MAX_LIMIT = 20, Q.MAX_MATCHES
NO_MAP = N_("reason.no_map_here")
_CONTACT = (("openingHours", ("opening_hours",)), ("phone", ("phone", "contact:phone")),
            ("website", ("website", "contact:website", "url")))


class NearbyQuery(FromText):
    """GET /api/trips/{id}/nearby-pois: the category, the fix, how far and how many."""

    class Meta:
        unknown = RAISE

    category = fields.String(required=True, validate=validate.OneOf(KINDS))
    lat = Number(required=True, validate=validate.Range(-90, 90), allow_nan=False)
    lon = Number(required=True, validate=validate.Range(-180, 180), allow_nan=False)
    radius = Whole(load_default=DEFAULT_RADIUS_M, validate=validate.Range(MIN_RADIUS_M, MAX_RADIUS_M),
                            metadata={"description": "Metres around the fix (2000)."})
    limit = Whole(load_default=DEFAULT_LIMIT, validate=validate.Range(1, MAX_LIMIT),
                           metadata={"description": "How many places at most, nearest first (20)."})


def map_coverage(box: tuple[float, float, float, float], areas) -> str:
    """"full", "partial" or "none": how the imported areas' boxes cover `box` (min_lat, min_lon, max_lat, max_lon)."""
    s, w, n, e = box
    if any(a[0] <= s and a[1] <= w and a[2] >= n and a[3] >= e for a in areas):
        return "full"
    if any(a[0] <= n and a[2] >= s and a[1] <= e and a[3] >= w for a in areas):
        return "partial"
    return "none"


def _place(point: Q.MapPoint) -> dict:
    place = {"name": point.name, "category": point.kind, "kind": point.subkind, "lat": point.lat, "lon": point.lon,
             "distanceMeters": round(point.distance_m), "osmType": OSM_TYPES.get(point.osm_type, point.osm_type),
             "osmId": point.osm_id}
    for out, keys in _CONTACT:
        value = next((point.tags[k] for k in keys if point.tags.get(k)), None)
        if value:
            place[out] = value
    return place


def nearby_points(actor: User, trip_id: str, query) -> dict:
    """The map's places of `category` within `radius` m of (lat, lon), nearest first, at most `limit`, with the map's
    coverage of that circle (see the module docstring). Guard: ownership of the trip (a read).

    Raises NotFound (the trip) and InvalidQuery (a parameter, named; unknown ones too)."""
    try:
        q = load(NearbyQuery(), dict(query))
    except Invalid as exc:
        raise InvalidQuery(exc.errors) from None
    load_owned_trip(actor.id, trip_id)
    coverage = map_coverage(G.box_around(q["lat"], q["lon"], q["radius"]), Q.ready_areas(db.engine).tolist())
    answer = {"category": q["category"], "position": {"lat": q["lat"], "lon": q["lon"]}, "radius": q["radius"],
              "mapCoverage": coverage}
    if coverage == "none":
        return answer | {"pois": None, "reason": i18n.t(NO_MAP, i18n.current_locale())}
    found = Q.points_near(q["lat"], q["lon"], q["radius"], kinds=[q["category"]], engine=db.engine)
    return answer | {"pois": [_place(p) for p in found[:q["limit"]]], "more": len(found) > q["limit"]}
