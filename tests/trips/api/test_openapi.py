"""The OpenAPI document of /api: valid OpenAPI 3.1, served publicly and cacheably, complete (every /api route
of the url_map), and true (real answers of every operation, successes and refusals, match it)."""
from __future__ import annotations

import io
from datetime import date, timedelta

import jsonschema
import pytest
from openapi_spec_validator import validate as validate_openapi

from oauth.kernel.models import Grant, OAuthClient
from oauth.kernel.tokens import issue_token
from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.api import openapi
from trips.services import sharing
from trips.core.db import atomic, db
from trips.models import Stage, Trip
from trips.services.trips import import_gpx

DOC = "/api/openapi.json"
KOMOOT = "https://www.komoot.com/tour/123456"
METHODS = ("get", "put", "post", "patch", "delete")


@pytest.fixture
def doc(client):
    return client.get(DOC).get_json()


class Conformance:
    """Checks answers against the document; remembers which (method, path, status) it saw."""

    def __init__(self, app, doc):
        self.adapter = app.url_map.bind("localhost")
        self.doc = doc
        self.seen: set[tuple[str, str, str]] = set()

    def check(self, response, method: str, url: str):
        path = openapi.openapi_path(self.adapter.match(url.split("?")[0], method.upper(), return_rule=True)[0].rule)
        operation = self.doc["paths"][path][method]
        status = str(response.status_code)
        assert status in operation["responses"], f"{method.upper()} {path} answered {status}, undocumented"
        documented = self.resolve(operation["responses"][status])
        media = response.mimetype
        if response.status_code in (204, 304):
            assert not response.data and "content" not in documented
        else:
            assert media in documented["content"], f"{method.upper()} {path} {status}: {media} is not documented"
            schema = documented["content"][media].get("schema")
            if media.endswith("json") and schema:
                validator = jsonschema.Draft202012Validator(
                    {**schema, "components": self.doc["components"]},
                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
                errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(response.get_json())]
                assert not errors, f"{method.upper()} {path} {status} breaks its schema: {errors[:5]}"
        self.seen.add((method, path, status))
        return response

    def resolve(self, item: dict) -> dict:
        while "$ref" in item:
            _, section, kind, name = item["$ref"].split("/")
            item = self.doc[section][kind][name]
        return item


def test_the_document_is_valid_openapi_3_1(doc):
    validate_openapi(doc)  # raises OpenAPIValidationError naming the first fault
    assert doc["openapi"] == "3.1.0"
    assert doc["components"]["securitySchemes"]["bearer"] == {**doc["components"]["securitySchemes"]["bearer"],
                                                               "type": "http", "scheme": "bearer"}


def test_every_api_route_of_the_url_map_is_documented_and_nothing_else(app, doc):
    routes = {(method, path) for method, path, _ in openapi.api_routes(app)}
    documented = {(m, p) for p, item in doc["paths"].items() for m in item if m in METHODS}
    assert routes - documented == set(), "routes under /api without documentation (trips/api/openapi.py OPERATIONS)"
    assert documented - routes == set()
    assert set(openapi.OPERATIONS) == {endpoint for _, _, endpoint in openapi.api_routes(app)}


def test_a_new_route_without_documentation_is_caught(app):
    from flask import Flask

    probe = Flask("probe")
    probe.config.update(app.config)
    for rule in app.url_map.iter_rules():
        if rule.rule.startswith("/api/"):
            probe.add_url_rule(rule.rule, rule.endpoint, lambda **_: "", methods=rule.methods)
    probe.add_url_rule("/api/trips/<trip_id>/secret", "trips_api.secret", lambda **_: "", methods=["GET"])
    paths = openapi.build(probe)["paths"]
    assert "/api/trips/{trip_id}/secret" not in paths  # left out, so the comparison above would fail
    assert ("get", "/api/trips/{trip_id}/secret", "trips_api.secret") in openapi.api_routes(probe)


def test_every_operation_says_its_scope_and_refusals(doc):
    for path, item in doc["paths"].items():
        for method, operation in ((m, o) for m, o in item.items() if m in METHODS):
            public = path in (DOC, "/api/s/{code}/route")
            assert operation["security"] == ([] if public else [{"bearer": [operation["security"][0]["bearer"][0]]}])
            if not public:
                scope = operation["security"][0]["bearer"][0]
                assert scope == ("trips:read" if method == "get" else "trips:write"), (method, path)
                assert {"401", "403"} <= set(operation["responses"]), (method, path)
            if "{" in path:
                assert "404" in operation["responses"], (method, path)
            problems = [r for s, r in operation["responses"].items() if int(s) >= 400]
            assert all(r["$ref"].startswith("#/components/responses/") for r in problems), (method, path)


def test_every_json_body_has_an_example_that_matches_its_schema(doc):
    bodies = [(m, p, o["requestBody"]["content"]["application/json"]) for p, item in doc["paths"].items()
              for m, o in item.items() if m in METHODS and "application/json" in o.get("requestBody", {}).get(
                  "content", {})]
    assert len(bodies) == 11
    for method, path, media in bodies:
        validator = jsonschema.Draft202012Validator({**media["schema"], "components": doc["components"]})
        assert validator.is_valid(media["example"]), (method, path)


def test_served_without_a_token_and_cacheable(client):
    first = client.get(DOC)
    assert first.status_code == 200 and first.mimetype == "application/json"
    assert first.headers["Cache-Control"].startswith("public, max-age=") and first.headers["ETag"]
    again = client.get(DOC, headers={"If-None-Match": first.headers["ETag"]})
    assert again.status_code == 304 and not again.data
    assert client.get(DOC, headers={"If-None-Match": '"stale"'}).status_code == 200


def test_a_drifted_answer_breaks_the_schema(app, client, rider, doc):
    user, headers = rider
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Drift")), {})
    real = client.get(f"/api/trips/{trip.id}", headers=headers).get_json()
    validator = jsonschema.Draft202012Validator({"$ref": "#/components/schemas/TripDetail",
                                                 "components": doc["components"]})
    assert validator.is_valid(real)
    assert not validator.is_valid({**real, "newKey": 1})  # a key added without its schema
    assert not validator.is_valid({k: v for k, v in real.items() if k != "title"})  # a key dropped
    assert not validator.is_valid({**real, "stages": [{**real["stages"][0], "distance": "far"}]})


def test_a_gpx_upload_form_carries_an_hour_and_a_list(client, rider):
    _, headers = rider
    form = {"gpxFile": (io.BytesIO(gpx_from_points(make_points(300))), "r.gpx"), "departureHour": "7",
            "enabledAccommodationTypes": ["hotel", "hostel"]}
    made = client.post("/api/trips/gpx-upload", data=form, headers=headers)
    assert made.status_code == 201, made.get_json()
    assert made.get_json()["departureHour"] == 7
    assert made.get_json()["enabledAccommodationTypes"] == ["hotel", "hostel"]
    form = {"gpxFile": (io.BytesIO(gpx_from_points(make_points(300))), "r.gpx"), "departureHour": "7.5"}
    refused = client.post("/api/trips/gpx-upload", data=form, headers=headers)
    assert refused.status_code == 422 and set(refused.get_json()["errors"]) == {"departureHour"}
    as_text = client.post("/api/trips/gpx-upload", data={"gpxFile": "<gpx/>"}, headers=headers)
    assert as_text.status_code == 422 and "as a file" in as_text.get_json()["errors"]["gpxFile"]


def _seed(user):
    """A three-day GPX trip with candidates to sleep on day 1, a share link, and an authorized application."""
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Conformance")), {})
    with atomic():
        first = db.session.get(Stage, trip.stages[0].id)
        first.accommodations = [{"name": "Gîte", "type": "guest_house", "lat": first.end_lat, "lon": first.end_lon}]
        client_id = "https://agent.example/client.json"
        db.session.add(OAuthClient(client_id=client_id, kind="metadata", client_name="Agent", redirect_uris=[]))
        db.session.add(Grant(user_id=user.id, client_id=client_id, scope="trips:read"))
        issue_token(user, "https://agent.example/mcp", "trips:read", client_id=client_id)
    share, _ = sharing.share_trip(user, trip.id)
    return trip, share, db.session.scalar(db.select(Grant.id).where(Grant.user_id == user.id))


def test_real_answers_of_every_operation_match_the_document(app, client, rider, doc):
    user, headers = rider
    trip, share, grant_id = _seed(user)
    c = Conformance(app, doc)
    t = f"/api/trips/{trip.id}"
    day = [s.id for s in trip.stages]
    v = {"If-Match": "*"}

    def call(method, url, status, **kwargs):
        response = getattr(client, method)(url, **{"headers": headers, **kwargs})
        assert response.status_code == status, (method, url, response.get_data(as_text=True)[:500])
        return c.check(response, method, url)

    tag = call("get", DOC, 200).headers["ETag"]
    call("get", DOC, 304, headers={"If-None-Match": tag})
    key = idem()
    call("post", "/api/trips", 202, json={"sourceUrl": KOMOOT}, headers={**headers, **key})
    call("post", "/api/trips", 200, json={"sourceUrl": KOMOOT}, headers={**headers, **key})
    call("post", "/api/trips/gpx-upload", 201, data={"gpxFile": (io.BytesIO(gpx_from_points(make_points(300))),
                                                                   "r.gpx"), "title": "Up"})
    call("get", "/api/trips?itemsPerPage=2&page=1", 200)
    call("get", t, 200)
    call("patch", t, 200, json={"title": "Renamed"}, headers={**headers, **v})
    tag = call("get", f"{t}/route", 200).headers["ETag"]
    call("get", f"{t}/route", 304, headers={**headers, "If-None-Match": tag})
    call("post", f"{t}/analyze", 202)
    with atomic():  # as if the worker had run the analysis: a scan expands its candidates
        for row in db.session.get(Trip, trip.id).computations:
            row.status = "done"
    call("post", f"{t}/accommodations/scan", 202, json={"radiusKm": 8, "stageId": day[0]})
    call("post", f"{t}/accommodations/scan", 409, json={})
    key = idem()
    call("post", f"{t}/duplicate", 201, headers={**headers, **key})
    call("post", f"{t}/duplicate", 200, headers={**headers, **key})
    for path in (f"{t}.gpx", f"{t}/stages/{day[0]}.gpx", f"{t}.fit", f"{t}/stages/{day[0]}.fit"):
        tag = call("get", path, 200).headers["ETag"]
        call("get", path, 304, headers={**headers, "If-None-Match": tag})
    call("get", f"{t}.fit?days=courses", 200)
    call("get", f"{t}.fit?days=weeks", 400)
    call("get", f"{t}/nearby-pois?category=water&lat=45.0&lon=5.0&radius=500", 200)
    call("get", f"{t}/nearby-pois?category=pizza&lat=45.0&lon=5.0", 400)
    call("get", "/api/geocode/search?q=Grenoble&limit=2", 200)
    call("get", f"{t}/stages/{day[0]}", 200)
    call("patch", f"{t}/stages/{day[0]}", 200, json={"label": "First"}, headers={**headers, **v})
    first = trip.stages[0]
    call("patch", f"{t}/stages/{day[0]}/accommodation", 200, json={"lat": first.end_lat, "lon": first.end_lon},
         headers={**headers, **v})
    call("post", f"{t}/stages/{day[0]}/accommodations/manual", 200, json={
        "name": "Chez Paulette", "point": {"lat": first.end_lat, "lon": first.end_lon}, "price": 30, "currency": "EUR"},
        headers={**headers, **v})
    call("post", f"{t}/stages/{day[1]}/poi-waypoint", 202, json={"lat": trip.stages[1].end_lat,
                                                                  "lon": trip.stages[1].end_lon})
    call("post", f"{t}/stages/{day[1]}/rest-day", 200, headers={**headers, **v})
    call("patch", f"{t}/stages/{day[2]}/move", 200, json={"toIndex": 0}, headers={**headers, **v})
    point = {"lat": 46.0, "lon": 6.0}
    call("post", f"{t}/stages", 200, json={"startPoint": point, "endPoint": {"lat": 46.1, "lon": 6.1}},
         headers={**headers, **v})
    call("delete", f"{t}/stages/{day[2]}", 200, headers={**headers, **v})
    call("post", f"{t}/share", 200)
    call("get", f"{t}/share", 200)
    tag = call("get", f"/api/s/{share.short_code}/route", 200, headers={}).headers["ETag"]
    call("get", f"/api/s/{share.short_code}/route", 304, headers={"If-None-Match": tag})
    call("delete", f"{t}/share", 204)
    call("post", f"{t}/share", 201)
    call("get", "/api/users/me", 200)
    call("get", "/api/users/me/export", 200)
    call("get", "/api/users/me/export?format=zip", 200)
    call("get", "/api/users/me/export?format=pdf", 422)
    call("patch", "/api/users/me", 200, json={"locale": "fr"})
    call("patch", "/api/users/me", 422, json={"locale": "xx"})
    call("post", "/api/users/me/email-change", 202, json={"email": "moving@example.org"})
    call("post", "/api/users/me/email-change", 422, json={"email": "nowhere"})
    call("get", "/api/users/me/authorized-applications", 200)
    call("get", f"/api/users/me/authorized-applications/{grant_id}", 200)
    call("delete", f"/api/users/me/authorized-applications/{grant_id}", 204)
    spare = make_token(user, "trips:read")
    listed = call("get", "/api/users/me/tokens", 200).get_json()["member"]
    spare_id = next(t["id"] for t in listed if spare.startswith(t["prefix"]) and t["scopes"] == ["trips:read"])
    call("delete", f"/api/users/me/tokens/{spare_id}", 204)
    call("delete", f"/api/users/me/tokens/{spare_id}", 404)
    call("delete", t, 204)
    _refusals(call, client, user, headers)
    undocumented = {(m, p, s) for p, item in doc["paths"].items() for m, o in item.items() if m in METHODS
                    for s in o["responses"] if int(s) < 400} - c.seen
    assert undocumented == set(), "documented successes no test answer showed"
    refusals = {s for _, _, s in c.seen if int(s) >= 400}
    assert refusals >= {"400", "401", "403", "404", "409", "412", "422", "423", "428"}


def _refusals(call, client, user, headers):
    """Problem documents, each checked against the operation's documented refusal."""
    fresh = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400))), {})
    t = f"/api/trips/{fresh.id}"
    call("get", "/api/trips", 401, headers={})
    call("patch", t, 403, json={"title": "x"}, headers={**auth(make_token(user, "trips:read")), "If-Match": "*"})
    call("get", "/api/trips/0192f000-0000-7000-8000-000000000000", 404)
    call("get", "/api/trips?bogus=1", 400)
    call("post", "/api/trips", 400, data="{", headers={**headers, **idem(), "Content-Type": "application/json"})
    call("post", "/api/trips", 422, json={"sourceUrl": "https://example.org/x"}, headers={**headers, **idem()})
    key = idem()
    call("post", "/api/trips", 202, json={"sourceUrl": KOMOOT}, headers={**headers, **key})
    call("post", "/api/trips", 409, json={"sourceUrl": KOMOOT, "title": "other"}, headers={**headers, **key})
    call("patch", t, 428, json={"title": "x"})
    call("patch", t, 412, json={"title": "x"}, headers={**headers, "If-Match": '"99"'})
    call("patch", t, 422, json={"fatigueFactor": 9}, headers={**headers, "If-Match": "*"})
    call("get", "/api/geocode/search", 400)
    past = (date.today() - timedelta(days=1)).isoformat()
    call("get", f"{t}.ics", 409)  # an undated trip has no calendar
    call("patch", t, 200, json={"startDate": past}, headers={**headers, "If-Match": "*"})
    tag = call("get", f"{t}.ics", 200).headers["ETag"]
    call("get", f"{t}.ics", 304, headers={**headers, "If-None-Match": tag})
    call("post", f"{t}/analyze", 423)
    stranger = auth(make_token(make_user()))
    call("delete", t, 404, headers=stranger)
