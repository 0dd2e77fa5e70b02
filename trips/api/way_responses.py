"""The answer schemas of a day's surfaces, way types and cues (docs/RULES.md "Surfaces and way types", "Cues")."""
from __future__ import annotations

from marshmallow import RAISE, Schema, fields, validate

from trips.osm.cues import TURNS


class CueOut(Schema):
    class Meta:
        unknown = RAISE

    km = fields.Float(required=True, metadata={"description": "From the day's start."})
    turn = fields.String(required=True, validate=validate.OneOf(TURNS))
    exit = fields.Integer(validate=validate.Range(min=1), metadata={"description": "A roundabout's exit taken."})
    street = fields.String(required=True, allow_none=True,
                           metadata={"description": "The road turned onto; null when unnamed."})
    instruction = fields.String(required=True, metadata={"description": "In the reader's language."})
    lat = fields.Float(required=True)
    lon = fields.Float(required=True)


def km_by(kinds: tuple[str, ...], what: str) -> fields.Field:
    """A day's {kind: km} table, or null."""
    return fields.Dict(keys=fields.String(validate=validate.OneOf(kinds)), values=fields.Float(), allow_none=True,
                       metadata={"description": f"Km by {what} ({', '.join(kinds)}), adding up to the day's distance; "
                                                "unknown: no way matched or no tag. Null: see waysReason."})
