"""One source for each argument rule: a tool argument the services load with a marshmallow field advertises
exactly that field's bounds (mcp/tool_schemas.py `rules`), and MCP refuses what REST refuses."""
import io

import pytest
from marshmallow import Schema

from mcp.tool_schemas import rules
from mcp.tools import BY_NAME
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from trips.services import inputs as ms
from trips.services.trips import import_gpx

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
          "minItems", "maxItems", "enum")
SETTINGS = ("title", "fatigueFactor", "elevationPenalty", "departureHour", "maxDistancePerDay", "averageSpeed",
            "enabledAccommodationTypes")
# (tool, argument path, marshmallow schema the service loads it with, its data key there, keywords the tool
# leaves out on purpose)
SHARED = [
    *[("create_trip", (k,), ms.TripCreate, k, ()) for k in ("sourceUrl", *SETTINGS)],
    *[("update_trip_settings", (k,), ms.TripUpdate, k, ()) for k in SETTINGS],
    ("edit_stages", ("position",), ms.StageAdd, "position", ()),
    ("edit_stages", ("label",), ms.StageUpdate, "label", ()),
    ("edit_stages", ("distance",), ms.StageUpdate, "distance", ()),
    *[("edit_stages", (p, "properties", k), ms.PointIn, k, ()) for p in ("startPoint", "endPoint")
      for k in ("lat", "lon", "ele")],
    ("list_trips", ("page",), ms.TripListQuery, "page", ()),
    ("list_trips", ("itemsPerPage",), ms.TripListQuery, "itemsPerPage", ("maximum",)),  # clamped to 30
    ("list_trips", ("title",), ms.TripListQuery, "title", ()),
    ("add_waypoint", ("waypointLat",), ms.WaypointIn, "lat", ()),
    ("add_waypoint", ("waypointLon",), ms.WaypointIn, "lon", ()),
    ("choose_accommodation", ("selectedAccommodationLat",), ms.AccommodationChoice, "lat", ()),
    ("choose_accommodation", ("selectedAccommodationLon",), ms.AccommodationChoice, "lon", ()),
]


def advertised(tool: str, path: tuple[str, ...]) -> dict:
    schema = BY_NAME[tool].input_schema["properties"]
    for step in path:
        schema = schema[step]
    return schema


def bounds(schema: dict) -> dict:
    found = {k: v for k, v in schema.items() if k in BOUNDS}
    if "items" in schema:
        found["items"] = bounds(schema["items"])
    return found


@pytest.mark.parametrize("tool,path,schema,key,omit", SHARED, ids=lambda v: v if isinstance(v, str) else None)
def test_a_shared_argument_advertises_the_services_bounds(tool, path, schema: type[Schema], key, omit):
    assert bounds(advertised(tool, path)) == rules(schema, key, omit=omit)


def test_the_rules_read_every_kind_of_validator():
    assert rules(ms.TripUpdate, "elevationPenalty") == {"exclusiveMinimum": 0, "maximum": 10000}
    assert rules(ms.TripUpdate, "fatigueFactor") == {"minimum": 0.5, "maximum": 1.0}
    assert rules(ms.TripCreate, "sourceUrl") == {"minLength": 1, "maxLength": 2048}
    assert rules(ms.TripUpdate, "enabledAccommodationTypes")["items"]["enum"][0] == "camp_site"
    assert rules(ms.TripUpdate, "enabledAccommodationTypes")["minItems"] == 1
    assert rules(ms.TripListQuery, "itemsPerPage", omit=("maximum",)) == {"minimum": 1}
    assert rules(ms.TripUpdate, "ebikeMode") == {}
    with pytest.raises(KeyError):
        rules(ms.TripUpdate, "elevation_penalty")  # the attribute name is not what a client sends


def test_a_hand_written_bound_that_disagrees_is_caught():
    # The check above compares the advertised keywords, not the derivation: a tool that wrote its own
    # maximum for elevationPenalty (it once had none while the services refused above 10 000) fails it.
    drifted = {"type": "number", "exclusiveMinimum": 0}
    assert bounds(drifted) != rules(ms.TripUpdate, "elevationPenalty")


@pytest.fixture
def owner(app, ctx):
    user = make_user("rules@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(400))), {})
    return trip, mcp_token(app, user)


def test_mcp_refuses_an_elevation_penalty_rest_refuses_and_takes_the_bound(client, owner):
    trip, token = owner
    refused = call(client, token, "update_trip_settings", {"id": trip.id, "version": 1, "elevationPenalty": 10001})
    assert refused["isError"]
    error = payload(refused)["error"]
    assert error["code"] == "invalid_argument" and "elevationPenalty" in str(error)
    taken = call(client, token, "update_trip_settings", {"id": trip.id, "version": 1, "elevationPenalty": 10000})
    assert not taken["isError"], payload(taken)


# ------------------------------------------------------------------ argument sets seen passing (mcp/arguments.py)
def _tool(properties: dict, required=()):
    from mcp.tools.base import Tool

    return Tool(name="probe", title="Probe", description="d", scope="trips:read", output_schema=None,
                run=lambda ctx, args: {}, input_schema={"type": "object", "properties": properties,
                                                        "required": list(required), "additionalProperties": False})


def test_a_set_seen_passing_passes_again_and_nothing_else_is_taken_for_it():
    from mcp.arguments import check_arguments
    from trips.errors import Invalid

    tool = _tool({"page": {"type": "integer", "minimum": 1}, "title": {"type": "string", "maxLength": 5}})
    assert check_arguments(tool, {"page": 1, "title": "ab"}) == {"page": 1, "title": "ab"}
    again = check_arguments(tool, {"title": "ab", "page": 1})  # remembered: the same set in another order
    assert again == {"page": 1, "title": "ab"}
    for bad, field in (({"page": True, "title": "ab"}, "page"),  # True == 1 in Python: the type tells them apart
                       ({"page": 1.5, "title": "ab"}, "page"),
                       ({"page": 0, "title": "ab"}, "page"),
                       ({"page": 1, "title": "abcdef"}, "title"),
                       ({"page": 1, "title": "ab", "extra": 1}, "arguments")):
        with pytest.raises(Invalid) as caught:
            check_arguments(tool, bad)
        assert field in caught.value.errors, (bad, caught.value.errors)
    # a refusal is never remembered: the same set is refused every time
    with pytest.raises(Invalid):
        check_arguments(tool, {"page": True, "title": "ab"})


def test_a_tool_made_anew_with_another_schema_remembers_nothing():
    from mcp.arguments import check_arguments
    from trips.errors import Invalid

    check_arguments(_tool({"id": {"type": "string"}}), {"id": "abc"})
    with pytest.raises(Invalid):  # same name, a stricter schema: judged on its own
        check_arguments(_tool({"id": {"type": "string", "maxLength": 2}}), {"id": "abc"})


def test_returned_arguments_are_a_copy_the_tool_may_change():
    from mcp.arguments import check_arguments

    tool = _tool({"id": {"type": "string"}})
    sent = {"id": "abc"}
    for _ in range(2):  # judged, then remembered
        args = check_arguments(tool, sent)
        args["id"] = "changed"
        assert sent == {"id": "abc"}
