"""Every tool's arguments generated from the inputSchema tools/list publishes (tests/fuzz/strategies.py), one mutation
each, sent against the owner's undated, dated and started trips and another user's. Every case: no 500, no -32603,
no hang; a refusal commits nothing; another user's trip refused like an unknown one, a started trip by every tool
that takes its lock."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz import rpc
from tests.fuzz.strategies import HOSTILE_TEXT, LONE, dumps, hostile_object, json_values, with_edges
from tests.fuzz.support import LONG, bounded_case, fuzz_settings
from tests.fuzz.test_envelope import TOOLS, once
from trips.core.db import db
from trips.models import Trip

pytestmark = pytest.mark.slow

UNKNOWN = "0192f000-0000-7000-8000-000000000000"
TRIP_ARGUMENTS = ("id", "tripId")
LOCK_CARRYING = {"update_trip_settings", "edit_stages", "add_waypoint", "choose_accommodation", "analyze_trip"}


@dataclass(frozen=True)
class TripRef:
    """A trip named by role; resolved to its id when the case runs."""

    role: str


@dataclass(frozen=True)
class DayRef:
    """The n-th day (modulo) of the trip the case names; resolved when the case runs."""

    index: int


@dataclass(frozen=True)
class VersionRef:
    """The named trip's current version, plus `delta`."""

    delta: int


# Places on or near the fixtures' route (it runs north-east from 45.0 N 5.0 E for 240 km), so that a point
# argument gets past "too far from the day" some of the time; the schema's own values cover the rest.
NEAR_LAT, NEAR_LON = st.floats(44.9, 46.6), st.floats(4.9, 7.2)
NEAR_POINT = st.fixed_dictionaries({"lat": NEAR_LAT, "lon": NEAR_LON}, optional={"ele": st.floats(-500, 9000)})
@dataclass(frozen=True)
class DayCoord:
    """The end of the day the case names (its `stageId`, else the first), one coordinate, plus `jitter` degrees:
    a place near that day, so a waypoint or an accommodation choice gets past "too far from the day"."""

    axis: str
    jitter: float


def near_day(axis: str, fallback):
    return st.one_of(st.floats(-0.05, 0.05).map(lambda j: DayCoord(axis, j)), fallback)


TRIPS = st.sampled_from([TripRef("trip")] * 6 + [TripRef("dated"), TripRef("locked"), TripRef("foreign"),
                                                  TripRef("unknown")])
OVERRIDES = {
    "id": TRIPS, "tripId": TRIPS,
    "action": st.one_of(st.sampled_from(["add", "update", "move", "delete", "rest_day"]),
                        st.sampled_from(["ADD", "", "remove", LONE, LONG])),
    "stageId": st.one_of(st.integers(0, 5).map(DayRef), st.integers(0, 5).map(DayRef),
                         st.sampled_from([UNKNOWN, "", LONE, LONG, "../x"])),
    "version": st.one_of(st.just(VersionRef(0)), st.just(VersionRef(0)), st.just(VersionRef(0)),
                         st.sampled_from([VersionRef(-1), VersionRef(1)]),
                         st.sampled_from(["*", "", "7", "1e3", 0, -1, 2 ** 40, None, True, 1.5])),
    "sourceUrl": st.sampled_from(["https://www.komoot.com/tour/123456", "https://www.strava.com/routes/42",
                                  "https://ridewithgps.com/routes/7", "http://www.komoot.com/tour/1",
                                  "https://evil.example/tour/1", "javascript:alert(1)", "file:///etc/passwd",
                                  "https://127.0.0.1:6379/", "https://www.komoot.com/tour/" + "9" * 3000,
                                  "https://www.komoot.com/tour/1\u202e", "", " ", LONG]),
    "waypointLat": near_day("lat", NEAR_LAT), "waypointLon": near_day("lon", NEAR_LON),
    "selectedAccommodationLat": near_day("lat", NEAR_LAT), "selectedAccommodationLon": near_day("lon", NEAR_LON), "startPoint": NEAR_POINT, "endPoint": NEAR_POINT,
    "confirmationToken": st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=40)),
    "idempotencyKey": st.one_of(st.text("abcXYZ019-_", min_size=16, max_size=40), st.sampled_from(HOSTILE_TEXT)),
}


def _listing(client, token) -> dict:
    response = client.post("/mcp", data=dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                               "params": {"_meta": rpc.META}}),
                           headers=rpc.headers(token, "tools/list"))
    assert response.status_code == 200, response.data[:300]
    return {tool["name"]: tool for tool in response.get_json()["result"]["tools"]}


def test_every_tool_listed_is_fuzzed(client, world):
    assert sorted(_listing(client, world.token)) == sorted(TOOLS)


def _resolve(world, arguments):
    """Replace the references a case holds by the trip's id, its current day ids and version."""
    if not isinstance(arguments, dict):
        return arguments, None
    ids = {"trip": world.trip.id, "dated": world.dated.id, "locked": world.locked.id,
           "foreign": world.foreign.id, "unknown": UNKNOWN}
    named = next((arguments[k] for k in TRIP_ARGUMENTS if isinstance(arguments.get(k), TripRef)), TripRef("trip"))
    db.session.rollback()
    trip = db.session.get(Trip, ids[named.role]) if named.role != "unknown" else None
    out = {}
    for key, value in arguments.items():
        if isinstance(value, TripRef):
            value = ids[value.role]
        elif isinstance(value, DayRef):
            value = trip.stages[value.index % len(trip.stages)].id if trip is not None and trip.stages else UNKNOWN
        elif isinstance(value, VersionRef):
            value = max((trip.version if trip is not None else 1) + value.delta, 0)
        out[key] = value
    return resolve_coords(out, trip), named.role


def resolve_coords(arguments: dict, trip, stage_id=None) -> dict:
    """DayCoord values replaced by a coordinate near the end of the named day (or the trip's first), nested objects
    and lists of them too (a REST body's `point: {lat, lon}`, `waypoints: [{lat, lon}, …]`)."""
    stages = list(trip.stages) if trip is not None else []
    wanted = stage_id or arguments.get("stageId")
    day = next((s for s in stages if s.id == wanted), stages[0] if stages else None)
    out = {}
    for key, value in arguments.items():
        if isinstance(value, DayCoord):
            base = (day.end_lat if value.axis == "lat" else day.end_lon) if day is not None else 45.0
            value = base + value.jitter
        elif isinstance(value, dict):
            value = resolve_coords(value, trip, wanted)
        elif isinstance(value, list):  # a list of points (POST /api/trips `waypoints`)
            value = [resolve_coords(v, trip, wanted) if isinstance(v, dict) else v for v in value]
        out[key] = value
    return out


def _mirrors(schema: dict, arguments) -> dict:
    """Mcp-Param-* headers for arguments whose schema names x-mcp-header (SEP-2243), as a client sends them."""
    out = {}
    if not isinstance(arguments, dict):
        return out
    for name, prop in schema.get("properties", {}).items():
        suffix = prop.get("x-mcp-header") if isinstance(prop, dict) else None
        value = arguments.get(name)
        if isinstance(suffix, str) and isinstance(value, (str, int, bool)) and value is not None:
            out[f"Mcp-Param-{suffix}"] = rpc.on_the_wire(
                ("true" if value else "false") if isinstance(value, bool) else str(value))
    return out


# edit_stages reads a different set of its arguments per action (any other is refused by name): cases shaped
# per action, from the published schema's own properties, get past that refusal to the edit itself.
ACTIONS = {"add": (["startPoint", "endPoint"], ["position", "label"]), "update": (["stageId"], ["startPoint",
           "endPoint", "label"]), "cut": (["stageId", "distance"], []), "move": (["stageId", "toIndex"], []),
           "delete": (["stageId"], []), "rest_day": (["stageId"], [])}


def _per_action(schema: dict):
    shapes = []
    for action, (required, optional) in ACTIONS.items():
        base = ["tripId", "version", "action"]
        shape = {"type": "object", "required": base + required,
                 "properties": {n: schema["properties"][n] for n in base + required + optional}}
        shaped = {**OVERRIDES, "action": st.just("update" if action == "cut" else action)}
        shapes.append(hostile_object(shape, None, shaped))
    return st.one_of(shapes)


def _strategy(name: str, schema: dict):
    objects = hostile_object(schema, None, OVERRIDES)
    if name == "edit_stages":
        objects = st.one_of(objects, _per_action(schema), _per_action(schema))
    return st.one_of(objects, objects, objects, objects, objects, with_edges(schema, None, OVERRIDES))


@pytest.fixture
def warm(request):
    """The gazetteer built before search_places is fuzzed (tests/fuzz/conftest.py)."""
    if request.node.callspec.params.get("name") == "search_places":
        request.getfixturevalue("gazetteer")


@pytest.mark.parametrize("name", TOOLS)
@given(data=st.data(), elicit=st.sampled_from([False, False, False, True]))
@fuzz_settings(110)
def test_fuzz_tool_arguments(client, world, ledger, unlimited, warm, name, data, elicit):
    tool = once(world, "listing", lambda: _listing(client, world.token))[name]
    schema = tool["inputSchema"]
    arguments = data.draw(once(world, f"args:{name}", lambda: _strategy(name, schema)))
    arguments, role = _resolve(world, arguments)
    body = rpc.call_body(name, arguments)
    if elicit:
        body["params"]["_meta"] = {**rpc.META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    sent = {**rpc.headers(world.token, "tools/call", name), **_mirrors(schema, arguments)}
    with bounded_case("tool arguments"):
        before = ledger.look()
        response = client.post("/mcp", data=dumps(body), headers=sent)
        outcome = rpc.judge(response, ledger, before, f"{name} call", name)
    if os.environ.get("BTP_FUZZ_DEBUG") and outcome == "refused":
        text = response.get_data(as_text=True)
        print("REFUSED", name, text[:300].replace(world.trip.id, "T"), json.dumps(arguments, default=str)[:200])
    names_a_trip = isinstance(arguments, dict) and any(k in arguments for k in TRIP_ARGUMENTS)
    if names_a_trip and role == "foreign":
        assert outcome == "refused", json.dumps(response.get_json())[:300]
        refusal = json.loads(response.get_json()["result"]["content"][0]["text"]) if "result" in \
            response.get_json() else None
        assert refusal is None or refusal["error"]["code"] in ("not_found", "invalid_argument"), refusal
    if names_a_trip and role == "locked" and name in LOCK_CARRYING:
        assert outcome == "refused", json.dumps(response.get_json())[:300]


# ------------------------------------------------------------------ the human's answer to an elicitation

ANSWERS = st.one_of(json_values(5), st.fixed_dictionaries({"confirm": st.one_of(json_values(3), st.fixed_dictionaries(
    {"action": st.sampled_from(["accept", "accept", "decline", "cancel", "ACCEPT", 1, None])},
    optional={"content": st.one_of(json_values(2), st.fixed_dictionaries({"confirm": st.one_of(
        st.just(True), st.just(True), json_values(1))}))}))}))
STATES = st.sampled_from(["genuine"] * 6 + ["altered", "absent", "junk"])


def _elicit(client, world, name: str, arguments: dict, params: dict | None = None):
    body = rpc.call_body(name, arguments)
    body["params"]["_meta"] = {**rpc.META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    body["params"].update(params or {})
    return client.post("/mcp", data=dumps(body), headers=rpc.headers(world.token, "tools/call", name))


@given(name=st.sampled_from(["update_trip_settings", "unshare_trip", "delete_trip"]), answer=ANSWERS,
       state=STATES, junk=json_values(2))
@example(name="update_trip_settings", answer=["x"], state="genuine", junk=None)  # found: -32603 (mcp/confirmation.py)
@example(name="update_trip_settings", answer={"confirm": {"action": "accept", "content": "x"}}, state="genuine",
         junk=None)
@fuzz_settings(150)
def test_fuzz_elicitation_answers(client, world, ledger, unlimited, name, answer, state, junk):
    """A second call carrying the human's answer (inputResponses) and the sealed requestState of the first:
    whatever the answer's shape, a refusal or "declined" writes nothing, and never -32603."""
    from trips.services import sharing

    db.session.rollback()
    trip = db.session.get(Trip, world.dated.id if name == "unshare_trip" else world.trip.id)
    if name == "unshare_trip" and sharing.active_share(trip.id) is None:
        sharing.share_trip(world.owner, trip.id)
    arguments = {"tripId": trip.id} if name == "unshare_trip" else {"id": trip.id}
    if name == "update_trip_settings":
        # a recut: the one change it asks about (a title is saved at once)
        arguments.update(version=trip.version, fatigueFactor=0.8 if trip.fatigue_factor != 0.8 else 0.9)
    if name == "delete_trip" and isinstance(answer, dict) and isinstance(answer.get("confirm"), dict):
        answer = {"confirm": {**answer["confirm"], "action": "decline"}}  # the trip stays for the next cases
    with bounded_case("elicitation answer"):
        first = _elicit(client, world, name, arguments).get_json()["result"]
        assert first["resultType"] == "input_required", first
        sealed = first["requestState"]
        params = {"inputResponses": answer, "requestState": {"genuine": sealed, "altered": sealed[:-2] + "xx",
                                                             "junk": junk}.get(state)}
        if state == "absent":
            del params["requestState"]
        before = ledger.look()
        rpc.judge(_elicit(client, world, name, arguments, params), ledger, before, f"{name} answer",
                  "elicitation")
