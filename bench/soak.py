"""Soak: steady MCP load on BTP for a while, every gunicorn worker's memory sampled, errors counted.

    .venv/bin/python bench/soak.py [--seconds 600] [--interval 30]    (`make soak`, and the end of `make bench`)

The set-up of bench/bench_mcp.py (no peer), then wrk alternating get_trip and list_trips in --interval slices.
Verdict: flat when every worker's last sample is within +10 MB of its sample after the first minute, and no errors."""
from __future__ import annotations

import argparse
import sys
import time

import bench_mcp
from common import row, write_result

GROWTH_MB = 10.0
FIRST_MINUTE = 60.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="load duration (default 600)")
    ap.add_argument("--interval", type=float, default=30.0, help="seconds between memory samples (default 30)")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--keep", action="store_true", help="keep the database and the temporary directory")
    args = ap.parse_args(argv)
    stack = bench_mcp.Stack()
    try:
        return soak(stack, args)
    finally:
        stack.close()


def soak(stack, args) -> int:
    s = bench_mcp.Servers(stack, keep=args.keep, peer=False)
    calls = bench_mcp.tool_calls(s.info["trip"])
    mixed = calls["get_trip"] + calls["list_trips"]
    bench_mcp.wrk(s.btp_port, s.token, 3, args.connections, calls=mixed)  # warm every worker
    start_pids = set(s.btp_rss())
    series = [{"t": 0.0, "calls": 0, "errors": 0, "rss": s.btp_rss()}]
    bench_mcp.log("soak: RSS at start (MB)", series[0]["rss"])
    t0 = time.monotonic()
    total_calls = total_errors = 0
    first_error = ""
    while (elapsed := time.monotonic() - t0) < args.seconds - 0.5:
        slice_s = min(args.interval, args.seconds - elapsed)
        out = bench_mcp.wrk(s.btp_port, s.token, slice_s, args.connections, calls=mixed)
        total_calls += out["requests"]
        total_errors += out["errors_total"]
        first_error = first_error or (out["sample_error"] if out["errors_total"] else "")
        sample = {"t": round(time.monotonic() - t0, 1), "calls": out["requests"], "calls_s": out["calls_s"],
                  "p99_ms": round(out["p99_us"] / 1000, 2), "errors": out["errors_total"], "rss": s.btp_rss()}
        series.append(sample)
        bench_mcp.log(f"soak t={sample['t']:.0f}s calls/s {out['calls_s']} errors {out['errors_total']} RSS",
                      sample["rss"])
    # the reference: the first sample taken once the first minute is over (else the last one)
    ref = next((x for x in series if x["t"] >= FIRST_MINUTE), series[-1])
    last = series[-1]
    growth = {pid: round(last["rss"][pid] - ref["rss"][pid], 1) for pid in last["rss"] if pid in ref["rss"]}
    replaced = sorted(set(last["rss"]) ^ start_pids)
    worst_growth = max(growth.values(), default=None)
    flat = worst_growth is not None and worst_growth <= GROWTH_MB and not replaced
    verdict = {"flat": flat, "errors": total_errors, "ok": flat and total_errors == 0,
               "growth_mb": growth, "reference_t": ref["t"], "replaced_workers": replaced}
    rows = [
        row("steady load duration", "s", round(last["t"], 1)),
        row(f"calls served ({args.connections} connections, get_trip + list_trips)", "calls", total_calls),
        row("calls/s over the soak", "calls/s", round(total_calls / max(last["t"], 1e-9), 1)),
        row("errors", "calls", total_errors, target="= 0", met=total_errors == 0),
        row(f"RSS growth per worker, max, t={ref['t']:.0f}s → t={last['t']:.0f}s", "MB", worst_growth,
            target=f"<= {GROWTH_MB:g} MB", met=worst_growth is not None and worst_growth <= GROWTH_MB),
        row("RSS per worker at the end, max", "MB", max(last["rss"].values(), default=None), target="<= 150 MB",
            met=max(last["rss"].values(), default=1e9) <= 150),
    ]
    notes = [f"verdict: {'flat' if flat else 'NOT flat'}, {total_errors} errors"
             + (f"; workers replaced during the soak: {replaced}" if replaced else ""),
             "sampled every %gs; RSS series per worker pid in `series`" % args.interval]
    if first_error:
        notes.append("first error: " + first_error[:300])
        notes.append("gunicorn log tail: " + s.log_tail("gunicorn.log", 2000).replace("\n", " | "))
    series = [{**x, "rss": {str(k): v for k, v in x["rss"].items()}} for x in series]
    path = write_result("soak", rows, notes, extra={"series": series,
                                                    "verdict": {**verdict, "growth_mb": {str(k): v for k, v in growth.items()}}})
    bench_mcp.log("wrote", path)
    return 0  # a missed target is a figure (met: false in the table), not a failed script


if __name__ == "__main__":
    sys.exit(main())
