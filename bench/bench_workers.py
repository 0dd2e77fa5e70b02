"""Benchmark: gunicorn worker counts side by side with the FastMCP peer, in one rotation (README "Workers per core").

    .venv/bin/python bench/bench_workers.py [--workers 2,3] [--rounds 8] [--seconds 8] [--connections 8]
        [--tool edit_stages|get_trip|list_trips]

The set-up of bench/bench_mcp.py, one BTP server per worker count on the same database and Redis, every server
loaded in turn each round (the order reversed every other round); calls/s, CPU per call and the machine's idle
share per server. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_mcp as mcp  # noqa: E402
from common import row, write_result  # noqa: E402


def cpu_times() -> tuple[int, int]:
    """(idle + iowait, all) jiffies of the machine so far (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


def point(s, server, tool: str, seconds: float, connections: int, calls: dict) -> dict:
    """One wrk point on `server`; with `idle`, the share of the machine's CPU time left idle meanwhile."""
    port, proc, trips = server
    before = cpu_times()
    if tool == "edit_stages":
        out = mcp.wrk(port, s.token, seconds, connections, edits=mcp.edit_versions(s.db_url, trips)[:connections],
                      server=proc, beside=s.beside)
    else:
        out = mcp.wrk(port, s.token, seconds, connections, calls=calls[tool], server=proc, beside=s.beside)
    after = cpu_times()
    out["idle"] = round((after[0] - before[0]) / max(1, after[1] - before[1]), 3)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="2,3", help="BTP's worker counts, one server each (default 2,3)")
    ap.add_argument("--rounds", type=int, default=8, help="points per server (default 8)")
    ap.add_argument("--seconds", type=float, default=8.0, help="duration of each point (default 8)")
    ap.add_argument("--connections", type=int, default=8, help="wrk connections (default 8)")
    ap.add_argument("--tool", default="edit_stages", choices=("edit_stages", "get_trip", "list_trips"))
    args = ap.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",") if w]
    if not counts or min(counts) < 1 or len(set(counts)) != len(counts):
        raise SystemExit("--workers: distinct counts of at least 1, comma-separated")
    if args.tool == "edit_stages" and args.connections > mcp.EDIT_TRIPS:
        raise SystemExit(f"--connections: at most {mcp.EDIT_TRIPS} for edit_stages")
    stack = mcp.Stack()
    try:
        s = mcp.Servers(stack, peer=True, btp_workers=counts[0], slow_upstream_s=0)
        btp_trips = s.info["edits"][:mcp.EDIT_TRIPS]
        servers = {f"BTP {counts[0]} workers": (s.btp_port, s.btp, btp_trips)}
        for n in counts[1:]:
            port, logs = mcp.free_port(), Path(s.tmp) / f"workers-{n}"
            logs.mkdir()
            proc = mcp.start_btp(stack, s.env, port, logs, n)
            mcp.wait_answers(port, s.token, "get_trip", {"id": s.info["trip"]})
            servers[f"BTP {n} workers"] = (port, proc, btp_trips)
        servers["peer"] = (s.peer_port, s.peer, s.info["edits"][mcp.EDIT_TRIPS:2 * mcp.EDIT_TRIPS])
        calls = mcp.tool_calls(s.info["trip"])
        for server in servers.values():  # warm-up: every worker has served the reads and the point's tool
            for tool in ("get_trip", "list_trips"):
                mcp.wrk(server[0], s.token, 2, 8, calls=calls[tool])
            point(s, server, args.tool, 2, args.connections, calls)
        for server in servers.values():  # every server's start-up and warm-up work is over before the first round
            mcp.wait_idle(server[1])
        names, per = list(servers), {name: [] for name in servers}
        for n in range(args.rounds):
            said = []
            for name in names if n % 2 == 0 else names[::-1]:
                out = point(s, servers[name], args.tool, args.seconds, args.connections, calls)
                per[name].append(out)
                said.append(f"{name} {out['calls_s']:.0f}/s ({out['cpu_ms']} ms, {out.get('total_cpu_ms')} ms; "
                            f"idle {out['idle']:.0%})")
            mcp.log(f"round {n + 1}/{args.rounds}: " + " | ".join(said))
        summary, rows = {}, []
        for name in names:
            points = per[name]
            ratios = [p["calls_s"] / q["calls_s"] for p, q in zip(points, per["peer"]) if q["calls_s"]]
            summary[name] = {
                "calls_s": round(statistics.median(p["calls_s"] for p in points), 1),
                "cpu_ms": round(statistics.median(p["cpu_ms"] for p in points), 2),
                "total_cpu_ms": round(statistics.median(p.get("total_cpu_ms") or 0 for p in points), 2),
                "idle": round(statistics.median(p["idle"] for p in points), 3),
                "ratio_median": round(statistics.median(ratios), 2), "ratio_min": round(min(ratios), 2),
                "ratio_max": round(max(ratios), 2), "errors": sum(p["errors_total"] for p in points),
                "rounds": [p["calls_s"] for p in points]}
            mcp.log(f"{name}: median {summary[name]['calls_s']} calls/s, CPU {summary[name]['cpu_ms']} ms a call "
                    f"({summary[name]['total_cpu_ms']} with Redis and PostgreSQL), the machine {summary[name]['idle']:.0%} "
                    f"idle; against the peer round by round "
                    f"median {summary[name]['ratio_median']}, {summary[name]['ratio_min']}–{summary[name]['ratio_max']};"
                    f" errors {summary[name]['errors']}")
        for name in names[:-1]:  # the peer is last
            rows.append(row(f"{args.tool} calls/s at {args.connections} clients, {name} (median of {args.rounds} "
                            f"rounds; round by round against the peer: median {summary[name]['ratio_median']}, "
                            f"{summary[name]['ratio_min']}–{summary[name]['ratio_max']})", "calls/s",
                            summary[name]["calls_s"], summary["peer"]["calls_s"], "FastMCP peer, same rounds"))
        write_result("workers", rows, notes=[f"{args.rounds} rounds of {args.seconds} s at {args.connections} "
                                             f"connections, {args.tool}"], extra={"summary": summary})
        return 0 if all(v["errors"] == 0 for v in summary.values()) else 1
    finally:
        stack.close()


if __name__ == "__main__":
    raise SystemExit(main())
