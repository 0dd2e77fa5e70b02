"""Choosing where a day ends: one of its accommodation candidates, or none."""
from __future__ import annotations

from oauth.models import User
from trips.errors import Conflict, Invalid
from trips.guards import Precondition
from trips.models import Trip
from trips.schemas import AccommodationChoice, load
from trips.services.stages import find_stage, write_days

ACCOMMODATION_MATCH_DEG = 1e-6


def choose_accommodation(actor: User, trip_id: str, stage_id: str, precondition: Precondition, data) -> Trip:
    """Choose one of the day's candidates (by coordinates): the day ends there and the next day starts
    there. Both coordinates null clears the choice (the end point stays). The choice is the rider's: a
    later scan keeps it. Raises Conflict when the coordinates match no candidate (the list changed)."""

    def validate(trip):
        choice = load(AccommodationChoice(), data)
        stage = find_stage(trip, stage_id)
        if stage.is_rest_day:
            raise Invalid({"stageId": "a rest day has no accommodation of its own"})
        if choice["lat"] is None:
            return None
        for candidate in [*stage.accommodations, stage.selected_accommodation]:
            if candidate and abs(candidate["lat"] - choice["lat"]) <= ACCOMMODATION_MATCH_DEG \
                    and abs(candidate["lon"] - choice["lon"]) <= ACCOMMODATION_MATCH_DEG:
                return candidate
        raise Conflict("No accommodation of this day is at these coordinates; read the day again for the "
                       "current candidates.")

    def apply(trip, chosen):
        stage = find_stage(trip, stage_id)
        stage.selected_accommodation = chosen
        if chosen is None:
            return
        stage.end_lat, stage.end_lon = chosen["lat"], chosen["lon"]
        index = trip.stages.index(stage)
        if index + 1 < len(trip.stages):
            following = trip.stages[index + 1]
            following.start_lat, following.start_lon = chosen["lat"], chosen["lon"]
            if following.is_rest_day:
                following.end_lat, following.end_lon = chosen["lat"], chosen["lon"]

    return write_days(actor, trip_id, precondition, validate, apply)
