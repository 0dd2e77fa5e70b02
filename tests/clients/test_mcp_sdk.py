"""The official MCP Python SDK client drives BTP's /mcp under gunicorn in its three modes (2026-07-28, legacy, auto),
and authorizes itself with its own OAuth client (tests/mcp_sdk/). It runs in a virtual environment of its own,
`.venv-mcp-sdk`, because BTP's package `mcp/` would shadow the SDK's."""
from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa

from oauth.services.accounts import connected_agents
from oauth.kernel.tokens import find_user
from tests.factories import make_user
from tests.live import BIN, ROOT, Live, gunicorn
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import db
from trips.models import Trip
from trips.services.trips import import_gpx

pytestmark = pytest.mark.slow

SDK_PIN = "mcp==2.3.0"
SDK_VENV = ROOT / ".venv-mcp-sdk"
SDK_MARKER = SDK_VENV / ".btp-installed"  # holds SDK_PIN once that exact version was installed and imported
CLIENT_SCRIPT = ROOT / "tests" / "mcp_sdk" / "client_script.py"
OAUTH_SCRIPT = ROOT / "tests" / "mcp_sdk" / "oauth_script.py"
CLIENT_TIMEOUT = 60  # seconds for one whole client run (connect, list, every step)
MODERN = "2026-07-28"
THIRTEEN = {
    "list_trips", "get_trip", "get_stage", "search_places", "create_trip", "update_trip_settings", "edit_stages",
    "add_waypoint", "choose_accommodation", "analyze_trip", "share_trip", "unshare_trip", "delete_trip",
}
PROBE = "import importlib.metadata as m, mcp.client.streamable_http, httpx2; print(m.version('mcp'))"


def sdk_env() -> dict:
    """The environment of a process of the SDK venv: nothing that would put BTP on its path."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def installed_sdk(python: Path) -> str | None:
    """The `mcp` version the venv's python imports (from a neutral directory), or None if it cannot."""
    if not python.exists():
        return None
    try:
        probe = subprocess.run([str(python), "-I", "-c", PROBE], capture_output=True, text=True, timeout=60,
                               cwd=tempfile.gettempdir(), env=sdk_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return probe.stdout.strip() if probe.returncode == 0 else None


def run_checked(args: list, timeout: int, what: str) -> None:
    try:
        done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                              cwd=tempfile.gettempdir(), env=sdk_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: no answer after {timeout} s")
    if done.returncode != 0:
        pytest.fail(f"{what} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    """The python of `.venv-mcp-sdk`, with SDK_PIN installed: made once, then reused (a marker names the pin)."""
    python = SDK_VENV / "bin" / "python"
    version = SDK_PIN.split("==")[1]
    lock_path = Path(tempfile.gettempdir()) / f"btp-mcp-sdk-{hashlib.sha1(str(SDK_VENV).encode()).hexdigest()[:12]}.lock"
    with open(lock_path, "w") as lock:  # two pytest runs at once must not build the venv over each other
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and SDK_MARKER.exists() and SDK_MARKER.read_text().strip() == SDK_PIN:
            return python
        SDK_MARKER.unlink(missing_ok=True)
        found = installed_sdk(python)
        if found != version:
            if found is None:  # absent or unusable (e.g. its base interpreter moved): start afresh
                run_checked([sys.executable, "-m", "venv", "--clear", SDK_VENV], 120, "creating .venv-mcp-sdk")
            run_checked([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", SDK_PIN], 600,
                        f"pip install {SDK_PIN} into .venv-mcp-sdk")
            found = installed_sdk(python)
            assert found == version, f".venv-mcp-sdk imports mcp {found!r} after installing {SDK_PIN}"
        SDK_MARKER.write_text(SDK_PIN + "\n")
    return python


@pytest.fixture(scope="module")
def btp(app, app_config, tmp_path_factory):
    """gunicorn (two workers) on the test configuration, its BTP_BASE_URL being where it listens: the MCP
    resource (the tokens' audience) is then `{url}/mcp`, the address the client calls."""
    with gunicorn(app_config, tmp_path_factory.mktemp("gunicorn") / "gunicorn.log", own_base_url=True) as live:
        yield live


@dataclass
class Rider:
    email: str
    token: str
    trip_id: str
    stage_ids: list


@pytest.fixture
def rider(ctx, btp) -> Rider:
    """A fresh account (per test: tables are emptied after each), a GPX trip with its days, and an MCP token
    printed by `flask tokens issue` in the server's environment (so its audience is the server's resource)."""
    email = f"mcp-sdk-{secrets.token_hex(4)}@example.org"
    user = make_user(email)
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="SDK ride")), {})
    issued = subprocess.run([str(BIN / "flask"), "--app", "app", "tokens", "issue", email, "--audience", "mcp",
                             "--scope", "trips:read trips:write"],
                            env=btp.env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert issued.returncode == 0, issued.stderr[-3000:]
    return Rider(email, issued.stdout.strip(), trip.id, [s.id for s in trip.stages])


def full_plan(trip_id: str) -> list[dict]:
    """All thirteen tools, chained the way an agent would: ids and versions come from earlier answers
    (see the placeholder rules in tests/mcp_sdk/client_script.py)."""
    stage0 = "${trip.stages.0.stageId}"
    return [
        {"tool": "list_trips", "arguments": {}},
        {"tool": "get_trip", "arguments": {"id": trip_id}, "save": "trip"},
        {"tool": "get_stage", "arguments": {"tripId": trip_id, "stageId": stage0}, "save": "stage0"},
        {"tool": "search_places", "arguments": {"q": "Grenoble"}},
        {"tool": "create_trip", "arguments": {"sourceUrl": "https://www.komoot.com/tour/1234"}, "save": "created"},
        # a title discards nothing: saved at once, no confirmation (a recut asks: tests/trips/services/test_edit_road.py)
        {"tool": "update_trip_settings", "save": "settings",
         "arguments": {"id": trip_id, "version": "${trip.version}", "title": "Renamed"}},
        {"tool": "edit_stages", "save": "edit",
         "arguments": {"tripId": trip_id, "action": "rest_day", "stageId": stage0, "version": "${settings.version}"}},
        {"tool": "add_waypoint",
         "arguments": {"tripId": trip_id, "stageId": stage0, "waypointLat": "${stage0.startPoint.lat}",
                       "waypointLon": "${stage0.startPoint.lon}"}},
        # add_waypoint does not move the version: the one edit_stages answered is still current.
        {"tool": "choose_accommodation", "save": "accommodation",
         "arguments": {"tripId": trip_id, "stageId": stage0, "version": "${edit.version}"}},
        {"tool": "analyze_trip", "arguments": {"id": trip_id}},
        {"tool": "share_trip", "arguments": {"tripId": trip_id}},
        {"tool": "unshare_trip", "arguments": {"tripId": trip_id}, "save": "unshareChallenge"},
        {"tool": "unshare_trip",
         "arguments": {"tripId": trip_id, "confirmationToken": "${unshareChallenge.confirmationToken}"}},
        {"tool": "delete_trip", "arguments": {"id": "${created.id}"}, "save": "deleteChallenge"},
        {"tool": "delete_trip",
         "arguments": {"id": "${created.id}", "confirmationToken": "${deleteChallenge.confirmationToken}"}},
    ]


CHALLENGES = {11, 13}  # plan steps answered with a confirmation challenge
VERSION_MOVING = {5: "update_trip_settings", 6: "edit_stages", 8: "choose_accommodation"}


def run_sdk_script(python: Path, btp: Live, script: Path, args: list[str], what: str,
                   files: dict[str, object] | None = None) -> dict:
    """Run a script of tests/mcp_sdk in the SDK venv, from a temporary directory (so BTP's own `mcp` package
    is not on its path); its one JSON document. `files` are written there as JSON, `{name}` in `args`
    naming their paths."""
    with tempfile.TemporaryDirectory(prefix="btp-mcp-sdk-") as workdir:
        paths = {}
        for name, content in (files or {}).items():
            paths[name] = Path(workdir) / f"{name}.json"
            paths[name].write_text(json.dumps(content))
        command = [str(python), "-I", str(script.resolve()), *(a.format(**paths) for a in args)]
        try:
            done = subprocess.run(command, cwd=workdir, env=sdk_env(), capture_output=True, text=True,
                                  timeout=CLIENT_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{what} did not finish in {CLIENT_TIMEOUT} s\n"
                        f"stderr: {(exc.stderr or b'')[-3000:]!r}\nserver log:\n{btp.log_tail()}")
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        pytest.fail(f"{what} printed no JSON (exit {done.returncode})\nstdout: {done.stdout[-2000:]}\n"
                    f"stderr: {done.stderr[-4000:]}\nserver log:\n{btp.log_tail()}")
    assert done.returncode == 0 and "error" not in report, (
        f"{what} failed: {json.dumps(report, indent=1)[:6000]}\n"
        f"stderr: {done.stderr[-3000:]}\nserver log:\n{btp.log_tail()}")
    return report


def run_client(python: Path, btp: Live, token: str, mode: str, plan: list[dict]) -> dict:
    return run_sdk_script(python, btp, CLIENT_SCRIPT, ["--url", f"{btp.url}/mcp", "--token", token, "--mode", mode,
                                                       "--plan", "{plan}"], f"the SDK client ({mode})", {"plan": plan})


def reload(trip_id: str) -> Trip | None:
    db.session.rollback()  # a new snapshot: the server's commits are visible
    return db.session.get(Trip, trip_id)


@pytest.mark.parametrize("mode", [MODERN, "legacy", "auto"])
def test_the_official_sdk_client_drives_the_thirteen_tools(mode, sdk_python, btp, rider):
    plan = full_plan(rider.trip_id)
    assert {step["tool"] for step in plan} == THIRTEEN
    report = run_client(sdk_python, btp, rider.token, mode, plan)

    if mode == "legacy":
        assert report["protocolVersion"].startswith("2025-"), report["protocolVersion"]
    else:  # pinned, or auto: BTP answers server/discover, so the probe settles on the modern revision
        assert report["protocolVersion"] == MODERN, report["protocolVersion"]
    assert len(report["tools"]) == 13 and set(report["tools"]) == THIRTEEN, report["tools"]

    results = report["results"]
    for step, result in zip(plan, results):
        assert not result["isError"], (
            f"step {result['step']} ({mode}) {step['tool']} {json.dumps(step['arguments'])} was refused: "
            f"{json.dumps(result['structuredContent'])} / {result['text']!r}")
    assert len(results) == len(plan), f"{len(results)} of {len(plan)} steps ran: {json.dumps(results)[:3000]}"

    for index, result in enumerate(results):
        content = result["structuredContent"]
        assert isinstance(content, dict), f"step {index} {result['tool']}: structuredContent {content!r}"
        assert isinstance(result["text"], str) and json.loads(result["text"]) == content, (
            f"step {index} {result['tool']}: the text block is not the structuredContent JSON: {result['text']!r}")
        if index in CHALLENGES:
            assert content.get("confirmationRequired") is True and isinstance(content.get("confirmationToken"), str) \
                and content.get("action") and "impact" in content, f"step {index} {result['tool']}: {content}"
        else:
            assert "confirmationToken" not in content, f"step {index} {result['tool']} was not carried out: {content}"
    for index, tool in VERSION_MOVING.items():
        version = results[index]["structuredContent"].get("version")
        assert isinstance(version, int) and not isinstance(version, bool), f"{tool} answered no version: {results[index]}"
    assert "version" not in results[7]["structuredContent"], "add_waypoint does not move the version"

    trip = reload(rider.trip_id)
    assert trip.title == "Renamed"
    assert [s.is_rest_day for s in trip.stages][:2] == [False, True]
    assert trip.stages[0].id == rider.stage_ids[0]
    created = results[4]["structuredContent"]["id"]
    assert reload(created) is None, "the trip made by create_trip is deleted"
    owned = db.session.scalar(sa.select(sa.func.count()).select_from(Trip).where(Trip.user_id == trip.user_id))
    assert owned == 1


def run_oauth_client(python: Path, btp: Live, outbox: Path, email: str, mode: str) -> dict:
    return run_sdk_script(python, btp, OAUTH_SCRIPT, ["--url", f"{btp.url}/mcp", "--mode", mode, "--outbox",
                                                      str(outbox), "--email", email], f"the SDK OAuth client ({mode})")


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_the_official_sdk_client_authorizes_itself_with_oauth(mode, sdk_python, btp, app_config, ctx):
    """No token to start with: the SDK's OAuthClientProvider discovers BTP from the 401, registers, gets a code
    (PKCE S256, resource, iss) from a person who signs in by e-mail link and approves, exchanges it and calls."""
    email = f"mcp-oauth-{secrets.token_hex(4)}@example.org"
    outbox = Path(app_config["BTP_INSTANCE_DIR"]) / "outbox"
    report = run_oauth_client(sdk_python, btp, outbox, email, mode)
    requests = report["requests"]

    if mode == "legacy":
        assert report["protocolVersion"].startswith("2025-"), report["protocolVersion"]
    else:
        assert report["protocolVersion"] == MODERN, report["protocolVersion"]
    assert len(report["tools"]) == 13 and set(report["tools"]) == THIRTEEN, report["tools"]
    assert report["listTripsIsError"] is False, report["listTripsText"]

    assert requests[0].startswith("POST /mcp ") and requests[0].endswith(" 401"), requests
    assert {"GET /.well-known/oauth-protected-resource/mcp 200", "GET /.well-known/oauth-protected-resource 200"} \
        & set(requests), requests
    for expected in ("GET /.well-known/oauth-authorization-server 200", "POST /oauth/register 201",
                     "POST /oauth/token 200"):
        assert expected in requests, f"{expected!r} not in {requests}"
    assert requests.index("POST /oauth/register 201") < requests.index("POST /oauth/token 200")
    after_token = requests[requests.index("POST /oauth/token 200") + 1:]
    assert after_token and all(" 401" not in r and " 403" not in r for r in after_token), requests

    authorization = report["authorization"]  # what the SDK put in the authorization request
    assert authorization["code_challenge_method"] == "S256" and authorization["resource"] == f"{btp.url}/mcp"
    assert set(authorization["scope"].split()) == {"trips:read", "trips:write"}, authorization
    assert report["callback"]["iss"] == btp.url and report["callback"]["state"], report["callback"]
    assert report["token"]["refresh"] and set(report["token"]["scope"].split()) == {"trips:read", "trips:write"}

    db.session.rollback()  # a new snapshot: the server's commits are visible
    user = find_user(email)
    assert user is not None, "signing in by the e-mail link made the account"
    agents = [(grant.client_id, client.client_name if client else None) for grant, client in connected_agents(user)]
    assert agents == [(authorization["client_id"], "SDK OAuth test")], agents
