"""The REST JSON bodies, fuzzed in process from /api/openapi.json's request schemas (an edge value, a wrong type, a
member dropped or added, bytes that are not JSON, any If-Match) against the owner's and another user's trips. Every
case: no 5xx, a bounded problem document that commits nothing, another user's trip a 404 like an unknown one."""
from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.strategies import HOSTILE_TEXT, dumps, hostile_object, json_values, resolve
from tests.fuzz.support import LONG, OUTCOMES, assert_bounded_message, bounded_case, fuzz_settings
from tests.fuzz.test_envelope import once
from tests.fuzz.test_tool_arguments import (
    NEAR_LAT, NEAR_LON, NEAR_POINT, OVERRIDES, UNKNOWN, near_day, resolve_coords,
)
from trips.core.db import db
from trips.models import Trip

pytestmark = pytest.mark.slow

MESSAGE_MAX = 600
OPERATIONS = [("post", "/api/trips"), ("patch", "/api/trips/{trip_id}"),
              ("post", "/api/trips/{trip_id}/accommodations/scan"), ("post", "/api/trips/{trip_id}/stages"),
              ("patch", "/api/trips/{trip_id}/stages/{stage_id}"),
              ("patch", "/api/trips/{trip_id}/stages/{stage_id}/accommodation"),
              ("patch", "/api/trips/{trip_id}/stages/{stage_id}/move"),
              ("post", "/api/trips/{trip_id}/stages/{stage_id}/poi-waypoint"), ("patch", "/api/users/me"),
              ("post", "/api/trips/{trip_id}/stages/{stage_id}/accommodations/manual"),
              ("post", "/api/users/me/email-change")]
ROLES = st.sampled_from(["trip"] * 6 + ["dated", "locked", "foreign", "unknown"])
IF_MATCH = st.sampled_from(["current"] * 6 + ["stale", "*", "absent", "garbage", "weak"])
REST_OVERRIDES = {**{k: v for k, v in OVERRIDES.items() if k in ("sourceUrl",)},
                  "lat": near_day("lat", NEAR_LAT), "lon": near_day("lon", NEAR_LON), "startPoint": NEAR_POINT,
                  "endPoint": NEAR_POINT}
RAW = st.one_of(st.binary(max_size=100), st.sampled_from([
    b"", b"null", b"[]", b'"x"', b"{", b'{"title": NaN}', b'{"title": "\\ud800"}', b'{"toIndex": 1e999}',
    b'{"toIndex": ' + b"9" * 5000 + b"}", b"[" * 50_000, b'{"a": ' * 3000 + b"1" + b"}" * 3000,
    b"\xef\xbb\xbf{}", '{"title": "é"}'.encode("utf-16"), b'{"label": "' + LONG.encode() + b'"}']))


def _document(client) -> dict:
    return client.get("/api/openapi.json").get_json()


def _body_schema(doc: dict, method: str, path: str) -> dict:
    content = doc["paths"][path][method]["requestBody"]["content"]["application/json"]
    return resolve(content["schema"], doc)


def test_every_json_body_is_fuzzed(client):
    doc = _document(client)
    bodies = {(m, p) for p, ops in doc["paths"].items() for m, op in ops.items()
              if isinstance(op, dict) and "application/json" in op.get("requestBody", {}).get("content", {})}
    assert bodies == set(OPERATIONS)


def _target(world, role: str, day: int):
    ids = {"trip": world.trip.id, "dated": world.dated.id, "locked": world.locked.id, "foreign": world.foreign.id}
    db.session.rollback()
    trip = db.session.get(Trip, ids[role]) if role in ids else None
    trip_id = trip.id if trip is not None else UNKNOWN
    stage_id = trip.stages[day % len(trip.stages)].id if trip is not None and trip.stages else UNKNOWN
    return trip_id, stage_id, (trip.version if trip is not None else 1)


def _judge(response, ledger, before, what: str) -> str:
    assert response.status_code < 500, f"{what}: HTTP {response.status_code} {response.data[:300]!r}"
    if response.status_code < 400:
        return "accepted"
    raw = response.get_data(as_text=True)
    assert response.mimetype in ("application/problem+json", "application/json"), (what, response.mimetype)
    body = json.loads(raw)
    assert_bounded_message(raw, what)
    texts = [body.get("detail"), body.get("title"), body.get("error_description"),
             *(body.get("errors") or {}).values()]
    for text in texts:
        assert text is None or (isinstance(text, str) and len(text) <= MESSAGE_MAX), (what, str(text)[:200])
    ledger.assert_unchanged(before, what)
    return "refused"


@pytest.mark.parametrize("method,path", OPERATIONS)
@given(data=st.data(), role=ROLES, day=st.integers(0, 5), if_match=IF_MATCH, raw=st.integers(0, 7))
@fuzz_settings(50)
def test_fuzz_rest_bodies(client, world, ledger, unlimited, method, path, data, role, day, if_match, raw):
    doc = once(world, "openapi", lambda: _document(client))
    schema = _body_schema(doc, method, path)
    trip_id, stage_id, version = _target(world, role, day)
    if raw == 0:
        body = data.draw(RAW)
    else:
        value = data.draw(once(world, f"body:{method}:{path}", lambda: hostile_object(schema, doc, REST_OVERRIDES)))
        if isinstance(value, dict):
            value = resolve_coords(value, db.session.get(Trip, trip_id), stage_id)
        body = dumps(value)
    headers = {**world.rest, "Content-Type": "application/json"}
    headers["If-Match"] = {"current": f'"{version}"', "stale": f'"{version + 1}"', "*": "*", "absent": None,
                           "garbage": data.draw(st.sampled_from(HOSTILE_TEXT[:4] + ['"x"', "1", '"-1"'])),
                           "weak": f'W/"{version}"'}[if_match]
    if path == "/api/trips":
        headers["Idempotency-Key"] = data.draw(st.one_of(st.text("abcdef0123456789", min_size=16, max_size=32),
                                                         st.sampled_from(["", "short", "x" * 300])))
    headers = {k: v.replace("\r", " ").replace("\n", " ") for k, v in headers.items() if v is not None}
    url = path.replace("{trip_id}", trip_id).replace("{stage_id}", stage_id)
    what = f"{method.upper()} {path}"
    with bounded_case("rest body"):
        before = ledger.look()
        response = client.open(url, method=method.upper(), data=body, headers=headers)
        outcome = _judge(response, ledger, before, what)
    OUTCOMES[("rest " + what, outcome if outcome == "accepted" else str(response.status_code))] += 1
    if role == "foreign" and "{trip_id}" in path:
        assert response.status_code in (400, 404, 415, 422, 428), (what, response.status_code)
        assert response.status_code != 200


# ------------------------------------------------------------------ dynamic client registration (RFC 7591)

URIS = st.sampled_from(["https://agent.example/cb", "http://127.0.0.1:8765/cb", "http://[::1]/cb",
                        "com.example.app:/cb", "https://[::1", "http://127.0.0.1:99999/", "https://a.example/#f",
                        "javascript:alert(1)", "https://user@a.example/", "", LONG, "https://a.example/\ud800"])
REGISTRATION = st.fixed_dictionaries({}, optional={
    "redirect_uris": st.one_of(st.lists(URIS, min_size=1, max_size=3), json_values(3)),
    "client_name": st.one_of(st.sampled_from(HOSTILE_TEXT), json_values(2)),
    "token_endpoint_auth_method": st.one_of(st.just("none"), json_values(2)),
    "grant_types": st.one_of(st.just(["authorization_code"]), st.lists(json_values(2), max_size=3)),
    "response_types": st.one_of(st.just(["code"]), json_values(2)),
    "extra": json_values(3)})


@given(body=st.one_of(REGISTRATION, REGISTRATION, json_values(4)))
@example(body={"redirect_uris": ["https://agent.example/cb"], "grant_types": [["authorization_code"]]})
@example(body={"redirect_uris": ["https://agent.example/cb"], "grant_types": [{}]})
@fuzz_settings(150)
def test_fuzz_client_registration(client, app, ledger, unlimited, body):
    with bounded_case("registration body"):
        before = ledger.look()
        response = client.post("/oauth/register", data=dumps(body), headers={"Content-Type": "application/json"})
        assert response.status_code < 500, response.data[:300]
        if response.status_code >= 400:
            raw = response.get_data(as_text=True)
            assert_bounded_message(raw, "a registration refusal")
            assert len(response.get_json()["error_description"]) <= MESSAGE_MAX
            ledger.assert_unchanged(before, "registration")
    OUTCOMES[("registration", "refused" if response.status_code >= 400 else "registered")] += 1
