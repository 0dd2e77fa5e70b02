"""The answers of trips/api/rider.py (places near a fix, the e-mail change) as marshmallow schemas, for the OpenAPI
document (trips/api/openapi.py), closed and complete like trips/api/responses.py's."""
from __future__ import annotations

from marshmallow import fields, validate

from trips.api.responses import Answer, answer, nullable
from trips.osm.tags import KINDS
from trips.services.nearby import MAX_RADIUS_M, MIN_RADIUS_M


@answer
class FixOut(Answer):
    lat = fields.Float(validate=validate.Range(-90, 90))
    lon = fields.Float(validate=validate.Range(-180, 180))


@answer
class NearbyPlaceOut(Answer):
    OPTIONAL = ("openingHours", "phone", "website")
    name = nullable(fields.String())
    category = fields.String(validate=validate.OneOf(KINDS))
    kind = fields.String(metadata={"description": "The map's own kind: drinking_water, supermarket, repair, …"})
    lat = fields.Float(validate=validate.Range(-90, 90))
    lon = fields.Float(validate=validate.Range(-180, 180))
    distanceMeters = fields.Integer(validate=validate.Range(min=0))
    osmType = fields.String(validate=validate.OneOf(("node", "way", "relation")))
    osmId = fields.Integer()
    openingHours = fields.String()
    phone = fields.String()
    website = fields.String()


@answer
class NearbyPlacesOut(Answer):
    OPTIONAL = ("more", "reason")
    category = fields.String(validate=validate.OneOf(KINDS))
    position = fields.Nested(FixOut)
    radius = fields.Integer(validate=validate.Range(MIN_RADIUS_M, MAX_RADIUS_M))
    mapCoverage = fields.String(validate=validate.OneOf(("full", "partial", "none")), metadata={
        "description": "How much of the circle the imported map covers. none: pois is null (BTP cannot know); "
                       "partial: more places may lie beyond the map."})
    pois = nullable(fields.List(fields.Nested(NearbyPlaceOut), metadata={
        "description": "Nearest first; null when no imported map covers the place."}))
    more = fields.Boolean(metadata={"description": "More places than `limit` lie within the radius."})
    reason = fields.String(metadata={"description": "Why pois is null."})


@answer
class EmailChangeSentOut(Answer):
    sentTo = fields.String(metadata={"format": "email"})
    expiresInSeconds = fields.Integer(validate=validate.Range(min=1))


RESPONSES = {"Fix": FixOut, "NearbyPlace": NearbyPlaceOut, "NearbyPlaces": NearbyPlacesOut, "EmailChangeSent": EmailChangeSentOut}
