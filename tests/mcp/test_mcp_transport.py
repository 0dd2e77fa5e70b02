"""The /mcp transport: HTTP rules, both eras, headers, auth, scopes, budgets and error surfaces."""
import json

import pytest
import sqlalchemy as sa

from tests.factories import auth, make_token, make_user
from tests.mcp_helpers import MODERN, b64, call, legacy, mcp_token, modern, payload
from trips.core.db import db


@pytest.fixture
def user(ctx):
    return make_user("agent-owner@example.org")


@pytest.fixture
def token(app, user):
    return mcp_token(app, user)


def error_of(response):
    return response.get_json()["error"]


def test_get_and_delete_are_405(client):
    assert client.get("/mcp").status_code == 405
    assert client.delete("/mcp").status_code == 405


def test_origin_is_checked(app, client, token, monkeypatch):
    assert modern(client, token, "tools/list", headers={"Origin": "https://evil.example"}).status_code == 403
    assert modern(client, token, "tools/list", headers={"Origin": "http://127.0.0.1:8000"}).status_code == 200
    monkeypatch.setitem(app.config, "BTP_ALLOWED_ORIGINS", "https://claude.ai, https://chatgpt.com")
    assert modern(client, token, "tools/list", headers={"Origin": "https://claude.ai"}).status_code == 200


def test_content_type_json_and_lenient_accept(client, token):
    response = client.post("/mcp", data="{}", headers={"Authorization": f"Bearer {token}",
                                                       "Content-Type": "text/plain"})
    assert response.status_code == 415
    for accept in ("*/*", "application/json", "text/event-stream", None):
        assert modern(client, token, "tools/list", headers={"Accept": accept}).status_code == 200
    # the exact header is taken as it is; anything else is parsed as a media type
    for content_type in ("application/json; charset=utf-8", "Application/JSON", " application/json"):
        assert modern(client, token, "tools/list", headers={"Content-Type": content_type}).status_code == 200
    for content_type in ("application/jsonx", "application/json-seq", "text/json", "", "application/ json"):
        answer = modern(client, token, "tools/list", headers={"Content-Type": content_type})
        assert answer.status_code == 415, content_type


def test_an_mcp_answer_carries_the_security_headers_once(client, token):
    answer = modern(client, token, "tools/list")
    assert answer.status_code == 200
    for name in ("Content-Security-Policy", "X-Content-Type-Options", "Referrer-Policy"):
        assert len(answer.headers.getlist(name)) == 1, name
    assert answer.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]


def test_malformed_json_and_envelopes(client, token):
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for junk in ("{not json", "[" * 100_000):
        bad = client.post("/mcp", data=junk, headers=headers)
        assert bad.status_code == 400 and error_of(bad)["code"] == -32700
    for body in ({"jsonrpc": "1.0", "method": "x", "id": 1}, {"jsonrpc": "2.0", "id": 1},
                 {"jsonrpc": "2.0", "method": "ping", "id": None}, {"jsonrpc": "2.0", "method": "ping", "params": [1], "id": 1}):
        response = client.post("/mcp", data=json.dumps(body), headers=headers)
        assert response.status_code == 400 and error_of(response)["code"] == -32600, body


def test_unknown_methods(client, token):
    response = modern(client, token, "resources/list")
    assert response.status_code == 404 and error_of(response)["code"] == -32601
    for removed in ("initialize", "ping"):
        assert modern(client, token, removed).status_code == 404
    old = legacy(client, token, "resources/list")
    assert old.status_code == 200 and error_of(old)["code"] == -32601


@pytest.mark.parametrize("headers,code", [
    ({"MCP-Protocol-Version": None}, -32020),
    ({"MCP-Protocol-Version": "2025-11-25"}, -32020),
    ({"Mcp-Method": None}, -32020),
    ({"Mcp-Method": "TOOLS/CALL"}, -32020),
    ({"Mcp-Name": ""}, -32020),
    ({"Mcp-Name": "get_stage"}, -32020),
    ({"Mcp-Name": "=?base64?not base64?="}, -32020),
])
def test_header_mirror_mismatches(client, token, headers, code):
    sent = dict(headers)
    name = sent.pop("Mcp-Name", None)
    response = modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}}, headers=sent,
                      name_header=name)
    assert response.status_code == 400 and error_of(response)["code"] == code


def test_header_values_decoded_and_trimmed(client, token):
    for name in (b64("list_trips"), "  list_trips  ", f" {b64('list_trips')} "):
        response = modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}}, name_header=name)
        assert response.status_code == 200 and "result" in response.get_json()
    spaced = modern(client, token, "tools/list", headers={"Mcp-Method": " tools/list ",
                                                          "MCP-Protocol-Version": f" {MODERN} "})
    assert spaced.status_code == 200


def test_modern_requests_need_their_meta(client, token):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}}
    response = client.post("/mcp", data=json.dumps(body), headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list"})
    assert response.status_code == 400 and error_of(response)["code"] == -32602
    unknown = client.post("/mcp", data=json.dumps({**body, "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {}}}}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                 "MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
    assert unknown.status_code == 400 and error_of(unknown)["code"] == -32022
    assert error_of(unknown)["data"]["supported"] == [MODERN]


@pytest.mark.parametrize("header,claim,code", [(MODERN, "2099-01-01", -32020), ("2099-01-01", MODERN, -32020),
                                               ("2099-01-01", "2099-01-01", -32022)])
def test_a_header_that_disagrees_with_its_claim_is_a_mismatch_before_any_version_check(client, token, header,
                                                                                        claim, code):
    body = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": claim, "io.modelcontextprotocol/clientCapabilities": {}}}}
    response = client.post("/mcp", data=json.dumps(body), headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "MCP-Protocol-Version": header,
        "Mcp-Method": "tools/list"})
    assert response.status_code == 400 and error_of(response)["code"] == code
    assert response.get_json()["id"] == 5


def test_discover_and_list_results(client, token):
    discover = modern(client, token, "server/discover").get_json()["result"]
    assert discover["resultType"] == "complete" and discover["supportedVersions"] == [MODERN]
    assert discover["cacheScope"] == "public" and discover["ttlMs"] > 0
    assert discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bike-trip-planner"
    listing = modern(client, token, "tools/list").get_json()["result"]
    assert listing["resultType"] == "complete" and listing["cacheScope"] == "private"
    assert "_meta" in listing and len(listing["tools"]) == 13
    result = call(client, token, "list_trips")
    assert result["resultType"] == "complete" and "_meta" in result


@pytest.mark.parametrize("asked,answered", [("2025-03-26", "2025-03-26"), ("2025-06-18", "2025-06-18"),
                                            ("2025-11-25", "2025-11-25"), ("2026-07-28", "2025-11-25"),
                                            ("1999-01-01", "2025-11-25")])
def test_handshake_era_is_stateless(client, token, asked, answered):
    response = legacy(client, token, "initialize", {"protocolVersion": asked, "capabilities": {},
                                                    "clientInfo": {"name": "t", "version": "1"}}, version=None)
    assert response.status_code == 200 and "Mcp-Session-Id" not in response.headers
    result = response.get_json()["result"]
    assert result["protocolVersion"] == answered and "resultType" not in result
    assert legacy(client, token, "notifications/initialized", notification=True).status_code == 202
    assert legacy(client, token, "ping").get_json()["result"] == {}
    listed = legacy(client, token, "tools/list").get_json()["result"]
    assert len(listed["tools"]) == 13 and "resultType" not in listed


def test_batches_only_on_2025_03_26_and_judged_per_message(app, client, user):
    reader = mcp_token(app, user, "trips:read")
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_trips", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "delete_trip",
                                                                           "arguments": {"id": "x"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 3, "method": "nope"}]
    headers = {"Authorization": f"Bearer {reader}", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-03-26"}
    answers = {a["id"]: a for a in client.post("/mcp", data=json.dumps(batch), headers=headers).get_json()}
    assert "result" in answers[1] and answers[2]["error"]["data"] == {"error": "insufficient_scope",
                                                                     "scope": "trips:write"}
    assert "confirmationToken" not in json.dumps(answers) and answers[3]["error"]["code"] == -32601
    later = client.post("/mcp", data=json.dumps(batch), headers={**headers, "MCP-Protocol-Version": "2025-06-18"})
    assert later.status_code == 400 and error_of(later)["code"] == -32600


def test_a_batch_answers_every_element_whatever_a_sibling_does(app, client, user, monkeypatch):
    """An edit commits in the first element; a tool that raises, an answer JSON cannot encode and a read follow:
    the edit is committed AND reported, the broken ones are -32603, the read still answers."""
    import dataclasses
    import io

    from mcp.tools import BY_NAME
    from mcp.tools.base import Content
    from tests.fakes.thirdparty import gpx_from_points, make_points
    from trips.models import Trip
    from trips.services.trips import import_gpx

    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400))), {})
    stage = trip.stages[0].id

    def explode(ctx, args):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(BY_NAME, "list_trips", dataclasses.replace(BY_NAME["list_trips"], run=explode))
    monkeypatch.setitem(BY_NAME, "search_places", dataclasses.replace(
        BY_NAME["search_places"], run=lambda ctx, args: Content([{"type": "text", "text": b"not JSON"}])))
    call_ = {"jsonrpc": "2.0", "method": "tools/call"}
    batch = [{**call_, "id": 1, "params": {"name": "edit_stages", "arguments": {
                 "tripId": trip.id, "action": "rest_day", "stageId": stage, "version": 1}}},
             {**call_, "id": 2, "params": {"name": "list_trips", "arguments": {}}},
             {**call_, "id": 3, "params": {"name": "search_places", "arguments": {"q": "Grenoble"}}},
             {**call_, "id": 4, "params": {"name": "get_trip", "arguments": {"id": trip.id}}}]
    response = client.post("/mcp", data=json.dumps(batch), headers={
        "Authorization": f"Bearer {mcp_token(app, user)}", "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-03-26"})
    assert response.status_code == 200
    answers = {a["id"]: a for a in response.get_json()}
    assert payload(answers[1]["result"])["version"] == 2
    assert answers[2]["error"]["code"] == -32603 and "disk on fire" not in response.get_data(as_text=True)
    assert answers[3]["error"]["code"] == -32603
    assert payload(answers[4]["result"])["version"] == 2
    db.session.rollback()
    assert db.session.get(Trip, trip.id).version == 2  # committed, and the client was told so


def test_every_401_carries_the_challenge_and_says_why(app, client, user):
    """The reasons themselves, REST's and the CLI's: tests/oauth/test_token_refusals.py."""
    rest_token = make_token(user)
    expired = mcp_token(app, user)
    from oauth.kernel.models import AccessToken
    from trips.core.db import utcnow

    db.session.execute(sa.update(AccessToken).where(AccessToken.client_id == "test-client")
                       .values(expires_at=utcnow()))
    db.session.commit()
    answers = [modern(client, t, "tools/list") for t in (rest_token, "btp_at_invented", expired, "not-ours")]
    anonymous = modern(client, None, "tools/list", headers={"Authorization": None})
    for response in answers + [anonymous]:
        assert response.status_code == 401
        challenge = response.headers["WWW-Authenticate"]
        assert 'resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"' in challenge
        assert 'scope="trips:read trips:write"' in challenge
    said = [r.get_json()["error_description"] for r in answers]
    assert said[0].startswith("The token was issued for another audience (api)")
    assert said[1] == said[3] == "The token is unknown or malformed."
    assert answers[1].get_data() == answers[3].get_data()  # nothing tells which tokens exist
    assert said[2] == "The token has expired."
    for response, words in zip(answers, said):
        assert response.get_json()["error"] == "invalid_token"
        assert f'error="invalid_token", error_description="{words}"' in response.headers["WWW-Authenticate"]
    assert "error=" not in anonymous.headers["WWW-Authenticate"]
    assert anonymous.get_json()["error"] == "unauthorized"
    agent = mcp_token(app, user)
    assert client.get("/api/trips", headers=auth(agent)).status_code == 401


def test_scopes_filter_the_list_and_refuse_calls(app, client, user):
    reader, writer = mcp_token(app, user, "trips:read"), mcp_token(app, user, "trips:write")
    names = [t["name"] for t in modern(client, reader, "tools/list").get_json()["result"]["tools"]]
    assert names == ["list_trips", "get_trip", "get_stage", "search_places"]
    refused = modern(client, reader, "tools/call", {"name": "delete_trip", "arguments": {"id": "x"}},
                     name_header=b64("delete_trip"))
    assert refused.status_code == 403 and "insufficient_scope" in refused.get_data(as_text=True)
    assert 'error="insufficient_scope", resource_metadata=' in refused.headers["WWW-Authenticate"]
    assert 'scope="trips:write"' in refused.headers["WWW-Authenticate"]
    assert "confirmationToken" not in refused.get_data(as_text=True)
    read = modern(client, writer, "tools/call", {"name": "get_trip", "arguments": {"id": "x"}})
    assert read.status_code == 403 and 'scope="trips:read"' in read.headers["WWW-Authenticate"]


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", None])
def test_a_single_message_steps_up_in_every_era(app, client, user, version):
    reader = mcp_token(app, user, "trips:read")
    refused = legacy(client, reader, "tools/call", {"name": "delete_trip", "arguments": {"id": "x"}}, version=version)
    assert refused.status_code == 403 and refused.get_json()["error"] == "insufficient_scope"
    challenge = refused.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="trips:write"' in challenge
    assert "confirmationToken" not in refused.get_data(as_text=True)
    allowed = legacy(client, reader, "tools/call", {"name": "list_trips", "arguments": {}}, version=version)
    assert allowed.status_code == 200 and "result" in allowed.get_json()


def test_unknown_tool_is_invalid_params(client, token):
    body = modern(client, token, "tools/call", {"name": "drop_tables\nnow", "arguments": {}},
                  name_header=b64("drop_tables\nnow")).get_json()
    assert body["error"]["code"] == -32602 and "\n" not in body["error"]["message"]


def test_unexpected_failures_hide_their_text(client, token, monkeypatch):
    import dataclasses

    from mcp.tools import BY_NAME

    def explode(ctx, args):
        raise RuntimeError("database password is hunter2")

    monkeypatch.setitem(BY_NAME, "list_trips", dataclasses.replace(BY_NAME["list_trips"], run=explode))
    response = modern(client, token, "tools/call", {"name": "list_trips", "arguments": {}},
                      headers={"X-Request-Id": "req-4711"})
    body = response.get_json()
    assert body["error"]["code"] == -32603 and "hunter2" not in json.dumps(body)
    # The message names the request's own id, as the X-Request-Id header and the log line do.
    assert "req-4711" in body["error"]["message"] and response.headers["X-Request-Id"] == "req-4711"


def test_call_and_write_budgets(app, client, user, monkeypatch):
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_calls", (5, 60))  # as BTP_LIMIT_MCP_CALLS=5/60 would
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_writes", (2, 60))
    token = mcp_token(app, user)
    results = [call(client, token, "list_trips") for _ in range(6)]
    assert [r["isError"] for r in results] == [False] * 5 + [True]
    error = payload(results[-1])["error"]
    assert error["code"] == "rate_limited" and isinstance(error["retryAfter"], int)
    other = mcp_token(app, user, client_id="other-client")
    writes = [call(client, other, "share_trip", {"tripId": "0192f000-0000-7000-8000-000000000000"})
              for _ in range(3)]
    assert [payload(w)["error"]["code"] for w in writes] == ["not_found", "not_found", "rate_limited"]


def test_address_envelope(app, client, token, monkeypatch):
    monkeypatch.setitem(app.config["BTP_LIMITS"], "mcp_address", (3, 60))
    codes = [modern(client, token, "tools/list").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    assert modern(client, None, "tools/list", headers={"Authorization": None}).status_code == 429  # before auth


def test_last_use_is_stamped_after_a_call_at_most_every_five_minutes(app, client, user):
    from oauth.kernel.models import Grant
    from oauth.services.server import record_grant

    token = mcp_token(app, user)
    with app.app_context():
        record_grant(user.id, "test-client", "trips:read trips:write")
        db.session.commit()
    modern(client, token, "tools/list")
    assert db.session.scalar(sa.select(Grant.last_used_at)) is None
    call(client, token, "list_trips")
    db.session.rollback()
    first = db.session.scalar(sa.select(Grant.last_used_at))
    assert first is not None
    call(client, token, "list_trips")
    db.session.rollback()
    assert db.session.scalar(sa.select(Grant.last_used_at)) == first


def test_the_request_pipeline_order_is_pinned():
    from mcp.endpoint import PIPELINE

    assert [step.__name__ for step in PIPELINE] == [
        "check_origin", "limit_address", "authenticate", "check_content_type", "parse_body", "classify",
        "scope_of_single_call"]


def test_arguments_annotated_x_mcp_header_are_mirrored(app, client, token, monkeypatch):
    """SEP-2243 Mcp-Param-*: present and equal (decoded; integers numerically), else 400 / -32020."""
    from mcp.tools import Registry
    from mcp.tools.base import Content, Tool

    echo = Tool(name="echo", title="Echo", description="Echo.", scope="trips:read", output_schema=None,
                input_schema={"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"},
                                                               "count": {"type": "integer", "x-mcp-header": "Count"},
                                                               "note": {"type": "string"}}},
                run=lambda ctx, args: Content([{"type": "text", "text": "ok"}]))
    monkeypatch.setitem(app.extensions, "mcp.tools", Registry([echo]))

    def status(arguments, headers):
        response = modern(client, token, "tools/call", {"name": "echo", "arguments": arguments}, headers=headers)
        body = response.get_json()
        return response.status_code, body.get("error", {}).get("code")

    assert status({"region": "Drôme", "count": 7}, {"Mcp-Param-Region": b64("Drôme"), "Mcp-Param-Count": "07"}) == \
        (200, None)
    assert status({"note": "no header needed"}, {}) == (200, None)
    assert status({"region": "Vercors"}, {}) == (400, -32020)
    assert status({"region": "Vercors"}, {"Mcp-Param-Region": "Chartreuse"}) == (400, -32020)
    assert status({"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8?="}) == (400, -32020)  # bad padding
    assert status({"count": 7}, {"Mcp-Param-Count": "8"}) == (400, -32020)
    assert status({"count": 2}, {"Mcp-Param-Count": b64("²")}) == (400, -32020)  # a digit to isdigit(), not to int()
    listed = modern(client, token, "tools/list").get_json()["result"]["tools"]
    assert [t["name"] for t in listed] == ["echo"] and "outputSchema" not in listed[0]
