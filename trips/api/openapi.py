"""The OpenAPI 3.1 document of /api, served at GET /api/openapi.json (public, cacheable).

Built by apispec from the schemas the code runs (the services' load schemas, trips/api/responses.py) and the Flask
url_map; `OPERATIONS` says per view what the url_map cannot (summary, scope, headers, answers, refusals).
tests/trips/api/test_openapi.py fails when an /api route has no entry here.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Blueprint, Flask, current_app, request
from marshmallow import validate

from oauth.services.accounts import AccountUpdate, EmailChange
from trips.services import inputs
from trips.services.manual_accommodation import ManualAccommodation
from trips.services.nearby import NearbyQuery

from trips.api import account_responses, day_responses, responses, rider_responses
from trips.places.geocode import MAX_LIMIT, MAX_QUERY_LENGTH

log = logging.getLogger(__name__)
bp = Blueprint("openapi", __name__, url_prefix="/api")
READ, WRITE = "trips:read", "trips:write"
PROBLEM = "application/problem+json"
CACHE_SECONDS = 300
METHOD_ORDER = ("get", "post", "put", "patch", "delete")

# The refusals, as RFC 9457 problem documents (trips/core/problems.py); the operations name the ones they give.
PROBLEMS = {
    400: ("BadRequest", "The request is malformed: not JSON, a bad query parameter (named in `errors`), a "
                        "malformed If-Match or Idempotency-Key."),
    401: ("Unauthorized", "No valid bearer token of audience api."),
    403: ("Forbidden", "The token lacks the scope this operation needs (WWW-Authenticate says which)."),
    404: ("NotFound", "No such trip, day, link or application (someone else's is not found either)."),
    409: ("Conflict", "Another change or computation is in progress, an Idempotency-Key was reused with another "
                      "body, or a calendar was asked of a trip without dates."),
    412: ("PreconditionFailed", "If-Match names a version the trip has moved past: read it again."),
    413: ("ContentTooLarge", "The request body is over 30 MB."),
    422: ("Unprocessable", "The content is invalid: `errors` names each field."),
    423: ("Locked", "The trip's start date is today or past: it can no longer be edited."),
    428: ("PreconditionRequired", 'This edit needs If-Match: "<version>", the ETag of the trip.'),
    429: ("TooManyRequests", "Too many trips created (places looked up, mails sent) for now: see Retry-After."),
    502: ("BadGateway", "A service BTP relies on did not answer (the place search, the mail server)."),
    503: ("ServiceUnavailable", "BTP cannot reach its Redis right now: the same request works again soon "
                                "(Retry-After)."),
}
PROBLEM_HEADERS = {
    401: {"WWW-Authenticate": {"schema": {"type": "string"}}},
    403: {"WWW-Authenticate": {"schema": {"type": "string"}}},
    429: {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}},
    503: {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}},
}
ETAG = {"ETag": {"description": 'The trip version, as a strong tag: "7".', "schema": {"type": "string"}}}
LOCATION = {"Location": {"description": "Where the trip (or the day) can be read.", "schema": {"type": "string"}}}
HEADERS = {
    "IfMatch": {"name": "If-Match", "in": "header", "required": True, "schema": {"type": "string", "maxLength": 200},
                "description": 'The version being edited, as published in the ETag ("7"), or * for any.'},
    "IdempotencyKey": {"name": "Idempotency-Key", "in": "header", "required": True,
                       "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{16,255}$"},
                       "description": "A replay with the same key and body answers the first result (24 h)."},
    "IfNoneMatch": {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"},
                    "description": "The ETag of a route or file already held: 304 when it has not changed."},
}
PATH_PARAMETERS = {
    "trip_id": ("The trip's id.", {"type": "string", "format": "uuid"}),
    "stage_id": ("The day's stageId, as published by the trip.", {"type": "string", "format": "uuid"}),
    "grant_id": ("The application's id, as listed.", {"type": "string", "minLength": 1}),
    "token_id": ("The token's id, as listed.", {"type": "string", "minLength": 1}),
    "code": ("The share link's short code.", {"type": "string", "pattern": "^[A-Za-z0-9_-]{8}$"}),
}
GEOCODE_QUERY = [
    {"name": "q", "in": "query", "required": True, "description": "What to look for.",
     "schema": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_LENGTH, "pattern": r"\S"}},
    {"name": "limit", "in": "query", "required": False, "description": "How many places at most (5).",
     "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}},
]
GPX_UPLOAD_FILE = {"gpxFile": {"type": "string", "format": "binary", "contentMediaType": "application/gpx+xml",
                               "description": "A GPX 1.0/1.1 file (a file part)."}}


def trip(description: str, *headers: dict) -> dict:
    return {"description": description, "headers": {k: v for h in (ETAG, *headers) for k, v in h.items()},
            "content": {"application/json": {"schema": "TripDetail"}}}


def body(schema: str, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


FILE_TAG = {"ETag": {"description": "The file's strong tag (a hash of its content).", "schema": {"type": "string"}}}
GPX_FILE = {"description": "A GPX 1.1 file (an attachment).", "headers": FILE_TAG, "content": {
    "application/gpx+xml": {"schema": {"type": "string"}}}}
FIT_FILE = {"description": "A FIT course file (an attachment): Garmin, Wahoo and other bike computers load it.",
            "headers": FILE_TAG,
            "content": {"application/vnd.ant.fit": {"schema": {"type": "string", "format": "binary"}}}}
FIT_FILES = {"description": "A FIT course file, the days as laps; with days=courses a ZIP of one course per day.",
             "headers": FILE_TAG,
             "content": {**FIT_FILE["content"], "application/zip": {"schema": {"type": "string", "format": "binary"}}}}
FIT_QUERY = [{"name": "days", "in": "query", "required": False, "schema": {"type": "string", "enum": ["laps", "courses"]},
              "description": "laps (default): one course, each day a lap; courses: a ZIP of one course per day."}]
ICS_FILE = {"description": "An iCalendar file (RFC 5545, an attachment) in the reader's language.",
            "content": {"text/calendar": {"schema": {"type": "string"}}}}
EXPORT_QUERY = [{"name": "format", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": ["json", "zip"]},
                 "description": "json (default); zip: account.json and each trip's GPX under trips/."}]
ACCOUNT_EXPORT = {"description": "Everything BTP holds about the account (never a token nor its hash), an attachment.",
                  "content": {"application/json": {"schema": {
                      "type": "object", "required": ["exportedAt", "account", "trips", "agents", "tokens"],
                      "properties": {"trips": {"type": "array", "items": {"type": "object"}, "description": "Each as the "
                                                   "trip's detail, with its locale and its share links."}}}},
                      "application/zip": {"schema": {"type": "string", "format": "binary"}}}}
NOT_MODIFIED = {"description": "Not modified: the If-None-Match tag is current."}
EMPTY = {"description": "Done; no content."}


# A realistic body per JSON request schema: shown to readers, and sent as is by schemathesis' examples phase.
EXAMPLES = {
    inputs.TripCreate: {"sourceUrl": "https://www.komoot.com/tour/123456", "title": "Across the Alps",
                         "startDate": "2031-06-01", "endDate": "2031-06-05"},
    inputs.TripUpdate: {"title": "Across the Alps", "maxDistancePerDay": 90},
    inputs.StageAdd: {"startPoint": {"lat": 45.19, "lon": 5.72}, "endPoint": {"lat": 45.3, "lon": 5.9, "ele": 400},
                       "label": "Lake day"},
    inputs.StageUpdate: {"label": "Over the pass"},
    inputs.StageMove: {"toIndex": 0},
    inputs.AccommodationChoice: {"lat": None, "lon": None},
    inputs.WaypointIn: {"lat": 45.19, "lon": 5.72},
    inputs.AccommodationScan: {"radiusKm": 10},
    AccountUpdate: {"locale": "fr"},
    ManualAccommodation: {"name": "Chez Paulette", "point": {"lat": 45.9, "lon": 6.13}, "price": 35,
                          "currency": "EUR", "phone": "+33 4 50 00 00 00"},
    EmailChange: {"email": "me@example.org"},
}


@dataclass(frozen=True)
class Op:
    summary: str
    scope: str | None
    answers: dict
    errors: tuple = ()
    body: object = None  # a load schema (JSON body), or GpxUploadSettings (multipart with the file)
    query: list | type | None = None
    headers: tuple = ()
    tag: str = "trips"


WRITE_ERRORS = (400, 404, 409, 412, 413, 422, 423, 428)
OPERATIONS = {
    "trips_api.create_trip": Op("Create a trip from a route link (Komoot, Strava, RideWithGPS) or from waypoints",
                                WRITE, {
        202: trip("Made: its route is being fetched, the days follow (partial until then).", LOCATION),
        200: trip("A replay of an earlier request with this Idempotency-Key.", LOCATION)},
        (400, 409, 413, 422, 429), body=inputs.TripCreate, headers=("IdempotencyKey",)),
    "trips_api.upload_gpx": Op("Create a trip from a GPX file (multipart), cut into days at once", WRITE, {
        201: trip("Made, with its days.", LOCATION)}, (400, 413, 422, 429), body=inputs.GpxUploadSettings),
    "trips_api.list_trips": Op("List my trips, newest first", READ, {200: body("TripList", "A page of trips.")},
                               (400,), query=inputs.TripListQuery),
    "trips_api.get_trip": Op("Read a trip with its days", READ, {200: trip("The trip.")}, (404,)),
    "trips_api.update_trip": Op("Change a trip's settings (a pacing change cuts the days again)", WRITE, {
        200: trip("The trip as changed.")}, WRITE_ERRORS, body=inputs.TripUpdate, headers=("IfMatch",)),
    "trips_api.delete_trip": Op("Delete a trip (allowed on a started one)", WRITE, {204: EMPTY}, (404, 409)),
    "trips_api.get_route": Op("Every day's line (lat, lon, ele)", READ, {
        200: body("TripRoute", "The lines; ETag of the content."), 304: NOT_MODIFIED}, (404,),
        headers=("IfNoneMatch",)),
    "trips_api.analyze": Op("Run the analyses again (or retry a failed route fetch)", WRITE, {
        202: trip("Dispatched.")}, (404, 409, 422, 423, 429)),
    "trips_api.scan_accommodations": Op("Look for places to sleep again, wider (every day, or one)", WRITE, {
        202: trip("Dispatched: the accommodations computation runs; the days' candidates are kept and new "
                  "ones added.")}, (400, 404, 409, 413, 422, 423), body=inputs.AccommodationScan),
    "trips_api.duplicate": Op("Copy a trip with its days", WRITE, {
        201: trip("The copy.", LOCATION), 200: trip("A replay of an earlier request with this key.", LOCATION)},
        (400, 404, 409, 429), headers=("IdempotencyKey",)),
    "trips_api.trip_gpx": Op("Download the trip as GPX", READ, {200: GPX_FILE, 304: NOT_MODIFIED}, (404,),
                             headers=("IfNoneMatch",), tag="exports"),
    "trips_api.trip_ics": Op("Download the trip's calendar (iCalendar): a riding day's event from departure to "
                             "arrival, a rest day's all day", READ, {200: ICS_FILE, 304: NOT_MODIFIED}, (404, 409),
                             headers=("IfNoneMatch",), tag="exports"),
    "trips_api.stage_gpx": Op("Download one day as GPX", READ, {200: GPX_FILE, 304: NOT_MODIFIED}, (404,),
                              headers=("IfNoneMatch",), tag="exports"),
    "trips_api.geocode": Op("Look places up by name", READ, {200: body("PlaceList", "The places found.")},
                            (400, 429, 502), query=GEOCODE_QUERY, tag="places"),
    "stages_api.add": Op("Add a day", WRITE, {200: trip("The trip with the new day.")}, WRITE_ERRORS,
                         body=inputs.StageAdd, headers=("IfMatch",), tag="days"),
    "stages_api.read": Op("Read one day", READ, {200: {**body("StageDetail", "The day."), "headers": ETAG}},
                          (404,), tag="days"),
    "stages_api.update": Op("Change a day's points or label, or cut it at a distance", WRITE, {
        200: trip("The trip as changed.")}, WRITE_ERRORS, body=inputs.StageUpdate, headers=("IfMatch",),
        tag="days"),
    "stages_api.move": Op("Move a day to another place", WRITE, {200: trip("The trip as changed.")}, WRITE_ERRORS,
                          body=inputs.StageMove, headers=("IfMatch",), tag="days"),
    "stages_api.delete": Op("Delete a day (merged with a neighbour)", WRITE, {200: trip("The trip as changed.")},
                            tuple(s for s in WRITE_ERRORS if s != 413), headers=("IfMatch",), tag="days"),
    "stages_api.rest_day": Op("Insert a rest day after this day", WRITE, {200: trip("The trip as changed.")},
                              tuple(s for s in WRITE_ERRORS if s != 413), headers=("IfMatch",), tag="days"),
    "stages_api.accommodation": Op("Choose one of the day's accommodations (both null: none)", WRITE, {
        200: trip("The trip as changed.")}, WRITE_ERRORS, body=inputs.AccommodationChoice, headers=("IfMatch",),
        tag="days"),
    "stages_api.waypoint": Op("Reroute the day through a point (computed by a job)", WRITE, {
        202: trip("Asked: the day's route_segment computation runs.", LOCATION)},
        (400, 404, 409, 413, 422, 423), body=inputs.WaypointIn, tag="days"),
    "rider_api.manual_accommodation": Op("Enter the day's lodging by hand: the day ends there, as a chosen one",
                                         WRITE, {200: trip("The trip as changed.")}, WRITE_ERRORS,
                                         body=ManualAccommodation, headers=("IfMatch",), tag="days"),
    "rider_api.nearby": Op("The imported map's places near a GPS fix, by category and radius (offline)", READ, {
        200: body("NearbyPlaces", "The places, with how much of the circle the map covers.")}, (400,),
        query=NearbyQuery, tag="places"),
    "rider_api.trip_fit": Op("Download the trip as a FIT course", READ, {200: FIT_FILES, 304: NOT_MODIFIED},
                             (400, 409), query=FIT_QUERY, headers=("IfNoneMatch",), tag="exports"),
    "rider_api.stage_fit": Op("Download one day as a FIT course", READ, {200: FIT_FILE, 304: NOT_MODIFIED}, (409,),
                              headers=("IfNoneMatch",), tag="exports"),
    "rider_api.email_change": Op("Change my e-mail address: a link is mailed to the new one (30 min, once)", WRITE, {
        202: body("EmailChangeSent", "Mailed; the address changes when the link's page is confirmed.")},
        (400, 413, 422, 429, 502), body=EmailChange, tag="account"),
    "share_api.create": Op("Share the trip by a public link (the active one if any)", WRITE, {
        201: body("Share", "A new link."), 200: body("Share", "The active link.")}, (404, 409), tag="sharing"),
    "share_api.read": Op("The trip's active share link", READ, {200: body("Share", "The link.")}, (404,),
                         tag="sharing"),
    "share_api.revoke": Op("Revoke the share link", WRITE, {204: EMPTY}, (404, 409), tag="sharing"),
    "share_api.shared_route": Op("A shared trip's lines (no token)", None, {
        200: body("TripRoute", "The lines; ETag of the content."), 304: NOT_MODIFIED}, (404,),
        headers=("IfNoneMatch",), tag="sharing"),
    "users_api.me": Op("Who am I", READ, {200: body("Me", "The account.")}, tag="account"),
    "users_api.update_me": Op("Choose my language (en, fr; null: the request's Accept-Language, else en)", WRITE,
                              {200: body("Me", "The account as changed.")}, (400, 413, 422),
                              body=AccountUpdate, tag="account"),
    "users_api.applications": Op("The applications (agents) I authorized", READ, {
        200: body("ApplicationList", "The applications.")}, tag="account"),
    "users_api.application": Op("One authorized application", READ, {200: body("Application", "It.")}, (404,),
                                tag="account"),
    "users_api.revoke_application": Op("Disconnect an application (its tokens die)", WRITE, {204: EMPTY}, (404,),
                                       tag="account"),
    "users_api.tokens": Op("My personal tokens (issued by `flask tokens issue`), newest first", READ, {
        200: body("TokenList", "The live tokens.")}, tag="account"),
    "users_api.export": Op("Download everything BTP holds about my account: profile, trips with their days, choices "
                           "and share links, agents, tokens' metadata", READ, {200: ACCOUNT_EXPORT}, (422,),
                           query=EXPORT_QUERY, tag="account"),
    "users_api.revoke_token": Op("Revoke one of my personal tokens (the next request with it is 401)", WRITE, {
        204: EMPTY}, (404,), tag="account"),
    "openapi.document_view": Op("This document", None, {200: {"description": "OpenAPI 3.1.", "content": {
        "application/json": {"schema": {"type": "object", "required": ["openapi", "paths"]}}}},
        304: NOT_MODIFIED}, tag="meta"),
}


def exclusive_bounds(self, field, ret: dict, **_) -> dict:
    """apispec writes every Range bound as inclusive; marshmallow's `min_inclusive=False` is JSON Schema's
    exclusiveMinimum (2020-12 validation §6.2.5), and likewise for the maximum."""
    for rule in field.validators:
        if isinstance(rule, validate.Range):
            if rule.min is not None and not rule.min_inclusive and "minimum" in ret:
                ret["exclusiveMinimum"] = ret.pop("minimum")
            if rule.max is not None and not rule.max_inclusive and "maximum" in ret:
                ret["exclusiveMaximum"] = ret.pop("maximum")
    return {}


def openapi_path(rule: str) -> str:
    """`/api/trips/<trip_id>.gpx` → `/api/trips/{trip_id}.gpx` (converters dropped: every id here is a string)."""
    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", r"{\1}", rule)


def api_routes(app: Flask) -> list[tuple[str, str, str]]:
    """(method, OpenAPI path, endpoint) of every /api route, by path, HEAD and OPTIONS left out (Flask adds them)."""
    routes = {(method.lower(), openapi_path(rule.rule), rule.endpoint) for rule in app.url_map.iter_rules()
              if rule.rule.startswith("/api/") for method in rule.methods - {"HEAD", "OPTIONS"}}
    return sorted(routes, key=lambda route: (route[1], METHOD_ORDER.index(route[0]) if route[0] in METHOD_ORDER
                                             else len(METHOD_ORDER), route[0]))


def _operation(op: Op, path: str) -> dict:
    parameters: list = list(op.headers)  # names of components.parameters: apispec makes them references
    if isinstance(op.query, list):
        parameters += op.query
    elif op.query is not None:
        parameters.append({"in": "query", "schema": op.query})
    # A token-holding operation may find Redis unreachable (token use, limits, locks, queues); the public ones
    # and this document need none.
    statuses = {*op.errors} | ({401, 403, 503} if op.scope else set())
    if "{" in path:
        statuses.add(404)
    answers = {str(status): answer for status, answer in op.answers.items()}
    answers.update({str(s): {"$ref": f"#/components/responses/{PROBLEMS[s][0]}"} for s in sorted(statuses)})
    doc = {"summary": op.summary, "tags": [op.tag], "responses": answers,
           "security": [{"bearer": [op.scope]}] if op.scope else []}
    if parameters:
        doc["parameters"] = parameters
    if op.body is inputs.GpxUploadSettings:
        doc["requestBody"] = {"required": True, "content": {"multipart/form-data": {"schema": "GpxUpload"}}}
    elif op.body is not None:
        media = {"schema": op.body, **({"example": EXAMPLES[op.body]} if op.body in EXAMPLES else {})}
        doc["requestBody"] = {"required": True, "content": {"application/json": media}}
    return doc


def build(app: Flask) -> dict:
    """The document for `app`'s routes. An /api route without an entry in OPERATIONS is left out (logged);
    tests/trips/api/test_openapi.py fails on it."""
    marshmallow = MarshmallowPlugin()
    spec = APISpec(title="BTP REST API", version="1", openapi_version="3.1.0", plugins=[marshmallow],
                   info={"description": "Trips cut into days, under /api. Errors are RFC 9457 problem documents. "
                                        "Bearer tokens of audience api carry the scopes trips:read, trips:write."},
                   servers=[{"url": app.config["BTP_BASE_URL"]}])
    marshmallow.converter.add_attribute_function(exclusive_bounds)
    spec.components.security_scheme("bearer", {
        "type": "http", "scheme": "bearer",
        "description": "An access token of audience api (`flask tokens issue EMAIL --audience api --scope …`); "
                       "each operation names the scope it needs: trips:read or trips:write."})
    for name, schema in {**responses.RESPONSES, **day_responses.RESPONSES, **account_responses.RESPONSES,
                         **rider_responses.RESPONSES}.items():
        spec.components.schema(name, schema=schema)
    for name in ("PointIn", "WaypointIn", "TripCreate", "TripUpdate", "StageAdd", "StageUpdate", "StageMove",
                 "AccommodationChoice"):  # WaypointIn before TripCreate, which nests it
        spec.components.schema(name, schema=getattr(inputs, name))
    spec.components.schema("AccountUpdate", schema=AccountUpdate)
    spec.components.schema("ManualAccommodation", schema=ManualAccommodation)
    spec.components.schema("EmailChange", schema=EmailChange)
    # The upload's form: the file, and the settings as GpxUploadSettings loads them (one flat object: multipart
    # fields are named properties, OpenAPI 3.1 §4.8.14.4).
    form = marshmallow.converter.schema2jsonschema(inputs.GpxUploadSettings)
    spec.components.schema("GpxUpload", {**form, "required": ["gpxFile"],
                                         "properties": {**GPX_UPLOAD_FILE, **form["properties"]}})
    for name, parameter in HEADERS.items():
        spec.components.parameter(name, parameter["in"], parameter)
    for status, (name, description) in PROBLEMS.items():
        spec.components.response(name, {"description": description, "headers": PROBLEM_HEADERS.get(status, {}),
                                        "content": {PROBLEM: {"schema": "Problem"}}})
    by_path: dict[str, dict] = {}
    for method, path, endpoint in api_routes(app):
        if endpoint not in OPERATIONS:
            log.warning("openapi: %s %s (%s) is not documented", method.upper(), path, endpoint)
            continue
        by_path.setdefault(path, {})[method] = _operation(OPERATIONS[endpoint], path)
    for path, operations in by_path.items():
        names = re.findall(r"{([^}]+)}", path)
        parameters = [{"name": n, "in": "path", "required": True, "description": PATH_PARAMETERS[n][0],
                       "schema": PATH_PARAMETERS[n][1]} for n in names]
        spec.path(path=path, operations=operations, parameters=parameters)
    return spec.to_dict()


def document(app: Flask) -> tuple[bytes, str]:
    """The serialized document and its strong ETag, built once per application."""
    cached = app.extensions.get("btp_openapi")
    if cached is None:
        raw = json.dumps(build(app), separators=(",", ":")).encode()
        cached = app.extensions["btp_openapi"] = (raw, hashlib.sha256(raw).hexdigest()[:32])
    return cached


@bp.get("/openapi.json")
def document_view():
    raw, tag = document(current_app)
    response = current_app.response_class(raw, mimetype="application/json")
    response.set_etag(tag)
    # The same for everyone and changes only with a release: shared caches may keep it a few minutes.
    response.headers["Cache-Control"] = f"public, max-age={CACHE_SECONDS}"
    return response.make_conditional(request)
