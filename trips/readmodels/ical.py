"""A trip as an iCalendar file (RFC 5545, docs/RULES.md "Trip calendar"): one event per riding day from its local
departure to its arrival, an all-day event per rest day, in the reader's words."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from trips.core import i18n
from trips.core.text import floor
from trips.errors import Conflict, N_
from trips.models import Stage, Trip
from trips.readmodels.day import best_accommodation, day_labels, stage_date
from trips.route.elevation import rounded
from trips.route.pacing import rider_time
from trips.services.gpx_days import departure

PRODID = "-//BTP//Trip calendar//EN"
UNDATED = N_("refusal.calendar_undated")
DAY, DAY_TO, REST = N_("calendar.day"), N_("calendar.day_to"), N_("calendar.rest_day")
RIDE, RIDE_UNKNOWN_CLIMB = N_("calendar.ride"), N_("calendar.ride_unknown_climb")
NIGHT, NO_NIGHT = N_("calendar.night"), N_("calendar.night_not_chosen")


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _clocked(when: datetime) -> datetime:
    """An instant in its tz database zone (written with its VTIMEZONE), else in UTC: a fixed-offset zone (the
    nautical one of an export without a known zone, trips/route/clock.py) has no TZID a calendar could read."""
    return when if isinstance(when.tzinfo, ZoneInfo) else when.astimezone(timezone.utc)


def _night(stage: Stage, locale: str) -> str:
    place, chosen = best_accommodation(stage)
    name = place.get("name") if chosen and place else None
    return i18n.t(NIGHT, locale, name=floor(name)) if name else i18n.t(NO_NIGHT, locale)


def _summary(stage: Stage, locale: str, end: str | None) -> str:
    if stage.is_rest_day:
        return i18n.t(REST, locale, day=stage.day_number)
    return i18n.t(DAY_TO, locale, day=stage.day_number, end=end) if end else i18n.t(DAY, locale, day=stage.day_number)


def _event(trip: Trip, stage: Stage, locale: str, stamp: datetime, host: str) -> list[tuple[str, object]]:
    """The day's event as (property, value) pairs, in the order they are written."""
    _, end = day_labels(stage)
    end = floor(end) if end else None
    out: list[tuple[str, object]] = [("uid", f"{stage.id}@{host}"), ("dtstamp", stamp),
                                     ("summary", _summary(stage, locale, end))]
    day = stage_date(trip, stage)
    lines = []
    if stage.is_rest_day:
        out += [("dtstart", day), ("dtend", day + timedelta(days=1)), ("transp", "TRANSPARENT")]
    else:
        timing = rider_time(stage.distance, stage.elevation, trip.average_speed, trip.departure_hour)
        leaving = departure(trip, stage)
        out += [("dtstart", _clocked(leaving)),
                ("dtend", _clocked(leaving + timedelta(hours=timing.elapsed_at(stage.distance))))]
        km = i18n.number(stage.distance, locale)
        lines.append(i18n.t(RIDE_UNKNOWN_CLIMB, locale, distance=km) if stage.elevation is None else
                     i18n.t(RIDE, locale, distance=km, up=i18n.number(rounded(stage.elevation), locale, 0)))
    lines.append(_night(stage, locale))
    out.append(("description", "\n".join(lines)))
    if end:
        out.append(("location", end))
    return out + [("geo", (round(stage.end_lat, 6), round(stage.end_lon, 6)))]


def trip_calendar(trip: Trip, locale: str, host: str) -> bytes:
    """The trip's calendar in `locale`'s words; `host` makes the events' UIDs. Raises Conflict on an undated trip:
    without a date no day has a place in a calendar."""
    if trip.start_date is None:
        raise Conflict(UNDATED)
    from icalendar import Calendar, Event  # 3 MB a web worker would keep for life: loaded by the first calendar

    stamp = _utc(trip.updated_at or trip.created_at)
    cal = Calendar()
    cal.add("prodid", PRODID)
    cal.add("version", "2.0")
    cal.add("calscale", "GREGORIAN")
    cal.add("method", "PUBLISH")
    if trip.title:
        cal.add("x-wr-calname", floor(trip.title))
    for stage in trip.stages:
        event = Event()
        for name, value in _event(trip, stage, locale, stamp, host):
            event.add(name, value)
        cal.add_component(event)
    last = trip.start_date + timedelta(days=len(trip.stages))
    # the zones' rules over the trip's dates only: a VTIMEZONE of every year since 1970 says nothing more
    cal.add_missing_timezones(first_date=trip.start_date - timedelta(days=7), last_date=last + timedelta(days=7))
    return cal.to_ical()
