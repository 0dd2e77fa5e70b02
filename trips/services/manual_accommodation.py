"""A lodging the rider enters by hand (a friend's house, a place the map lacks), by its point: no third party is
asked. It becomes the day's chosen accommodation (docs/RULES.md "Choosing an accommodation") and, as a chosen
candidate, the day ends at it along the roads (trips/services/lodging_road.py). A price not given is unknown, never 0;
one given is in its ISO 4217 currency, by default the one of the country the imported map puts the point in.
"""
from __future__ import annotations

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from oauth.kernel.models import User
from trips.core.db import db
from trips.enrich import prices as P
from trips.enrich.accommodations import MAX_RADIUS_KM
from trips.osm import queries as Q
from trips.errors import Invalid, Msg
from trips.guards import Precondition
from trips.models import Stage, Trip
from trips.route.geo import cumulative_km, haversine_m, locate_on_line
from trips.services import day_points, lodging_road
from trips.core.validation import Number, load
from trips.services.stages import find_stage, geometry_changed, write_days

MANUAL_TYPE, MANUAL_SOURCE = "other", "manual"
MAX_OFF_ROUTE_KM = MAX_RADIUS_KM  # as far from the day's road as the widest lodging search looks
MAX_PRICE = 10_000_000  # a night in any currency (a night in dong included): anything more is a typing slip


class LodgingPoint(Schema):
    class Meta:
        unknown = RAISE

    lat = Number(required=True, validate=validate.Range(-90, 90), allow_nan=False)
    lon = Number(required=True, validate=validate.Range(-180, 180), allow_nan=False)


class ManualAccommodation(Schema):
    """POST /api/trips/{id}/stages/{stageId}/accommodations/manual: where and what the lodging is; the price and
    the contact are optional."""

    class Meta:
        unknown = RAISE

    name = fields.String(required=True, validate=[validate.Length(min=1, max=120),
                                                  validate.Regexp(r"\S", error=Msg("field.blank"))])
    point = fields.Nested(LodgingPoint, required=True)
    price = Number(load_default=None, allow_none=True, allow_nan=False,
                         validate=validate.Range(0, MAX_PRICE),
                         metadata={"description": "For the night, in `currency`; absent or null: unknown."})
    currency = fields.String(validate=lambda code: P.is_currency(code) or _refuse(Msg("field.not_a_currency")),
                             metadata={"description": "ISO 4217 code of `price` (EUR, CHF…); absent: the currency of "
                                                      "the country the imported map puts the point in, needed where "
                                                      "BTP knows none."})
    phone = fields.String(validate=[validate.Length(max=40), validate.Regexp(r"^\+?[0-9 ().-]{3,40}$", error=Msg("field.not_a_phone"))])
    website = fields.Url(schemes={"http", "https"}, require_tld=False, validate=validate.Length(max=2048))
    address = fields.String(validate=validate.Length(min=1, max=200))


def _refuse(message: Msg):
    raise ValidationError([message])  # a list: marshmallow takes a non-string message as its messages


def _currency(fields_: dict, lat: float, lon: float) -> str:
    """The price's currency: the rider's, else the one of the country the imported boundaries put the point in
    (the offline geocoder is a job's, not a web worker's). Raises Invalid when neither is known, or for a
    currency given without a price."""
    if fields_["price"] is None:
        if fields_.get("currency"):
            raise Invalid({"currency": Msg("field.currency_without_price")})
        return ""
    found = fields_.get("currency") or P.currency_of((Q.country_at(lat, lon, engine=db.engine) or (None,))[0])
    if not found:
        raise Invalid({"currency": Msg("field.currency_needed")})
    return found


def lodging(fields_: dict, end: tuple[float, float]) -> dict:
    """The stored accommodation, with the keys a scanned one has (docs/RULES.md "Accommodations"). Raises Invalid
    for a price whose currency is not known (`_currency`)."""
    lat, lon = fields_["point"]["lat"], fields_["point"]["lon"]
    place = {"name": fields_["name"].strip(), "type": MANUAL_TYPE, "source": MANUAL_SOURCE, "lat": lat, "lon": lon,
             "possibleClosed": False, "distanceToEndPoint": round(haversine_m(end[0], end[1], lat, lon) / 1000, 3)}
    currency = _currency(fields_, lat, lon)
    if fields_["price"] is not None:  # the rider's own price: exact; none given: unknown, said by its absence
        place |= {"estimatedPriceMin": fields_["price"], "estimatedPriceMax": fields_["price"], "isExactPrice": True,
                  "currency": currency}
    for key, out in (("phone", "phone"), ("website", "url"), ("address", "address")):
        if fields_.get(key):
            place[out] = fields_[key].strip()
    return place


def _off_route_km(trip: Trip, stage: Stage, lat: float, lon: float) -> float:
    """How far (km) the point lies from the road its day's end can move along: the day and the next riding day."""
    days = [d for d in (stage, day_points.neighbour(trip, stage, 1)) if d is not None]
    line, boundary, _ = day_points.window(trip, days)
    found = locate_on_line(line, cumulative_km(line), lat, lon, None, boundary)
    return found[1] / 1000.0 if found else float("inf")


def add_manual_accommodation(actor: User, trip_id: str, stage_id: str, precondition: Precondition, data) -> Trip:
    """Make the rider's own lodging the day's chosen one: the day ends there with its road, and the next day starts
    there (see the module docstring). Guards: ownership → lock → version → validation, as choosing a candidate.

    Raises NotFound (the trip or the day), Locked, PreconditionRequired/Failed, Invalid (a field, a rest day, a
    point more than MAX_OFF_ROUTE_KM off the day's road, a day left under 50 m, a day too many) and Conflict (the
    days being computed)."""

    def validate(trip):
        fields_ = load(ManualAccommodation(), data)
        stage = find_stage(trip, stage_id)
        if stage.is_rest_day:
            raise Invalid({"stageId": Msg("field.rest_day_no_lodging")})
        place = lodging(fields_, (stage.end_lat, stage.end_lon))
        off = _off_route_km(trip, stage, place["lat"], place["lon"])
        if off > MAX_OFF_ROUTE_KM:
            raise Invalid({"point": Msg("field.lodging_off_route", km=round(off), most=MAX_OFF_ROUTE_KM)})
        return place

    notes: list[Msg] = []
    routes = lodging_road.route_before_the_lock(actor, trip_id, stage_id, lambda stage: lodging(
        load(ManualAccommodation(), data), (stage.end_lat, stage.end_lon)))

    def apply(trip, place):
        lodging_road.reach(trip, find_stage(trip, stage_id), place, notes, routes)

    # The day's line and the days after it changed: the GEOMETRY enrichments again; the chosen day keeps its lodging
    # (no scan writes a day whose lodging is chosen), a day added by the cut gets its own candidates.
    return write_days(actor, trip_id, precondition, validate, apply, lambda trip, _: geometry_changed(trip),
                      notes=notes, forget_facts=True)
