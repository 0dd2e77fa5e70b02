"""GPX downloads of a trip or of some of its days (GPX 1.1, waypoints at day ends and chosen stays), at the stored
resolution (trips/services/gpx_days.py), streamed; and the trip's calendar (trips/readmodels/ical.py)."""
from __future__ import annotations

import dataclasses
import re
from urllib.parse import urlsplit

from flask import Response, current_app

from trips.core.text import floor
from trips.models import Stage, Trip
from trips.readmodels.ical import trip_calendar
from trips.route.gpx_export import DayExport, iter_gpx
from trips.services.gpx_days import day_exports


def filename(trip: Trip, stages: list[Stage] | None) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", trip.title or "trip").strip("-")[:60] or "trip"
    return f"{base}-day-{stages[0].day_number}.gpx" if stages and len(stages) == 1 else f"{base}.gpx"


def _floored(value):
    return floor(value) if isinstance(value, str) else value


def _floored_day(day: DayExport) -> DayExport:
    acc = day.accommodation
    if isinstance(acc, dict):
        acc = {**acc, "name": _floored(acc.get("name")), "type": _floored(acc.get("type"))}
    return dataclasses.replace(day, label=_floored(day.label), end_label=_floored(day.end_label), accommodation=acc)


def gpx_download(trip: Trip, stages: list[Stage] | None = None, *, public: bool = False) -> Response:
    """Every value is read before the answer starts: the chunks are made from them alone, no database read.

    `public`: the share link's file, opened by anyone with the link. Its words (the owner's title and day labels,
    third parties' lodging names) pass the same text floor as the share page and the MCP answers
    (trips/core/text.py): no bidi override or control character reshapes what its reader's app shows."""
    days = day_exports(trip, stages)
    title = trip.title
    if public:
        title, days = _floored(title), [_floored_day(day) for day in days]
    response = Response(iter_gpx(title, days, speed_kmh=trip.average_speed), mimetype="application/gpx+xml")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename(trip, stages)}"'
    response.headers["Cache-Control"] = "private, no-cache"
    return response


def ics_download(trip: Trip, locale: str) -> Response:
    """The trip's calendar in `locale`'s words, an attachment; its events' UIDs name this server's host."""
    host = urlsplit(current_app.config["BTP_BASE_URL"]).hostname or "btp"
    response = Response(trip_calendar(trip, locale, host), mimetype="text/calendar")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename(trip, None).removesuffix(".gpx")}.ics"'
    response.headers["Cache-Control"] = "private, no-cache"
    return response
