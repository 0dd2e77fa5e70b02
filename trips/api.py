"""The REST blueprint under /api: principal → service → read model. Thin by design."""
from __future__ import annotations

from flask import Blueprint, g, jsonify, request, url_for

from oauth.principal import require_api_scope
from trips import readmodels, services
from trips.analysis import analyze_trip
from trips.exports import gpx_download
from trips.guards import Precondition
from trips.problems import conditional_json, json_body

bp = Blueprint("trips_api", __name__, url_prefix="/api")
READ, WRITE = "trips:read", "trips:write"


def versioned(payload: dict, version: int, status: int = 200):
    response = jsonify(payload)
    response.status_code = status
    response.headers["ETag"] = f'"{version}"'
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/trips")
@require_api_scope(WRITE)
def create_trip():
    trip, created = services.create_trip(g.principal.user, json_body(), request.headers.get("Idempotency-Key"))
    response = versioned(readmodels.trip_detail(trip), trip.version, 202 if created else 200)
    response.headers["Location"] = url_for(".get_trip", trip_id=trip.id)
    return response


@bp.post("/trips/gpx-upload")
@require_api_scope(WRITE)
def upload_gpx():
    form = {k: v for k, v in request.form.items()}
    trip = services.import_gpx(g.principal.user, request.files.get("gpxFile"), form)
    response = versioned(readmodels.trip_detail(trip), trip.version, 201)
    response.headers["Location"] = url_for(".get_trip", trip_id=trip.id)
    return response


@bp.get("/trips")
@require_api_scope(READ)
def list_trips():
    page = services.list_trips(g.principal.user, request.args)
    return jsonify({"member": [readmodels.trip_list_item(t) for t in page["trips"]], "totalItems": page["total"],
                    "page": page["page"], "itemsPerPage": page["items_per_page"]})


@bp.get("/trips/<trip_id>")
@require_api_scope(READ)
def get_trip(trip_id):
    trip = services.get_trip(g.principal.user, trip_id)
    return versioned(readmodels.trip_detail(trip), trip.version)


@bp.patch("/trips/<trip_id>")
@require_api_scope(WRITE)
def update_trip(trip_id):
    pre = Precondition.from_if_match(request.headers.get("If-Match"))
    trip = services.update_trip_settings(g.principal.user, trip_id, pre, json_body())
    return versioned(readmodels.trip_detail(trip), trip.version)


@bp.delete("/trips/<trip_id>")
@require_api_scope(WRITE)
def delete_trip(trip_id):
    services.delete_trip(g.principal.user, trip_id)
    return "", 204


@bp.get("/trips/<trip_id>/route")
@require_api_scope(READ)
def get_route(trip_id):
    trip = services.get_trip(g.principal.user, trip_id)
    return conditional_json(readmodels.trip_route(trip))


@bp.post("/trips/<trip_id>/analyze")
@require_api_scope(WRITE)
def analyze(trip_id):
    trip = analyze_trip(g.principal.user, trip_id)
    return versioned(readmodels.trip_detail(trip), trip.version, 202)


@bp.post("/trips/<trip_id>/duplicate")
@require_api_scope(WRITE)
def duplicate(trip_id):
    trip, created = services.duplicate_trip(g.principal.user, trip_id, request.headers.get("Idempotency-Key"))
    response = versioned(readmodels.trip_detail(trip), trip.version, 201 if created else 200)
    response.headers["Location"] = url_for(".get_trip", trip_id=trip.id)
    return response


@bp.get("/trips/<trip_id>.gpx")
@require_api_scope(READ)
def trip_gpx(trip_id):
    return gpx_download(services.get_trip(g.principal.user, trip_id))


@bp.get("/trips/<trip_id>/stages/<stage_id>.gpx")
@require_api_scope(READ)
def stage_gpx(trip_id, stage_id):
    stage = services.get_stage(g.principal.user, trip_id, stage_id)
    return gpx_download(stage.trip, [stage])


@bp.get("/geocode/search")
@require_api_scope(READ)
def geocode():
    return jsonify(services.search_places(g.principal.user, request.args))
