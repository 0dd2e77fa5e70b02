"""Input validation for trips: marshmallow load schemas (allowlists, unknown fields refused by name)."""
from __future__ import annotations

from datetime import date

from marshmallow import RAISE, Schema, ValidationError, fields, post_load, validate, validates, validates_schema

from trips.core.validation import FromText, Number, Whole
from trips.errors import Msg
from trips.models import ACCOMMODATION_TYPES
from trips.osm.waykinds import BIKE_TYPES
from trips.route.sources import UnsupportedSource, parse_source_url
from trips.route.pacing import MAX_DAY_KM, MAX_TRIP_DAYS, too_many_dated_days  # the one cap on a trip's days
from trips.enrich.accommodations import DEFAULT_RADIUS_KM, MAX_RADIUS_KM, MIN_RADIUS_KM

# The one list of writable trip fields (API name → attribute), used by create and update alike.
WRITABLE = {
    "sourceUrl": "source_url", "title": "title", "startDate": "start_date", "endDate": "end_date",
    "fatigueFactor": "fatigue_factor", "elevationPenalty": "elevation_penalty", "ebikeMode": "ebike_mode", "bikeType": "bike_type",
    "departureHour": "departure_hour", "maxDistancePerDay": "max_distance_per_day",
    "averageSpeed": "average_speed", "enabledAccommodationTypes": "enabled_accommodation_types",
}
PACING = ("start_date", "end_date", "fatigue_factor", "elevation_penalty", "max_distance_per_day")


class _Settings(Schema):
    class Meta:
        unknown = RAISE

    title = fields.String(data_key="title", allow_none=True, validate=validate.Length(max=255))
    start_date = fields.Date(data_key="startDate", allow_none=True)
    end_date = fields.Date(data_key="endDate", allow_none=True)
    fatigue_factor = Number(data_key="fatigueFactor", validate=validate.Range(0.5, 1.0), allow_nan=False)
    elevation_penalty = Number(
        data_key="elevationPenalty", validate=validate.Range(min=0, min_inclusive=False, max=10000), allow_nan=False
    )
    ebike_mode = fields.Boolean(data_key="ebikeMode")
    bike_type = fields.String(data_key="bikeType", validate=validate.OneOf(BIKE_TYPES))
    departure_hour = Whole(data_key="departureHour", validate=validate.Range(0, 23))
    max_distance_per_day = Number(
        data_key="maxDistancePerDay", validate=validate.Range(30, MAX_DAY_KM), allow_nan=False
    )
    average_speed = Number(data_key="averageSpeed", validate=validate.Range(5, 50), allow_nan=False)
    enabled_accommodation_types = fields.List(
        fields.String(validate=validate.OneOf(ACCOMMODATION_TYPES)),
        data_key="enabledAccommodationTypes", validate=validate.Length(min=1, max=len(ACCOMMODATION_TYPES)),
    )

    @validates_schema
    def _dates(self, data, **_):
        check_dates(data.get("start_date"), data.get("end_date"))


MIN_WAYPOINTS, MAX_WAYPOINTS = 2, 50  # a trip planned from places (trips/osm/router.py MAX_POINTS holds as many)


class WaypointIn(Schema):
    """A point to pass: add_waypoint's, and each of a trip planned from places (`TripCreate.waypoints`)."""

    class Meta:
        unknown = RAISE

    lat = Number(required=True, validate=validate.Range(-90, 90), allow_nan=False)
    lon = Number(required=True, validate=validate.Range(-180, 180), allow_nan=False)


class TripCreate(_Settings):
    """A route link (`sourceUrl`), or the places to ride through in order (`waypoints`), never both."""

    source_url = fields.String(data_key="sourceUrl", validate=validate.Length(min=1, max=2048))
    source_points = fields.List(fields.Nested(WaypointIn), data_key="waypoints",
                                validate=validate.Length(min=MIN_WAYPOINTS, max=MAX_WAYPOINTS))

    @validates("source_url")
    def _source(self, value, **_):
        try:
            parse_source_url(value)
        except UnsupportedSource as exc:
            raise ValidationError([Msg(exc.message)]) from None

    @validates_schema
    def _one_source(self, data, **_):
        if ("source_url" in data) == ("source_points" in data):
            raise ValidationError([Msg("field.one_source", least=MIN_WAYPOINTS, most=MAX_WAYPOINTS)],
                                  "sourceUrl" if "source_url" in data else "body")

    @post_load
    def _pairs(self, data, **_):
        if "source_points" in data:
            data["source_points"] = [[p["lat"], p["lon"]] for p in data["source_points"]]
        return data


class TripUpdate(_Settings):
    """Settings of an existing trip. The route cannot change: a new route is a new trip."""


class GpxUploadSettings(FromText, _Settings):
    """The optional form fields that come with a GPX upload (text, as multipart sends them: "8" is the hour 8 here,
    while the JSON schemas refuse the string "8")."""


class TripListQuery(FromText):
    """GET /api/trips's query string (text), and list_trips' arguments."""

    class Meta:
        unknown = RAISE

    page = Whole(load_default=1, validate=validate.Range(1, 100000))
    items_per_page = Whole(data_key="itemsPerPage", load_default=20, validate=validate.Range(1, 30))
    title = fields.String(validate=validate.Length(max=255))
    start_date = fields.Date(data_key="startDate")
    end_date = fields.Date(data_key="endDate")


def check_dates(start: date | None, end: date | None) -> None:
    """Raises ValidationError (naming endDate, and a date that fits) when the end is before the start (the same
    date is a one-day trip) or the trip is longer than MAX_TRIP_DAYS."""
    if start and end:
        if end < start:
            raise ValidationError([Msg("pacing.end_before_start", start=start.isoformat())], "endDate")
        if (end - start).days + 1 > MAX_TRIP_DAYS:
            raise ValidationError([too_many_dated_days(start, (end - start).days + 1)], "endDate")


class PointIn(Schema):
    class Meta:
        unknown = RAISE

    lat = Number(required=True, validate=validate.Range(-90, 90), allow_nan=False)
    lon = Number(required=True, validate=validate.Range(-180, 180), allow_nan=False)
    ele = Number(load_default=None, validate=validate.Range(-500, 9000), allow_nan=False)


class StageAdd(Schema):
    class Meta:
        unknown = RAISE

    start_point = fields.Nested(PointIn, data_key="startPoint", required=True)
    end_point = fields.Nested(PointIn, data_key="endPoint", required=True)
    position = Whole(validate=validate.Range(min=0))
    label = fields.String(allow_none=True, validate=validate.Length(max=255))


class StageUpdate(Schema):
    """Either points and/or a label, or a `distance` (km) at which the day is cut: not both kinds."""

    class Meta:
        unknown = RAISE

    start_point = fields.Nested(PointIn, data_key="startPoint")
    end_point = fields.Nested(PointIn, data_key="endPoint")
    label = fields.String(allow_none=True, validate=validate.Length(max=255))
    distance = Number(validate=validate.Range(min=0, min_inclusive=False, max=1000), allow_nan=False)

    @validates_schema
    def _one_mode(self, data, **_):
        if not data:
            raise ValidationError([Msg("field.give_something")], "body")
        if "distance" in data and ({"start_point", "end_point"} & data.keys()):
            raise ValidationError([Msg("field.cut_or_points")], "distance")


class StageMove(Schema):
    class Meta:
        unknown = RAISE

    to_index = Whole(data_key="toIndex", required=True)


class AccommodationChoice(Schema):
    """Coordinates of one of the day's candidates, or both null to clear the choice."""

    class Meta:
        unknown = RAISE

    lat = Number(required=True, allow_none=True, validate=validate.Range(-90, 90), allow_nan=False)
    lon = Number(required=True, allow_none=True, validate=validate.Range(-180, 180), allow_nan=False)

    @validates_schema
    def _both_or_neither(self, data, **_):
        if (data.get("lat") is None) != (data.get("lon") is None):
            raise ValidationError([Msg("field.lat_and_lon")], "lat")


class AccommodationScan(Schema):
    """A wider search for places to sleep (docs/RULES.md "Accommodations"): around every day's end, or `stageId`'s."""

    class Meta:
        unknown = RAISE

    radius_km = Number(data_key="radiusKm", load_default=DEFAULT_RADIUS_KM, allow_nan=False,
                             validate=validate.Range(MIN_RADIUS_KM, MAX_RADIUS_KM))
    stage_id = fields.String(data_key="stageId", validate=validate.Length(min=1, max=36))
