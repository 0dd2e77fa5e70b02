"""Counts before items: a list or string past its bound is refused by its length alone, naming the field and the
bound and never echoing the value, before any item is read (REST and MCP); and a create refused for its input still
spends the creation budget, so a flood of bad creates meets 429 like a flood of good ones."""
import io
import json

from marshmallow import Schema, fields, validate

from tests.factories import idem, make_user
from tests.mcp_helpers import call, mcp_token, payload
from trips.core.validation import over_bounds
from trips.services.inputs import MAX_WAYPOINTS, StageAdd

MANY = 100_000
BAD_ITEM = {"lat": 999.0, "lon": 5.0}  # out of range: named by the load if any item were read
NAN_ITEM = {"lat": float("nan"), "lon": 5.0}  # refused by the MCP finiteness walk if it reached the items


def test_rest_refuses_a_hundred_thousand_waypoints_by_their_count(client, rider):
    _, headers = rider
    body = json.dumps({"waypoints": [BAD_ITEM] * MANY})
    answer = client.post("/api/trips", data=body, headers={**headers, **idem(), "Content-Type": "application/json"})
    assert answer.status_code == 422
    problem = answer.get_json()
    assert list(problem["errors"]) == ["waypoints"]  # the count, not waypoints[0].lat: no item was read
    assert str(MAX_WAYPOINTS) in problem["errors"]["waypoints"]
    assert "999" not in answer.get_data(as_text=True)


def test_rest_still_judges_items_once_the_count_is_allowed(client, rider):
    _, headers = rider
    answer = client.post("/api/trips", json={"waypoints": [BAD_ITEM, {"lat": 45.0, "lon": 5.0}]},
                         headers={**headers, **idem()})
    assert answer.status_code == 422
    assert list(answer.get_json()["errors"]) == ["waypoints[0].lat"]


def test_mcp_refuses_a_hundred_thousand_waypoints_by_their_count(app, client, ctx):
    token = mcp_token(app, make_user())
    result = call(client, token, "create_trip", {"waypoints": [NAN_ITEM] * MANY})
    assert result["isError"] is True
    error = payload(result)["error"]
    assert list(error["fields"]) == ["waypoints"]  # not waypoints[0].lat: the items were never walked
    assert str(MAX_WAYPOINTS) in error["fields"]["waypoints"]


def test_mcp_refuses_a_string_past_its_max_length_naming_it(app, client, ctx):
    token = mcp_token(app, make_user())
    result = call(client, token, "create_trip", {"sourceUrl": "https://www.komoot.com/tour/" + "9" * 5000})
    error = payload(result)["error"]
    assert list(error["fields"]) == ["sourceUrl"] and "2,048" in error["fields"]["sourceUrl"]
    assert "9999" not in json.dumps(error)


class _Inner(Schema):
    tags = fields.List(fields.String(validate=validate.Length(max=3)), validate=validate.Length(max=2))


class _Outer(Schema):
    inner = fields.Nested(_Inner)
    many = fields.List(fields.Nested(_Inner), validate=validate.Length(max=2))


def test_over_bounds_walks_containers_before_items_and_names_the_path():
    assert over_bounds(_Outer(), {"inner": {"tags": ["a", "b", "c"]}}) is not None
    assert list(over_bounds(_Outer(), {"inner": {"tags": ["a", "b", "c"]}})) == ["inner.tags"]
    assert list(over_bounds(_Outer(), {"many": [{"tags": []}, {"tags": [1, 2, 3]}]})) == ["many[1].tags"]
    assert list(over_bounds(_Outer(), {"many": [{"tags": [1, 2, 3]}] * 3})) == ["many"]  # the count comes first
    assert over_bounds(_Outer(), {"many": [{"tags": ["a"]}], "inner": "not an object"}) is None  # left to the load
    assert list(over_bounds(StageAdd(), {"label": "x" * 256})) == ["label"]


def test_bad_creates_spend_the_creation_budget_until_429(app, client, rider):
    _, headers = rider
    count = app.config["BTP_LIMITS"]["trip_create"][0]
    for _ in range(count):
        answer = client.post("/api/trips", json={"waypoints": [BAD_ITEM, BAD_ITEM]}, headers={**headers, **idem()})
        assert answer.status_code == 422
    refused = client.post("/api/trips", json={"waypoints": [BAD_ITEM, BAD_ITEM]}, headers={**headers, **idem()})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    good = {"sourceUrl": "https://www.komoot.com/tour/123"}
    assert client.post("/api/trips", json=good, headers={**headers, **idem()}).status_code == 429


def test_creates_without_a_key_spend_the_creation_budget_too(app, client, rider):
    _, headers = rider
    good = {"sourceUrl": "https://www.komoot.com/tour/123"}
    for _ in range(app.config["BTP_LIMITS"]["trip_create"][0]):
        assert client.post("/api/trips", json=good, headers=headers).status_code == 400
    assert client.post("/api/trips", json=good, headers={**headers, **idem()}).status_code == 429


def test_bad_gpx_uploads_spend_the_creation_budget_too(app, client, rider):
    _, headers = rider
    count = app.config["BTP_LIMITS"]["trip_create"][0]
    for _ in range(count):
        answer = client.post("/api/trips/gpx-upload", data={"departureHour": "99",
                                                             "gpxFile": (io.BytesIO(b"<gpx/>"), "a.gpx")},
                             headers=headers)
        assert answer.status_code == 422
    answer = client.post("/api/trips/gpx-upload", data={"gpxFile": (io.BytesIO(b"<gpx/>"), "a.gpx")}, headers=headers)
    assert answer.status_code == 429


def test_bad_mcp_creates_spend_the_creation_budget_until_refused(app, client, ctx):
    user = make_user()
    token = mcp_token(app, user)
    count = app.config["BTP_LIMITS"]["trip_create"][0]
    for _ in range(count):
        error = payload(call(client, token, "create_trip", {"waypoints": [NAN_ITEM] * (MAX_WAYPOINTS + 1)}))["error"]
        assert error["code"] == "invalid_argument"
    error = payload(call(client, token, "create_trip", {"waypoints": [NAN_ITEM] * 2}))["error"]
    assert error["code"] == "rate_limited" and error["retryAfter"] >= 1


def test_another_account_keeps_its_own_creation_budget(app, client, rider, ctx):
    _, headers = rider
    count = app.config["BTP_LIMITS"]["trip_create"][0]
    for _ in range(count + 1):
        client.post("/api/trips", json={"waypoints": [BAD_ITEM, BAD_ITEM]}, headers={**headers, **idem()})
    token = mcp_token(app, make_user())
    error = payload(call(client, token, "create_trip", {"waypoints": [BAD_ITEM, BAD_ITEM]}))["error"]
    assert error["code"] == "invalid_argument"


def test_the_mcp_walk_judges_lengths_through_nullable_and_nested_schemas():
    from mcp.arguments import _over_bounds

    schema = {"type": "object", "properties": {
        "tags": {"anyOf": [{"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 3}},
                           {"type": "null"}]},
        "point": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}}}}}
    assert _over_bounds(schema, {"tags": ["a", "b", "c"]}, [])[0] == ["tags"]
    assert _over_bounds(schema, {"tags": ["a", "long"]}, [])[0] == ["tags", 1]
    assert _over_bounds(schema, {"point": {"name": "longer"}}, [])[0] == ["point", "name"]
    assert _over_bounds(schema, {"tags": None, "point": "not an object", "other": "x" * 100}, []) is None
