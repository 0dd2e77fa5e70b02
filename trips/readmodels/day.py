"""The day read model: a stage on the wire (camelCase, no geometry), alone or inside its trip."""
from __future__ import annotations

from trips.models import Stage, Trip
from trips.route.pacing import rider_time


def _point(lat, lon, ele) -> dict:
    return {"lat": round(lat, 6), "lon": round(lon, 6), "ele": round(ele, 1)}


def stage_summary(trip: Trip, stage: Stage) -> dict:
    timing = rider_time(stage.distance, stage.elevation, trip.average_speed, trip.departure_hour)
    return {
        "stageId": stage.id, "dayNumber": stage.day_number,
        "distance": round(stage.distance, 1), "elevation": round(stage.elevation),
        "elevationLoss": round(stage.elevation_loss),
        "startPoint": _point(stage.start_lat, stage.start_lon, stage.start_ele),
        "endPoint": _point(stage.end_lat, stage.end_lon, stage.end_ele),
        "label": stage.label, "startLabel": stage.start_label, "endLabel": stage.end_label,
        "isRestDay": stage.is_rest_day, "approximate": stage.approximate,
        "accommodations": list(stage.accommodations or []), "selectedAccommodation": stage.selected_accommodation,
        "ridingHours": 0.0 if stage.is_rest_day else round(timing.riding_hours, 2),
        "estimatedArrival": None if stage.is_rest_day else _clock(timing.arrival_hour),
    }


def _clock(hour: float) -> str:
    minutes = int(round(hour * 60))
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def stage_detail(trip: Trip, stage: Stage) -> dict:
    return {"tripId": trip.id, "version": trip.version, **stage_summary(trip, stage)}
