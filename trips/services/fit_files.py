"""FIT course files of a trip or of some of its days (trips/route/fit_export.py): which days, from when, at what pace."""
from __future__ import annotations

from datetime import datetime, time, timezone

from trips.errors import Conflict, InvalidQuery, Msg
from trips.models import Stage, Trip
from trips.services.gpx_days import day_exports

SPLITS = ("laps", "courses")


def fit_file(trip: Trip, stages: list[Stage] | None = None, split: str | None = None) -> tuple[bytes, str]:
    """(the file, its media type): one course with the days as laps, or (`split` "courses") a ZIP of one course per
    day. The times are the trip's pace from its departure hour (UTC) on its start date, else today.

    Raises InvalidQuery (`days`: not one of SPLITS) and Conflict (no riding day with a line yet: nothing to ride)."""
    if split is not None and split not in SPLITS:
        raise InvalidQuery({"days": Msg("field.laps_or_courses")})
    from trips.route import fit_export  # fit_tool is heavy: a web worker loads it at its first FIT download
    start = datetime.combine(trip.start_date or datetime.now(timezone.utc).date(), time(trip.departure_hour or 0),
                             timezone.utc)
    write = fit_export.course_per_day if split == "courses" else fit_export.course
    try:
        data = write(trip.title, day_exports(trip, stages), start, trip.average_speed)
    except ValueError:
        raise Conflict("refusal.nothing_to_ride") from None
    return data, "application/zip" if split == "courses" else fit_export.MEDIA_TYPE
