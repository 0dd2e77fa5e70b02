"""The official TypeScript SDK client (tests/ts_client/client.mjs, Node 22 from tests/node_tools.py) drives BTP's /mcp
under gunicorn: the tool list, every read tool, and the refusals an agent meets, read through its own `callTool`, which
validates structuredContent against the outputSchema. SDK 1.x at 2025-11-25 and the 2.x client at 2026-07-28; a stand-in
server with a refusal in structuredContent is the negative control. Without npm the tests fail, saying why."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests import node_tools
from tests.live import ROOT, Live
from tests.ts_client.old_refusal_server import old_refusal_server
from tests.ts_client.scene import (THIRTEEN, UNKNOWN, Scene, btp, last_json_line, node_folder, require_node_tools,
                                   run_node, scene)
from trips.core.db import db
from trips.models import Trip

pytestmark = pytest.mark.slow
__all__ = ["Scene", "btp", "node_folder", "scene"]  # fixtures of tests/ts_client/scene.py, used by name

CLIENT = ROOT / "tests" / "ts_client" / "client.mjs"
MODERN = "2026-07-28"


def run_ts_client(node_folder: Path, url: str, token: str, plan: list[dict], server_log: str = "",
                  sdk: tuple[str, str] = ("v1", "legacy")) -> dict:
    """The SDK client's one JSON report for `plan` against the MCP endpoint `url` (see tests/ts_client/client.mjs),
    `sdk` being (--sdk, --negotiation). Fails the test if the client printed no report or stopped outside a step."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="btp-plan-", delete=False) as sink:
        json.dump(plan, sink)
    try:
        done = run_node(node_folder, CLIENT, ["--url", url, "--token", token, "--plan", sink.name,
                                              "--sdk", sdk[0], "--negotiation", sdk[1]],
                        "the TypeScript SDK client", server_log)
    finally:
        Path(sink.name).unlink(missing_ok=True)
    report = last_json_line(done.stdout)
    assert report is not None, (f"the TypeScript SDK client printed no JSON (exit {done.returncode})\nstdout: "
                                f"{done.stdout[-2000:]}\nstderr: {done.stderr[-4000:]}\nserver log:\n{server_log}")
    assert done.returncode == 0 and "error" not in report, (
        f"the TypeScript SDK client failed: {json.dumps(report, indent=1)[:6000]}\nstderr: {done.stderr[-3000:]}\n"
        f"server log:\n{server_log}")
    return report


def refusal(result: dict) -> dict:
    """The `error` a refusal's text block carries; asserts the SDK read it as a refusal without throwing."""
    assert result["threw"] is None, f"the SDK threw on {result['tool']}: {result['threw']}"
    assert result["isError"] is True, f"{result['tool']} was not refused: {result}"
    assert result["structuredContent"] is None, (
        f"{result['tool']}: a refusal must carry no structuredContent (the SDK validates it against the "
        f"outputSchema): {result['structuredContent']}")
    error = json.loads(result["text"])["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"].strip(), error
    return error


# SDK 1.x knows only the initialize era (2025-11-25 at newest); the 2.x client's `auto` probes with
# server/discover and, BTP answering it, settles on 2026-07-28 with no initialize at all.
LEGS = {("v1", "legacy"): ("1.", "2025-11-25", "legacy"), ("v2", "auto"): ("2.", MODERN, "modern")}


@pytest.mark.parametrize("sdk", list(LEGS), ids=lambda leg: "-".join(leg))
def test_the_typescript_sdk_reads_every_read_answer_and_every_refusal(sdk, node_folder, btp: Live, scene: Scene):
    stage = scene.stage_ids[0]
    plan = [
        {"tool": "list_trips", "arguments": {}},
        {"tool": "get_trip", "arguments": {"id": scene.trip_id}},
        {"tool": "get_stage", "arguments": {"tripId": scene.trip_id, "stageId": stage}},
        {"tool": "search_places", "arguments": {"q": "Grenoble"}},
        {"tool": "get_trip", "arguments": {"id": UNKNOWN}},  # 4: unknown trip
        {"tool": "get_stage", "arguments": {"tripId": UNKNOWN, "stageId": stage}},  # 5: unknown trip
        # 6 moves the version on; 7 then sends the version it had read before: stale.
        {"tool": "edit_stages", "arguments": {"tripId": scene.trip_id, "action": "rest_day", "stageId": stage,
                                              "version": scene.version}},
        {"tool": "choose_accommodation", "arguments": {"tripId": scene.trip_id, "stageId": stage,
                                                       "version": scene.version}},
        # 8, 9: the started trip, with its current version: locked all the same.
        {"tool": "edit_stages", "arguments": {"tripId": scene.locked_id, "action": "rest_day",
                                              "stageId": scene.locked_stage_id, "version": scene.locked_version}},
        {"tool": "choose_accommodation", "arguments": {"tripId": scene.locked_id, "stageId": scene.locked_stage_id,
                                                       "version": scene.locked_version}},
    ]
    report = run_ts_client(node_folder, f"{btp.url}/mcp", scene.token, plan, btp.log_tail(), sdk)

    major, version, era = LEGS[sdk]
    assert report["sdkVersion"].startswith(major), report["sdkVersion"]
    assert (report["protocolVersion"], report["protocolEra"]) == (version, era), report["http"][:3]
    assert set(report["tools"]) == THIRTEEN and len(report["tools"]) == 13, report["tools"]
    assert set(report["outputSchemas"]) == THIRTEEN, "every tool declares an outputSchema the SDK validates against"
    # The negative control: the SDK's own validator rejects the refusal shape as get_trip's output, so a refusal
    # sent as structuredContent would have thrown in callTool instead of reaching the agent.
    assert report["control"]["refusalShapeValid"] is False, report["control"]

    results = report["results"]
    assert [r["tool"] for r in results] == [s["tool"] for s in plan], results
    for result in results[:4] + results[6:7]:
        assert result["threw"] is None, f"the SDK threw on {result['tool']}: {result['threw']}"
        assert result["isError"] is False, f"{result['tool']} was refused: {result['text']}"
        assert isinstance(result["structuredContent"], dict), result
        assert json.loads(result["text"]) == result["structuredContent"], (
            f"{result['tool']}: the text block is not the structuredContent JSON")
    assert any(t["id"] == scene.trip_id for t in results[0]["structuredContent"]["member"]), results[0]
    assert results[1]["structuredContent"]["id"] == scene.trip_id
    assert results[6]["structuredContent"]["version"] > scene.version

    for index in (4, 5):
        error = refusal(results[index])
        assert error["code"] == "not_found" and "not found" in error["message"].lower(), error
    error = refusal(results[7])
    assert error["code"] == "stale_version", error
    for index in (8, 9):
        error = refusal(results[index])
        assert error["code"] == "locked", error

    db.session.rollback()  # a new snapshot: the server's commits are visible
    trip = db.session.get(Trip, scene.trip_id)
    assert trip.version == results[6]["structuredContent"]["version"], "the stale call changed nothing"
    assert db.session.get(Trip, scene.locked_id).version == scene.locked_version, "the locked trip is untouched"

    posts = [h for h in report["http"] if h["method"] == "POST"]
    assert posts and all(h["status"] < 400 for h in posts), report["http"]
    if era == "modern":  # every request says its method (and tool) in headers; nothing is initialized
        assert all(h["protocolVersionHeader"] == MODERN and h["mcpHeaders"].get("mcp-method") == h["mcpMethod"]
                   for h in posts), report["http"]
        assert {h["mcpHeaders"].get("mcp-name") for h in posts if h["mcpMethod"] == "tools/call"} \
            == {s["tool"] for s in plan}, report["http"]
        assert "initialize" not in {h["mcpMethod"] for h in posts}, report["http"]
    else:
        assert all(h["protocolVersionHeader"] == version for h in posts if h["mcpMethod"] != "initialize")


def test_the_sdk_throws_on_a_refusal_carried_as_structured_content(node_folder):
    """The negative control: a server answering a refusal the way BTP must not (structuredContent
    {error: …} next to BTP's real outputSchemas) makes the SDK's callTool throw, so the agent never reads the
    refusal; this is the failure the test above would report if BTP regressed."""
    with old_refusal_server() as url:
        report = run_ts_client(node_folder, url, "any-token", [{"tool": "get_trip", "arguments": {"id": UNKNOWN}}])
    assert set(report["outputSchemas"]) == THIRTEEN
    (result,) = report["results"]
    assert result["threw"] and "Structured content does not match the tool's output schema" in result["threw"], result
    assert "isError" not in result, "the agent got no result at all"


def test_without_npm_the_clients_fail_the_run_and_say_why(tmp_path, monkeypatch):
    """No npm (and nothing installed yet): the TypeScript-client tests fail naming the cause; a silent skip would
    let CI pass without ever running the clients."""
    monkeypatch.setattr(node_tools, "CACHE", tmp_path / "node-tools")
    monkeypatch.setattr(node_tools.shutil, "which", lambda name: None)
    with pytest.raises(pytest.fail.Exception, match="cannot be installed: npm is not installed on this machine"):
        require_node_tools()
