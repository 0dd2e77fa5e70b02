"""Benchmark: what one edit_stages call costs, per action, in process (time, CPU, SQL statements, Redis round trips).

    .venv/bin/python bench/bench_edit_costs.py [--calls 200] [--recut-calls 60] [--profile-calls 300]
        [--database-url postgresql+psycopg://…] [--pg-schema S] [--redis-url redis://…]

The app a web worker runs, the 14-day trip of bench/bench_analysis.py filled and settled by hand, real tools/calls
POSTed to /mcp through the test client; then a cProfile of renames and moves by layer. What it reports:
bench/README.md."""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from common import OUT, row, write_result  # noqa: E402

LIFTED = {"BTP_LIMIT_MCP_ADDRESS": "1000000000/60", "BTP_LIMIT_MCP_CALLS": "1000000000/60",
          "BTP_LIMIT_MCP_WRITES": "1000000000/60", "BTP_LIMIT_TRIP_CREATE": "1000000/60"}
MODERN = "2026-07-28"
CONTROL = ("BEGIN", "SAVEPOINT", "RELEASE", "COMMIT", "ROLLBACK")
PEER_RENAME = {"calls_s": 331, "p50_ms": 2.9}  # the FastMCP peer's one-UPDATE rename at 1 client, from bench_mcp.py
ACTIONS = ("rename", "update_distance", "add", "delete", "move", "rest_day")
LAYERS = (  # (layer, path fragments), first match wins
    ("JSON", ("/json/", "jsonio.py", "orjson", "protocol.py")),
    ("Redis", ("/redis/", "ratelimit.py", "epochs.py", "redis_client.py")),
    ("SQLAlchemy ORM flush/load", ("sqlalchemy/orm/",)),
    ("SQLAlchemy core + driver", ("sqlalchemy/", "psycopg", "sqlite3")),
    ("guards + services", ("trips/guards.py", "trips/services/", "trips/core/db.py", "trips/computations.py",
                           "trips/route/", "trips/enrich/", "mcp/tools/")),
    ("MCP endpoint pipeline", ("mcp/", "oauth/", "trips/core/metrics.py", "trips/core/observability.py",
                               "trips/core/text.py")),
    ("Flask/werkzeug", ("flask/", "werkzeug/", "flask_sqlalchemy/")),
)


def log(*parts) -> None:
    print("[bench_edit_costs]", *parts, flush=True)


# Functions whose cumulative time says where an edit goes (file suffix, function name, what it is)
KEY_FUNCTIONS = (
    ("flask/app.py", "wsgi_app", "the whole request in the app"),
    ("mcp/dispatch.py", "tools_call", "the tool call (budgets, admission, arguments, tool, answer)"),
    ("mcp/dispatch.py", "_spend_budget", "budgets + token epoch (one Redis script)"),
    ("mcp/dispatch.py", "_admit", "admission: the trip read by primary key (ownership, started?)"),
    ("trips/services/stages.py", "write_days", "the edit itself (fail-fast chain, lock, chain, apply, commit)"),
    ("trips/guards.py", "load_owned_trip", "every trip read of the chains (admission, fail-fast, under the lock)"),
    ("sqlalchemy/orm/session.py", "scalar", "the load under the lock (trip + computations, then days)"),
    ("sqlalchemy/orm/session.py", "commit", "session commits (the ORM flush inside)"),
    ("trips/core/epochs.py", "flush", "TrackedSession.flush: the ORM flush and the owners noted"),
    ("sqlalchemy/orm/session.py", "_flush", "the ORM unit of work (UPDATE statements)"),
    ("redis/lock.py", "acquire", "the trip lock taken (SET NX PX)"),
    ("redis/lock.py", "release", "the trip lock released (Lua)"),
    ("trips/core/epochs.py", "_replace", "the epochs replaced after the commit"),
    ("trips/core/metrics.py", "record_request", "the request's counters"),
    ("sqlalchemy/orm/state.py", "_expire", "instances expired (by the commits)"),
    ("sqlalchemy/orm/loading.py", "instances", "ORM rows turned into instances"),
    ("sqlalchemy/engine/base.py", "_execute_context", "every statement executed (driver included)"),
)


def layer(filename: str, func: str = "") -> str:
    if filename == "~":  # a C built-in: by what it is
        if "socket" in func:
            return "Redis"  # the only Python socket here (psycopg talks through libpq)
        if "sqlite3" in func:
            return "SQLAlchemy core + driver"
        if "json" in func:
            return "JSON"
        return "other (built-ins, stdlib)"
    for name, parts in LAYERS:
        if any(p in filename for p in parts):
            return name
    return "other (built-ins, stdlib)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(tmp: Path) -> tuple[str, subprocess.Popen]:
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL,
                            start_new_session=True)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return f"redis://127.0.0.1:{port}/0", proc
        except OSError:
            time.sleep(0.05)
    proc.terminate()
    raise SystemExit("redis-server did not start")


class Meter:
    """SQL statements (and their time) and Redis round trips (and their time) while `on` is set."""

    def __init__(self, engine):
        import redis as redis_lib
        from sqlalchemy import event

        self.on = False
        self.reset()
        conn_cls = redis_lib.connection.AbstractConnection
        sent, read = conn_cls.send_packed_command, conn_cls.read_response
        meter = self

        def send(conn, command, check_health=True):
            if meter.on:
                meter.redis += 1
                t = time.perf_counter()
                try:
                    return sent(conn, command, check_health)
                finally:
                    meter.redis_s += time.perf_counter() - t
            return sent(conn, command, check_health)

        def receive(conn, *args, **kwargs):
            if meter.on:
                t = time.perf_counter()
                try:
                    return read(conn, *args, **kwargs)
                finally:
                    meter.redis_s += time.perf_counter() - t
            return read(conn, *args, **kwargs)

        conn_cls.send_packed_command, conn_cls.read_response = send, receive

        def before(conn, cursor, text, parameters, context, executemany):
            if meter.on and not text.lstrip().upper().startswith(CONTROL):
                meter.sql.append(" ".join(text.split()[:4])[:60])
            conn.info["btp_bench_t"] = time.perf_counter()

        def after(conn, cursor, text, parameters, context, executemany):
            started = conn.info.pop("btp_bench_t", None)
            if meter.on and started is not None:
                meter.sql_s += time.perf_counter() - started

        event.listen(engine, "before_cursor_execute", before)
        event.listen(engine, "after_cursor_execute", after)

    def reset(self):
        self.sql, self.sql_s, self.redis, self.redis_s = [], 0.0, 0, 0.0

    @contextmanager
    def counting(self):
        self.on = True
        try:
            yield self
        finally:
            self.on = False


def command_stats(redis) -> Counter:
    stats = redis.info("commandstats")
    return Counter({k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()})


class Bench:
    def __init__(self, app, token: str, trip_id: str, meter: Meter):
        self.app, self.token, self.trip_id, self.meter = app, token, trip_id, meter
        self.client = app.test_client()
        self.version = self.call("get_trip", {"id": trip_id})["version"]

    def call(self, tool: str, arguments: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments,
            "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}}}}
        response = self.client.post("/mcp", data=json.dumps(body), headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/call", "Mcp-Name": tool})
        result = response.get_json()["result"]
        if result.get("isError"):
            raise SystemExit(f"{tool} {arguments} refused: {result['content'][0]['text'][:300]}")
        return result["structuredContent"]

    def edit(self, args: dict) -> None:
        self.version = self.call("edit_stages", {"tripId": self.trip_id, "version": self.version, **args})["version"]

    def days(self) -> list:
        import sqlalchemy as sa

        from trips.core.db import db
        from trips.models import Stage

        with self.app.app_context():
            rows = db.session.execute(sa.select(Stage.id, Stage.distance, Stage.end_lat, Stage.end_lon)
                                      .where(Stage.trip_id == self.trip_id).order_by(Stage.position)).all()
            db.session.remove()
        return rows

    def steps(self, action: str, n: int):
        """(untimed set-up, the measured arguments) for the n-th call of `action`: the trip comes back to its shape
        (a cut alternates two places, a move goes and comes back, an added day is deleted, a rest day removed)."""
        d = self.days()
        if action == "rename":
            return None, {"action": "update", "stageId": d[2].id, "label": f"Col de Rousset {n}"}
        if action == "update_distance":
            if not hasattr(self, "_cut_km"):
                self._cut_km = (round(d[1].distance * 0.8, 1), round(d[1].distance, 1))
            return None, {"action": "update", "stageId": d[1].id, "distance": self._cut_km[n % 2]}
        if action == "move":
            return None, ({"action": "move", "stageId": d[0].id, "toIndex": 1} if n % 2 == 0 else
                          {"action": "move", "stageId": d[1].id, "toIndex": 0})
        if action == "rest_day":
            undo = {"action": "delete", "stageId": d[4].id} if n % 2 else None  # the rest day the last call put
            return undo, {"action": "rest_day", "stageId": d[3].id} if n % 2 == 0 else None
        end = {"lat": d[-1].end_lat, "lon": d[-1].end_lon}
        add = {"action": "add", "startPoint": end, "endPoint": {"lat": end["lat"] + 0.003, "lon": end["lon"] + 0.003}}
        if action == "add":
            return ({"action": "delete", "stageId": d[-1].id} if n % 2 else None), (add if n % 2 == 0 else None)
        return (add if n % 2 == 0 else None), ({"action": "delete", "stageId": d[-1].id} if n % 2 else None)

    def floor(self, calls: int) -> dict:
        """A get_trip answered from what the process keeps (mcp/kept.py: no SQL, the budgets' round trip and the
        request's counters): what any tools/call costs in this process before the tool does anything."""
        walls, cpus = [], []
        for n in range(calls + 5):
            self.meter.reset()
            with self.meter.counting():
                c0, w0 = time.process_time(), time.perf_counter()
                self.call("get_trip", {"id": self.trip_id})
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            if n >= 5:
                walls.append(wall * 1000)
                cpus.append(cpu * 1000)
        return {"calls": calls, "p50_ms": round(statistics.median(walls), 3), "cpu_ms": round(statistics.mean(cpus), 3),
                "calls_s": round(1000 / statistics.mean(walls), 1), "sql": len(self.meter.sql),
                "redis": self.meter.redis}

    def measure(self, action: str, calls: int) -> dict:
        redis = self._redis()
        walls, cpus, sql, redis_trips, sql_ms, redis_ms = [], [], [], [], [], []
        kinds: Counter = Counter()
        commands: Counter = Counter()
        n = measured = 0
        while measured < calls + 1:  # the first measured call warms up and is left out
            setup, args = self.steps(action, n)
            n += 1
            if setup:
                self.edit(setup)
            if not args:
                continue
            before = command_stats(redis)
            self.meter.reset()
            with self.meter.counting():
                c0, w0 = time.process_time(), time.perf_counter()
                self.edit(args)
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            after = command_stats(redis)
            measured += 1
            if measured == 1:
                continue
            walls.append(wall * 1000)
            cpus.append(cpu * 1000)
            sql.append(len(self.meter.sql))
            sql_ms.append(self.meter.sql_s * 1000)
            redis_trips.append(self.meter.redis)
            redis_ms.append(self.meter.redis_s * 1000)
            if measured == 2:
                kinds = Counter(self.meter.sql)
                commands = Counter({k: v for k, v in (after - before).items() if k != "info"})
        walls.sort()
        return {"calls": calls, "p50_ms": round(statistics.median(walls), 3),
                "p99_ms": round(walls[min(len(walls) - 1, int(len(walls) * 0.99))], 3),
                "calls_s": round(1000 / statistics.mean(walls), 1), "cpu_ms": round(statistics.mean(cpus), 3),
                "sql": statistics.mode(sql), "sql_range": [min(sql), max(sql)],
                "sql_ms": round(statistics.mean(sql_ms), 3), "redis": statistics.mode(redis_trips),
                "redis_range": [min(redis_trips), max(redis_trips)], "redis_ms": round(statistics.mean(redis_ms), 3),
                "statements": dict(kinds.most_common()), "redis_commands": dict(commands.most_common())}

    def _redis(self):
        from trips.core.redis_client import get_redis

        with self.app.app_context():
            return get_redis()

    def profile(self, action: str, calls: int, path: Path, append: bool = False) -> dict:
        """cProfile of `calls` calls of `action` (rename, or move: a day there and back), written to `path`."""
        d = self.days()
        ids = {"rename": d[2].id, "move": d[0].id}

        def args(n):
            if action == "rename":
                return {"action": "update", "stageId": ids["rename"], "label": f"Profiled {n}"}
            return {"action": "move", "stageId": ids["move"], "toIndex": 1 if n % 2 == 0 else 0}

        for n in range(6):  # warm
            self.edit(args(n))
        profiler = cProfile.Profile()
        w0 = time.perf_counter()
        profiler.enable()
        for n in range(calls):
            self.edit(args(n))
        profiler.disable()
        wall = time.perf_counter() - w0
        stats = pstats.Stats(profiler)
        by_layer: Counter = Counter()
        for (filename, _, func), (_, _, tottime, _, _) in stats.stats.items():
            by_layer[layer(filename, func)] += tottime
        total = sum(by_layer.values())
        out = io.StringIO()
        out.write(f"{'=' * 100}\ncProfile of {calls} edit_stages {action} calls through /mcp (test client, in process), "
                  f"{wall * 1000 / calls:.2f} ms a call under the profiler; total self time {total:.3f} s\n\n")
        out.write("Self time per layer (tottime summed over the functions of each layer):\n")
        for name, seconds in by_layer.most_common():
            out.write(f"  {name:28s} {seconds:8.3f} s  {100 * seconds / total:5.1f} %  "
                      f"{seconds * 1000 / calls:6.3f} ms/call\n")
        out.write("\nTop 25 by cumulative time (layer | ncalls | tottime | cumtime | ms/call cum | function):\n")
        entries = sorted(stats.stats.items(), key=lambda kv: kv[1][3], reverse=True)[:25]
        for (filename, line, func), (_, ncalls, tottime, cumtime, _) in entries:
            short = filename.replace(str(ROOT) + "/", "").split("site-packages/")[-1]
            out.write(f"  {layer(filename, func):28s} | {ncalls:7d} | {tottime:7.3f} | {cumtime:7.3f} | "
                      f"{cumtime * 1000 / calls:6.3f} | {short}:{line}({func})\n")
        out.write("\nKey functions (cumulative ms per call, times called per call):\n")
        for suffix, name, what in KEY_FUNCTIONS:
            for (filename, line, func), (_, ncalls, _, cumtime, _) in stats.stats.items():
                if filename.endswith(suffix) and func == name:
                    out.write(f"  {cumtime * 1000 / calls:7.3f} ms  {ncalls / calls:5.1f}x  {suffix}:{line}({func}): "
                              f"{what}\n")

        out.write("\nTop 40 by self time:\n")
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(40)
        out.write(stream.getvalue().split("\n", 6)[-1] if stream.getvalue() else "")
        with path.open("a" if append else "w", encoding="utf-8") as f:
            f.write(out.getvalue())
        return {name: round(s * 1000 / calls, 3) for name, s in by_layer.most_common()}



def setup(config: dict):
    """The app migrated, a user with an MCP token, the 14-day trip dated, filled and settled: (app, token, trip id)."""
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from flask_migrate import upgrade

    import bench_analysis
    from app import create_app
    from oauth.kernel.tokens import create_user, issue_token
    from tests.fakes.thirdparty import gpx_from_points
    from tests.trips.readmodels.test_readmodels_enriched import fill, settle
    from trips.core.db import atomic, db
    from trips.services.trips import import_gpx

    app = create_app(config, environ={})
    with app.app_context():
        upgrade()
        user = create_user("bench-edits@example.org")
        db.session.commit()
        with atomic():
            token = issue_token(user, app.config["MCP_RESOURCE"], "trips:read trips:write", 86400,
                                client_id="bench-agent")
        start = (date.today() + timedelta(days=200)).isoformat()
        trip = import_gpx(user, io.BytesIO(gpx_from_points(bench_analysis.route(), name="Bench 14 days")),
                          {"startDate": start})
        trip_id, days = trip.id, len(trip.stages)
        fill(trip_id)
        settle(trip_id)
        db.session.remove()
    return app, token, trip_id, days


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="measured renames")
    parser.add_argument("--recut-calls", type=int, default=60, help="measured calls of each other action")
    parser.add_argument("--profile-calls", type=int, default=300, help="profiled renames (and a tenth as many moves)")
    env_db = os.environ.get("DATABASE_URL", "")
    parser.add_argument("--database-url", default=env_db if env_db.startswith("postgresql") else "")
    parser.add_argument("--pg-schema", default="btp_bench_edits")
    parser.add_argument("--redis-url", default="")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="btp-bench-edits-"))
    redis_proc = None
    try:
        if args.redis_url:
            import redis as redis_lib

            redis_lib.Redis.from_url(args.redis_url).flushdb()
            redis_url = args.redis_url
        else:
            redis_url, redis_proc = start_redis(tmp)
        if args.database_url:
            from tests.conftest import pg_url_with_schema, reset_pg_schema

            reset_pg_schema(args.database_url, args.pg_schema)
            db_url, engine_name = pg_url_with_schema(args.database_url, args.pg_schema), "postgresql"
        else:
            db_url, engine_name = f"sqlite:///{tmp / 'btp.sqlite3'}", "sqlite"
        config = {"DATABASE_URL": db_url, "REDIS_URL": redis_url, "BTP_INSTANCE_DIR": str(tmp),
                  "BTP_SECRET_KEY": "bench-secret-key", "BTP_ENV": "production",
                  "BTP_BASE_URL": "http://127.0.0.1:8000", **LIFTED}
        t = time.perf_counter()
        app, token, trip_id, days = setup(config)
        log(f"{engine_name}: trip {trip_id} ({days} days) ready in {time.perf_counter() - t:.1f} s")
        from app import create_app
        from trips.core.db import db

        with app.app_context():
            db.engine.dispose()
        app = create_app(config, environ={}, serving=True)  # a web worker's app, as wsgi.py builds it
        with app.app_context():
            meter = Meter(db.engine)
        bench = Bench(app, token, trip_id, meter)
        floor = bench.floor(args.calls)
        log(f"get_trip kept (the pipeline's floor) p50 {floor['p50_ms']:.2f} ms  CPU {floor['cpu_ms']:.2f} ms  "
            f"SQL {floor['sql']}  Redis {floor['redis']}")
        results = {}
        for action in ACTIONS:
            calls = args.calls if action == "rename" else args.recut_calls
            results[action] = bench.measure(action, calls)
            r = results[action]
            log(f"{action:16s} p50 {r['p50_ms']:7.2f} ms  {r['calls_s']:6.1f}/s  CPU {r['cpu_ms']:6.2f} ms  "
                f"SQL {r['sql']} ({r['sql_ms']:.2f} ms)  Redis {r['redis']} ({r['redis_ms']:.2f} ms)")
        suffix = "" if engine_name == "sqlite" else f"-{engine_name}"
        OUT.mkdir(parents=True, exist_ok=True)
        profile_path = OUT / f"edit_profile{suffix}.txt"
        layers = bench.profile("rename", args.profile_calls, profile_path) if args.profile_calls else {}
        if args.profile_calls:  # a recut action beside it: where its time goes (fewer calls: each costs far more)
            recut_layers = bench.profile("move", max(10, args.profile_calls // 10), profile_path, append=True)
            log("move profile (self ms per call by layer):", recut_layers)
        if layers:
            log("profile written to", profile_path, layers)
        rows = []
        rename = results["rename"]
        rows.append(row(f"rename calls/s, 1 client, in process ({engine_name})", "calls/s", rename["calls_s"],
                        PEER_RENAME["calls_s"], "fastmcp peer over HTTP (bench_mcp.py)", PEER_RENAME["calls_s"],
                        rename["calls_s"] >= PEER_RENAME["calls_s"]))
        rows.append(row(f"rename p50, in process ({engine_name})", "ms", rename["p50_ms"], PEER_RENAME["p50_ms"],
                        "fastmcp peer over HTTP (bench_mcp.py)", 3.0, rename["p50_ms"] <= 3.0))
        rows.append(row(f"get_trip kept p50, the pipeline's floor ({engine_name})", "ms", floor["p50_ms"]))
        rows.append(row(f"get_trip kept CPU per call ({engine_name})", "ms", floor["cpu_ms"]))
        for action, r in results.items():
            rows.append(row(f"{action} p50 ({engine_name})", "ms", r["p50_ms"]))
            rows.append(row(f"{action} CPU per call ({engine_name})", "ms", r["cpu_ms"]))
            rows.append(row(f"{action} SQL statements per call ({engine_name})", "statements", r["sql"]))
            rows.append(row(f"{action} Redis round trips per call ({engine_name})", "round trips", r["redis"]))
        notes = [f"{engine_name}, in process (Flask test client on /mcp, no HTTP server), one client, the version "
                 f"chained; trip of {days} days; {args.calls} renames, {args.recut_calls} calls of each other action",
                 "the peer's figures are over HTTP (bench_mcp.py): the in-process figure leaves out the server, so "
                 "BTP below them here is below them over HTTP too",
                 f"profile: {profile_path.name}; self ms per rename by layer: {layers}"]
        path = write_result(f"edit_costs{suffix}", rows, notes, extra={"actions": results, "floor": floor,
                                                                                 "layers_ms": layers})
        log("written", path)
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
