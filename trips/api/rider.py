"""REST for a rider's own app: a lodging entered by hand, the map's places near a GPS fix, FIT course files (the
owner's and the shared link's), and the account's e-mail change. Thin adapters; none of them is an MCP tool (files,
live GPS, mailbox flows stay off the tool surface)."""
from __future__ import annotations

from flask import Blueprint, Response, g, jsonify, request

from oauth.services import accounts
from oauth.kernel.principal import require_api_scope
from trips.api.exports import export_answer, filename, options
from trips.api.trips import READ, WRITE, if_match, trip_answer
from trips.core.problems import json_body
from trips.services import sharing
from trips.services import trip_reads as reads
from trips.services.fit_files import fit_file, split_of
from trips.services.manual_accommodation import add_manual_accommodation
from trips.core.validation import load
from trips.services.nearby import nearby_points
from trips.services.stages import find_stage, get_stage

api = Blueprint("rider_api", __name__, url_prefix="/api")
pages = Blueprint("rider_pages", __name__)


@api.post("/trips/<trip_id>/stages/<stage_id>/accommodations/manual")
@require_api_scope(WRITE)
def manual_accommodation(trip_id, stage_id):
    trip = add_manual_accommodation(g.principal.user, trip_id, stage_id, if_match(), json_body())
    return trip_answer(trip)


@api.get("/trips/<trip_id>/nearby-pois")
@require_api_scope(READ)
def nearby(trip_id):
    return jsonify(nearby_points(g.principal.user, trip_id, request.args))


@api.post("/users/me/email-change")
@require_api_scope(WRITE)
def email_change():
    address = accounts.request_email_change(g.principal.user, load(accounts.EmailChange(), json_body())["email"])
    return jsonify({"sentTo": address, "expiresInSeconds": int(accounts.EMAIL_CHANGE_TTL.total_seconds())}), 202


@api.get("/trips/<trip_id>.fit")
@require_api_scope(READ)
def trip_fit(trip_id):
    return fit_download(reads.get_trip(g.principal.user, trip_id), split=request.args.get("days"))


@api.get("/trips/<trip_id>/stages/<stage_id>.fit")
@require_api_scope(READ)
def stage_fit(trip_id, stage_id):
    stage = get_stage(g.principal.user, trip_id, stage_id)
    return fit_download(stage.trip, [stage])


@pages.get("/s/<code>.fit")
def shared_fit(code):
    return fit_download(sharing.shared_trip(code), split=request.args.get("days"))


@pages.get("/s/<code>/stages/<stage_id>.fit")
def shared_stage_fit(code, stage_id):
    trip = sharing.shared_trip(code)
    return fit_download(trip, [find_stage(trip, stage_id)])


def fit_download(trip, stages=None, split: str | None = None) -> Response:
    split = split_of(split)
    name = filename(trip, stages).removesuffix(".gpx") + (".zip" if split == "courses" else ".fit")

    def make():
        data, media = fit_file(trip, stages, split)
        return (data,), media

    return export_answer(trip, "fit", options(stages, split), make, name)
