"""Export downloads of a trip or of some of its days (GPX 1.1 at the stored resolution, trips/services/gpx_days.py;
FIT courses, trips/services/fit_files.py; the calendar, trips/readmodels/ical.py), each made once per version of the
trip and served from the store with a strong ETag (trips/services/stored_exports.py): a request naming it in
If-None-Match is answered 304."""
from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import Callable, Iterable
from urllib.parse import urlsplit

from flask import Response, current_app, request

from trips.core.text import floor
from trips.models import Stage, Trip
from trips.readmodels.ical import trip_calendar
from trips.route.gpx_export import DayExport, iter_gpx
from trips.services.gpx_days import day_exports
from trips.services.stored_exports import stored_export

GPX_MEDIA_TYPE = "application/gpx+xml"
OPTIONS_CHARS = 80  # trips/models.py TripExport.options


def filename(trip: Trip, stages: list[Stage] | None) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", trip.title or "trip").strip("-")[:60] or "trip"
    return f"{base}-day-{stages[0].day_number}.gpx" if stages and len(stages) == 1 else f"{base}.gpx"


def options(stages: list[Stage] | None, *more: str | None) -> str:
    """The key of an export's options: the days it holds (all when None) and the caller's other choices."""
    days = ["days=" + "+".join(s.id for s in stages)] if stages is not None else []
    key = ",".join(days + [m for m in more if m])
    return key if len(key) <= OPTIONS_CHARS else "sha256=" + hashlib.sha256(key.encode()).hexdigest()[:64 - 7]


def export_answer(trip: Trip, kind: str, opts: str, make: Callable[[], tuple[Iterable[bytes], str]], name: str,
                  language: str = "") -> Response:
    """The kept file of `kind` (made by `make` when there is none for the trip as it is now), as an attachment
    named `name`; 304 when the request's If-None-Match names it."""
    stored = stored_export(trip, kind, opts, language, make, request.headers.get("If-None-Match"))
    if stored.content is None:
        response = Response(status=304)
    else:
        response = Response(stored.chunks(), mimetype=stored.media_type)
        response.headers["Content-Length"] = str(stored.size)
        response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    response.headers["ETag"] = stored.etag
    response.headers["Cache-Control"] = "private, no-cache"
    return response


def _floored(value):
    return floor(value) if isinstance(value, str) else value


def _floored_day(day: DayExport) -> DayExport:
    acc = day.accommodation
    if isinstance(acc, dict):
        acc = {**acc, "name": _floored(acc.get("name")), "type": _floored(acc.get("type"))}
    return dataclasses.replace(day, label=_floored(day.label), end_label=_floored(day.end_label), accommodation=acc)


def gpx_download(trip: Trip, stages: list[Stage] | None = None, *, public: bool = False) -> Response:
    """`public`: the share link's file, opened by anyone with the link. Its words (the owner's title and day labels,
    third parties' lodging names) pass the same text floor as the share page and the MCP answers
    (trips/core/text.py): no bidi override or control character reshapes what its reader's app shows."""

    def make() -> tuple[Iterable[bytes], str]:
        days = day_exports(trip, stages)
        title = trip.title
        if public:
            title, days = _floored(title), [_floored_day(day) for day in days]
        return iter_gpx(title, days, speed_kmh=trip.average_speed), GPX_MEDIA_TYPE

    return export_answer(trip, "gpx", options(stages, "public" if public else None), make, filename(trip, stages))


def ics_download(trip: Trip, locale: str) -> Response:
    """The trip's calendar in `locale`'s words, an attachment; its events' UIDs name this server's host."""
    host = urlsplit(current_app.config["BTP_BASE_URL"]).hostname or "btp"

    def make() -> tuple[Iterable[bytes], str]:
        return [trip_calendar(trip, locale, host)], "text/calendar"

    name = filename(trip, None).removesuffix(".gpx") + ".ics"
    return export_answer(trip, "ics", options(None), make, name, language=locale)
