"""The MCP Inspector's CLI drives BTP's /mcp under gunicorn as a person trying BTP would (tools/list and tools/call,
both protocol eras): it validates every result against the tool's outputSchema and exits 5 on a refusal, printing it.
HOME is a temporary directory and `--stored-auth-only` keeps it from starting an OAuth login."""
from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from tests.live import Live
from tests.node_tools import package_bin
from tests.ts_client.old_refusal_server import old_refusal_server
from tests.ts_client.scene import THIRTEEN, UNKNOWN, Scene, btp, last_json_line, node_folder, run_node, scene
from trips.core.db import db
from trips.models import Trip

pytestmark = pytest.mark.slow
__all__ = ["btp", "node_folder", "scene"]  # fixtures of tests/ts_client/scene.py, used by name

TOOL_ERROR_EXIT = 5  # the CLI's EXIT_CODES.TOOL_ERROR: the tool answered isError true
READ_CALLS = ("list_trips", "get_trip", "get_stage", "search_places")
META_SERVER = "io.modelcontextprotocol/serverInfo"  # BTP puts it in every 2026-07-28 result's _meta


@dataclass
class Outcome:
    code: int
    out: dict | None  # the JSON envelope on stdout ({"result": …})
    err: dict | None  # the error envelope on stderr ({"error": {code, message}})
    stderr: str


def inspect(node_folder, url: str, token: str, era: str, method: str, tool: str | None = None,
            arguments: dict | None = None, extra: tuple = (), server_log: str = "") -> Outcome:
    """One Inspector CLI run (`--format json`)."""
    args = ["--cli", url, "--transport", "http", "--header", f"Authorization: Bearer {token}", "--stored-auth-only",
            "--protocol-era", era, "--method", method, "--format", "json", *extra]
    if tool is not None:
        args += ["--tool-name", tool, "--tool-args-json", json.dumps(arguments or {})]
    launcher = package_bin("mcp-inspector", node_folder).resolve()
    done = run_node(node_folder, launcher, args, f"the Inspector CLI ({era} {method} {tool or ''})", server_log)
    return Outcome(done.returncode, last_json_line(done.stdout), last_json_line(done.stderr), done.stderr[-3000:])


def read_ok(outcome: Outcome, what: str, era: str) -> dict:
    """A successful tool result's structuredContent; asserts the CLI validated and printed it."""
    assert outcome.code == 0 and outcome.out, f"{what}: exit {outcome.code}, {outcome.err or outcome.stderr}"
    result = outcome.out["result"]
    assert result["isError"] is False and isinstance(result["structuredContent"], dict), f"{what}: {result}"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"], what
    assert (META_SERVER in result.get("_meta", {})) == (era == "modern"), f"{what}: not the {era} leg: {result}"
    return result["structuredContent"]


def readable_refusal(outcome: Outcome, what: str) -> dict:
    """A refusal's `error`: the CLI printed the result (no schema complaint) and exited TOOL_ERROR_EXIT."""
    assert outcome.code == TOOL_ERROR_EXIT, f"{what}: exit {outcome.code}, {outcome.err or outcome.stderr}"
    assert outcome.err["error"]["code"] == "tool_is_error", outcome.err
    result = outcome.out["result"]
    assert result["isError"] is True and "structuredContent" not in result, f"{what}: {result}"
    error = json.loads(result["content"][0]["text"])["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"].strip(), error
    return error


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_lists_reads_and_shows_refusals(era, node_folder, btp: Live, scene: Scene):
    url, log = f"{btp.url}/mcp", btp.log_tail

    def run(method, tool=None, arguments=None, extra=()):
        return inspect(node_folder, url, scene.token, era, method, tool, arguments, extra, log())

    listed = run("tools/list", extra=("--strict",))  # --strict: any tool-schema portability error exits 6
    assert listed.code == 0 and listed.out, f"tools/list: exit {listed.code}, {listed.err or listed.stderr}"
    names = [t["name"] for t in listed.out["result"]["tools"]]
    assert len(names) == 13 and set(names) == THIRTEEN, names
    assert "schemaFindings" not in listed.out, listed.out["schemaFindings"]

    stage = scene.stage_ids[0]
    arguments = {"list_trips": {}, "get_trip": {"id": scene.trip_id},
                 "get_stage": {"tripId": scene.trip_id, "stageId": stage}, "search_places": {"q": "Grenoble"}}
    answers = {tool: read_ok(run("tools/call", tool, arguments[tool]), tool, era) for tool in READ_CALLS}
    assert answers["get_trip"]["id"] == scene.trip_id and answers["get_stage"]["stageId"] == stage
    assert scene.trip_id in {t["id"] for t in answers["list_trips"]["member"]}

    error = readable_refusal(run("tools/call", "get_trip", {"id": UNKNOWN}), "get_trip of an unknown id")
    assert error["code"] == "not_found" and "not found" in error["message"].lower(), error

    moved = read_ok(run("tools/call", "edit_stages", {"tripId": scene.trip_id, "action": "rest_day",
                                                      "stageId": stage, "version": scene.version}), "edit", era)
    assert moved["version"] > scene.version
    error = readable_refusal(run("tools/call", "choose_accommodation",
                                 {"tripId": scene.trip_id, "stageId": stage, "version": scene.version}), "stale")
    assert error["code"] == "stale_version", error

    error = readable_refusal(run("tools/call", "edit_stages", {
        "tripId": scene.locked_id, "action": "rest_day", "stageId": scene.locked_stage_id,
        "version": scene.locked_version}), "a started trip")
    assert error["code"] == "locked", error
    db.session.rollback()  # a new snapshot: the server's commits are visible
    assert db.session.get(Trip, scene.trip_id).version == moved["version"], "the stale call changed nothing"
    assert db.session.get(Trip, scene.locked_id).version == scene.locked_version, "the started trip is untouched"


def test_the_inspector_rejects_a_refusal_carried_as_structured_content(node_folder):
    """The negative control: against a server answering a refusal with structuredContent {error: …}, the Inspector
    exits 1 with its output-schema complaint and never shows the refusal."""
    with old_refusal_server() as url:
        outcome = inspect(node_folder, url, "any-token", "legacy", "tools/call", "get_trip", {"id": UNKNOWN})
    assert outcome.code == 1 and outcome.out is None, (outcome.code, outcome.out)
    assert "data must have required property 'id'" in outcome.err["error"]["message"], outcome.err
