"""The REST blueprint under /api: principal → service → read model. Thin by design."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request, url_for
from marshmallow import fields

from oauth.kernel.principal import require_api_scope
from trips.readmodels import trip as readmodels
from trips.services import trip_reads as reads
from trips.services import trips as services
from trips.services.places import search_places
from trips.services.stages import get_stage
from trips.services.analysis import analyze_trip
from trips.services.accommodations import scan_accommodations as look_again
from trips.errors import Invalid, Msg
from trips.api.exports import gpx_download, ics_download
from trips.core import i18n
from trips.guards import Precondition
from trips.core.problems import conditional_json, json_body
from trips.services.inputs import GpxUploadSettings

bp = Blueprint("trips_api", __name__, url_prefix="/api")
READ, WRITE = "trips:read", "trips:write"
GPX_FORM_LISTS = {f.data_key or name for name, f in GpxUploadSettings().fields.items() if isinstance(f, fields.List)}


def versioned(payload: dict, version: int, status: int = 200):
    response = jsonify(payload)
    response.status_code = status
    response.headers["ETag"] = f'"{version}"'
    response.headers["Cache-Control"] = "no-store"
    return response


def trip_answer(trip, status: int = 200, created: bool = False):
    """The trip's detail with its version as ETag; `Location` when a trip was made."""
    response = versioned(readmodels.trip_detail(trip), trip.version, status)
    if created:
        response.headers["Location"] = url_for("trips_api.get_trip", trip_id=trip.id)
    return response


def if_match() -> Precondition:
    return Precondition.from_if_match(request.headers.get("If-Match"))


@bp.post("/trips")
@require_api_scope(WRITE)
def create_trip():
    trip, created = services.create_trip(g.principal.user, json_body(), request.headers.get("Idempotency-Key"))
    return trip_answer(trip, 202 if created else 200, created=True)


@bp.post("/trips/gpx-upload")
@require_api_scope(WRITE)
def upload_gpx():
    if "gpxFile" in request.form:  # a text field, not a file part: say how to send it, not "Unknown field."
        raise Invalid({"gpxFile": Msg("api.gpx_not_a_file")})
    # A list setting comes as one form field per item (OpenAPI 3.1 §4.8.15: multipart arrays are repeated parts).
    form = {k: request.form.getlist(k) if k in GPX_FORM_LISTS else v for k, v in request.form.items()}
    trip = services.import_gpx(g.principal.user, request.files.get("gpxFile"), form)
    return trip_answer(trip, 201, created=True)


@bp.get("/trips")
@require_api_scope(READ)
def list_trips():
    page = reads.list_trips(g.principal.user, request.args)
    return jsonify({"member": [readmodels.trip_list_item(t) for t in page["trips"]], "totalItems": page["total"],
                    "page": page["page"], "itemsPerPage": page["items_per_page"]})


@bp.get("/trips/<trip_id>")
@require_api_scope(READ)
def get_trip(trip_id):
    return trip_answer(reads.get_trip(g.principal.user, trip_id))


@bp.patch("/trips/<trip_id>")
@require_api_scope(WRITE)
def update_trip(trip_id):
    return trip_answer(services.update_trip_settings(g.principal.user, trip_id, if_match(), json_body()))


@bp.delete("/trips/<trip_id>")
@require_api_scope(WRITE)
def delete_trip(trip_id):
    services.delete_trip(g.principal.user, trip_id)
    return "", 204


@bp.get("/trips/<trip_id>/route")
@require_api_scope(READ)
def get_route(trip_id):
    trip = reads.get_trip(g.principal.user, trip_id)
    return conditional_json(readmodels.trip_route(trip))


@bp.post("/trips/<trip_id>/analyze")
@require_api_scope(WRITE)
def analyze(trip_id):
    return trip_answer(analyze_trip(g.principal.user, trip_id), 202)


@bp.post("/trips/<trip_id>/accommodations/scan")
@require_api_scope(WRITE)
def scan_accommodations(trip_id):
    return trip_answer(look_again(g.principal.user, trip_id, json_body()), 202)


@bp.post("/trips/<trip_id>/duplicate")
@require_api_scope(WRITE)
def duplicate(trip_id):
    trip, created = services.duplicate_trip(g.principal.user, trip_id, request.headers.get("Idempotency-Key"))
    return trip_answer(trip, 201 if created else 200, created=True)


@bp.get("/trips/<trip_id>.gpx")
@require_api_scope(READ)
def trip_gpx(trip_id):
    return gpx_download(reads.get_trip(g.principal.user, trip_id))


@bp.get("/trips/<trip_id>.ics")
@require_api_scope(READ)
def trip_ics(trip_id):
    return ics_download(reads.get_trip(g.principal.user, trip_id), i18n.current_locale())


@bp.get("/trips/<trip_id>/stages/<stage_id>.gpx")
@require_api_scope(READ)
def stage_gpx(trip_id, stage_id):
    stage = get_stage(g.principal.user, trip_id, stage_id)
    return gpx_download(stage.trip, [stage])


@bp.get("/geocode/search")
@require_api_scope(READ)
def geocode():
    return jsonify(search_places(g.principal.user, request.args))
