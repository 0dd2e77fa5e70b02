"""The JSON-RPC envelope of POST /mcp, fuzzed in process: any JSON body, wrong-typed members, batches, odd MCP headers,
bytes that are not JSON. Every case: no HTTP 500, no -32603, no hang; a refusal commits nothing and its messages are
bounded."""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz import rpc
from tests.fuzz.strategies import HOSTILE_TEXT, LONE, dumps, json_values
from tests.fuzz.support import LONG, bounded_case, fuzz_settings
from tests.mcp_helpers import MODERN

pytestmark = pytest.mark.slow

TOOLS = ["list_trips", "get_trip", "get_stage", "search_places", "create_trip", "update_trip_settings",
         "edit_stages", "add_waypoint", "choose_accommodation", "analyze_trip", "share_trip", "unshare_trip",
         "delete_trip"]
METHODS = ["tools/call", "tools/list", "server/discover", "initialize", "ping", "notifications/initialized",
           "notifications/cancelled", "resources/list", "prompts/list", "completion/complete", "logging/setLevel",
           "", " tools/list", "TOOLS/LIST", "tools/call\x00", "tools/" + LONE, "rpc.discover", LONG]
VERSIONS = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2099-01-01", "", "latest", LONG[:300],
            " 2026-07-28 ", "2026-07-28, 2025-11-25"]
CONTENT_TYPES = ["application/json", "application/json; charset=utf-8", "application/json; charset=latin-1",
                 "APPLICATION/JSON", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                 "application/json-rpc", "", None, "application/jsonx"]
ACCEPTS = ["application/json, text/event-stream", "application/json", "text/event-stream", "*/*", "text/html",
           "", None, "application/xml;q=0.9"]
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40)


def _meta():
    return st.one_of(st.just(rpc.META), st.just(rpc.META), st.just({}), json_values(4), st.fixed_dictionaries({
        "io.modelcontextprotocol/protocolVersion": st.one_of(st.sampled_from(VERSIONS), json_values(3)),
        "io.modelcontextprotocol/clientCapabilities": st.one_of(st.just({}), st.just({"elicitation": {}}),
                                                                 json_values(3))}))


def _arguments(world):
    ids = st.sampled_from(world.trip_ids() + ["0192f000-0000-7000-8000-000000000000", "", LONE, LONG])
    return st.one_of(json_values(6), st.fixed_dictionaries({}, optional={
        "id": ids, "tripId": ids, "version": st.one_of(st.integers(0, 5), json_values(2)),
        "stageId": st.sampled_from([s.id for s in world.trip.stages] + ["x"]), "q": st.sampled_from(HOSTILE_TEXT),
        "action": st.sampled_from(["rest_day", "delete", "move", "add", "update", "x"]),
        "title": st.sampled_from(HOSTILE_TEXT)}))


def _params(world):
    return st.one_of(
        st.fixed_dictionaries({"_meta": _meta()}, optional={
            "name": st.one_of(st.sampled_from(TOOLS), st.sampled_from(TOOLS), st.sampled_from(HOSTILE_TEXT),
                              json_values(2)),
            "arguments": _arguments(world),
            "protocolVersion": st.sampled_from(VERSIONS), "cursor": json_values(2),
            "inputResponses": json_values(3), "requestState": json_values(2),
            "capabilities": json_values(3), "clientInfo": json_values(3)}),
        json_values(4))


def _message(world):
    return st.fixed_dictionaries(
        {"jsonrpc": st.one_of(st.just("2.0"), st.just("2.0"), st.sampled_from(["1.0", "2", 2.0, 2, None, "", " 2.0"])),
         "method": st.one_of(st.sampled_from(METHODS[:5]), st.sampled_from(METHODS), json_values(2))},
        optional={"id": st.one_of(st.integers(), st.text(max_size=12), st.just(LONG), st.just(2 ** 80),
                                  json_values(2)),
                  "params": _params(world), "extra": json_values(2)})


_BUILT: dict = {}


def once(world, name: str, build):
    """A strategy built once per world (building one costs more than drawing from it)."""
    key = (id(world), name)
    if key not in _BUILT:
        if len(_BUILT) > 32:
            _BUILT.clear()
        _BUILT[key] = build()
    return _BUILT[key]


DROP = object()
CHOICES = {"MCP-Protocol-Version": VERSIONS, "Mcp-Method": METHODS, "Mcp-Name": TOOLS, "Content-Type": CONTENT_TYPES,
           "Accept": ACCEPTS, "Origin": ["https://evil.example", "null", "http://localhost", ""]}
# What to do to the headers a well-behaved client sends: usually nothing, else spoil one or two of them.
SPOILS = st.lists(st.sampled_from(sorted(CHOICES)).flatmap(lambda header: st.tuples(st.just(header), st.one_of(
    st.just(DROP), st.sampled_from([c for c in CHOICES[header] if c is not None]), HEADER_TEXT))), max_size=2)
TOKENS = st.sampled_from(["owner"] * 6 + ["read", "none", "junk", "long"])
BASE64_NAME = st.booleans()


def _headers(world, message, token: str, spoils: list, base64_name: bool) -> dict:
    method = message.get("method") if isinstance(message, dict) else None
    params = message.get("params") if isinstance(message, dict) else None
    name = params.get("name") if isinstance(params, dict) else None
    token = {"owner": world.token, "read": world.read_token, "none": None, "junk": "not-a-token",
             "long": LONG[:500]}[token]
    sent = rpc.headers(token, method if isinstance(method, str) else None, name if isinstance(name, str) else None)
    if isinstance(name, str) and base64_name:  # surrogatepass: a lone surrogate's bytes, as a hostile client sends
        sent["Mcp-Name"] = "=?base64?" + base64.b64encode(name.encode("utf-8", "surrogatepass")).decode() + "?="
    for header, value in spoils:
        if value is DROP:
            sent.pop(header, None)
        else:
            sent[header] = value
    return {k: rpc.on_the_wire(v) for k, v in sent.items()}


def _encodable(value) -> bool:
    try:
        dumps(value)
    except (ValueError, RecursionError):
        return False
    return True


def _post(client, body: bytes, sent: dict):
    return client.post("/mcp", data=body, headers=sent)


def _run(client, ledger, body: bytes, sent: dict, what: str) -> str:
    with bounded_case("envelope"):
        before = ledger.look()
        outcome = rpc.judge(_post(client, body, sent), ledger, before, what, "envelope")
    return outcome


@given(data=st.data(), token=TOKENS, spoils=SPOILS, base64_name=BASE64_NAME)
@fuzz_settings(600)
def test_fuzz_single_messages(client, world, ledger, unlimited, data, token, spoils, base64_name):
    message = data.draw(once(world, "message", lambda: st.one_of(_message(world), _message(world), json_values(8))))
    if _encodable(message):
        _run(client, ledger, dumps(message), _headers(world, message, token, spoils, base64_name), "single message")


@given(data=st.data())
@fuzz_settings(200)
def test_fuzz_batches(client, world, ledger, unlimited, data):
    size = data.draw(st.sampled_from([0, 1, 2, 3, 5, 8, 100, 101, 1000]), label="size")
    element = once(world, "element", lambda: st.one_of(
        _message(world), st.just({"jsonrpc": "2.0", "method": "ping"}),
        st.just({"jsonrpc": "2.0", "id": 1, "method": "ping"}), json_values(3)))
    drawn = data.draw(st.lists(element, min_size=min(size, 8), max_size=min(size, 8)), label="elements")
    batch = (drawn * (size // max(len(drawn), 1) + 1))[:size] if drawn else []
    if not _encodable(batch):
        return
    sent = rpc.headers(world.token, "tools/call")
    sent.pop("Mcp-Method")
    version = data.draw(st.sampled_from(["2025-03-26", None, MODERN, "2025-11-25"]), label="version")
    if version is None:
        sent.pop("MCP-Protocol-Version")
    else:
        sent["MCP-Protocol-Version"] = version
    _run(client, ledger, dumps(batch), sent, f"batch of {size}")


def _raw_bodies():
    valid = json.dumps(rpc.call_body("list_trips", {}))
    return st.one_of(
        st.binary(max_size=300),
        st.integers(1, len(valid) - 1).map(lambda n: valid[:n].encode()),  # truncated
        st.sampled_from([b"", b" ", b"\x00", b"null", b"[]", b"{}", b"[[]]", b'"' + LONG.encode() + b'"',
                         b"\xef\xbb\xbf" + valid.encode(), valid.encode("utf-16"), valid.encode("utf-32"),
                         valid.encode("utf-16-be"), b"\xff\xfe\x00", valid.replace("7", "NaN").encode(),
                         valid.replace("7", "Infinity").encode(), valid.replace("7", "-Infinity").encode(),
                         valid.replace("7", "1" * 5000).encode(), valid.replace("7", "1e999999").encode(),
                         valid.replace('"list_trips"', '"list_trips\\ud800"').encode(),
                         valid.replace('"2.0"', '"2.0\\u0000"').encode(),
                         valid.replace("7", '"\\udfff"').encode(), valid.replace("{}", '{"a": "\\ud83d"}').encode(),
                         b"{" * 100_000, b"[" * 100_000 + b"]" * 100_000, b"[" * 5_000 + b"]" * 5_000,
                         b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + b"[" * 3000
                         + b"]" * 3000 + b"}", valid.encode() + b"garbage", valid.encode() * 2,
                         b'{"jsonrpc": "2.0", "jsonrpc": "1.0", "id": 1, "method": "ping"}',
                         ("[" + ",".join([valid] * 100) + "]").encode(), valid.encode("latin-1"),
                         b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": '
                         + json.dumps(rpc.META).encode() + b', "pad": "' + b"x" * 2_000_000 + b'"}}']),
        st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    )


@given(body=_raw_bodies(), version=st.sampled_from([MODERN, "2025-03-26", None]))
@example(body=b"[" * 100_000, version=MODERN)
@fuzz_settings(300)
def test_fuzz_raw_bodies(client, world, ledger, unlimited, body, version):
    sent = rpc.headers(world.token, "tools/call", "list_trips")
    if version is None:
        sent.pop("MCP-Protocol-Version")
    else:
        sent["MCP-Protocol-Version"] = version
    _run(client, ledger, body, sent, "raw body")
