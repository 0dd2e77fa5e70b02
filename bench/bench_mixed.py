"""Benchmark: a mixed MCP load, reads, edits and analyses as an agent session makes them, BTP against the FastMCP peer.

    .venv/bin/python bench/bench_mixed.py [--seconds 10] [--rounds 2] [--connections 8,32] [--keep]

The set-up of bench/bench_mcp.py with RQ workers beside BTP; a Python load client (`--client` mode of this file)
draws each connection's calls from its own seeded RNG (`schedule`). What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from common import row, write_result  # noqa: E402

KINDS = ("get_trip", "list_trips", "edit", "analyze")
WEIGHTS = (0.50, 0.20, 0.25, 0.05)  # reads 70 % (get_trip 50, list_trips 20), edits 25 %, analyses 5 %
MODERN = "2026-07-28"
ACTIVE = ("pending", "running")
CLIENT_PROCESSES = 2
EDIT_TRIPS = 40  # one per connection, at the most connections (32) and some to spare
SEED = 22


def log(*parts) -> None:
    print("[bench_mixed]", *parts, flush=True)


# --- pure helpers (tests/project/test_bench_mixed.py) ------------------------------------------------------------------
def schedule(seed: int, connection: int, weights=WEIGHTS):
    """The endless, deterministic sequence of call kinds of one connection: each drawn from `weights` (KINDS'
    order) by an RNG seeded with (seed, connection), so a run replays the same calls on both servers."""
    if len(weights) != len(KINDS) or any(w < 0 for w in weights) or not sum(weights):
        raise ValueError(f"weights: {len(KINDS)} non-negative numbers, not all zero ({KINDS})")
    rng = random.Random(f"{seed}:{connection}")
    total = sum(weights)
    bounds, acc = [], 0.0
    for w in weights:
        acc += w / total
        bounds.append(acc)
    while True:
        x = rng.random()
        yield next((k for k, b in zip(KINDS, bounds) if x < b), KINDS[-1])


def classify(status: int, body: bytes) -> tuple[dict | None, str | None]:
    """(the JSON-RPC result, None) when the call succeeded: HTTP 200, a JSON-RPC `result` that is not a tool
    refusal (isError); else (None, what went wrong, short)."""
    text = body[:200].decode(errors="replace")
    if status != 200:
        return None, f"HTTP {status}: {text}"
    try:
        answer = json.loads(body)
    except ValueError:
        return None, f"not JSON: {text}"
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        return None, f"no result: {text}"
    if result.get("isError"):
        return None, f"refused: {text}"
    return result, None


def percentile(sorted_values: list, q: float):
    """The nearest-rank q-th percentile (0 < q <= 100) of an ascending list; None when empty."""
    if not sorted_values:
        return None
    if not 0 < q <= 100:
        raise ValueError("q must be in (0, 100]")
    rank = -(-q * len(sorted_values) // 100)  # ceil
    return sorted_values[max(1, int(rank)) - 1]


def aggregate(parts: list[dict], kinds=KINDS) -> dict:
    """The figures of one point from its client processes' reports (`run_client`): per kind the calls, errors,
    calls/s, p50 and p99 (ms, over every call of that kind, errors included), the first error; the total calls/s,
    and "reads+edits" (every kind but analyze: what the peer can do too). The point's duration is from the common
    start to the last call's end."""
    start = min(p["start"] for p in parts)
    end = max(p["end"] for p in parts)
    seconds = max(end - start, 1e-9)
    out = {"seconds": round(seconds, 3), "kinds": {}}
    for kind in kinds:
        lat = sorted(x for p in parts for x in p["latencies_us"].get(kind, []))
        errors = sum(p["errors"].get(kind, 0) for p in parts)
        sample = next((p["samples"][kind] for p in parts if p["samples"].get(kind)), None)
        out["kinds"][kind] = {"calls": len(lat), "errors": errors, "calls_s": round(len(lat) / seconds, 1),
                              "p50_ms": _ms(percentile(lat, 50)), "p99_ms": _ms(percentile(lat, 99)),
                              "sample_error": sample}
    calls = sum(k["calls"] for k in out["kinds"].values())
    out["calls"] = calls
    out["calls_s"] = round(calls / seconds, 1)
    rw = sum(v["calls"] for k, v in out["kinds"].items() if k != "analyze")
    out["rw_calls_s"] = round(rw / seconds, 1)
    out["errors"] = sum(k["errors"] for k in out["kinds"].values())
    out["skipped"] = sum(p.get("skipped", 0) for p in parts)
    out["pool_exhausted"] = sum(p.get("pool_exhausted", 0) for p in parts)
    out["client_cpu_s"] = round(sum(p["cpu_s"] for p in parts), 3)
    return out


def _ms(us):
    return None if us is None else round(us / 1000, 2)


def median_points(points: list[dict]) -> dict:
    """One point from its rounds: the median of calls/s, p50 and p99 (per kind and in total), errors and calls
    summed, the first error kept."""
    from statistics import median

    def med(values):
        values = [v for v in values if v is not None]
        return round(median(values), 2) if values else None

    out = {"kinds": {}, "rounds": len(points)}
    for key in ("calls_s", "rw_calls_s", "server_cpu_ms", "client_cpu_ms"):
        out[key] = med([p.get(key) for p in points])
    for key in ("calls", "errors", "skipped", "pool_exhausted"):
        out[key] = sum(p.get(key) or 0 for p in points)
    for kind in points[0]["kinds"]:
        ks = [p["kinds"][kind] for p in points]
        out["kinds"][kind] = {"calls_s": med([k["calls_s"] for k in ks]), "p50_ms": med([k["p50_ms"] for k in ks]),
                              "p99_ms": med([k["p99_ms"] for k in ks]), "calls": sum(k["calls"] for k in ks),
                              "errors": sum(k["errors"] for k in ks),
                              "sample_error": next((k["sample_error"] for k in ks if k["sample_error"]), None)}
    return out


# --- the load client (a child process: `bench_mixed.py --client`, its spec on stdin) ---------------------------
def _request_body(tool: str, arguments: dict, n: int) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                  "io.modelcontextprotocol/clientCapabilities": {}}}}, separators=(",", ":")).encode()


def run_client(spec: dict) -> dict:
    """Run the connections of `spec` (one thread each) from spec["start_at"] (time.time()) for spec["seconds"];
    a call started before the end is finished and counted. Returns latencies (µs) per kind, errors, samples."""
    port, token, trip = spec["port"], spec["token"], spec["trip"]
    lat = {k: [] for k in KINDS}
    errors = {k: 0 for k in KINDS}
    samples: dict[str, str] = {}
    counters = {"skipped": 0, "pool_exhausted": 0}
    lock = threading.Lock()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
               "Mcp-Method": "tools/call"}

    def connection(conn_spec: dict, deadline: float) -> None:
        index = conn_spec["index"]
        edit_trip, edit_stage, version = conn_spec["edit"]
        pool = list(conn_spec["pool"])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = {k: [] for k in KINDS}
        mine_err, mine_samples, skipped, exhausted, n = {k: 0 for k in KINDS}, {}, 0, 0, 0
        kinds = schedule(spec["seed"], index, spec["weights"])
        while time.perf_counter() < deadline:
            kind = next(kinds)
            if kind == "analyze":
                if not spec["analyze"]:
                    skipped += 1
                    continue
                if not pool:
                    exhausted += 1
                    continue
            n += 1
            if kind == "get_trip":
                tool, args = "get_trip", {"id": trip}
            elif kind == "list_trips":
                tool, args = "list_trips", {}
            elif kind == "edit":
                tool, args = "edit_stages", {"tripId": edit_trip, "action": "update", "stageId": edit_stage,
                                             "version": version, "label": f"Day {index} rename {n}"}
            else:
                tool, args = "analyze_trip", {"id": pool.pop(0)}
            body = _request_body(tool, args, n)
            t0 = time.perf_counter()
            try:
                conn.request("POST", "/mcp", body=body, headers={**headers, "Mcp-Name": tool})
                response = conn.getresponse()
                status, raw = response.status, response.read()
            except (OSError, http.client.HTTPException) as exc:
                status, raw = 0, repr(exc).encode()
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine[kind].append(int((time.perf_counter() - t0) * 1e6))
            result, error = classify(status, raw)
            if error:
                mine_err[kind] += 1
                mine_samples.setdefault(kind, error)
            elif kind == "edit":
                version = (result.get("structuredContent") or {}).get("version", version)
        conn.close()
        with lock:
            for k in KINDS:
                lat[k] += mine[k]
                errors[k] += mine_err[k]
                if k in mine_samples:
                    samples.setdefault(k, mine_samples[k])
            counters["skipped"] += skipped
            counters["pool_exhausted"] += exhausted

    cpu0 = sum(os.times()[:2])
    delay = spec["start_at"] - time.time()
    if delay > 0:
        time.sleep(delay)
    start = time.perf_counter()
    deadline = start + spec["seconds"]
    wall_start = time.time()
    threads = [threading.Thread(target=connection, args=(c, deadline)) for c in spec["connections"]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = time.perf_counter()
    return {"start": wall_start, "end": wall_start + (end - start), "latencies_us": lat, "errors": errors,
            "samples": samples, "cpu_s": sum(os.times()[:2]) - cpu0, **counters}


def client_main() -> int:
    spec = json.loads(sys.stdin.read())
    print(json.dumps(run_client(spec)))
    return 0


def split_connections(connections: list[dict], processes: int) -> list[list[dict]]:
    """The connections dealt round-robin to at most `processes` client processes (none empty)."""
    parts = [connections[i::processes] for i in range(max(1, processes))]
    return [p for p in parts if p]


def load(port: int, token: str, trip: str, edits: list, pools: list, seconds: float, analyze: bool,
         seed: int = SEED, weights=WEIGHTS) -> dict:
    """One point: len(edits) connections over CLIENT_PROCESSES client processes; the aggregated figures."""
    conns = [{"index": i, "edit": list(edits[i]), "pool": pools[i] if analyze else []} for i in range(len(edits))]
    start_at = time.time() + 1.0  # every process imported and ready
    procs = []
    for part in split_connections(conns, CLIENT_PROCESSES):
        spec = {"port": port, "token": token, "trip": trip, "seconds": seconds, "analyze": analyze, "seed": seed,
                "weights": list(weights), "start_at": start_at, "connections": part}
        proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--client"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        proc.stdin.write(json.dumps(spec))
        proc.stdin.close()
        procs.append(proc)
    parts = []
    for proc in procs:
        out = proc.stdout.read()
        err = proc.stderr.read()
        if proc.wait(seconds + 120) != 0:
            raise RuntimeError(f"load client failed ({proc.returncode}): {err[-800:]}")
        parts.append(json.loads(out))
    return aggregate(parts)


# --- analyses settling -----------------------------------------------------------------------------------------
def computation_statuses(db_url: str) -> dict[str, int]:
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return dict(conn.execute(sa.text("SELECT status, count(*) FROM computation GROUP BY status")).all())
    finally:
        engine.dispose()


def wait_settled(db_url: str, timeout: float) -> tuple[float, dict[str, int]]:
    """Seconds until no computation of any trip is pending or running (polled every 0.2 s), and the statuses."""
    import sqlalchemy as sa

    engine = sa.create_engine(db_url)
    start = time.monotonic()
    try:
        with engine.connect() as conn:
            while True:
                statuses = dict(conn.execute(sa.text("SELECT status, count(*) FROM computation GROUP BY status"))
                                .all())
                conn.rollback()
                if not any(statuses.get(s) for s in ACTIVE):
                    return round(time.monotonic() - start, 2), statuses
                if time.monotonic() - start > timeout:
                    raise SystemExit(f"the analyses did not settle within {timeout:.0f} s: {statuses}")
                time.sleep(0.2)
    finally:
        engine.dispose()


def tree_cpu(proc: subprocess.Popen | None) -> float:
    """CPU seconds of a process and its live children, their reaped children included (cutime, cstime): an RQ
    worker's forked work horses are reaped by it."""
    from bench_mcp import cpu_seconds

    return cpu_seconds(proc, reaped=True)


def start_rq_workers(stack, env: dict, n: int, logs: Path) -> list[subprocess.Popen]:
    """`n` `flask worker` processes (BTPWorker: a forked work horse per job), registered before returning."""
    import redis

    procs = [stack.popen([sys.executable, "-m", "flask", "--app", "app", "worker", "--name", f"bench-mixed-{i}"],
                         cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                         stderr=open(logs / f"rq-worker-{i}.log", "wb")) for i in range(n)]
    connection = redis.Redis.from_url(env["REDIS_URL"])
    end = time.monotonic() + 60
    while True:
        names = {n.decode() for n in connection.smembers("rq:workers")}
        if all(f"rq:worker:bench-mixed-{i}" in names for i in range(n)):
            return procs
        if time.monotonic() > end or any(p.poll() is not None for p in procs):
            raise SystemExit(f"the RQ workers did not register: {sorted(names)}; see {logs}/rq-worker-*.log")
        time.sleep(0.2)


# --- the run ---------------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--client"]:
        return client_main()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="duration of each load point (default 10)")
    ap.add_argument("--rounds", type=int, default=2, help="each point this many times, BTP and the peer in turn; "
                                                          "the median is reported (default 2)")
    ap.add_argument("--connections", default="8,32", help="load points (default 8,32; at most 40)")
    ap.add_argument("--pool", type=int, default=160,
                    help="short trips the analysis kind re-analyses, dealt to the connections, each analysed at most "
                         "once per point (default 160)")
    ap.add_argument("--rq-workers", type=int, default=2, help="RQ workers beside BTP (default 2)")
    ap.add_argument("--settle-timeout", type=float, default=1200.0, help="seconds the analyses may take to settle "
                                                                        "after a point (default 1200)")
    ap.add_argument("--quiet-timeout", type=float, default=20.0,
                    help="at most this long waiting for a quiet machine before each point (default 20)")
    ap.add_argument("--no-peer", action="store_true", help="BTP alone (no ratios)")
    ap.add_argument("--keep", action="store_true", help="keep the database and the temporary directory")
    args = ap.parse_args(argv)
    points = [int(c) for c in args.connections.split(",") if c]
    if not points or min(points) < 1 or max(points) > EDIT_TRIPS:
        raise SystemExit(f"--connections: 1 to {EDIT_TRIPS} each")
    if args.pool < max(points):
        raise SystemExit("--pool: at least one trip per connection")
    from bench_mcp import Stack

    stack = Stack()
    try:
        return run(stack, args, points)
    finally:
        stack.close()


def run(stack, args, points: list[int]) -> int:
    from bench_mcp import Servers, cpu_seconds, edit_versions, wait_quiet

    peer = not args.no_peer
    t = time.perf_counter()
    s = Servers(stack, keep=args.keep, peer=peer, db_prefix="btp_mixed",
                setup={"others_n": EDIT_TRIPS, "edits_n": EDIT_TRIPS, "pool_n": args.pool})
    setup_s = time.perf_counter() - t
    info = s.info
    log(f"set-up {setup_s:.0f} s: {info['trips']} trips, pool {len(info['pool'])}")
    workers = start_rq_workers(stack, s.env, args.rq_workers, s.tmp)
    settle0, statuses0 = wait_settled(s.db_url, args.settle_timeout)
    log(f"{args.rq_workers} RQ workers registered; computations {statuses0}")

    def pools_for(c: int) -> list[list[str]]:
        return [info["pool"][i::c] for i in range(c)]

    def point(who: str, c: int, seconds: float) -> dict:
        port, server = (s.peer_port, s.peer) if who == "peer" else (s.btp_port, s.btp)
        edits = edit_versions(s.db_url, info["edits"][:c])
        cpu0, wcpu0 = cpu_seconds(server), sum(tree_cpu(w) for w in workers)
        out = load(port, s.token, info["trip"], edits, pools_for(c), seconds, analyze=who == "btp")
        out["server_cpu_ms"] = round(1000 * (cpu_seconds(server) - cpu0) / max(1, out["calls"]), 2)
        out["client_cpu_ms"] = round(1000 * out["client_cpu_s"] / max(1, out["calls"]), 3)
        if who == "btp":
            out["settle_s"], out["statuses"] = wait_settled(s.db_url, args.settle_timeout)
            out["worker_cpu_s"] = round(sum(tree_cpu(w) for w in workers) - wcpu0, 1)
            out["failed"] = out["statuses"].get("failed", 0)
        return out

    # warm-up: every worker of both servers has served every kind (the analyses settle before the load)
    for who in ("btp", "peer") if peer else ("btp",):
        warm = point(who, 8, 2.0)
        log(f"warm-up {who}: {warm['calls']} calls, {warm['errors']} errors")
    per_round: dict[int, list] = {c: [] for c in points}
    loads = []
    series = ("btp", "btp_rw", "peer") if peer else ("btp", "btp_rw")
    for n in range(args.rounds):
        order = series if n % 2 == 0 else series[::-1]
        for c in points:
            got = {}
            for who in order:
                waited = wait_quiet(args.quiet_timeout)
                got[who] = point(who, c, args.seconds)
                got[who]["quiet_after_s"] = waited
                loads.append(round(os.getloadavg()[0], 2))
            per_round[c].append((got["btp"], got.get("peer"), got["btp_rw"]))
            ours, theirs = got["btp"], got.get("peer")
            log(f"c={c} round {n + 1}/{args.rounds}: BTP {ours['calls_s']} calls/s (reads+edits "
                f"{ours['rw_calls_s']}), errors {ours['errors']}, " + ", ".join(
                    f"{k} {v['calls_s']}/s p50 {v['p50_ms']} p99 {v['p99_ms']} ms" for k, v in ours["kinds"].items())
                + f"; settled {ours['settle_s']} s after, {ours['failed']} failed"
                + (f" | peer {theirs['rw_calls_s']} calls/s, errors {theirs['errors']}, " + ", ".join(
                    f"{k} {v['calls_s']}/s p50 {v['p50_ms']} p99 {v['p99_ms']} ms"
                    for k, v in theirs["kinds"].items() if k != "analyze") if theirs else "")
                + f" | BTP without analyses {got['btp_rw']['rw_calls_s']} calls/s, errors {got['btp_rw']['errors']}")
    rows, notes = report(per_round, peer, args, info, loads)
    notes.append(f"set-up {setup_s:.0f} s (untimed); before the load the computations were {statuses0}")
    path = write_result("mixed", rows, notes)
    log("wrote", path)
    return 0


NAMES = {"get_trip": "get_trip", "list_trips": "list_trips", "edit": "edit_stages (rename, chained)",
         "analyze": "analyze_trip (a settled trip of the connection's own)"}


def report(per_round: dict, peer: bool, args, info: dict, loads: list) -> tuple[list, list]:
    """Rows and notes from every round of every point: (BTP with analyses, the peer or None, BTP without)."""
    peer_name = "FastMCP 4.2 + uvicorn ×2 (no analysis: 70:25 reads and edits)" if peer else None
    rows, notes = [], []
    for c, rounds in per_round.items():
        ours = median_points([r[0] for r in rounds])
        theirs = median_points([r[1] for r in rounds]) if peer else None
        plain = median_points([r[2] for r in rounds])
        label = f"{c} connections"
        rows.append(row(f"reads+edits calls/s, BTP with its 5 % analyses and RQ workers, {label}", "calls/s",
                        ours["rw_calls_s"], theirs["rw_calls_s"] if theirs else None, peer_name))
        rows.append(row(f"reads+edits calls/s, BTP with the analysis draws skipped (as the peer), {label}",
                        "calls/s", plain["rw_calls_s"], theirs["rw_calls_s"] if theirs else None, peer_name))
        rows.append(row(f"all calls/s, BTP (analyze_trip included), {label}", "calls/s", ours["calls_s"]))
        for kind in KINDS:
            k = ours["kinds"][kind]
            p = theirs["kinds"][kind] if theirs and kind != "analyze" else None
            name = peer_name if p else None
            rows.append(row(f"{NAMES[kind]} calls/s, {label}", "calls/s", k["calls_s"],
                            p["calls_s"] if p else None, name))
            rows.append(row(f"{NAMES[kind]} p50, {label}", "ms", k["p50_ms"], p["p50_ms"] if p else None, name))
            rows.append(row(f"{NAMES[kind]} p99, {label}", "ms", k["p99_ms"], p["p99_ms"] if p else None, name))
        rows.append(row(f"server CPU per call, {label}", "ms", ours["server_cpu_ms"],
                        theirs["server_cpu_ms"] if theirs else None, peer_name))
        rows.append(row(f"errors, {label}", "calls", ours["errors"], theirs["errors"] if theirs else None,
                        peer_name, "= 0", ours["errors"] == 0))
        rows.append(row(f"errors, BTP with the analysis draws skipped, {label}", "calls", plain["errors"], None, None,
                        "= 0", plain["errors"] == 0))
        settle = [r[0]["settle_s"] for r in rounds]
        failed = max(r[0]["failed"] for r in rounds)
        unsettled = sum(sum(r[0]["statuses"].get(s, 0) for s in ACTIVE) for r in rounds)
        analyses = sum(r[0]["kinds"]["analyze"]["calls"] for r in rounds)
        rows.append(row(f"analyses settled after the load (slowest round), {label}", "s", max(settle), None, None,
                        "every analysis settled", unsettled == 0))
        rows.append(row(f"failed computations after the load (most in a round), {label}", "computations", failed, None, None, "= 0",
                        failed == 0))
        notes.append(f"{label}: {analyses} analyze_trip calls over {len(rounds)} rounds; every computation settled "
                     f"{', '.join(f'{x:g}' for x in settle)} s after each BTP round's load "
                     f"(statuses then: {rounds[-1][0]['statuses']}); the RQ workers' CPU over each round's load and "
                     "settling: " + ", ".join(f"{r[0]['worker_cpu_s']:g} s" for r in rounds))
        notes.append(f"{label}, each round (BTP all / reads+edits calls/s; BTP without analyses; peer; ratios of "
                     "reads+edits to the peer): " + "; ".join(
                         f"{o['calls_s']:g} / {o['rw_calls_s']:g}; {w['rw_calls_s']:g}; "
                         + (f"{t['rw_calls_s']:g}; {o['rw_calls_s'] / t['rw_calls_s']:.2f}, "
                            f"{w['rw_calls_s'] / t['rw_calls_s']:.2f}" if t and t["rw_calls_s"] else "-")
                         for o, t, w in rounds))
        notes.append(f"{label}, BTP with the analysis draws skipped, per kind (median of rounds): " + ", ".join(
            f"{NAMES[k]} {v['calls_s']:g}/s p50 {v['p50_ms']} ms p99 {v['p99_ms']} ms"
            for k, v in plain["kinds"].items() if k != "analyze") + f"; server CPU per call {plain['server_cpu_ms']} ms")
        notes.append(f"{label}: load client CPU per call: BTP {ours['client_cpu_ms']} ms, BTP without analyses "
                     f"{plain['client_cpu_ms']} ms, peer {theirs['client_cpu_ms'] if theirs else '-'} ms (the same "
                     "client, 2 processes, on the same 2 CPUs as the servers)")
        for who, fig in (("BTP", ours), ("BTP without analyses", plain), ("peer", theirs)):
            if fig and fig["errors"]:
                notes.append(f"{who} {label}: {fig['errors']} errors, first per kind: " + json.dumps(
                    {k: v["sample_error"] for k, v in fig["kinds"].items() if v["sample_error"]})[:600])
            if fig and fig["pool_exhausted"]:
                notes.append(f"{who} {label}: {fig['pool_exhausted']} analysis draws skipped, the connection's pool "
                             "share used up (raise --pool)")
        if theirs:
            notes.append(f"{label}: analysis draws skipped over the rounds: peer {theirs['skipped']}, BTP without "
                         f"analyses {plain['skipped']}")
    notes.append(f"mix per connection (seeded RNG {SEED}): " + ", ".join(
        f"{NAMES[k]} {w:.0%}" for k, w in zip(KINDS, WEIGHTS)) + f"; {args.seconds:g} s per point, {args.rounds} "
        "rounds (median reported), BTP, BTP without analyses and the peer in turn (the order reversed every other "
        f"round); {args.rq_workers} RQ workers (flask worker, forked work horses) beside BTP; pool of "
        f"{len(info['pool'])} short trips (4 km) for analyze_trip, each analysed at most once per point; gunicorn -w 4 "
        "(gunicorn.conf.py) on PostgreSQL + Redis, budgets lifted with BTP_LIMIT_*")
    notes.append("create_trip is not in the mix: it takes a route link (Komoot, Strava, RideWithGPS) fetched from "
                 "the network, not a GPX; the analysis kind is analyze_trip alone")
    notes.append(f"load average (1 min) after each point: {loads}; other work may share the 2 CPUs: compare the "
                 "ratios (same run), not the absolute numbers")
    return rows, notes


if __name__ == "__main__":
    sys.exit(main())
