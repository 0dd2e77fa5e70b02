"""What the TypeScript-client tests share: Node 22 and the npm clients, BTP under gunicorn, a rider with an open
and a started trip, and one way to run a Node program. Imported as fixtures by tests/clients/test_mcp_ts_client.py and
tests/clients/test_inspector_cli.py (each module gets its own gunicorn)."""
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

from oauth.kernel.tokens import issue_token
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.live import gunicorn
from tests.node_tools import NodeToolsUnavailable, node_binary, node_env, node_tools
from trips.core.db import atomic, db
from trips.models import Trip
from trips.services.trips import import_gpx

NODE_TIMEOUT = 90  # seconds for one whole node run (start, connect, list, every step)
UNKNOWN = "0192f000-0000-7000-8000-000000000000"
THIRTEEN = {
    "list_trips", "get_trip", "get_stage", "search_places", "create_trip", "update_trip_settings", "edit_stages",
    "add_waypoint", "choose_accommodation", "analyze_trip", "share_trip", "unshare_trip", "delete_trip",
}


def require_node_tools() -> Path:
    """The folder holding Node 22 and the npm clients. An install that cannot happen FAILS the test (never a
    skip): CI must notice that the clients nobody here wrote were not run."""
    try:
        return node_tools()
    except NodeToolsUnavailable as exc:
        pytest.fail(f"the npm MCP clients cannot be installed: {exc}")


@pytest.fixture(scope="module")
def node_folder() -> Path:
    return require_node_tools()


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
    """A fresh account (tables are emptied after each test) with two GPX trips with their days: one open, one
    started today (so locked, docs/RULES.md "Trip lock"), and an MCP token whose audience is the live server's resource."""
    user = make_user(f"ts-client-{secrets.token_hex(4)}@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="TS ride")), {})
    started = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400), name="Started ride")), {})
    with atomic():
        db.session.get(Trip, started.id).start_date = date.today()
        token = issue_token(user, f"{btp.url}/mcp", "trips:read trips:write", 3600, client_id="ts-client-test")
    return Scene(token, trip.id, [s.id for s in trip.stages], trip.version, started.id, started.stages[0].id,
                 started.version)


def run_node(node_folder: Path, program: Path, args: list[str], what: str,
             server_log: str = "") -> subprocess.CompletedProcess:
    """Run a Node 22 program from a temporary directory that is also its HOME (npm clients keep state under ~;
    never the real one), the npm packages found through BTP_NODE_MODULES. Fails the test, with `server_log`,
    if it does not finish in NODE_TIMEOUT."""
    env = node_env(node_folder)
    env["BTP_NODE_MODULES"] = str(node_folder / "node_modules")
    with tempfile.TemporaryDirectory(prefix="btp-node-") as workdir:
        env["HOME"] = workdir
        try:
            return subprocess.run([str(node_binary(node_folder)), str(program), *args], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=NODE_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{what} did not finish in {NODE_TIMEOUT} s\nstderr: {(exc.stderr or b'')[-3000:]!r}\n"
                        f"server log:\n{server_log}")


def last_json_line(text: str) -> dict | None:
    """The JSON object on the last non-empty line of `text`, or None."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    try:
        found = json.loads(lines[-1])
    except (IndexError, ValueError):
        return None
    return found if isinstance(found, dict) else None
