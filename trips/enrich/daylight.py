"""Daylight (docs/RULES.md "Daylight"): on each riding day of a dated trip, the civil
twilight end at the day's end point, on the day's date (`astral`, solar depression 6°), in the local time of
that point (`timezonefinder`, its default file-backed mode: the polygons stay on disk, not in each worker's
memory); the alert fires when the estimated arrival (departureHour + riding time, trips.route.pacing, the one
formula) is later. Its auto-fix is the departure hour that would arrive by twilight,
max(5, floor(twilight − (arrival − departureHour))).

Nothing in polar day or night (astral raises ValueError when the sun never sets, never rises or never goes 6°
below the horizon: there is no twilight end to beat), nothing without a start date (the original fell back on
today), rest days skipped (looked at, nothing to say).

Group "daylight", category terrain_security: the original ran this check inside terrain and raised it in the
terrain group, but every enrichment replaces only its own group (registry.apply), and terrain's inputs (the
e-bike mode) and this one's (the dates, the end point's sky) differ, so it is its own computation with its
own group; terrain_security is where BTP puts what bears on the day's riding safety, as terrain is.
"""
from __future__ import annotations

import math
import threading
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from astral import Observer
from astral.sun import dusk, sunset

from trips.enrich.alerts.calendar import SUNSET_ARRIVAL_AFTER_TWILIGHT
from trips.enrich.contract import AlertFact, Result, StageSnap, TripSnap
from trips.route.pacing import rider_time

NAME = "daylight"
GROUP = "daylight"
EARLIEST_DEPARTURE_HOUR = 5  # the auto-fix floor: max(5, …)

_finder = None
_lock = threading.Lock()


def _timezone(lat: float, lon: float) -> ZoneInfo:
    """The time zone at the point (at sea: the nautical Etc/GMT±n zone timezonefinder answers); UTC when
    there is none or the system has no such zone."""
    global _finder
    if _finder is None:
        with _lock:
            if _finder is None:
                from timezonefinder import TimezoneFinder  # heavy: loaded by the job, never by a web worker

                _finder = TimezoneFinder()  # in_memory=False (the default): file-backed
    name = _finder.timezone_at(lng=lon, lat=lat)
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except ZoneInfoNotFoundError:
        return ZoneInfo("UTC")


def sky(lat: float, lon: float, day: date) -> tuple[float, float] | None:
    """(sunset, civil twilight end) at the point on `day` as decimal local hours from that day's midnight
    (past 24 when they fall after midnight); None in polar day or night, or when the sun never goes 6° below
    the horizon."""
    zone = _timezone(lat, lon)
    where = Observer(latitude=lat, longitude=lon)
    try:
        end, down = dusk(where, day, tzinfo=zone), sunset(where, day, tzinfo=zone)
    except ValueError:
        return None
    midnight = datetime.combine(day, datetime.min.time(), tzinfo=zone)
    return (down - midnight) / timedelta(hours=1), (end - midnight) / timedelta(hours=1)


def clock(hours: float) -> str:
    """Decimal hours as HH:MM (minutes rounded down, so an arrival is never shown earlier than it is late)."""
    minutes = math.floor(hours * 60 + 1e-9)
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def check(snap: TripSnap, stage: StageSnap) -> AlertFact | None:
    """The day's alert, or None (arrival by twilight, polar day or night, no date, a rest day)."""
    if stage.is_rest_day or stage.date is None:
        return None
    found = sky(*stage.end, stage.date)
    if found is None:
        return None
    sunset_h, twilight_h = found
    arrival = rider_time(stage.distance_km, stage.elevation_gain_m, snap.average_speed,
                         snap.departure_hour).arrival_hour
    if arrival <= twilight_h:
        return None
    hour = max(EARLIEST_DEPARTURE_HOUR, math.floor(twilight_h - (arrival - snap.departure_hour)))
    return AlertFact(SUNSET_ARRIVAL_AFTER_TWILIGHT.code, stage.id,
                     {"arrival": clock(arrival), "twilight": clock(twilight_h), "sunset": clock(sunset_h)},
                     {"kind": "auto_fix", "departureHour": hour})


def compute(snap: TripSnap, engine) -> Result:
    """Every day of a dated trip looked at; the alert where the arrival is after twilight. Needs no map.
    Raises nothing for a day without twilight (polar), only for a broken snapshot."""
    result = Result()
    for stage in snap.stages:
        if stage.date is None:
            continue
        result.ran_on(stage.id)
        fact = check(snap, stage)
        if fact is not None:
            result.add(fact)
    return result
