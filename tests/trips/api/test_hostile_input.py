"""Hostile input where it enters: lone UTF-16 surrogates in JSON (REST and /mcp), NaN, ±Infinity and
huge numbers in tool arguments and REST bodies, and property-based runs over both that must never answer
500 / -32603 nor write anything for a refused call."""
import io
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import MODERN, mcp_token
from trips.core import jsonio
from trips.core.db import db
from trips.models import Trip
from trips.services.trips import import_gpx
from trips.core.text import floor, mend

LONE = "\\ud800"  # as it is written inside a JSON string: six characters, backslash included


# ------------------------------------------------------------------ the loader


@pytest.mark.parametrize("text,where", [
    ('{"title": "a' + LONE + 'b"}', "title"),
    ('{"a": [1, {"b": "' + LONE + '"}]}', "a[1].b"),
    ('{"\\udc00x": 1}', "\ufffdx"),
    ('["' + LONE + '"]', "[0]"),
    ('"\\udfff"', "body"),
    ('{"p": {"arguments": {"t": "\\ude00\\ud83d"}}}', "p.arguments.t"),  # low then high: not a pair
])
def test_lone_surrogates_are_refused_naming_where(text, where):
    with pytest.raises(jsonio.InvalidText) as caught:
        jsonio.loads(text)
    assert caught.value.field == where
    assert "lone UTF-16 surrogate" in caught.value.message
    caught.value.message.encode("utf-8")  # the message itself can always be sent


def test_raw_surrogate_bytes_are_refused_too():
    # json.loads decodes bytes with surrogatepass: ED A0 80 is U+D800 written as (invalid) UTF-8.
    with pytest.raises(jsonio.InvalidText):
        jsonio.loads(b'{"title": "\xed\xa0\x80"}')


def test_valid_text_goes_through():
    assert jsonio.loads('{"t": "\\ud83d\\ude00 caf\\u00e9"}') == {"t": "\U0001F600 café"}
    assert jsonio.loads("[NaN, Infinity, 1e400]")[0] != 0  # the literals are read: fields refuse them by name
    with pytest.raises(ValueError):
        jsonio.loads(b"{nope")


@pytest.mark.parametrize("body", [
    b'{"t": "\\ud800"}',  # an escape
    b'{"t": "\xed\xa0\x80"}',  # the UTF-8 form of a surrogate (json.loads reads bytes with surrogatepass)
    b'{"t": "\\u0000"}',  # NUL
    '{"t": "\\ud800"}'.encode("utf-16-le"),  # read as UTF-16 (a NUL in the first two bytes)
    '{"t": "\\ud800"}'.encode("utf-16"),  # with its BOM
    '{"t": "\\ud800"}'.encode("utf-32"),
    bytearray(b'{"t": "\\ud800"}'),
    '{"t": "\ud800"}',  # a str holding the surrogate itself
    '{"t": "a\x00"}',
    b'{"t": "a\x00"}',  # a NUL written out, which json.loads takes inside a string with strict=False
])
def test_every_way_a_surrogate_or_nul_arrives_is_walked_and_refused(body):
    # loads skips walking a body whose text cannot hold one (jsonio._plain): each of these must still be walked
    assert not jsonio._plain(body)
    with pytest.raises((jsonio.InvalidText, ValueError)) as caught:
        jsonio.loads(body)
    if body not in ('{"t": "a\x00"}', b'{"t": "a\x00"}'):
        assert isinstance(caught.value, jsonio.InvalidText)
    else:  # a raw NUL in a string is not strict JSON at all; read leniently, it is found and refused
        with pytest.raises(jsonio.InvalidText):
            jsonio.loads(body, strict=False)


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=12),
       st.booleans(), st.sampled_from(["utf-8", "utf-16", "utf-16-le", "utf-32"]))
def test_the_shortcut_never_lets_an_unstorable_string_through(value, ascii_only, encoding):
    text = json.dumps(value, ensure_ascii=ascii_only)  # escapes (\uXXXX) or the characters themselves
    try:
        data = text.encode(encoding, "surrogatepass")
    except UnicodeEncodeError:
        return
    parsed = json.loads(data)
    if jsonio._plain(data) or jsonio._plain(text):
        assert jsonio.find_unstorable(parsed) is None  # the text alone proved nothing unstorable is there


def test_a_deep_body_is_walked_without_recursion():
    depth = 900
    assert jsonio.loads("[" * depth + '"x"' + "]" * depth)
    with pytest.raises(jsonio.InvalidText):
        jsonio.loads("[" * depth + '"' + LONE + '"' + "]" * depth)


@pytest.mark.parametrize("name", [b"a&#xD800;b", b"a\xed\xa0\x80b"])
def test_gpx_text_cannot_carry_a_surrogate(name):
    from trips.route.gpx import INVALID, GpxError, parse_gpx

    with pytest.raises(GpxError) as refused:  # XML 1.0 Char excludes them; lxml refuses both forms
        parse_gpx(b'<gpx><trk><name>' + name + b'</name><trkseg><trkpt lat="1" lon="2"/></trkseg></trk></gpx>')
    assert refused.value.message == INVALID


def test_the_floor_mends_a_surrogate_that_slipped_through():
    assert floor("a\ud800b") == "a\ufffdb"
    floor("\udc00" * 3).encode("utf-8")


# ------------------------------------------------------------------ REST


@pytest.fixture
def trip(rider):
    user, headers = rider
    return import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Vercors")), {})  # 3 days


def _patch(client, headers, trip_id, version, body: str):
    return client.patch(f"/api/trips/{trip_id}", data=body.encode("utf-8", "surrogatepass"),
                        headers={**headers, "Content-Type": "application/json", "If-Match": f'"{version}"'})


def _stored(trip_id) -> tuple:
    db.session.rollback()
    t = db.session.get(Trip, trip_id)
    return (t.version, t.title, t.fatigue_factor, t.elevation_penalty, t.max_distance_per_day, t.average_speed,
            t.departure_hour, t.start_date, t.end_date, len(t.stages))


@pytest.mark.parametrize("body,field", [
    ('{"title": "' + LONE + '"}', "title"),
    ('{"' + LONE + '": 1}', "\ufffd"),
    ('{"enabledAccommodationTypes": ["hotel", "\\udbff"]}', "enabledAccommodationTypes[1]"),
    ('{"title": "a\\u0000b"}', "title"),  # NUL: PostgreSQL cannot store it in text (a 500 there, not on SQLite)
])
def test_rest_patch_refuses_a_lone_surrogate_with_400(client, rider, trip, body, field):
    _, headers = rider
    before = _stored(trip.id)
    response = _patch(client, headers, trip.id, trip.version, body)
    assert response.status_code == 400
    assert response.mimetype == "application/problem+json"
    detail = response.get_json()["detail"]
    assert "invalid string" in detail and field in detail
    assert _stored(trip.id) == before


def test_a_gpx_upload_form_title_with_a_nul_is_refused_by_name(client, rider):
    _, headers = rider
    gpx = gpx_from_points(make_points(300))
    response = client.post("/api/trips/gpx-upload", headers=headers, content_type="multipart/form-data",
                           data={"gpxFile": (io.BytesIO(gpx), "ride.gpx"), "title": "a\x00b"})
    assert response.status_code == 422 and "title" in response.get_json()["errors"]
    db.session.rollback()
    assert db.session.query(Trip).count() == 0


def test_third_party_text_with_a_nul_is_mended():
    assert mend("a\x00b\ud800") == "ab\ufffd"


def test_rest_create_refuses_a_lone_surrogate(client, rider):
    _, headers = rider
    body = '{"sourceUrl": "https://www.komoot.com/tour/1", "title": "' + LONE + '"}'
    response = client.post("/api/trips", data=body, headers={**headers, "Content-Type": "application/json",
                                                               "Idempotency-Key": "k" * 20})
    assert response.status_code == 400 and "title" in response.get_json()["detail"]
    db.session.rollback()
    assert db.session.query(Trip).count() == 0


@pytest.mark.parametrize("body,field", [
    ('{"fatigueFactor": NaN}', "fatigueFactor"),
    ('{"elevationPenalty": Infinity}', "elevationPenalty"),
    ('{"averageSpeed": -Infinity}', "averageSpeed"),
    ('{"maxDistancePerDay": 1e400}', "maxDistancePerDay"),
    ('{"elevationPenalty": ' + "9" * 400 + "}", "elevationPenalty"),
])
def test_rest_patch_refuses_non_finite_numbers_by_name(client, rider, trip, body, field):
    _, headers = rider
    before = _stored(trip.id)
    response = _patch(client, headers, trip.id, trip.version, body)
    assert response.status_code == 422
    assert field in response.get_json()["errors"]
    assert _stored(trip.id) == before


def test_query_strings_paths_and_forms_cannot_carry_surrogates(client, rider):
    _, headers = rider
    # Bytes ED A0 80 are not UTF-8: werkzeug decodes them as U+FFFD, never as a surrogate.
    assert client.get("/api/trips?title=%ED%A0%80", headers=headers).status_code == 200
    assert client.get("/api/trips/%ED%A0%80", headers=headers).status_code == 404
    response = client.post("/login", data=b"email=%ED%A0%80&csrf_token=x",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code < 500


def test_a_third_party_title_with_a_lone_surrogate_is_mended_not_a_failed_job(app, client, rider,
                                                                              fake_thirdparty):
    from tests.factories import idem
    from tests.trips.services.test_pipeline import reload, run_jobs, structural

    _, headers = rider
    fake_thirdparty.add_komoot_tour("31", "Col\ud800 du Lautaret", make_points(600))  # an escape in the page
    response = client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/31"},
                           headers={**headers, **idem()})
    run_jobs(app)
    trip = reload(response.get_json()["id"])
    assert structural(trip) == {"route": ("done", None), "stages": ("done", None)}
    assert trip.title == "Col\ufffd du Lautaret"


# ------------------------------------------------------------------ MCP


def _rpc(client, token, text: str, name="update_trip_settings", extra_headers=None):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
               "Mcp-Method": "tools/call", "Mcp-Name": name, **(extra_headers or {})}
    return client.post("/mcp", data=text.encode("utf-8", "surrogatepass"), headers=headers)


def _call_text(trip_id, version, arguments: str, name="update_trip_settings", rpc_id="1", method="tools/call"):
    meta = ('"_meta": {"io.modelcontextprotocol/protocolVersion": "%s", '
            '"io.modelcontextprotocol/clientCapabilities": {}}' % MODERN)
    args = arguments.replace("TRIP", trip_id).replace("VERSION", str(version))
    return ('{"jsonrpc": "2.0", "id": %s, "method": "%s", "params": {"name": "%s", "arguments": %s, %s}}'
            % (rpc_id, method, name, args, meta))


@pytest.fixture
def agent(app, rider, trip):
    return mcp_token(app, rider[0])


@pytest.mark.parametrize("where", ["id", "method", "tool", "argument name", "title", "batch"])
def test_mcp_refuses_a_lone_surrogate_as_a_parse_error(client, trip, agent, where):
    args = '{"id": "TRIP", "version": VERSION, "title": "T"}'
    text = {
        "id": _call_text(trip.id, trip.version, args, rpc_id='"' + LONE + '"'),
        "method": _call_text(trip.id, trip.version, args, method="tools/" + LONE),
        "tool": _call_text(trip.id, trip.version, args, name="update" + LONE),
        "argument name": _call_text(trip.id, trip.version, '{"id": "TRIP", "version": VERSION, "' + LONE + '": 1}'),
        "title": _call_text(trip.id, trip.version, '{"id": "TRIP", "version": VERSION, "title": "' + LONE + '"}'),
        "batch": "[" + _call_text(trip.id, trip.version, args) + ", " + _call_text(
            trip.id, trip.version, '{"id": "TRIP", "version": VERSION, "title": "' + LONE + '"}') + "]",
    }[where]
    before = _stored(trip.id)
    response = _rpc(client, agent, text)
    assert response.status_code == 400
    body = response.get_json()
    assert body["id"] is None and body["error"]["code"] == -32700
    assert "lone UTF-16 surrogate" in body["error"]["message"]
    assert _stored(trip.id) == before


@pytest.mark.parametrize("tool,arguments,name", [
    ("update_trip_settings", '{"id": "TRIP", "version": VERSION, "fatigueFactor": NaN}', "fatigueFactor"),
    ("update_trip_settings", '{"id": "TRIP", "version": VERSION, "elevationPenalty": Infinity}', "elevationPenalty"),
    ("update_trip_settings", '{"id": "TRIP", "version": VERSION, "averageSpeed": -Infinity}', "averageSpeed"),
    ("update_trip_settings", '{"id": "TRIP", "version": VERSION, "elevationPenalty": 1e400}', "elevationPenalty"),
    ("update_trip_settings", '{"id": "TRIP", "version": VERSION, "elevationPenalty": ' + "9" * 400 + "}",
     "elevationPenalty"),
    ("edit_stages", '{"tripId": "TRIP", "version": VERSION, "action": "add", "startPoint": {"lat": 45, "lon": 5},'
                    ' "endPoint": {"lat": 45.1, "lon": 5, "ele": NaN}}', "endPoint.ele"),
    ("edit_stages", '{"tripId": "TRIP", "version": VERSION, "action": "update", "stageId": "x", '
                    '"distance": Infinity}', "distance"),
])
def test_mcp_refuses_non_finite_numbers_by_name(client, trip, agent, tool, arguments, name):
    before = _stored(trip.id)
    response = _rpc(client, agent, _call_text(trip.id, trip.version, arguments, name=tool), name=tool)
    assert response.status_code == 200
    result = response.get_json()["result"]
    assert result["isError"] is True
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "invalid_argument" and error["fields"] == {name: "must be a finite number"}
    assert _stored(trip.id) == before


def test_an_mcp_name_header_with_surrogate_bytes_is_a_mismatch_not_a_crash(client, trip, agent):
    # Header bytes reach Python as latin-1 (never a surrogate); base64 of ED A0 80 does not decode as UTF-8.
    text = _call_text(trip.id, trip.version, '{"id": "TRIP", "version": VERSION, "title": "T"}')
    for header in ("update_trip_settings\xed\xa0\x80", "=?base64?7aCA?="):
        response = _rpc(client, agent, text, extra_headers={"Mcp-Name": header})
        assert response.status_code == 400 and "Mcp-Name" in response.get_json()["error"]["message"]


# ------------------------------------------------------------------ property-based runs

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf, 10 ** 400, -(10 ** 309), 2 ** 1024, 1e308, -0.0])
NUMBERS = st.one_of(SPECIAL, st.floats(), st.integers(min_value=-10 ** 400, max_value=10 ** 400))
TEXT = st.one_of(st.text(max_size=30), st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                                                 min_size=1, max_size=3).map(lambda s: "x" + s))
VALUES = st.one_of(NUMBERS, NUMBERS, TEXT, st.booleans(), st.none(), st.lists(NUMBERS | TEXT, max_size=3))
SETTINGS = ["title", "startDate", "endDate", "fatigueFactor", "elevationPenalty", "ebikeMode", "departureHour",
            "maxDistancePerDay", "averageSpeed", "enabledAccommodationTypes"]
# Mostly valid settings, then at most two hostile entries: a refusal must come from the hostile value, not
# from a sibling that would have been refused anyway, or the run never reaches the code behind validation.
VALID = {"title": st.text(max_size=20), "fatigueFactor": st.floats(0.5, 1.0), "ebikeMode": st.booleans(),
         "elevationPenalty": st.floats(1.0, 1000.0), "maxDistancePerDay": st.floats(30.0, 300.0),
         "averageSpeed": st.floats(5.0, 50.0), "departureHour": st.integers(0, 23)}
HOSTILE = st.builds(lambda known, unknown: {**known, **unknown},
                    st.dictionaries(st.sampled_from(SETTINGS), st.one_of(SPECIAL, VALUES), max_size=1),
                    st.one_of(st.just({}), st.just({}), st.just({}), st.dictionaries(TEXT, VALUES, max_size=1)))
BODIES = st.builds(lambda valid, hostile: {**valid, **hostile},
                   st.fixed_dictionaries({}, optional=VALID), HOSTILE).filter(bool)
COORD = st.one_of(st.floats(44.0, 46.0), NUMBERS)
POINT = st.fixed_dictionaries({"lat": COORD, "lon": st.one_of(st.floats(4.0, 6.0), NUMBERS)},
                              optional={"ele": st.one_of(st.floats(0, 2000), NUMBERS)})


def _dumps(value) -> bytes:
    """JSON text as a hostile client writes it: NaN/Infinity literals, lone surrogates as escapes."""
    return json.dumps(value, allow_nan=True).encode()


def _forget_limits(redis_client):
    for key in redis_client.scan_iter("btp:rl:*"):
        redis_client.delete(key)


def _mcp_body(name: str, arguments: dict) -> bytes:
    return _dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": name, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}})


def _check_mcp(client, token, name, arguments, trip_id) -> None:
    before = _stored(trip_id)
    response = client.post("/mcp", data=_mcp_body(name, arguments), headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "MCP-Protocol-Version": MODERN,
        "Accept": "application/json, text/event-stream", "Mcp-Method": "tools/call", "Mcp-Name": name})
    assert response.status_code < 500, response.data[:300]
    body = response.get_json()
    assert body is not None
    if "error" in body:
        assert body["error"]["code"] != -32603, body
        assert _stored(trip_id) == before
    elif body["result"].get("isError") or "confirmationToken" in json.dumps(body["result"]):
        assert _stored(trip_id) == before  # a refusal, or a confirmation challenge: nothing written


@given(changes=BODIES)
@FUZZ
def test_fuzz_update_trip_settings(client, trip, agent, redis_client, changes):
    _forget_limits(redis_client)
    version = _stored(trip.id)[0]
    _check_mcp(client, agent, "update_trip_settings", {"id": trip.id, "version": version, **changes}, trip.id)


INDEX = st.one_of(st.integers(0, 3), NUMBERS)
ACTIONS = {  # each action with the arguments it reads (mostly plausible, each possibly hostile), so that a
    # refusal comes from a value and not from a stray argument the action would refuse anyway
    "add": st.fixed_dictionaries({"startPoint": POINT, "endPoint": POINT}, optional={"position": INDEX,
                                                                                     "label": TEXT}),
    "update": st.one_of(st.fixed_dictionaries({}, optional={"startPoint": POINT, "endPoint": POINT,
                                                            "label": TEXT}),
                        st.fixed_dictionaries({"distance": st.one_of(st.floats(1.0, 50.0), NUMBERS)})),
    "move": st.fixed_dictionaries({"toIndex": INDEX}),
    "delete": st.just({}), "rest_day": st.just({}), "x\ud800": st.just({}),
}


@given(edit=st.sampled_from(sorted(ACTIONS)).flatmap(lambda a: st.tuples(st.just(a), ACTIONS[a])),
       day=st.integers(0, 5))
@FUZZ
def test_fuzz_edit_stages(client, trip, agent, redis_client, edit, day):
    action, extra = edit
    _forget_limits(redis_client)
    db.session.rollback()
    stored = db.session.get(Trip, trip.id)
    arguments = {"tripId": trip.id, "version": stored.version, "action": action, **extra}
    if action != "add":
        arguments["stageId"] = stored.stages[day % len(stored.stages)].id
    _check_mcp(client, agent, "edit_stages", arguments, trip.id)


@given(body=BODIES)
@FUZZ
def test_fuzz_rest_patch(client, rider, trip, redis_client, body):
    _forget_limits(redis_client)
    _, headers = rider
    before = _stored(trip.id)
    response = client.patch(f"/api/trips/{trip.id}", data=_dumps(body), headers={
        **headers, "Content-Type": "application/json", "If-Match": f'"{before[0]}"'})
    assert response.status_code < 500, response.data[:300]
    if response.status_code >= 400:
        assert response.mimetype == "application/problem+json"
        assert _stored(trip.id) == before
