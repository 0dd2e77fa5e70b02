"""FIT course files of a trip or of some of its days (trips/route/fit_export.py): which days, from when, at what pace."""
from __future__ import annotations

from trips.errors import N_, Conflict, InvalidQuery, Msg
from trips.models import Stage, Trip
from trips.route import fit_export
from trips.services.gpx_days import day_exports

SPLITS = ("laps", "courses")
NOTHING_TO_RIDE = N_("refusal.nothing_to_ride")


def split_of(split: str | None) -> str | None:
    """The `days` choice of a FIT download ("laps", the default, is None). Raises InvalidQuery for another."""
    if split is not None and split not in SPLITS:
        raise InvalidQuery({"days": Msg("field.laps_or_courses")})
    return None if split == "laps" else split


def fit_file(trip: Trip, stages: list[Stage] | None = None, split: str | None = None,
             cues: list | None = None) -> tuple[bytes, str]:
    """(the file, its media type): one course with the days as laps, or (`split` "courses") a ZIP of one course per
    day. The times are the trip's pace from each day's local departure (gpx_days.departure: the trip's departure
    hour on the day's date in its start point's zone). `cues`: per day written, its cues (fit_export.course).

    Raises InvalidQuery (`days`: not one of SPLITS) and Conflict (no riding day with a line yet: nothing to ride)."""
    split_of(split)
    chosen = stages if stages is not None else list(trip.stages)
    days = day_exports(trip, chosen)
    start = next((day.departure for day in days if day.departure is not None), None)
    if start is None:  # only rest days
        raise Conflict(NOTHING_TO_RIDE)
    write = fit_export.course_per_day if split == "courses" else fit_export.course
    try:
        # each day's stored line: its route's points simplified at 20 m, where a long day's thinning starts
        data = write(trip.title, days, start, trip.average_speed, cues,
                     [None if s.is_rest_day else s.geometry for s in chosen])
    except ValueError:  # no riding day with a line
        raise Conflict(NOTHING_TO_RIDE) from None
    return data, "application/zip" if split == "courses" else fit_export.MEDIA_TYPE
