"""Benchmark: how long a request far beyond its bounds costs before it is refused (REST and MCP create).

    .venv/bin/python bench/bench_bounds.py [--items 100000] [--rounds 5]

A trip created from `--items` waypoints, sent to POST /api/trips and to the create_trip tool in-process (Flask's test
client, SQLite, an embedded Redis): the median time from the request to its refusal, the JSON parsing included,
after one untimed warm-up call each.
What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from common import row, write_result  # noqa: E402

TARGET_MS = 100
LIFTED = {"BTP_LIMIT_TRIP_CREATE": "1000000/60", "BTP_LIMIT_MCP_CALLS": "1000000/60",
          "BTP_LIMIT_MCP_WRITES": "1000000/60", "BTP_LIMIT_MCP_ADDRESS": "1000000/60"}


def timed(send, rounds: int) -> tuple[float, int]:
    """(median milliseconds, the last status) of `rounds` calls of `send`."""
    times, status = [], 0
    for _ in range(rounds):
        start = time.perf_counter()
        status = send()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from flask_migrate import upgrade

    from app import create_app
    from tests.factories import auth, make_token, make_user
    from tests.mcp_helpers import MODERN, mcp_token
    from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis

    tmp = Path(tempfile.mkdtemp(prefix="btp-bounds-"))
    redis_url, started = ensure_embedded_redis(tmp)
    points = [{"lat": 45.0 + i * 1e-6, "lon": 5.0} for i in range(args.items)]
    try:
        app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3", "BTP_INSTANCE_DIR": str(tmp),
                          "REDIS_URL": redis_url, "BTP_SECRET_KEY": "bench", **LIFTED}, environ={})
        with app.app_context():
            upgrade()
            user = make_user("bench@example.org")
            rest, token = auth(make_token(user)), mcp_token(app, user)
            client = app.test_client()
            body = json.dumps({"waypoints": points})
            # The client's own encoding is not the server's cost: the bodies are encoded once, before the clock.
            call = {"name": "create_trip", "arguments": {"waypoints": points},
                    "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                              "io.modelcontextprotocol/clientCapabilities": {}}}
            message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
            sent = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN,
                    "Mcp-Method": "tools/call", "Mcp-Name": "create_trip"}

            def over_rest() -> int:
                return client.post("/api/trips", data=body, headers={**rest, "Content-Type": "application/json",
                                                                     "Idempotency-Key": secrets.token_hex(16)}).status_code

            def over_mcp() -> int:
                answer = client.post("/mcp", data=message, headers=sent).get_json()
                return 422 if answer["result"].get("isError") else 200

            over_rest(), over_mcp()  # warm-up: the catalogues and the tool's validator are loaded once per process
            rest_ms, rest_status = timed(over_rest, args.rounds)
            mcp_ms, mcp_status = timed(over_mcp, args.rounds)
    finally:
        if started:
            stop_embedded_redis(redis_url)
        shutil.rmtree(tmp, ignore_errors=True)
    rows = [row(f"REST create, {args.items} waypoints, until refused", "ms", round(rest_ms, 1), target=TARGET_MS,
                met=rest_ms <= TARGET_MS and rest_status == 422),
            row(f"MCP create_trip, {args.items} waypoints, until refused", "ms", round(mcp_ms, 1), target=TARGET_MS,
                met=mcp_ms <= TARGET_MS and mcp_status == 422)]
    for r in rows:
        print(f"{r['figure']}: {r['btp']} {r['unit']} (target {r['target']}, met {r['met']})")
    write_result("bounds", rows, notes=[f"statuses: REST {rest_status}, MCP {mcp_status}; median of {args.rounds}"])


if __name__ == "__main__":
    main()
