"""GPX downloads of a trip or of some of its days (GPX 1.1, waypoints at day ends and chosen stays), at the stored
resolution (trips/services/gpx_days.py), streamed."""
from __future__ import annotations

import re

from flask import Response

from trips.models import Stage, Trip
from trips.route.gpx_export import iter_gpx
from trips.services.gpx_days import day_exports


def filename(trip: Trip, stages: list[Stage] | None) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", trip.title or "trip").strip("-")[:60] or "trip"
    return f"{base}-day-{stages[0].day_number}.gpx" if stages and len(stages) == 1 else f"{base}.gpx"


def gpx_download(trip: Trip, stages: list[Stage] | None = None) -> Response:
    """Every value is read before the answer starts: the chunks are made from them alone, no database read."""
    body = iter_gpx(trip.title, day_exports(trip, stages))
    response = Response(body, mimetype="application/gpx+xml")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename(trip, stages)}"'
    response.headers["Cache-Control"] = "private, no-cache"
    return response
