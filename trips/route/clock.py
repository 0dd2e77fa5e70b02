"""Times are instants (docs/RULES.md "Times"): "departure hour + hours ridden on day D at (lat, lon)" becomes a
timezone-aware datetime in the local zone of a point, so daylight, arrival, opening hours at the passage and
weather windows compare times, never clock faces (an arrival at 09:53 is not after a twilight end at 00:02 of
the next night, and a day crossing a time zone arrives at the end point's hour).

The departure hour is the wall-clock hour on D at the day's start point; the hours ridden are elapsed time
(added in UTC, so a daylight-saving change during the ride counts as it happens); the result is read in the
zone of the point asked about.
"""
from __future__ import annotations

import threading
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Point = tuple[float, float]

_finder = None
_lock = threading.Lock()


def zone_name(lat: float, lon: float) -> str | None:
    """The tz database name of the zone at the point (None where timezonefinder has none); one finder per process,
    shared with the border lookup (trips/enrich/countries.py)."""
    global _finder
    if _finder is None:
        with _lock:
            if _finder is None:
                from timezonefinder import TimezoneFinder  # heavy: loaded by the jobs that need it, not by a web worker

                _finder = TimezoneFinder()  # in_memory=False (the default): file-backed
    return _finder.timezone_at(lng=lon, lat=lat)


def zone_at(lat: float, lon: float) -> ZoneInfo:
    """The time zone at the point (at sea: the nautical Etc/GMT±n zone timezonefinder answers); UTC when there is
    none or the system has no such zone."""
    return _zone(round(float(lat), 4), round(float(lon), 4))


@lru_cache(maxsize=4096)
def _zone(lat: float, lon: float) -> ZoneInfo:
    name = zone_name(lat, lon)
    try:
        return ZoneInfo(name) if name else ZoneInfo("UTC")
    except ZoneInfoNotFoundError:
        return ZoneInfo("UTC")


def departure(day: date, departure_hour: float, start: Point) -> datetime:
    """The departure instant: `departure_hour` (decimal, wall clock) on `day` at `start`, in its zone."""
    zone = zone_at(*start)
    return datetime.combine(day, time(0), tzinfo=zone) + timedelta(hours=departure_hour)


def instant(day: date, departure_hour: float, hours_after: float, start: Point, where: Point | None = None) -> datetime:
    """The instant `hours_after` elapsed hours after the departure (`departure_hour` on `day` at `start`), in the
    local zone of `where` (default: the start)."""
    out = departure(day, departure_hour, start).astimezone(timezone.utc) + timedelta(hours=hours_after)
    return out.astimezone(zone_at(*(where or start)))


def local_departure(day: date, departure_hour: float, zone: str | None, lon: float) -> datetime:
    """`departure_hour` (wall clock) on `day` in the zone named `zone` (the day's start zone the borders' computation
    stored), else in the nautical zone of `lon` (UTC ± 1 h per 15°: within an hour or two of the local clock
    where no zone is known yet); the exports' clock, read without a time-zone lookup (docs/RULES.md "Times")."""
    where: tzinfo = timezone(timedelta(hours=max(-12, min(12, round(float(lon) / 15.0)))))
    try:
        where = ZoneInfo(zone) if zone else where
    except (ValueError, ZoneInfoNotFoundError):
        pass  # a name this system's tz database lacks: the nautical zone
    return datetime.combine(day, time(0), tzinfo=where) + timedelta(hours=departure_hour)


def ride_starts(departures: list[datetime], seconds: list[float]) -> list[datetime]:
    """When each day of a ride begins: its own departure, or when the day before ends (its departure plus its
    `seconds` of riding) if that is later, so the times of a file never go back."""
    out: list[datetime] = []
    for i, leaving in enumerate(departures):
        out.append(max(leaving, out[-1] + timedelta(seconds=float(seconds[i - 1]))) if out else leaving)
    return out


def hours_since_midnight(moment: datetime, day: date) -> float:
    """Decimal hours from `day`'s local midnight (in `moment`'s zone) to `moment`; past 24 on the next day."""
    midnight = datetime.combine(day, time(0), tzinfo=moment.tzinfo)
    return (moment.astimezone(timezone.utc) - midnight.astimezone(timezone.utc)) / timedelta(hours=1)


def clock(moment: datetime) -> str:
    """An instant as its local HH:MM (minutes rounded down, so an arrival is never shown earlier than it is)."""
    moment += timedelta(milliseconds=1)  # a float sum landing a hair before the minute still shows it
    return f"{moment.hour:02d}:{moment.minute:02d}"
