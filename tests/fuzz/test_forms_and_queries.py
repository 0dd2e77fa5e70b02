"""Hostile text without a JSON body: the OAuth token and revocation forms, and the query strings of the REST reads
(GET /api/trips, GET /api/geocode/search). Every case: no 5xx, no hang; a refusal is bounded and commits nothing."""
from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import HOSTILE_TEXT
from tests.fuzz.support import LONG, OUTCOMES, assert_bounded_message, bounded_case, fuzz_settings

pytestmark = pytest.mark.slow

FORM_TEXT = st.one_of(st.sampled_from([t for t in HOSTILE_TEXT if "\ud800" not in t and "\udfff" not in t
                                       and "\udc00" not in t]), st.text(max_size=20).filter(
    lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t)))
GRANTS = st.one_of(st.sampled_from(["authorization_code", "refresh_token", "client_credentials", "password",
                                    "urn:ietf:params:oauth:grant-type:device_code", "implicit", ""]), FORM_TEXT)
TOKEN_FORM = st.fixed_dictionaries({"grant_type": GRANTS}, optional={
    "code": FORM_TEXT, "redirect_uri": st.sampled_from(["https://agent.example/cb", "http://127.0.0.1/cb", LONG, ""]),
    "code_verifier": st.one_of(st.text("abcXYZ012-._~", min_size=43, max_size=128), FORM_TEXT),
    "client_id": st.one_of(st.sampled_from(["https://agent.example/client.json", "btp_client_x"]), FORM_TEXT),
    "refresh_token": FORM_TEXT, "scope": st.sampled_from(["trips:read", "trips:read trips:write", "admin", LONG]),
    "resource": st.sampled_from(["http://localhost/mcp", "https://evil.example/", LONG]),
    "client_secret": FORM_TEXT})
REVOKE_FORM = st.fixed_dictionaries({}, optional={"token": FORM_TEXT, "token_type_hint": FORM_TEXT,
                                                  "client_id": FORM_TEXT})
CONTENT_TYPES = st.sampled_from(["application/x-www-form-urlencoded"] * 5
                                + ["application/json", "multipart/form-data", "text/plain", ""])


def _judge(response, ledger, before, what: str) -> None:
    assert response.status_code < 500, f"{what}: HTTP {response.status_code} {response.data[:300]!r}"
    if response.status_code >= 400:
        raw = response.get_data(as_text=True)
        assert_bounded_message(raw, what)
        body = json.loads(raw) if raw and response.is_json else {}
        for key in ("error_description", "detail"):
            assert len(str(body.get(key, ""))) <= 600, (what, str(body.get(key))[:200])
        ledger.assert_unchanged(before, what)
    OUTCOMES[(what, "refused" if response.status_code >= 400 else "accepted")] += 1


@given(endpoint=st.sampled_from(["/oauth/token", "/oauth/token", "/oauth/revoke"]), token_form=TOKEN_FORM,
       revoke_form=REVOKE_FORM, content_type=CONTENT_TYPES, repeat=st.booleans())
@fuzz_settings(200)
def test_fuzz_oauth_forms(client, app, ledger, unlimited, endpoint, token_form, revoke_form, content_type, repeat):
    form = token_form if endpoint == "/oauth/token" else revoke_form
    pairs = list(form.items()) + (list(form.items())[:1] if repeat else [])  # a repeated parameter (RFC 6749 §3.1)
    body = urlencode(pairs).encode() if content_type != "application/json" else json.dumps(form).encode()
    with bounded_case("oauth form"):
        before = ledger.look()
        response = client.post(endpoint, data=body, headers={"Content-Type": content_type} if content_type else {})
        _judge(response, ledger, before, f"POST {endpoint}")


QUERY_TEXT = st.one_of(FORM_TEXT, st.integers(-10, 10 ** 6).map(str), st.sampled_from(
    ["2026-02-30", "2026-01-01", "9999-12-31", "0", "-1", "1e3", "NaN", "30", "31", "100000", "100001", "%00"]))
PLAUSIBLE = {"page": st.integers(1, 3).map(str), "itemsPerPage": st.integers(1, 30).map(str),
             "title": st.sampled_from(["Ver", "dated", "é", "%", "_"]),
             "startDate": st.dates().map(str), "endDate": st.dates().map(str)}
LIST_QUERY = st.builds(lambda plausible, hostile: {**plausible, **hostile},
                       st.fixed_dictionaries({}, optional=PLAUSIBLE),
                       st.dictionaries(st.sampled_from([*PLAUSIBLE, "order", "unknown"]), QUERY_TEXT, max_size=1))
GEOCODE_QUERY = st.builds(lambda plausible, hostile: {**plausible, **hostile}, st.fixed_dictionaries(
    {"q": st.sampled_from(["Paris", "Grenoble", "Gre", "saint", "Łódź", "北京", "a", "new york"])},
    optional={"limit": st.integers(1, 10).map(str)}),
    st.dictionaries(st.sampled_from(["q", "limit", "lang"]), QUERY_TEXT, max_size=1))


@given(which=st.sampled_from(["/api/trips"] * 3 + ["/api/geocode/search"]), trips=LIST_QUERY,
       places=GEOCODE_QUERY, repeat=st.booleans())
@fuzz_settings(200)
def test_fuzz_rest_queries(client, world, ledger, unlimited, gazetteer, which, trips, places, repeat):
    query = trips if which == "/api/trips" else places
    pairs = list(query.items()) + (list(query.items())[:1] if repeat else [])
    with bounded_case("rest query"):
        before = ledger.look()
        response = client.get(f"{which}?{urlencode(pairs)}", headers=world.rest)
        _judge(response, ledger, before, f"GET {which}")
        if response.status_code == 200:
            ledger.assert_unchanged(before, f"GET {which}")  # a read never writes
