"""The answer of the REST day (trips/api/stages.py) as marshmallow schemas, for the OpenAPI document
(trips/api/openapi.py), closed and complete like trips/api/responses.py's."""
from __future__ import annotations

from marshmallow import fields, validate

from trips.api.responses import Answer, StageSummaryOut, answer, nullable
from trips.api.way_responses import CueOut
from trips.route.profile import CATEGORIES


@answer
class ClimbOut(Answer):
    startKm = fields.Float(metadata={"description": "Where it starts, km from the day's start."})
    lengthKm = fields.Float()
    gain = fields.Integer(metadata={"description": "Metres up, foot to top."})
    meanPct = fields.Float(metadata={"description": "Mean gradient, %."})
    steepestPct = fields.Float(metadata={"description": "Its steepest 500 m, %."})
    category = fields.String(validate=validate.OneOf([name for name, _ in CATEGORIES]), metadata={
        "description": "From length (m) × mean gradient (%), as cycling apps rank climbs."})


@answer
class StageDetailOut(StageSummaryOut):
    tripId = fields.String(metadata={"format": "uuid"})
    version = fields.Integer(validate=validate.Range(min=1))
    outOfZone = fields.Boolean(metadata={"description": "The route leaves the imported map areas."})
    categoryStatus = fields.List(fields.Nested("CategoryStatusOut"))
    routing = nullable(fields.List(fields.String(), metadata={
        "description": "How the day's line was drawn through its waypoint, stretch by stretch (\"start → waypoint: "
                       "routed on the map\", or \"…: joined straight: approximate (why)\"); null for a day that "
                       "follows its route as planned."}))
    profile = nullable(fields.List(fields.List(fields.Float(), validate=validate.Length(equal=2)), metadata={
        "description": "[km, metres] along the day, at most 64 samples; null when the day's elevation is unknown "
                       "(see elevationReason), empty on a rest day."}))
    climbs = nullable(fields.List(fields.Nested(ClimbOut), metadata={
        "description": "The day's categorised climbs in route order; null when its elevation is unknown."}))
    cues = nullable(fields.List(fields.Nested(CueOut), metadata={
        "description": "Turn by turn where the road ridden changes; null: see waysReason."}))


# Component names, parts before the wholes they make up.
RESPONSES = {"Climb": ClimbOut, "StageDetail": StageDetailOut}
