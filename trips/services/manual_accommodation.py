"""A lodging the rider enters by hand (a friend's house, a place the map lacks): it becomes the day's chosen
accommodation, and the day ends there exactly as when a candidate is chosen (trips/services/accommodations.py
`end_day_at`, docs/RULES.md "Choosing an accommodation").

The original product took an address and geocoded it (nothing saved when it could not be found); a rider's app
knows the point itself, so BTP takes the point and no third party is asked. A price not given is unknown (no
price at all), never 0.
"""
from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from oauth.models import User
from trips.enrich.accommodations import MAX_RADIUS_KM
from trips.errors import Invalid
from trips.guards import Precondition
from trips.models import Trip
from trips.route.geo import haversine_m
from trips.services.accommodations import after_choice, end_day_at
from trips.services.schemas import load
from trips.services.stages import find_stage, write_days

MANUAL_TYPE, MANUAL_SOURCE = "other", "manual"
MAX_FROM_END_KM = MAX_RADIUS_KM  # as far from the day's end as the widest search looks
MAX_PRICE = 10_000  # € a night: anything more is a typing slip


class LodgingPoint(Schema):
    class Meta:
        unknown = RAISE

    lat = fields.Float(required=True, validate=validate.Range(-90, 90), allow_nan=False)
    lon = fields.Float(required=True, validate=validate.Range(-180, 180), allow_nan=False)


class ManualAccommodation(Schema):
    """POST /api/trips/{id}/stages/{stageId}/accommodations/manual: where and what the lodging is; the price and
    the contact are optional."""

    class Meta:
        unknown = RAISE

    name = fields.String(required=True, validate=[validate.Length(min=1, max=120),
                                                  validate.Regexp(r"\S", error="must not be blank")])
    point = fields.Nested(LodgingPoint, required=True)
    price = fields.Float(load_default=None, allow_none=True, allow_nan=False,
                         validate=validate.Range(0, MAX_PRICE),
                         metadata={"description": "€ for the night; absent or null: unknown."})
    phone = fields.String(validate=validate.Regexp(r"^\+?[0-9 ().-]{3,40}$", error="must be a phone number"))
    website = fields.Url(schemes={"http", "https"}, require_tld=False, validate=validate.Length(max=2048))
    address = fields.String(validate=validate.Length(min=1, max=200))


def lodging(fields_: dict, end: tuple[float, float]) -> dict:
    """The stored accommodation, with the keys a scanned one has (docs/RULES.md "Accommodations")."""
    lat, lon = fields_["point"]["lat"], fields_["point"]["lon"]
    place = {"name": fields_["name"].strip(), "type": MANUAL_TYPE, "source": MANUAL_SOURCE, "lat": lat, "lon": lon,
             "possibleClosed": False, "distanceToEndPoint": round(haversine_m(end[0], end[1], lat, lon) / 1000, 3)}
    if fields_["price"] is not None:  # the rider's own price: exact; none given: unknown, said by its absence
        place |= {"estimatedPriceMin": fields_["price"], "estimatedPriceMax": fields_["price"], "isExactPrice": True}
    for key, out in (("phone", "phone"), ("website", "url"), ("address", "address")):
        if fields_.get(key):
            place[out] = fields_[key].strip()
    return place


def add_manual_accommodation(actor: User, trip_id: str, stage_id: str, precondition: Precondition, data) -> Trip:
    """Make the rider's own lodging the day's chosen one: the day ends there and the next day starts there.
    Guards: ownership → lock → version → validation, as choosing a candidate.

    Raises NotFound (the trip or the day), Locked, PreconditionRequired/Failed, Invalid (a field, a rest day, a
    point more than MAX_FROM_END_KM from the day's end) and Conflict (the days being computed)."""

    def validate(trip):
        fields_ = load(ManualAccommodation(), data)
        stage = find_stage(trip, stage_id)
        if stage.is_rest_day:
            raise Invalid({"stageId": "a rest day has no accommodation of its own"})
        place = lodging(fields_, (stage.end_lat, stage.end_lon))
        if place["distanceToEndPoint"] > MAX_FROM_END_KM:
            raise Invalid({"point": f"is {place['distanceToEndPoint']:.0f} km from the day's end; a lodging is "
                                    f"at most {MAX_FROM_END_KM:g} km from it (move the day's end first)"})
        return place

    return write_days(actor, trip_id, precondition, validate, lambda trip, place: end_day_at(trip, stage_id, place),
                      lambda trip, place: after_choice(trip, stage_id, place))
