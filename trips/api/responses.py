"""What the REST answers look like, as marshmallow schemas: the source of the OpenAPI document's responses.

They describe the read models' plain dicts key for key: every schema is closed and every key required, so a key
added, renamed or dropped in a read model without its schema here fails tests/trips/api/test_openapi.py.
"""
from __future__ import annotations

from marshmallow import INCLUDE, RAISE, Schema, fields, validate

from trips.enrich.alerts.catalogue import GROUPS, SEVERITIES
from trips.models import ACCOMMODATION_TYPES
from trips.api.way_responses import CueOut, km_by
from trips.osm.waykinds import BIKE_TYPES, SURFACE_CLASSES, WAY_TYPES
from trips.readmodels.day import GROUP_STATUSES

COMPUTATION_STATUSES = ("pending", "running", "done", "failed", "superseded")
CATEGORY_STATUSES = ("running", "done", "failed")


class Answer(Schema):
    """Base of the answer schemas: closed, and (see `answer`) every key present."""

    class Meta:
        unknown = RAISE


def answer(cls: type[Schema]) -> type[Schema]:
    """Mark every declared field of `cls` required (a read model always writes every key), but those named in
    its OPTIONAL."""
    for name, field in cls._declared_fields.items():
        field.required = name not in getattr(cls, "OPTIONAL", ())
    return cls


def nullable(field: fields.Field) -> fields.Field:
    field.allow_none = True
    return field


@answer
class PointOut(Answer):
    lat = fields.Float(validate=validate.Range(-90, 90))
    lon = fields.Float(validate=validate.Range(-180, 180))
    ele = nullable(fields.Float(metadata={"description": "Elevation in metres, null when the route carries none."}))


class AccommodationOut(Schema):
    """A candidate place to sleep. Enrichments may add keys beyond these (open)."""

    name = fields.String(allow_none=True)
    type = fields.String(metadata={"examples": list(ACCOMMODATION_TYPES)})
    lat = fields.Float(required=True)
    lon = fields.Float(required=True)
    currency = fields.String(metadata={"description": "ISO 4217 code of estimatedPriceMin/Max, a night; absent "
                                                      "without a price. Never converted."})
    priceReason = fields.String(validate=validate.OneOf(("no_basis", "no_currency")), metadata={
        "description": "Why there is no price: no_basis (BTP has no price table for `country`), no_currency (the "
                       "map's price names no money BTP can tell)."})

    class Meta:
        unknown = INCLUDE


class AlertActionOut(Schema):
    """What would help: navigate to lat/lon (with `segments`, the stretches of route concerned, as
    [[lat, lon], …] polylines), or an auto_fix with its parameters (open)."""

    kind = fields.String(required=True)

    class Meta:
        unknown = INCLUDE


@answer
class AlertOut(Answer):
    OPTIONAL = ("action",)
    code = fields.String()
    severity = fields.String(validate=validate.OneOf(SEVERITIES))
    group = nullable(fields.String(validate=validate.OneOf(GROUPS)))
    message = fields.String(metadata={"description": "Rendered at read time in the reader's language (the account's, "
                                                     "else Accept-Language, else en)."})
    action = fields.Nested(AlertActionOut)


ENRICHED = "Null when the analysis never ran on this day."
NUMBER = "Null when the weather service gave no value."


@answer
class HourlyWeatherOut(Answer):
    hour = fields.Integer(validate=validate.Range(0, 23), metadata={"description": "Local hour."})
    temp = fields.Float(metadata={"description": "°C."})
    apparentTemp = nullable(fields.Float(metadata={"description": "Feels like, °C. " + NUMBER}))
    precipitationMm = nullable(fields.Float(metadata={"description": NUMBER}))
    precipitationProbability = nullable(fields.Float(metadata={"description": "%. " + NUMBER}))
    windSpeed = nullable(fields.Float(metadata={"description": "km/h. " + NUMBER}))
    windGusts = nullable(fields.Float(metadata={"description": "km/h. " + NUMBER}))
    windDirectionDeg = nullable(fields.Float(metadata={"description": "Where the wind blows from. " + NUMBER}))
    relativeWindDirection = fields.String(validate=validate.OneOf(("headwind", "tailwind", "crosswind", "unknown")))
    weatherCode = nullable(fields.Integer(metadata={"description": "WMO code. " + NUMBER}))


@answer
class WeatherOut(Answer):
    """The day's forecast over its riding window (docs/RULES.md "Weather"); `hourly` only in the stage detail."""

    OPTIONAL = ("hourly",)
    date = fields.Date()
    icon = fields.String(metadata={"examples": ["01d", "10d"]})
    description = fields.String(metadata={"description": "The word of weatherCode in the reader's language.",
                                          "examples": ["rain", "partly cloudy", "pluie"]})
    weatherCode = nullable(fields.Integer(metadata={"description": "WMO code of the median hour."}))
    tempMin = fields.Float(metadata={"description": "°C."})
    tempMax = fields.Float(metadata={"description": "°C."})
    apparentTempMin = nullable(fields.Float())
    apparentTempMax = nullable(fields.Float())
    windSpeed = nullable(fields.Float(metadata={"description": "Highest, km/h."}))
    windGusts = nullable(fields.Float(metadata={"description": "Highest, km/h."}))
    windDirection = nullable(fields.String(validate=validate.OneOf(("N", "NE", "E", "SE", "S", "SO", "O", "NO")),
                                           metadata={"description": "Where it blows from (O = west)."}))
    precipitationProbability = nullable(fields.Float(metadata={"description": "Highest, %."}))
    precipitationMm = nullable(fields.Float(metadata={"description": "Sum over the window."}))
    humidity = nullable(fields.Float(metadata={"description": "%, the median hour."}))
    uvIndex = nullable(fields.Integer())
    comfortIndex = fields.Integer(validate=validate.Range(0, 100))
    relativeWindDirection = fields.String(validate=validate.OneOf(("headwind", "tailwind", "crosswind", "unknown")))
    hourly = fields.List(fields.Nested(HourlyWeatherOut))


@answer
class MapCoverageOut(Answer):
    share = fields.Float(validate=validate.Range(0, 1), metadata={"description": "Of the day's length."})
    offMapKm = fields.List(fields.List(fields.Float(), validate=validate.Length(equal=2)), metadata={
        "description": "[from, to] km from the day's start not on the map (at most 5)."})


@answer
class StageSummaryOut(Answer):
    stageId = fields.String(metadata={"format": "uuid"})
    dayNumber = fields.Integer(validate=validate.Range(min=1))
    distance = fields.Float(metadata={"description": "Kilometres."})
    elevation = nullable(fields.Integer(metadata={"description": "Climbing, metres; null: unknown."}))
    elevationLoss = nullable(fields.Integer(metadata={"description": "Descent, metres; null: unknown."}))
    elevationReason = nullable(fields.String(metadata={"description": "Why the climbing is null."}))
    startPoint = fields.Nested(PointOut)
    endPoint = fields.Nested(PointOut)
    label = nullable(fields.String())
    startLabel = nullable(fields.String())
    endLabel = nullable(fields.String())
    isRestDay = fields.Boolean()
    approximate = fields.Boolean(metadata={"description": "The line is a straight detour, not a routed one."})
    accommodations = fields.List(fields.Nested(AccommodationOut))
    selectedAccommodation = nullable(fields.Nested(AccommodationOut))
    ridingHours = fields.Float()
    estimatedArrival = nullable(fields.String(validate=validate.Regexp(r"^[0-2][0-9]:[0-5][0-9]$"),
                                              metadata={"description": "HH:MM, null on a rest day."}))
    alertCount = fields.Integer(validate=validate.Range(min=0))
    alerts = fields.List(fields.Nested(AlertOut), metadata={"description": "Critical first, then warning, nudge."})
    groups = fields.Dict(keys=fields.String(validate=validate.OneOf(GROUPS)),
                         values=fields.String(validate=validate.OneOf(GROUP_STATUSES)),
                         metadata={"description": "Per alert group: done, partial (ran, but the map covers "
                                                  "the day partly: see mapCoverage), running, failed, off map (not "
                                                  "looked at: the part of the day it reads is off the imported map) "
                                                  "or not computed (a group not computed says nothing about the "
                                                  "day)."})
    mapCoverage = nullable(fields.Nested(MapCoverageOut, metadata={
        "description": "Share of the day on the imported map; null until an analysis measured it."}))
    resupply = nullable(fields.List(fields.Dict(), metadata={"description": "Where to buy food. " + ENRICHED}))
    supplyTimeline = nullable(fields.List(fields.Dict(), metadata={"description": "Food and water every 500 m "
                                                                                  "cluster. " + ENRICHED}))
    waterPoints = nullable(fields.List(fields.Dict(), metadata={"description": "Drinking water along the day: km, "
                                                                              "kind, name, lat, lon. " + ENRICHED}))
    bikeShops = nullable(fields.List(fields.Dict(), metadata={"description": "Bike shops and repair stations within 2 km "
                                                                            "of the day: km, kind (repair, shop, "
                                                                            "repair_station), name, lat, lon, phone, "
                                                                            "website. " + ENRICHED}))
    railwayStations = nullable(fields.List(fields.Dict(), metadata={
        "description": "The nearest train station within 10 km of the day's start and of its end: end (start or "
                       "end), name, distance (km), lat, lon. " + ENRICHED}))
    culturalPois = nullable(fields.List(fields.Dict(), metadata={"description": "Places to visit. " + ENRICHED}))
    terrain = nullable(fields.Dict(metadata={"description": "Rough and main-road km, steepest gradient. " + ENRICHED}))
    surfaces = km_by(SURFACE_CLASSES, "surface class")
    wayTypes = km_by(WAY_TYPES, "way type")
    waysReason = nullable(fields.String(metadata={"description": "Why surfaces, wayTypes and cues are null."}))
    weather = nullable(fields.Nested(WeatherOut, metadata={"description": "Null without a forecast for the day's "
                                                                          "date (see weatherAvailability)."}))
    weatherAvailability = nullable(fields.String(
        validate=validate.OneOf(("available", "past", "beyond_horizon", "unavailable")),
        metadata={"description": "Why there is a forecast or none: past, beyond_horizon (over 16 days ahead), "
                                 "unavailable (the weather service gave none); null on an undated trip or while "
                                 "it is being fetched. Derived when read."}))


@answer
class ComputationOut(Answer):
    name = fields.String()
    status = fields.String(validate=validate.OneOf(COMPUTATION_STATUSES))
    reason = nullable(fields.String())


@answer
class CategoryStatusOut(Answer):
    OPTIONAL = ("reason",)
    category = fields.String()
    status = fields.String(validate=validate.OneOf(CATEGORY_STATUSES))
    reason = nullable(fields.String(metadata={"description": "Why it failed (on a failed category only)."}))


@answer
class WaypointOut(Answer):
    lat = fields.Float()
    lon = fields.Float()


@answer
class RouteLegOut(Answer):
    from_ = fields.Integer(data_key="from", metadata={"description": "The leg's first point (1-based)."})
    to = fields.Integer(metadata={"description": "Its last point."})
    km = fields.Float()
    how = fields.String(metadata={"description": "In the reader's language: routed (on the imported map, or by the "
                                                "routing service); \"routed, joined straight for the … km from "
                                                "point n to its road: approximate\" where a point lies off the "
                                                "roads; or \"joined straight, approximate: why\" where the map "
                                                "cannot route it."})


@answer
class BudgetTotalOut(Answer):
    currency = fields.String(validate=validate.Regexp(r"^[A-Z]{3}$"), metadata={"description": "ISO 4217."})
    min = fields.Float(validate=validate.Range(min=0))
    max = fields.Float(validate=validate.Range(min=0))
    nights = fields.Integer(validate=validate.Range(min=1), metadata={"description": "The nights priced in it."})


@answer
class BudgetOut(Answer):
    totals = fields.List(fields.Nested(BudgetTotalOut), metadata={
        "description": "The nights' price ranges summed, one sum per currency (never converted), most nights first."})
    nights = fields.Integer(validate=validate.Range(min=0), metadata={"description": "Each day's but the last's."})
    chosen = fields.Integer(validate=validate.Range(min=0), metadata={"description": "Nights at a chosen place."})
    unknown = fields.List(fields.Integer(), metadata={"description": "Day numbers whose night has no known price."})


@answer
class TripDetailOut(Answer):
    id = fields.String(metadata={"format": "uuid"})
    title = nullable(fields.String())
    sourceUrl = nullable(fields.String(metadata={"description": "Null for a GPX upload."}))
    sourceType = nullable(fields.String(metadata={"description": "komoot_tour, komoot_collection, strava_route, "
                                                                 "ride_with_gps, gpx_upload or waypoints."}))
    waypoints = nullable(fields.List(fields.Nested(WaypointOut), metadata={
        "description": "The points a trip planned from places was created from; null for a route link or a file."}))
    routing = nullable(fields.List(fields.Nested(RouteLegOut), metadata={
        "description": "How BTP drew the route through the waypoints, leg by leg; null for any other route."}))
    startDate = nullable(fields.Date())
    endDate = nullable(fields.Date())
    fatigueFactor = fields.Float()
    elevationPenalty = fields.Float()
    ebikeMode = fields.Boolean()
    bikeType = fields.String(validate=validate.OneOf(BIKE_TYPES), metadata={
        "description": "Weighs the router's surfaces and the surface alert's limit."})
    departureHour = fields.Integer(validate=validate.Range(0, 23))
    maxDistancePerDay = fields.Float()
    averageSpeed = fields.Float()
    enabledAccommodationTypes = fields.List(fields.String(validate=validate.OneOf(ACCOMMODATION_TYPES)))
    status = fields.String(validate=validate.OneOf(("draft", "ready")))
    partial = fields.Boolean(metadata={"description": "True only while a computation is pending or running."})
    nextAction = nullable(fields.String(metadata={"description": "What to do now: wait, or how to recover from a "
                                                                 "failure (with its reason); null when nothing."}))
    version = fields.Integer(validate=validate.Range(min=1), metadata={"description": "Also the ETag."})
    isLocked = fields.Boolean(metadata={"description": "The start date is today or past: edits are refused."})
    outOfZone = fields.Boolean(metadata={"description": "The route leaves the imported map areas: the map-based "
                                                        "analyses cover only the part inside them."})
    totalDistance = fields.Float()
    totalElevation = nullable(fields.Integer(metadata={"description": "Null when a day's climbing is unknown."}))
    totalElevationLoss = nullable(fields.Integer())
    elevationReason = nullable(fields.String(metadata={"description": "Why the climbing is null."}))
    budget = fields.Nested(BudgetOut, metadata={"description": "What the nights cost."})
    computations = fields.List(fields.Nested(ComputationOut))
    categoryStatus = fields.List(fields.Nested(CategoryStatusOut))
    stages = fields.List(fields.Nested(StageSummaryOut))
    createdAt = fields.DateTime()
    updatedAt = fields.DateTime()


@answer
class TripListItemOut(Answer):
    id = fields.String(metadata={"format": "uuid"})
    title = nullable(fields.String())
    startDate = nullable(fields.Date())
    endDate = nullable(fields.Date())
    totalDistance = fields.Float()
    stageCount = fields.Integer(validate=validate.Range(min=0))
    createdAt = fields.DateTime()
    updatedAt = fields.DateTime()
    status = fields.String(validate=validate.OneOf(("draft", "analyzing", "analyzed", "failed")))


@answer
class TripListOut(Answer):
    member = fields.List(fields.Nested(TripListItemOut))
    totalItems = fields.Integer(validate=validate.Range(min=0))
    page = fields.Integer(validate=validate.Range(min=1))
    itemsPerPage = fields.Integer(validate=validate.Range(min=1))


@answer
class RouteStageOut(Answer):
    stageId = fields.String(metadata={"format": "uuid"})
    dayNumber = fields.Integer(validate=validate.Range(min=1))
    geometry = fields.List(fields.Nested(PointOut))


@answer
class TripRouteOut(Answer):
    id = fields.String(metadata={"format": "uuid"})
    version = fields.Integer(validate=validate.Range(min=1))
    stages = fields.List(fields.Nested(RouteStageOut))


@answer
class PlaceOut(Answer):
    name = fields.String()
    lat = fields.Float(validate=validate.Range(-90, 90))
    lon = fields.Float(validate=validate.Range(-180, 180))
    displayName = fields.String()
    type = fields.String()


@answer
class PlaceListOut(Answer):
    member = fields.List(fields.Nested(PlaceOut))
    totalItems = fields.Integer(validate=validate.Range(min=0))


@answer
class ShareOut(Answer):
    url = fields.String(metadata={"format": "uri"})
    shortCode = fields.String(validate=validate.Regexp(r"^[A-Za-z0-9_-]{8}$"))
    createdAt = fields.DateTime()


class ProblemOut(Schema):
    """RFC 9457 problem details (application/problem+json); `errors` names each bad field (422, and 400 for a
    bad query string)."""

    type = fields.String(required=True, metadata={"description": "Always about:blank: the status says it all."})
    title = fields.String(required=True)
    status = fields.Integer(required=True, validate=validate.Range(400, 599))
    detail = fields.String(required=True)
    instance = fields.String(required=True, metadata={"description": "The request path."})
    errors = fields.Dict(keys=fields.String(), values=fields.String())

    class Meta:
        unknown = RAISE


# Component names, parts before the wholes they make up (apispec names a part by the first that uses it).
RESPONSES = {
    "Point": PointOut, "Accommodation": AccommodationOut, "AlertAction": AlertActionOut, "Alert": AlertOut,
    "HourlyWeather": HourlyWeatherOut, "Weather": WeatherOut, "MapCoverage": MapCoverageOut,
    "Cue": CueOut, "StageSummary": StageSummaryOut,
    "Computation": ComputationOut, "CategoryStatus": CategoryStatusOut, "BudgetTotal": BudgetTotalOut,
    "Budget": BudgetOut, "TripDetail": TripDetailOut,
    "TripListItem": TripListItemOut, "TripList": TripListOut,
    "RouteStage": RouteStageOut, "TripRoute": TripRouteOut, "Place": PlaceOut, "PlaceList": PlaceListOut,
    "Share": ShareOut, "Problem": ProblemOut,
}
