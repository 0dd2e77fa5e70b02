"""The days of a GPX export at the stored resolution (docs/RULES.md "GPX export"): each day that still follows the
trip's full-resolution route (trips/models.py TripRoute) carries the route's own points between its ends; a day
edited off it, or a trip without a stored route, carries the day's stored line."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np

from trips.models import Stage, Trip
from trips.route import clock
from trips.route.follow import follow
from trips.route.geo import total_distance_km
from trips.route.gpx_export import DayExport
from trips.services.day_cues import day_cues
from trips.services.pipeline import unpack_tracks

SAME_DISTANCE = 0.01  # a followed stretch more than 1 % (and 50 m) off the day's distance is not the day's
SAME_DISTANCE_KM = 0.05


def _line(stage: Stage) -> np.ndarray | None:
    if stage.is_rest_day or not stage.geometry or len(stage.geometry) < 2:
        return None
    return np.asarray(stage.geometry, dtype=np.float64).reshape(-1, 3)


def full_lines(trip: Trip) -> dict[str, np.ndarray]:
    """{stage id: its full-resolution line} for the days of `trip` that follow its stored route."""
    if trip.route is None:
        return {}
    tracks = unpack_tracks(trip.route)
    route = tracks[0] if len(tracks) == 1 else np.concatenate(tracks)
    stages = list(trip.stages)
    found = follow(route, [_line(s) for s in stages])
    out = {}
    for stage, line in zip(stages, found):
        if line is not None and abs(total_distance_km(line) - stage.distance) <= max(
                SAME_DISTANCE * stage.distance, SAME_DISTANCE_KM):
            out[stage.id] = line
    return out


def end_label(stage: Stage) -> str | None:
    """The rider's end label, else the map's (docs/RULES.md "Day labels")."""
    mapped = (stage.enrichment or {}).get("labels")
    return stage.end_label or (mapped.get("end") if isinstance(mapped, dict) else None)


def departure(trip: Trip, stage: Stage) -> datetime:
    """When the day's ride leaves: the trip's departure hour on the day's date (the trip's start date, else today,
    plus the day's index) in its start point's zone (docs/RULES.md "Times"), as an instant."""
    first = trip.start_date or datetime.now(timezone.utc).date()
    zone = (stage.enrichment or {}).get("timeZone")
    return clock.local_departure(first + timedelta(days=stage.position), trip.departure_hour or 0,
                                 zone if isinstance(zone, str) else None, stage.start_lon)


def day_exports(trip: Trip, stages: list[Stage] | None = None) -> list[DayExport]:
    """The GPX days of `trip` (or of `stages`, some of its days), each at the stored resolution and leaving at its
    local departure, with its cues in the reader's language."""
    lines = full_lines(trip)
    return [DayExport(day_number=s.day_number, label=s.label,
                      geometry=lines.get(s.id, s.geometry if not s.is_rest_day else []),
                      end=(s.end_lat, s.end_lon, s.end_ele), end_label=end_label(s),
                      accommodation=s.selected_accommodation, is_rest_day=s.is_rest_day,
                      departure=None if s.is_rest_day else departure(trip, s), cues=day_cues(s) or ())
            for s in (stages if stages is not None else trip.stages)]
