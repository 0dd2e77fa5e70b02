"""Benchmark: BTP's gunicorn worker against gunicorn's own gthread worker, in one run (README "Which worker").

    .venv/bin/python bench/bench_server.py [--seconds 8] [--rounds 3] [--workers N] [--no-nginx] [--keep]

The set-up of bench/bench_mcp.py (PostgreSQL, a redis-server of its own, the 14-day trip); two gunicorn servers on
the same database and Redis, both reading gunicorn.conf.py with the same worker count: one with BTP's worker, one
with `--worker-class gthread --threads 8`. Points: get_trip at 1, 8 and 32 clients, the rename (edit_stages) at 8,
bench_mixed.py's mixed load at 8 (no analyses), and get_trip at 8 through deploy/nginx.conf (one nginx in front of
each server). Every point is measured on both servers in turn, round by round (which goes first alternating); each
figure is the median of its rounds in calls/s, and the row's ratio is BTP/gthread. The verdict says whether gthread
came within 15 % of BTP's worker on every point (README: then switch). What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_mcp as mcp  # noqa: E402
import bench_mixed as mixed  # noqa: E402
from common import row, write_result  # noqa: E402

SWITCH_WITHIN = 0.15  # README "Which worker": gthread this close to BTP's worker on every point means switch
GTHREAD = ("--worker-class", "gthread", "--threads", "8")
POINTS = (("get_trip", 1), ("get_trip", 8), ("get_trip", 32), ("rename", 8), ("mixed", 8), ("nginx get_trip", 8))
EDITS = 8  # trips per server for the rename and the mixed load (bench_mcp's setup makes twice EDIT_TRIPS)


def nginx_binary() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)


def start_gthread(stack: mcp.Stack, env: dict, port: int, logs: Path, workers: int):
    cmd = [str(ROOT / ".venv" / "bin" / "gunicorn"), "-w", str(workers), *GTHREAD, "-b", f"127.0.0.1:{port}",
           "wsgi:app"]
    proc = stack.popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                       stderr=open(logs / "gthread.log", "wb"))
    mcp.wait_port(port, proc)
    return proc


def behind_nginx(exits: ExitStack, upstream: int, folder: Path) -> str:
    """deploy/nginx.conf in front of the server on `upstream` (tests/clients/test_nginx.py's harness): its /mcp URL."""
    from tests.clients.test_nginx import nginx_running, prepared, render_site

    folder.mkdir()
    cert, key = prepared(folder)
    tls, plain = mcp.free_port(), mcp.free_port()
    exits.enter_context(nginx_running(folder, render_site(upstream, tls, plain, folder, cert, key), tls))
    return f"https://127.0.0.1:{tls}/mcp"


def measure(s, server: dict, point: str, connections: int, seconds: float, trip: str) -> dict:
    """One point on one server: calls/s and errors (and the server's CPU per call when wrk measured it)."""
    calls = mcp.tool_calls(trip)
    if point == "mixed":
        edits = mcp.edit_versions(s.db_url, server["trips"])[:connections]
        out = mixed.load(server["port"], s.token, trip, edits, [[] for _ in edits], seconds, analyze=False)
        return {"calls_s": out["calls_s"], "errors": out["errors"], "cpu_ms": None}
    if point == "rename":
        out = mcp.wrk(server["port"], s.token, seconds, connections, server=server["proc"],
                      edits=mcp.edit_versions(s.db_url, server["trips"])[:connections])
    else:
        out = mcp.wrk(server["port"], s.token, seconds, connections, calls=calls["get_trip"], server=server["proc"],
                      url=server["nginx"] if point.startswith("nginx") else None)
    return {"calls_s": out["calls_s"], "errors": out["errors_total"], "cpu_ms": out["cpu_ms"]}


def summarise(per: dict, points: list, rounds: int) -> tuple[list, dict]:
    rows, summary = [], {}
    for point, connections in points:
        key = f"{point} at {connections}"
        btp, gthread = per["btp"][key], per["gthread"][key]
        b, g = statistics.median(p["calls_s"] for p in btp), statistics.median(p["calls_s"] for p in gthread)
        ratios = [p["calls_s"] / q["calls_s"] for p, q in zip(btp, gthread) if q["calls_s"]]
        summary[key] = {"btp_calls_s": round(b, 1), "gthread_calls_s": round(g, 1),
                        "ratio": round(b / g, 3) if g else None,
                        "ratio_min": round(min(ratios), 3) if ratios else None,
                        "ratio_max": round(max(ratios), 3) if ratios else None,
                        "errors": {"btp": sum(p["errors"] for p in btp), "gthread": sum(p["errors"] for p in gthread)},
                        "btp_rounds": [p["calls_s"] for p in btp], "gthread_rounds": [p["calls_s"] for p in gthread]}
        rows.append(row(f"{key} clients, calls/s (median of {rounds} rounds)", "calls/s", round(b, 1), round(g, 1),
                        "gunicorn gthread, 8 threads, same rounds", target=f">= {1 + SWITCH_WITHIN:.2f}",
                        met=bool(g) and b / g >= 1 + SWITCH_WITHIN))
    return rows, summary


def decide(summary: dict) -> tuple[bool, str]:
    """(switch to gthread?, the sentence saying so): gthread within SWITCH_WITHIN of BTP's worker on every point."""
    ratios = [v["ratio"] for v in summary.values()]
    within = bool(ratios) and all(r is not None and r < 1 + SWITCH_WITHIN for r in ratios)
    if within:
        return True, f"gthread within {SWITCH_WITHIN:.0%} of BTP's worker on every point: switch (README 'Which worker')"
    return False, f"BTP's worker ahead by {SWITCH_WITHIN:.0%} or more on at least one point: keep it"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="duration of each point (default 8)")
    ap.add_argument("--rounds", type=int, default=3, help="times each point is measured on each server (default 3)")
    ap.add_argument("--workers", type=int, default=(os.cpu_count() or 2) + 1,
                    help="gunicorn workers of each server (default one per core plus one)")
    ap.add_argument("--no-nginx", action="store_true", help="skip the point behind deploy/nginx.conf")
    ap.add_argument("--keep", action="store_true", help="keep the database and the temporary directory")
    args = ap.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is missing: apt-get install wrk")
    points = [p for p in POINTS if not (p[0].startswith("nginx") and (args.no_nginx or not nginx_binary()))]
    stack = mcp.Stack()
    try:
        with ExitStack() as exits:
            return run(stack, exits, args, points)
    finally:
        stack.close()


def run(stack: mcp.Stack, exits: ExitStack, args, points: list) -> int:
    s = mcp.Servers(stack, keep=args.keep, peer=False, btp_workers=args.workers, slow_upstream_s=0)
    trip, trips = s.info["trip"], s.info["edits"]
    servers = {"btp": {"port": s.btp_port, "proc": s.btp, "trips": trips[:EDITS]}}
    port = mcp.free_port()
    servers["gthread"] = {"port": port, "proc": start_gthread(stack, s.env, port, Path(s.tmp), args.workers),
                          "trips": trips[EDITS:2 * EDITS]}
    mcp.wait_answers(port, s.token, "get_trip", {"id": trip})
    if any(p[0].startswith("nginx") for p in points):
        for name, server in servers.items():
            server["nginx"] = behind_nginx(exits, server["port"], Path(s.tmp) / f"nginx-{name}")
    for server in servers.values():  # warm-up: every worker has served each kind of point
        for point, connections in points:
            measure(s, server, point, min(connections, 8), 2, trip)
    for server in servers.values():
        mcp.wait_idle(server["proc"])
    per = {name: {f"{p} at {c}": [] for p, c in points} for name in servers}
    names = list(servers)
    for n in range(args.rounds):
        said = []
        for point, connections in points:
            for name in names if n % 2 == 0 else names[::-1]:
                out = measure(s, servers[name], point, connections, args.seconds, trip)
                per[name][f"{point} at {connections}"].append(out)
                said.append(f"{name} {point}@{connections} {out['calls_s']:.0f}/s")
        mcp.log(f"round {n + 1}/{args.rounds}: " + " | ".join(said))
    rows, summary = summarise(per, points, args.rounds)
    within, verdict = decide(summary)
    for key, v in summary.items():
        mcp.log(f"{key}: BTP {v['btp_calls_s']} calls/s, gthread {v['gthread_calls_s']}, ratio {v['ratio']} "
                f"(rounds {v['ratio_min']}–{v['ratio_max']}), errors {v['errors']}")
    mcp.log(verdict)
    path = write_result("server", rows, notes=[f"{args.rounds} rounds of {args.seconds} s, {args.workers} workers "
                                               f"each", verdict], extra={"summary": summary, "switch": within})
    mcp.log(f"written {path}")
    errors = sum(v["errors"]["btp"] + v["errors"]["gthread"] for v in summary.values())
    return 0 if errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
