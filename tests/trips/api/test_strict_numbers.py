"""A number is a JSON number where the OpenAPI document says number or integer: the same value written as a string
("45.5", "12") is refused 422 naming the field, over REST and MCP alike, and nothing is written. Forms and query
strings are text by nature: there a number is read from its digits."""
import io

import pytest

from tests.factories import idem
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from trips.core.db import db
from trips.models import Trip
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Three days")


def lodging(stage, **changes) -> dict:
    return {"name": "Chez Paulette", "point": {"lat": stage.end_lat, "lon": stage.end_lon}, "currency": "EUR", **changes}


@pytest.fixture
def trip(rider):
    user, _ = rider
    return import_gpx(user, io.BytesIO(GPX), {})


def refused(response, field: str) -> None:
    assert response.status_code == 422, response.get_data(as_text=True)
    errors = response.get_json()["errors"]
    assert field in errors, errors
    assert "Not a valid number." == errors[field] or "Not a valid integer." == errors[field], errors


def trips_count() -> int:
    db.session.rollback()
    return db.session.query(Trip).count()


@pytest.mark.parametrize("body, field", [
    ({"waypoints": [{"lat": "45.5", "lon": 5.7}, {"lat": 45.6, "lon": 5.9}]}, "waypoints[0].lat"),
    ({"waypoints": [{"lat": 45.5, "lon": 5.7}, {"lat": 45.6, "lon": "5.9"}]}, "waypoints[1].lon"),
    ({"sourceUrl": "https://www.komoot.com/tour/12", "maxDistancePerDay": "60"}, "maxDistancePerDay"),
    ({"sourceUrl": "https://www.komoot.com/tour/12", "averageSpeed": "20"}, "averageSpeed"),
    ({"sourceUrl": "https://www.komoot.com/tour/12", "fatigueFactor": "0.8"}, "fatigueFactor"),
    ({"sourceUrl": "https://www.komoot.com/tour/12", "elevationPenalty": "2"}, "elevationPenalty"),
    ({"sourceUrl": "https://www.komoot.com/tour/12", "departureHour": "8"}, "departureHour"),
])
def test_a_trip_s_numbers_written_as_strings_are_refused_by_name(client, rider, body, field):
    _, headers = rider
    before = trips_count()
    refused(client.post("/api/trips", json=body, headers={**headers, **idem()}), field)
    assert trips_count() == before


def test_the_same_numbers_as_numbers_are_taken(client, rider):
    _, headers = rider
    body = {"sourceUrl": "https://www.komoot.com/tour/12", "maxDistancePerDay": 60, "averageSpeed": 20.5}
    assert client.post("/api/trips", json=body, headers={**headers, **idem()}).status_code == 202


def test_a_manual_lodging_s_numbers_as_strings_are_refused(client, rider, trip):
    _, headers = rider
    stage = trip.stages[0]
    url = f"/api/trips/{trip.id}/stages/{stage.id}/accommodations/manual"
    for body, field in ((lodging(stage, price="12"), "price"),
                        (lodging(stage, point={"lat": str(stage.end_lat), "lon": stage.end_lon}), "point.lat")):
        refused(client.post(url, json=body, headers={**headers, "If-Match": '"1"'}), field)
    taken = client.post(url, json=lodging(stage, price=12), headers={**headers, "If-Match": '"1"'})
    assert taken.status_code == 200, taken.get_data(as_text=True)


@pytest.mark.parametrize("method, path, body, field", [
    ("patch", "", {"maxDistancePerDay": "80"}, "maxDistancePerDay"),
    ("patch", "/stages/{stage}", {"distance": "12.5"}, "distance"),
    ("patch", "/stages/{stage}", {"endPoint": {"lat": "0.01", "lon": 0.0}}, "endPoint.lat"),
    ("patch", "/stages/{stage}/move", {"toIndex": "1"}, "toIndex"),
    ("patch", "/stages/{stage}/accommodation", {"lat": "0.0", "lon": "0.0"}, "lat"),
    ("post", "/stages/{stage}/poi-waypoint", {"lat": "0.0", "lon": 0.0}, "lat"),
    ("post", "/accommodations/scan", {"radiusKm": "10"}, "radiusKm"),
])
def test_edits_refuse_numbers_written_as_strings(client, rider, trip, method, path, body, field):
    _, headers = rider
    url = f"/api/trips/{trip.id}" + path.format(stage=trip.stages[0].id)
    response = getattr(client, method)(url, json=body, headers={**headers, "If-Match": '"1"'})
    refused(response, field)
    db.session.rollback()
    assert db.session.get(Trip, trip.id).version == 1


def test_the_openapi_document_says_number_where_the_strings_are_refused(client):
    doc = client.get("/api/openapi.json").get_json()
    schemas = doc["components"]["schemas"]

    def prop(schema: str, name: str) -> dict:
        return schemas[schema]["properties"][name]

    create = next(s for n, s in schemas.items() if "waypoints" in s.get("properties", {}))
    assert prop("WaypointIn", "lat")["type"] == "number"
    assert "maxDistancePerDay" in create["properties"]
    assert prop("ManualAccommodation", "price")["type"] in ("number", ["number", "null"])


@pytest.mark.parametrize("tool, arguments, field", [
    ("create_trip", {"waypoints": [{"lat": "45.5", "lon": 5.7}, {"lat": 45.6, "lon": 5.9}]}, "waypoints[0].lat"),
    ("create_trip", {"sourceUrl": "https://www.komoot.com/tour/12", "maxDistancePerDay": "60"}, "maxDistancePerDay"),
])
def test_mcp_refuses_them_alike(app, client, rider, tool, arguments, field):
    user, _ = rider
    before = trips_count()
    result = call(client, mcp_token(app, user), tool, arguments)
    assert result.get("isError") is True, result
    error = payload(result)["error"]
    assert error["code"] == "invalid_argument" and field in error["message"], error
    assert trips_count() == before


def test_mcp_edits_refuse_them_too(app, client, rider, trip):
    user, _ = rider
    token = mcp_token(app, user)
    stage = trip.stages[0].id
    for tool, arguments, field in (
        ("edit_stages", {"tripId": trip.id, "version": 1, "action": "update", "stageId": stage, "distance": "12.5"},
         "distance"),
        ("add_waypoint", {"tripId": trip.id, "stageId": stage, "lat": "0.0", "lon": 0.0}, "lat"),
        ("choose_accommodation", {"tripId": trip.id, "version": 1, "stageId": stage, "lat": "0.0", "lon": "0.0"},
         "lat"),
    ):
        result = call(client, token, tool, arguments)
        assert result.get("isError") is True, (tool, result)
        assert field in payload(result)["error"]["message"], (tool, result)


def _load_schemas():
    from marshmallow import Schema

    from oauth.services import accounts
    from trips.services import inputs, manual_accommodation, nearby

    for module in (inputs, manual_accommodation, nearby, accounts):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Schema) and value.__module__ == module.__name__:
                yield value


@pytest.mark.parametrize("schema", list(_load_schemas()), ids=lambda s: s.__name__)
def test_every_number_a_request_declares_is_a_json_number(schema):
    # Checked on the fields themselves, so a new field written with marshmallow's lenient Float or Integer fails here.
    from marshmallow import fields

    from trips.core.validation import FromText, Number, Whole

    def numbers(made, path=""):
        for name, field in made.fields.items():
            if isinstance(field, fields.Nested):
                yield from numbers(field.schema, f"{path}{name}.")
            elif isinstance(field, fields.List) and isinstance(field.inner, fields.Nested):
                yield from numbers(field.inner.schema, f"{path}{name}[].")
            elif isinstance(field, (fields.Float, fields.Integer, fields.Decimal)):
                yield path + name, field

    for name, field in numbers(schema()):
        strict = isinstance(field, Number) or (isinstance(field, Whole) and field.strict)
        assert strict, f"{schema.__name__}.{name} takes a number written as a string"
    if issubclass(schema, FromText):
        assert schema.__name__ in ("GpxUploadSettings", "TripListQuery", "NearbyQuery")  # forms and query strings


@pytest.mark.parametrize("form, expected", [
    ({"departureHour": "8", "maxDistancePerDay": " 60 ", "averageSpeed": "17.5"}, 201),
    ({"maxDistancePerDay": "sixty"}, 422),
])
def test_a_gpx_upload_s_form_reads_its_numbers_from_the_text(client, rider, form, expected):
    _, headers = rider
    data = {"gpxFile": (io.BytesIO(GPX), "ride.gpx"), **form}
    response = client.post("/api/trips/gpx-upload", data=data, headers=headers, content_type="multipart/form-data")
    assert response.status_code == expected, response.get_data(as_text=True)
    if expected == 201:
        body = response.get_json()
        assert (body["departureHour"], body["maxDistancePerDay"], body["averageSpeed"]) == (8, 60, 17.5)
    else:
        assert response.get_json()["errors"] == {"maxDistancePerDay": "Not a valid number."}
