"""Benchmark: MCP tools/call under load, BTP (gunicorn) against a FastMCP peer (uvicorn ×2), same database.

    .venv/bin/python bench/bench_mcp.py [--seconds 10] [--rounds 3] [--connections 1,8,32] [--edit-connections 1,8]
        [--btp-workers N] [--no-peer] [--keep]

wrk drives get_trip and list_trips, and edit_stages renames with the version chained, each point in rounds with the
servers taking turns; then memory per worker and reads beside slow place searches. Its `Servers` set-up is shared
by bench_mixed.py, bench_workers.py and soak.py. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import atexit
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from common import row, write_result  # noqa: E402

PEER_VENV = ROOT / ".cache" / "bench-peer"
PEER_REQUIREMENTS = HERE / "peers" / "requirements.txt"
LUA = HERE / "lua" / "mcp_call.lua"
PG = {"host": "127.0.0.1", "user": "postgres"}
MODERN = "2026-07-28"
LIFTED = {"BTP_LIMIT_MCP_ADDRESS": "1000000000/60", "BTP_LIMIT_MCP_CALLS": "1000000000/60",
          "BTP_LIMIT_MCP_WRITES": "1000000000/60", "BTP_LIMIT_TRIP_CREATE": "1000000/60",
          "BTP_LIMIT_GEOCODE": "1000000000/60"}
OTHER_TRIPS = 20
EDIT_TRIPS = 8  # per server: one per connection at the most edit connections
SLOW_UPSTREAM_S = 2.0  # the fake place search service's delay (bench's slow point)
SLOW_CLIENTS = 2  # clients keeping one slow call in flight each


def log(*parts) -> None:
    print("[bench_mcp]", *parts, flush=True)


# --- processes we start, stopped whatever happens ---------------------------------------------------------------
class Stack:
    """Processes and clean-up callbacks, undone in reverse order at exit (also on SIGTERM)."""

    def __init__(self):
        self._undo = []
        atexit.register(self.close)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    def popen(self, cmd, **kw) -> subprocess.Popen:
        proc = subprocess.Popen(cmd, start_new_session=True, **kw)
        self._undo.append(lambda: _stop(proc))
        return proc

    def defer(self, fn) -> None:
        self._undo.append(fn)

    def close(self) -> None:
        while self._undo:
            fn = self._undo.pop()
            try:
                fn()
            except Exception as exc:  # clean-up must go on
                print(f"[bench_mcp] clean-up: {exc}", file=sys.stderr)


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: the server and the workers it forked
    except ProcessLookupError:
        return
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"process {proc.args[0]} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port} after {timeout:.0f} s")


# --- database, Redis ---------------------------------------------------------------------------------------------
def create_database(stack: Stack, keep: bool, prefix: str = "btp_bench") -> str:
    name = f"{prefix}_{os.getpid()}"
    subprocess.run(["createdb", "-h", PG["host"], "-U", PG["user"], name], check=True)
    if not keep:
        stack.defer(lambda: subprocess.run(["dropdb", "--force", "-h", PG["host"], "-U", PG["user"], name],
                                           check=False))
    subprocess.run(["psql", "-q", "-h", PG["host"], "-U", PG["user"], "-d", name, "-c",
                    "CREATE EXTENSION IF NOT EXISTS postgis"], check=True)
    return name


def start_redis(stack: Stack, tmp: Path) -> int:
    port = free_port()
    proc = stack.popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL)
    wait_port(port, proc)
    return port


# --- the data --------------------------------------------------------------------------------------------------
def setup_data(env: dict, others_n: int = OTHER_TRIPS, edits_n: int = 2 * EDIT_TRIPS, pool_n: int = 0) -> dict:
    """Migrate, import the map, create the user, token and trips, run the analysis. Returns what the load needs:
    `others_n` one-day trips, the first `edits_n` of them the edit trips; `pool_n` more short trips (4 km) listed
    in info["pool"] (bench_mixed.py re-analyses them)."""
    import logging

    logging.getLogger("rq").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from flask_migrate import upgrade
    from rq import SimpleWorker

    import bench_analysis
    from app import create_app
    from trips.core.queue import get_queue
    from trips.core.redis_client import get_redis
    from jobs.tasks import bind_app
    from oauth.kernel.tokens import create_user, issue_token
    from tests.fakes.thirdparty import gpx_from_points
    from trips.core.db import atomic, db
    from trips.models import Trip
    from trips.osm.importer import import_file
    from trips.services.trips import import_gpx

    app = create_app(dict(env), environ={})
    with app.app_context():
        upgrade()
        points = bench_analysis.route()
        t = time.perf_counter()
        import_file(db.engine, bench_analysis.region(points).write(Path(env["BTP_INSTANCE_DIR"]) / "region.osm.pbf"),
                    name="bench")
        log(f"map generated and imported in {time.perf_counter() - t:.1f} s")
        user = create_user("bench@example.org")
        db.session.commit()
        with atomic():
            token = issue_token(user, app.config["MCP_RESOURCE"], "trips:read trips:write", 30 * 86400,
                                client_id="bench-agent")
        bind_app(app)
        start = (date.today() + timedelta(days=200)).isoformat()  # dated (daylight, calendar), beyond the forecast
        main_trip = import_gpx(user, io.BytesIO(gpx_from_points(points, name="Bench 14 days")),
                               {"startDate": start})
        main_id = main_trip.id
        others = []
        pool = []
        for i in range(pool_n):  # short trips along the map, created first (list_trips shows the newest)
            start_at = (i * 37) % (len(points) - 40)
            trip = import_gpx(user, io.BytesIO(gpx_from_points(points[start_at: start_at + 40], name=f"Ride {i + 1}")),
                              {})
            pool.append(trip.id)
        for i in range(others_n):  # small trips on the same map (analysed too), for list_trips and the edits
            small = points[(i * 500) % (len(points) - 150):][:150]  # 15 km: one day (a short analysis)
            trip = import_gpx(user, io.BytesIO(gpx_from_points(small, name=f"Weekend {i + 1}")), {})
            others.append(trip.id)
        t = time.perf_counter()
        SimpleWorker([get_queue()], connection=get_redis()).work(burst=True, logging_level="WARNING")
        log(f"analysis of {1 + others_n + pool_n} trips settled in {time.perf_counter() - t:.1f} s")
        trip = db.session.get(Trip, main_id)
        statuses = {c.name: c.status for c in trip.computations}
        edits = []
        for trip_id in others[:edits_n]:
            t2 = db.session.get(Trip, trip_id)
            edits.append((t2.id, t2.stages[0].id))
        info = {"token": token, "trip": main_id, "days": len(trip.stages), "statuses": statuses, "edits": edits,
                "pool": pool, "trips": 1 + others_n + pool_n, "catalogue": peer_catalogue()}
    return info


def peer_catalogue() -> dict:
    """BTP's catalogues as data for the peer: alert severity/group/English template, weather words, categories."""
    from trips.enrich import registry
    from trips.core import i18n
    from trips.enrich import weather
    from trips.enrich.alerts.catalogue import CATALOGUE, COUNTERS, GROUPS, SEVERITIES
    from trips.enrich.registry import NO_MAP_DATA
    from trips.readmodels import day, words  # noqa: F401  (registers every alert code)

    return {
        # the English template, or its plural forms [one, other] when the message counts (the peer picks by `count`)
        "alerts": {code: [k.severity, k.group, _english(i18n, code, k)] for code, k in CATALOGUE.items()},
        "groups": list(GROUPS), "severities": list(SEVERITIES), "counters": sorted(COUNTERS),
        "categories": {c: list(names) for c, names in registry.categories().items()},
        "weather_words": {str(row[0]): words.describe({"weatherCode": row[0]}, "en") for row in weather.WMO},
        "no_map_data": NO_MAP_DATA,
    }


def _english(i18n, code: str, kind):
    one, other = i18n.template(code, "en", 1), i18n.template(code, "en", 2)
    if one is None:
        return kind.message if isinstance(kind.message, str) else list(kind.message)
    return one if one == other else [one, other]


def edit_versions(db_url: str, edits: list) -> list[tuple[str, str, int]]:
    """(trip, stage, current version) for each edit trip, read straight from the database."""
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            out = []
            for trip_id, stage_id in edits:
                version = conn.execute(sa.text("SELECT version FROM trip WHERE id = :i"), {"i": trip_id}).scalar()
                out.append((trip_id, stage_id, version))
            return out
    finally:
        engine.dispose()


# --- the servers -----------------------------------------------------------------------------------------------
def ensure_peer_venv() -> Path:
    """The peer's own virtual environment (.cache/bench-peer), installed from bench/peers/requirements.txt."""
    stamp = PEER_VENV / (".installed-" + hashlib.sha256(PEER_REQUIREMENTS.read_bytes()).hexdigest()[:12])
    if not stamp.exists():
        log("installing the peer's venv", PEER_VENV)
        if not (PEER_VENV / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(PEER_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", "-r", str(PEER_REQUIREMENTS)], check=True)
        for old in PEER_VENV.glob(".installed-*"):
            old.unlink()
        stamp.touch()
    return PEER_VENV


def start_btp(stack: Stack, env: dict, port: int, logs: Path, workers: int = 4) -> subprocess.Popen:
    cmd = [str(ROOT / ".venv" / "bin" / "gunicorn"), "-w", str(workers), "-b", f"127.0.0.1:{port}", "wsgi:app"]
    proc = stack.popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                       stderr=open(logs / "gunicorn.log", "wb"))
    wait_port(port, proc)
    return proc


def start_peer(stack: Stack, env: dict, port: int, logs: Path, workers: int = 2) -> subprocess.Popen:
    venv = ensure_peer_venv()
    cmd = [str(venv / "bin" / "uvicorn"), "fastmcp_peer:app", "--app-dir", str(HERE / "peers"), "--host",
           "127.0.0.1", "--port", str(port), "--workers", str(workers), "--log-level", "warning", "--no-access-log"]
    proc = stack.popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                       stderr=open(logs / "peer.log", "wb"))
    wait_port(port, proc)
    return proc


def call(port: int, token: str, tool: str, arguments: dict, timeout: float = 30.0) -> tuple[int, dict | None]:
    """One stateless tools/call as the Lua script sends it: (HTTP status, the JSON-RPC answer or None)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", data=json.dumps(body).encode(), headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call", "Mcp-Name": tool}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw)
        except ValueError:
            return exc.code, {"raw": raw[:300].decode(errors="replace")}


def wait_answers(port: int, token: str, tool: str, arguments: dict, timeout: float = 60.0) -> dict:
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        try:
            status, answer = call(port, token, tool, arguments)
            if status == 200 and answer and "result" in answer and not answer["result"].get("isError"):
                return answer["result"]
            last = (status, answer)
        except OSError as exc:
            last = exc
        time.sleep(0.3)
    raise SystemExit(f"{tool} on port {port} never answered a result: {str(last)[:400]}")


# --- memory ----------------------------------------------------------------------------------------------------
def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return sorted(out)


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def worker_rss(master: subprocess.Popen, name_contains: str | None = None) -> dict[int, float]:
    """{worker pid: VmRSS MB} of the server's worker processes (the master's children; uvicorn's spawn helpers
    such as multiprocessing's resource tracker are left out by `name_contains` on the command line)."""
    out = {}
    for pid in children(master.pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if name_contains and name_contains not in cmdline:
            continue
        value = rss_mb(pid)
        if value is not None:
            out[pid] = value
    return out


def cpu_seconds(master: subprocess.Popen | None, reaped: bool = False) -> float:
    """User + system CPU seconds of the server: its master and every worker (PostgreSQL and Redis not counted).
    `reaped`: with the CPU of their children they reaped (cutime, cstime: an RQ worker's forked work horses)."""
    if master is None:
        return 0.0
    total = 0
    for pid in (master.pid, *children(master.pid)):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime, stime (stat fields 14 and 15), then cutime, cstime (16, 17)
        total += sum(int(f) for f in fields[11:15 if reaped else 13])
    return total / os.sysconf("SC_CLK_TCK")


def _stat_cpu(pid: int) -> int:
    try:
        return sum(int(f) for f in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[11:13])
    except OSError:
        return 0


def _cmdlines(match) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if match(cmdline):
                out.append(int(entry.name))
    return out


class Beside:
    """The CPU the stores spend for the servers: this run's redis-server (BTP's alone: the peer uses none) and the
    PostgreSQL backends connected to this run's database (both servers': a point loads one server at a time, the
    other's backends idle). A backend that ends within a point takes its CPU with it (the pools keep theirs)."""

    def __init__(self, redis_port: int, db_name: str):
        self.redis_port, self.redis, self.db_name = redis_port, [], db_name

    def seconds(self) -> tuple[float, float]:
        """(Redis, PostgreSQL backends) CPU seconds so far."""
        if not self.redis:  # found once it has renamed itself "redis-server 127.0.0.1:PORT" (or by its arguments)
            self.redis = _cmdlines(lambda c: c.startswith("redis-server") and (
                c.split()[1:2] == [f"127.0.0.1:{self.redis_port}"] or f"--port {self.redis_port} " in c))
        backends = _cmdlines(lambda c: c.startswith("postgres: ") and f" {self.db_name} " in c)
        tick = os.sysconf("SC_CLK_TCK")
        return sum(map(_stat_cpu, self.redis)) / tick, sum(map(_stat_cpu, backends)) / tick


def wait_idle(server: subprocess.Popen | None, timeout: float = 90.0, below: float = 0.05) -> float:
    """Wait until the server's processes spend under `below` CPU seconds per second (a worker's start-up work,
    such as a background index build, would otherwise land in the first load point). Returns the seconds waited."""
    start = time.monotonic()
    last = cpu_seconds(server)
    while server is not None and time.monotonic() - start < timeout:
        time.sleep(1.0)
        now = cpu_seconds(server)
        if now - last < below:
            break
        last = now
    return round(time.monotonic() - start, 1)


def machine_busy(interval: float = 1.0) -> float:
    """CPUs' worth of work the whole machine did over `interval` seconds (/proc/stat: all but idle and iowait)."""
    def sample():
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]
    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    return (os.cpu_count() or 1) * (1 - (idle1 - idle0) / max(1, total1 - total0))


def wait_quiet(timeout: float = 60.0, below: float = 0.15) -> float:
    """Wait until the whole machine is nearly idle (PostgreSQL's autovacuum after the set-up, a server's start-up
    work, the previous point's tail): each load point, BTP's and the peer's alike, starts on a quiet machine.
    Returns the seconds waited (the timeout is not an error: the point is then measured as it is)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout and machine_busy() > below:
        pass
    return round(time.monotonic() - start, 1)


# --- load ------------------------------------------------------------------------------------------------------
def wrk(port: int, token: str, seconds: float, connections: int, *, calls=None, edits=None, threads=None,
        timeout_s: int = 10, server: subprocess.Popen | None = None, beside: Beside | None = None,
        url: str | None = None) -> dict:
    """One wrk run with bench/lua/mcp_call.lua; returns its WRKJSON figures plus calls_s, and with `server` the
    CPU milliseconds that server's processes spent per call (cpu_ms). `url`: another endpoint than the port's
    /mcp (a proxy in front)."""
    env = {**os.environ, "MCP_TOKEN": token}
    if edits is not None:
        env["MCP_EDITS"] = ";".join(f"{t},{s},{v}" for t, s, v in edits)
        threads = connections  # one connection per thread: each chains the versions of its own trip
    else:
        env["MCP_CALLS"] = "\n".join(f"{tool}\t{json.dumps(args, separators=(',', ':'))}" for tool, args in calls)
        threads = threads or min(connections, 2)
    cmd = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{max(1, round(seconds))}s",
           "--timeout", f"{timeout_s}s", "-s", str(LUA), url or f"http://127.0.0.1:{port}/mcp"]
    cpu_before, stores_before = cpu_seconds(server), beside.seconds() if beside else None
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=seconds + 60)
    cpu = cpu_seconds(server) - cpu_before
    stores = [b - a for a, b in zip(stores_before, beside.seconds())] if beside else None
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no figures (rc {done.returncode}): {done.stderr[-500:]} {done.stdout[-500:]}")
    out = json.loads(line[len("WRKJSON "):])
    out["calls_s"] = round(out["requests"] / (out["duration_us"] / 1e6), 1)
    out["errors_total"] = out["errors"] + out["socket_errors"]
    out["cpu_ms"] = round(1000 * cpu / out["requests"], 2) if server is not None and out["requests"] else None
    if stores is not None and out["requests"]:  # the stores' CPU per call, and the whole server side's
        out["redis_cpu_ms"], out["pg_cpu_ms"] = (round(1000 * v / out["requests"], 3) for v in stores)
        out["total_cpu_ms"] = round(out["cpu_ms"] + out["redis_cpu_ms"] + out["pg_cpu_ms"], 2)
    return out


def tool_calls(trip_id: str) -> dict[str, list]:
    return {"get_trip": [("get_trip", {"id": trip_id})], "list_trips": [("list_trips", {})]}


# --- reads beside slow requests --------------------------------------------------------------------------------
class SlowUpstream:
    """A place search service (Nominatim's /search, jsonv2) on 127.0.0.1 that answers after `delay` seconds:
    BTP's search_places waits on it, as it would on a slow Nominatim."""

    def __init__(self, delay: float):
        self.delay, self.calls = delay, 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - stdlib name
                owner.calls += 1
                time.sleep(owner.delay)
                body = json.dumps([{"lat": "45.7640000", "lon": "4.8357000", "name": "Lyon",
                                    "display_name": "Lyon, Auvergne-Rhône-Alpes, France", "addresstype": "city",
                                    "address": {"city": "Lyon", "country": "France"}}]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name="slow-upstream", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SlowCallers:
    """`clients` threads, each calling `one(n)` again and again (n counts every call, so no two ask the same: BTP
    keeps a search's answer for a day) until stopped; each call's (seconds, error or None)."""

    def __init__(self, one, clients: int):
        self.one, self.done, self.halt, self.lock = one, [], threading.Event(), threading.Lock()
        self.counter = iter(range(10**9))
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(clients)]

    def _loop(self) -> None:
        while not self.halt.is_set():
            with self.lock:
                n = next(self.counter)
            started = time.monotonic()
            try:
                error = self.one(n)
            except Exception as exc:  # noqa: BLE001 - counted, reported
                error = repr(exc)[:200]
            with self.lock:
                self.done.append((time.monotonic() - started, error))

    def __enter__(self) -> SlowCallers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.halt.set()
        for thread in self.threads:
            thread.join(60)


def slow_search(port: int, token: str):
    """One search_places call through BTP: None when it answered places, else what went wrong."""
    def one(n: int) -> str | None:
        status, answer = call(port, token, "search_places", {"q": f"Lyon {n}"}, timeout=60)
        result = (answer or {}).get("result") or {}
        if status != 200 or result.get("isError") or not result.get("structuredContent", {}).get("member"):
            return f"HTTP {status}: {json.dumps(answer)[:200]}"
        return None
    return one


def slow_point_rows(beside: dict, alone: dict | None, slow: list, delay: float, clients: int) -> tuple[list, list]:
    """The rows and notes of the reads-beside-slow-requests point: `beside` the wrk figures of get_trip at 8
    connections during the slow calls, `alone` the same point with nothing slow (this run's median, or None),
    `slow` each slow call's (seconds, error)."""
    label = f"get_trip {{}}, 8 clients beside {clients} slow calls ({delay:g} s upstream)"
    alone_name = "BTP, nothing slow (same run)" if alone else None
    p50, p99 = _ms(beside["p50_us"]), _ms(beside["p99_us"])
    rows = [
        row(label.format("p50"), "ms", p50, _ms(alone["p50_us"]) if alone else None, alone_name),
        row(label.format("p99"), "ms", p99, _ms(alone["p99_us"]) if alone else None, alone_name, "< 50 ms",
            p99 < 50),
        row(label.format("calls/s"), "calls/s", beside["calls_s"], alone["calls_s"] if alone else None, alone_name),
        row(label.format("errors"), "calls", beside["errors_total"], None, None, "= 0", beside["errors_total"] == 0),
    ]
    failed = [error for _, error in slow if error]
    took = sorted(seconds for seconds, _ in slow)
    rows.append(row(f"slow search_places calls failed, beside the reads ({delay:g} s upstream)", "calls", len(failed),
                    None, None, "= 0", not failed and bool(slow)))
    notes = [f"reads beside slow requests: {len(slow)} search_places calls on a place search service answering after "
             f"{delay:g} s, {clients} in flight at all times while wrk read get_trip at 8 connections; they took "
             + (f"{took[0]:.2f}–{took[-1]:.2f} s" if took else "nothing (none finished)")
             + (f"; first failure: {failed[0]}" if failed else "")]
    if beside["errors_total"]:
        notes.append(f"BTP get_trip beside slow calls: {beside['errors_total']} errors, first: "
                     f"{str(beside.get('sample_error'))[:300]}")
    return rows, notes


# --- comparing the answers -------------------------------------------------------------------------------------
def differences(a, b, path="$", out=None, limit=8) -> list[str]:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(dict.fromkeys([*a, *b])):
            if key not in a or key not in b:
                out.append(f"{path}.{key} only in {'peer' if key in b else 'BTP'}")
            else:
                differences(a[key], b[key], f"{path}.{key}", out, limit)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items in BTP, {len(b)} in the peer")
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, f"{path}[{i}]", out, limit)
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: BTP {json.dumps(a, ensure_ascii=False)[:60]} / peer {json.dumps(b, ensure_ascii=False)[:60]}")
    return out


def compare(btp_port: int, peer_port: int, token: str, tool: str, arguments: dict) -> tuple[bool, str]:
    ours = wait_answers(btp_port, token, tool, arguments).get("structuredContent")
    theirs = wait_answers(peer_port, token, tool, arguments).get("structuredContent")
    size = lambda v: len(json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode())  # noqa: E731
    if ours == theirs:
        return True, f"{tool}: the peer's structuredContent equals BTP's ({size(ours)} bytes of compact JSON)"
    diff = differences(ours, theirs)
    return False, (f"{tool}: the peer's structuredContent differs from BTP's (BTP {size(ours)} bytes, peer "
                   f"{size(theirs)} bytes): " + "; ".join(diff))


# --- the whole run ---------------------------------------------------------------------------------------------
class Servers:
    """Database, Redis, data, BTP and the peer, up and warm (shared with bench/soak.py)."""

    def __init__(self, stack: Stack, keep: bool = False, peer: bool = True, btp_workers: int = 4,
                 slow_upstream_s: float = 0.0, db_prefix: str = "btp_bench", setup: dict | None = None):
        self.tmp = Path(tempfile.mkdtemp(prefix="btp-bench-mcp-"))
        if not keep:
            stack.defer(lambda: shutil.rmtree(self.tmp, ignore_errors=True))
        else:
            log("keeping", self.tmp)
        self.db_name = create_database(stack, keep, db_prefix)
        self.db_url = f"postgresql+psycopg://{PG['user']}@{PG['host']}:5432/{self.db_name}"
        redis_port = start_redis(stack, self.tmp)
        self.beside = Beside(redis_port, self.db_name)
        self.btp_port, self.peer_port = free_port(), free_port()
        self.env = {"DATABASE_URL": self.db_url, "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
                    "BTP_BASE_URL": f"http://127.0.0.1:{self.btp_port}", "BTP_SECRET_KEY": "bench-secret-key",
                    "BTP_ENV": "production", "BTP_INSTANCE_DIR": str(self.tmp), **LIFTED}
        self.upstream = None
        if slow_upstream_s > 0:  # search_places waits on it (the reads-beside-slow-requests point)
            self.upstream = SlowUpstream(slow_upstream_s)
            stack.defer(self.upstream.stop)
            self.env["BTP_NOMINATIM_URL"] = self.upstream.url
        t = time.perf_counter()
        self.info = setup_data(self.env, **(setup or {}))
        log(f"data ready in {time.perf_counter() - t:.1f} s: trip {self.info['trip']} ({self.info['days']} days), "
            f"computations {self.info['statuses']}")
        self.token = self.info["token"]
        self.btp = start_btp(stack, self.env, self.btp_port, self.tmp, btp_workers)
        self.peer = None
        if peer:
            catalogue = self.tmp / "catalogue.json"
            catalogue.write_text(json.dumps(self.info["catalogue"]), encoding="utf-8")
            peer_env = {"PEER_DATABASE_URL": self.db_url.replace("postgresql+psycopg://", "postgresql://"),
                        "PEER_AUDIENCE": self.env["BTP_BASE_URL"] + "/mcp", "PEER_CATALOGUE": str(catalogue)}
            self.peer = start_peer(stack, peer_env, self.peer_port, self.tmp)
        try:
            wait_answers(self.btp_port, self.token, "get_trip", {"id": self.info["trip"]})
            if peer:
                wait_answers(self.peer_port, self.token, "get_trip", {"id": self.info["trip"]})
        except SystemExit:
            for name in ("gunicorn.log", "peer.log"):
                print(f"--- end of {name}:\n{self.log_tail(name, 4000)}", file=sys.stderr)
            raise
        idle = wait_idle(self.btp), wait_idle(self.peer)
        log(f"servers idle after {idle[0]} s (BTP) and {idle[1]} s (peer)")

    def btp_rss(self) -> dict[int, float]:
        return worker_rss(self.btp, "gunicorn")

    def peer_rss(self) -> dict[int, float]:
        return worker_rss(self.peer, "spawn_main") if self.peer else {}

    def log_tail(self, name: str, n: int = 2000) -> str:
        try:
            return (self.tmp / name).read_text(errors="replace")[-n:]
        except OSError:
            return ""


def median_point(points: list[dict]) -> dict:
    """One load point from its rounds: the median of each figure (calls/s, latencies, CPU per call), the errors and
    calls summed, the first error kept."""
    from statistics import median

    out = dict(points[0])
    for key in ("calls_s", "p50_us", "p90_us", "p99_us", "cpu_ms", "redis_cpu_ms", "pg_cpu_ms", "total_cpu_ms"):
        values = [p[key] for p in points if p.get(key) is not None]
        out[key] = round(median(values), 2) if values else None
    for key in ("requests", "errors", "socket_errors", "errors_total"):
        out[key] = sum(p.get(key) or 0 for p in points)
    out["sample_error"] = next((p["sample_error"] for p in points if p.get("sample_error")), out.get("sample_error"))
    return out


def _ms(us: float) -> float:
    return round(us / 1000, 2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of each load point (default 10)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="every point (reads and edits) measured this many times, BTP and the peer in turn; the median is reported "
                         "(default 3)")
    ap.add_argument("--connections", default="1,8,32", help="read load points (default 1,8,32)")
    ap.add_argument("--edit-connections", default="1,8", help="edit_stages load points (default 1,8)")
    ap.add_argument("--tools", default="get_trip,list_trips", help="read tools to load (default both)")
    ap.add_argument("--memory-calls", type=int, default=10_000, help="BTP calls before the second RSS sample")
    ap.add_argument("--memory-max-seconds", type=float, default=180.0,
                    help="at most this long topping the calls up to --memory-calls (default 180)")
    ap.add_argument("--slow-seconds", type=float, default=None,
                    help="the reads-beside-slow-requests point's duration (default: --seconds; 0: skip it)")
    ap.add_argument("--no-peer", action="store_true", help="BTP alone (no ratios)")
    ap.add_argument("--btp-workers", type=int, default=(os.cpu_count() or 2) + 1,
                    help="BTP's gunicorn workers (default one per core plus one; the peer runs 2)")
    ap.add_argument("--keep", action="store_true", help="keep the database and the temporary directory")
    args = ap.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is missing: apt-get install wrk")
    reads = [int(c) for c in args.connections.split(",") if c]
    writes = [int(c) for c in args.edit_connections.split(",") if c]
    if max(writes, default=0) > EDIT_TRIPS:
        raise SystemExit(f"--edit-connections: at most {EDIT_TRIPS}")
    stack = Stack()
    try:
        return run(stack, args, reads, writes)
    finally:
        stack.close()


def run(stack: Stack, args, reads: list[int], writes: list[int]) -> int:
    slow_seconds = args.seconds if args.slow_seconds is None else args.slow_seconds
    s = Servers(stack, keep=args.keep, peer=not args.no_peer, btp_workers=args.btp_workers,
                slow_upstream_s=SLOW_UPSTREAM_S if slow_seconds else 0)
    peer = not args.no_peer
    notes, rows = [], []
    equal = {}
    per_round = {}
    if peer:
        for tool, arguments in (("get_trip", {"id": s.info["trip"]}), ("list_trips", {})):
            equal[tool], note = compare(s.btp_port, s.peer_port, s.token, tool, arguments)
            notes.append(note)
            log(note)
        bogus = "btp_at_" + "x" * 43  # BTP's prefix, unknown token: both must refuse it (their checks are real)
        refused = {name: call(port, bogus, "list_trips", {})[0] for name, port in (("BTP", s.btp_port),
                                                                               ("peer", s.peer_port))}
        notes.append("an unknown bearer token: HTTP " + ", ".join(f"{k} {v}" for k, v in refused.items()))
        if set(refused.values()) != {401}:
            log("WARNING: an unknown token was not refused with 401 by both:", refused)
    calls = tool_calls(s.info["trip"])
    # warm-up: every worker of both servers has served both tools
    for port in (s.btp_port, s.peer_port) if peer else (s.btp_port,):
        for tool in ("get_trip", "list_trips"):
            wrk(port, s.token, 2, 8, calls=calls[tool])
    rss_warm, peer_warm = s.btp_rss(), s.peer_rss()
    log("RSS after warm-up (MB): BTP", rss_warm, "peer", peer_warm)
    btp_calls = 0
    results = {}
    points = [(tool, c) for tool in args.tools.split(",") if tool for c in reads]
    points += [("edit_stages", c) for c in writes]  # the edits too: measured round by round, their median reported
    for key in points:
        per_round[key] = []

    def load(who: str, tool: str, c: int) -> dict:
        port, server = (s.btp_port, s.btp) if who == "btp" else (s.peer_port, s.peer)
        if tool != "edit_stages":
            return wrk(port, s.token, args.seconds, c, calls=calls[tool], server=server, beside=s.beside)
        # each server renames its own half of the edit trips, the version read again before every point
        mine = s.info["edits"][:EDIT_TRIPS] if who == "btp" else s.info["edits"][EDIT_TRIPS:2 * EDIT_TRIPS]
        return wrk(port, s.token, args.seconds, c, edits=edit_versions(s.db_url, mine)[:c], server=server,
                   beside=s.beside)

    # Round by round over every point, not a point's rounds one after the other: a point's rounds are minutes
    # apart, so one slow phase of this VM (its speed moves by half for minutes at a time) reaches at most one of them
    # and the median does not follow it. Within a round BTP and the peer take turns, and which goes first
    # alternates: a change in the machine's speed lands on both alike.
    for n in range(args.rounds):
        order = ("btp", "peer") if n % 2 == 0 else ("peer", "btp")
        for tool, c in points:
            point, waited = {}, []
            for who in order:
                if who == "peer" and not peer:
                    continue
                waited.append(wait_quiet())
                point[who] = load(who, tool, c)
            btp_calls += point["btp"]["requests"]
            per_round[(tool, c)].append((point["btp"], point.get("peer")))
            ours, theirs = per_round[(tool, c)][-1]
            log(f"{tool} c={c} round {n + 1}/{args.rounds} (quiet after {'/'.join(map(str, waited))} s): BTP "
                f"{ours['calls_s']} calls/s p50 {_ms(ours['p50_us'])} ms p99 {_ms(ours['p99_us'])} ms CPU/call "
                f"{ours['cpu_ms']} ms (+ Redis {ours.get('redis_cpu_ms')} + PostgreSQL {ours.get('pg_cpu_ms')} = "
                f"{ours.get('total_cpu_ms')}) errors {ours['errors_total']}"
                + (f" | peer {theirs['calls_s']} calls/s p50 {_ms(theirs['p50_us'])} ms p99 "
                   f"{_ms(theirs['p99_us'])} ms CPU/call {theirs['cpu_ms']} ms (+ Redis {theirs.get('redis_cpu_ms')} + "
                   f"PostgreSQL {theirs.get('pg_cpu_ms')} = {theirs.get('total_cpu_ms')}) errors {theirs['errors_total']}"
                   if theirs else ""))
    for key, rounds in per_round.items():
        results[key] = (median_point([r[0] for r in rounds]), median_point([r[1] for r in rounds]) if peer else None)
    if slow_seconds:  # reads while slow requests run (BTP only: the peer has no place search)
        wait_quiet()
        with SlowCallers(slow_search(s.btp_port, s.token), SLOW_CLIENTS) as slow:
            time.sleep(0.5)  # both in flight
            beside = wrk(s.btp_port, s.token, slow_seconds, 8, calls=calls["get_trip"], server=s.btp)
        btp_calls += beside["requests"]
        alone = results.get(("get_trip", 8), (None, None))[0]
        log(f"get_trip c=8 beside {SLOW_CLIENTS} slow calls: p50 {_ms(beside['p50_us'])} ms p99 "
            f"{_ms(beside['p99_us'])} ms errors {beside['errors_total']}; {len(slow.done)} slow calls, "
            f"{sum(1 for _, e in slow.done if e)} failed")
        slow_rows, slow_notes = slow_point_rows(beside, alone, slow.done, SLOW_UPSTREAM_S, SLOW_CLIENTS)
    topped = time.monotonic()
    while btp_calls < args.memory_calls:  # at least --memory-calls since the warm-up before the second sample
        if time.monotonic() - topped > args.memory_max_seconds:
            notes.append(f"the second RSS sample came after {btp_calls} calls, not {args.memory_calls}: "
                         f"--memory-max-seconds {args.memory_max_seconds:g} ran out (a slow or busy machine)")
            break
        extra = wrk(s.btp_port, s.token, 5, 8, calls=calls["get_trip"] + calls["list_trips"])
        btp_calls += extra["requests"]
    rss_after, peer_after = s.btp_rss(), s.peer_rss()
    log(f"RSS after {btp_calls} BTP calls (MB): BTP", rss_after, "peer", peer_after)

    peer_name = "FastMCP 4.2 + uvicorn ×2" if peer else None
    total_errors = 0
    for (tool, c), (ours, theirs) in results.items():
        base = lambda key: theirs[key] if theirs else None  # noqa: E731
        target = "ratio >= 2" if c in (8, 32) and tool != "edit_stages" else None
        ratio_met = (ours["calls_s"] / theirs["calls_s"] >= 2) if target and theirs else None
        rows.append(row(f"{tool} calls/s, {c} client{'s' if c > 1 else ''}", "calls/s", ours["calls_s"],
                        base("calls_s"), peer_name, target, ratio_met))
        p50_target = "<= 2 ms" if c == 1 and tool != "edit_stages" else None
        rows.append(row(f"{tool} p50, {c} client{'s' if c > 1 else ''}", "ms", _ms(ours["p50_us"]),
                        _ms(theirs["p50_us"]) if theirs else None, peer_name, p50_target,
                        _ms(ours["p50_us"]) <= 2 if p50_target else None))
        p99_target = "< 50 ms" if c == 8 and tool != "edit_stages" else None
        rows.append(row(f"{tool} p99, {c} client{'s' if c > 1 else ''}", "ms", _ms(ours["p99_us"]),
                        _ms(theirs["p99_us"]) if theirs else None, peer_name, p99_target,
                        _ms(ours["p99_us"]) < 50 if p99_target else None))
        rows.append(row(f"{tool} server CPU per call, {c} client{'s' if c > 1 else ''}", "ms", ours["cpu_ms"],
                        base("cpu_ms"), peer_name))
        rows.append(row(f"{tool} server + Redis + PostgreSQL CPU per call, {c} client{'s' if c > 1 else ''}", "ms",
                        ours.get("total_cpu_ms"), base("total_cpu_ms"), peer_name))
        rows.append(row(f"{tool} errors, {c} client{'s' if c > 1 else ''}", "calls", ours["errors_total"],
                        base("errors_total"), peer_name, "= 0", ours["errors_total"] == 0))
        total_errors += ours["errors_total"]
        if ours["errors_total"]:
            notes.append(f"BTP {tool} c={c}: {ours['errors_total']} errors, first: {ours['sample_error'][:300]}")
        if theirs and theirs["errors_total"]:
            notes.append(f"peer {tool} c={c}: {theirs['errors_total']} errors, first: {theirs['sample_error'][:300]}")
    if slow_seconds:
        rows += slow_rows
        notes += slow_notes
        total_errors += beside["errors_total"]
    for label_, btp_rss, peer_rss in (("after warm-up", rss_warm, peer_warm),
                                      (f"after {btp_calls} calls", rss_after, peer_after)):
        worst = max(btp_rss.values(), default=None)
        rows.append(row(f"RSS per worker, max of {len(btp_rss)}, {label_}", "MB", worst,
                        max(peer_rss.values(), default=None) if peer else None, peer_name, "<= 150 MB",
                        worst is not None and worst <= 150))
    notes.append("RSS per worker (MB): BTP after warm-up " + json.dumps(sorted(rss_warm.values())) + ", after "
                 f"{btp_calls} calls " + json.dumps(sorted(rss_after.values())) + "; peer "
                 + json.dumps(sorted(peer_warm.values())) + " → " + json.dumps(sorted(peer_after.values())))
    notes.append(f"set-up: trip {s.info['days']} days, computations "
                 + ", ".join(f"{k}={v}" for k, v in sorted(s.info["statuses"].items()))
                 + f"; {s.info['trips']} trips; wrk {args.seconds:g} s per point, 2 threads (edits: one per "
                 "connection); BTP gunicorn -w 4 (gunicorn.conf.py: BTP's keep-alive worker, up to 8 threads a "
                 "worker) on PostgreSQL + Redis, budgets lifted with BTP_LIMIT_*")
    if any(v is False for v in equal.values()):
        notes.append("The peer reimplements trip_digest from the same rows and BTP's catalogues as data "
                     "(bench/peers/fastmcp_peer.py); a difference above is a gap in that reimplementation.")
    notes.append("Other work may share the 2 CPUs: compare the ratios (same run), not the absolute numbers. "
                 "'server CPU per call' (user + system CPU of the server's master and workers over the point, per "
                 "call; PostgreSQL, Redis and wrk not counted) depends least on what else runs.")
    for (tool, c), rounds in per_round.items():
        notes.append(f"{tool} c={c}, each round (BTP / peer calls/s, BTP p50 ms, BTP / peer server + Redis + "
                     "PostgreSQL CPU ms per call): " + "; ".join(
                         f"{ours['calls_s']:g} / {theirs['calls_s'] if theirs else '-'}, {_ms(ours['p50_us']):g}, "
                         f"{ours.get('total_cpu_ms')} / {theirs.get('total_cpu_ms') if theirs else '-'}"
                         for ours, theirs in rounds))
    if total_errors:
        notes.append("gunicorn log tail: " + s.log_tail("gunicorn.log", 2000).replace("\n", " | "))
    path = write_result("mcp", rows, notes)
    log("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
