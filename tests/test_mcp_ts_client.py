"""The official TypeScript SDK client (npm `@modelcontextprotocol/sdk` 1.x, on Node 22) drives BTP's /mcp under
gunicorn: it lists the thirteen tools, calls every read tool, and reads the refusals an agent meets (an unknown
trip, a stale version, a started trip) through its own `callTool`, which validates structuredContent against the
tool's outputSchema. Before issue 8 a refusal carried `structuredContent: {error: …}`, the SDK threw "Structured
content does not match the tool's output schema" and the agent never read "Trip not found".

Node 22 and the SDK come from tests/node_tools.py (.cache/node-tools); without npm the tests FAIL, naming why,
so CI notices. tests/ts_client/client.mjs is the client; it prints one JSON report asserted on here.
"""
from __future__ import annotations

import io
import json
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from oauth.tokens import issue_token
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.live import ROOT, Live, gunicorn
from tests.node_tools import NodeToolsUnavailable, node_binary, node_env, node_tools
from trips.db import atomic, db
from trips.models import Trip
from trips.services import import_gpx

pytestmark = pytest.mark.slow

CLIENT = ROOT / "tests" / "ts_client" / "client.mjs"
CLIENT_TIMEOUT = 90  # seconds for one whole node run (start, connect, list, every step)
UNKNOWN = "0192f000-0000-7000-8000-000000000000"
THIRTEEN = {
    "list_trips", "get_trip", "get_stage", "search_places", "create_trip", "update_trip_settings", "edit_stages",
    "add_waypoint", "choose_accommodation", "analyze_trip", "share_trip", "unshare_trip", "delete_trip",
}
READ_TOOLS = ("list_trips", "get_trip", "get_stage", "search_places")


@pytest.fixture(scope="module")
def node_folder() -> Path:
    """The folder holding Node 22 and the npm clients. An install that cannot happen FAILS the tests (never a
    skip): CI must notice that the clients nobody here wrote were not run."""
    try:
        return node_tools()
    except NodeToolsUnavailable as exc:
        pytest.fail(f"the npm MCP clients cannot be installed: {exc}")


@pytest.fixture(scope="module")
def btp(app, app_config, tmp_path_factory):
    """gunicorn (two workers) on the test configuration; its BTP_BASE_URL is where it listens, so the MCP
    resource, the tokens' audience, is `{url}/mcp`: the address the clients call."""
    with gunicorn(app_config, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log", own_base_url=True) as live:
        yield live


@dataclass
class Scene:
    token: str
    trip_id: str
    stage_ids: list
    version: int
    locked_id: str
    locked_stage_id: str
    locked_version: int


@pytest.fixture
def scene(ctx, btp) -> Scene:
    """A fresh account with two GPX trips with their days: one open, one started today (so locked, C42), and an
    MCP token whose audience is the live server's resource."""
    user = make_user(f"ts-sdk-{secrets.token_hex(4)}@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="TS ride")), {})
    started = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Started ride")), {})
    with atomic():
        db.session.get(Trip, started.id).start_date = date.today()
        token = issue_token(user, f"{btp.url}/mcp", "trips:read trips:write", 3600, client_id="ts-sdk-test")
    return Scene(token, trip.id, [s.id for s in trip.stages], trip.version, started.id, started.stages[0].id,
                 started.version)


def run_node(node_folder: Path, btp: Live, script: Path, args: list[str], what: str) -> subprocess.CompletedProcess:
    """Run a Node 22 program from a temporary directory (nothing of the repository as its cwd), the SDK found
    through BTP_NODE_MODULES. Fails the test with the server log if it does not finish."""
    env = node_env(node_folder)
    env["BTP_NODE_MODULES"] = str(node_folder / "node_modules")
    with tempfile.TemporaryDirectory(prefix="btp-node-") as workdir:
        env["HOME"] = workdir  # npm clients keep state under ~: never the real home
        try:
            return subprocess.run([str(node_binary(node_folder)), str(script), *args], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{what} did not finish in {CLIENT_TIMEOUT} s\nstderr: {(exc.stderr or b'')[-3000:]!r}\n"
                        f"server log:\n{btp.log_tail()}")


def run_ts_client(node_folder: Path, btp: Live, token: str, plan: list[dict]) -> dict:
    """The SDK client's one JSON report for `plan` (see tests/ts_client/client.mjs)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="btp-plan-", delete=False) as sink:
        json.dump(plan, sink)
    try:
        done = run_node(node_folder, btp, CLIENT, ["--url", f"{btp.url}/mcp", "--token", token, "--plan", sink.name],
                        "the TypeScript SDK client")
    finally:
        Path(sink.name).unlink(missing_ok=True)
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"the TypeScript SDK client printed no JSON (exit {done.returncode})\nstdout: "
                    f"{done.stdout[-2000:]}\nstderr: {done.stderr[-4000:]}\nserver log:\n{btp.log_tail()}")
    assert done.returncode == 0 and "error" not in report, (
        f"the TypeScript SDK client failed: {json.dumps(report, indent=1)[:6000]}\nstderr: {done.stderr[-3000:]}\n"
        f"server log:\n{btp.log_tail()}")
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


def test_the_typescript_sdk_reads_every_read_answer_and_every_refusal(node_folder, btp, scene):
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
    report = run_ts_client(node_folder, btp, scene.token, plan)

    assert report["sdkVersion"].startswith("1."), report["sdkVersion"]
    # SDK 1.x speaks only the initialize era; its newest revision is 2025-11-25 and BTP accepts it.
    assert report["protocolVersion"] == "2025-11-25", report["protocolVersion"]
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
    assert all(h["protocolVersionHeader"] == "2025-11-25" for h in posts if h["mcpMethod"] != "initialize")
