"""GPX downloads of a trip or of some of its days (GPX 1.1, waypoints at day ends and chosen stays)."""
from __future__ import annotations

import re

from flask import Response

from trips.route.gpx_export import DayExport, write_gpx
from trips.models import Stage, Trip


def day_export(stage: Stage) -> DayExport:
    return DayExport(
        day_number=stage.day_number, label=stage.label, geometry=[tuple(p) for p in stage.geometry],
        end=(stage.end_lat, stage.end_lon, stage.end_ele), end_label=stage.end_label,
        accommodation=stage.selected_accommodation, is_rest_day=stage.is_rest_day,
    )


def filename(trip: Trip, stages: list[Stage] | None) -> str:
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", trip.title or "trip").strip("-")[:60] or "trip"
    return f"{base}-day-{stages[0].day_number}.gpx" if stages and len(stages) == 1 else f"{base}.gpx"


def gpx_download(trip: Trip, stages: list[Stage] | None = None) -> Response:
    body = write_gpx(trip.title, [day_export(s) for s in (stages if stages is not None else trip.stages)])
    response = Response(body, mimetype="application/gpx+xml")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename(trip, stages)}"'
    response.headers["Cache-Control"] = "private, no-cache"
    return response
