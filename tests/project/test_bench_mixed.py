"""bench/bench_mixed.py's pure helpers, without the benchmark itself (which needs PostgreSQL, servers and minutes):
the seeded mix schedule, the error classification, the percentiles and the per-kind aggregation of the load
client's reports."""
import json
import sys
from collections import Counter
from itertools import islice
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_mixed as bm  # noqa: E402


def draws(connection: int, n: int, seed: int = bm.SEED, weights=bm.WEIGHTS) -> list[str]:
    return list(islice(bm.schedule(seed, connection, weights), n))


def test_the_schedule_draws_the_agent_mix_70_25_5_within_a_point():
    counts = Counter(draws(0, 20_000))
    share = {k: counts[k] / 20_000 for k in bm.KINDS}
    reads = share["get_trip"] + share["list_trips"]
    assert abs(reads - 0.70) < 0.015 and abs(share["edit"] - 0.25) < 0.015 and abs(share["analyze"] - 0.05) < 0.006
    for kind, weight in zip(bm.KINDS, bm.WEIGHTS):
        assert abs(share[kind] - weight) < 0.015, (kind, share[kind])


def test_every_connection_of_a_point_draws_the_mix_too():
    counts = Counter(k for c in range(32) for k in draws(c, 400))
    total = sum(counts.values())
    for kind, weight in zip(bm.KINDS, bm.WEIGHTS):
        assert abs(counts[kind] / total - weight) < 0.015, kind


def test_the_schedule_is_the_same_on_every_run_and_differs_between_connections():
    assert draws(3, 300) == draws(3, 300)
    assert draws(3, 300) != draws(4, 300)
    assert draws(3, 300, seed=1) != draws(3, 300, seed=2)


def test_without_the_analyses_the_reads_and_edits_keep_70_to_25():
    rest = [k for k in draws(1, 20_000) if k != "analyze"]
    reads = sum(k in ("get_trip", "list_trips") for k in rest) / len(rest)
    assert abs(reads - 0.70 / 0.95) < 0.015


def test_a_kind_of_weight_zero_is_never_drawn():
    assert "analyze" not in draws(0, 5_000, weights=(0.5, 0.2, 0.3, 0))


@pytest.mark.parametrize("weights", [(1, 1, 1), (0.5, 0.2, 0.25, -0.05), (0, 0, 0, 0)])
def test_bad_weights_are_refused_with_the_kinds_named(weights):
    with pytest.raises(ValueError, match="get_trip"):
        next(bm.schedule(0, 0, weights))


def body(obj) -> bytes:
    return json.dumps(obj).encode()


def test_a_result_that_is_not_a_refusal_is_a_success():
    result, error = bm.classify(200, body({"jsonrpc": "2.0", "id": 1, "result": {
        "structuredContent": {"version": 7}, "isError": False}}))
    assert error is None and result["structuredContent"]["version"] == 7


@pytest.mark.parametrize("status, raw, reason", [
    (200, body({"jsonrpc": "2.0", "id": 1, "result": {"isError": True, "content": [{"type": "text",
                                                                                      "text": "conflict"}]}}),
     "refused"),
    (200, body({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}), "no result"),
    (200, b"<html>oops</html>", "not JSON"),
    (200, body([1, 2]), "no result"),
    (429, body({"jsonrpc": "2.0", "id": 1, "result": {}}), "HTTP 429"),
    (0, b"ConnectionResetError()", "HTTP 0"),
])
def test_anything_else_is_an_error_with_its_reason(status, raw, reason):
    result, error = bm.classify(status, raw)
    assert result is None and error.startswith(reason)


def test_percentiles_are_nearest_rank():
    values = list(range(1, 101))
    assert bm.percentile(values, 50) == 50 and bm.percentile(values, 99) == 99 and bm.percentile(values, 100) == 100
    assert bm.percentile([5, 9], 50) == 5 and bm.percentile([5, 9], 99) == 9
    assert bm.percentile([7], 1) == 7 and bm.percentile([], 50) is None
    with pytest.raises(ValueError):
        bm.percentile(values, 0)


def part(start, end, latencies, errors=None, samples=None, cpu=0.5, skipped=0):
    return {"start": start, "end": end, "latencies_us": latencies, "errors": errors or {}, "samples": samples or {},
            "cpu_s": cpu, "skipped": skipped, "pool_exhausted": 0}


def test_the_aggregation_pools_each_kinds_latencies_over_the_client_processes():
    a = part(100.0, 110.0, {"get_trip": [1000, 2000, 3000], "edit": [10_000], "analyze": [50_000]},
             errors={"edit": 1}, samples={"edit": "refused: stale version"})
    b = part(100.2, 110.5, {"get_trip": [4000], "list_trips": [500, 700]}, errors={"get_trip": 2},
             samples={"get_trip": "HTTP 502: "}, skipped=3)
    out = bm.aggregate([a, b])
    assert out["seconds"] == 10.5  # from the first start to the last end
    g = out["kinds"]["get_trip"]
    assert (g["calls"], g["errors"], g["p50_ms"], g["p99_ms"], g["calls_s"]) == (4, 2, 2.0, 4.0, 0.4)
    assert out["kinds"]["list_trips"]["p50_ms"] == 0.5 and out["kinds"]["edit"]["sample_error"].startswith("refused")
    assert out["kinds"]["get_trip"]["sample_error"] == "HTTP 502: "
    assert (out["calls"], out["calls_s"], out["rw_calls_s"]) == (8, 0.8, 0.7)  # reads+edits leave analyze out
    assert out["errors"] == 3 and out["skipped"] == 3 and out["client_cpu_s"] == 1.0


def test_a_kind_no_call_drew_has_no_latency():
    out = bm.aggregate([part(0.0, 1.0, {"get_trip": [1000]})])
    assert out["kinds"]["analyze"] == {"calls": 0, "errors": 0, "calls_s": 0.0, "p50_ms": None, "p99_ms": None,
                                       "sample_error": None}


def test_rounds_give_the_median_of_each_figure_and_the_sum_of_errors():
    def fig(calls_s, p50, errors):
        return {"calls_s": calls_s, "rw_calls_s": calls_s - 1, "server_cpu_ms": 1.0, "client_cpu_ms": 0.1,
                "calls": 10, "errors": errors, "skipped": 0, "pool_exhausted": 0,
                "kinds": {"edit": {"calls_s": calls_s, "p50_ms": p50, "p99_ms": p50 * 2, "calls": 10,
                                   "errors": errors, "sample_error": "refused: x" if errors else None}}}
    out = bm.median_points([fig(100, 3.0, 0), fig(300, 1.0, 2), fig(200, 2.0, 0)])
    assert out["calls_s"] == 200 and out["rw_calls_s"] == 199 and out["errors"] == 2 and out["calls"] == 30
    assert out["kinds"]["edit"] == {"calls_s": 200, "p50_ms": 2.0, "p99_ms": 4.0, "calls": 30, "errors": 2,
                                    "sample_error": "refused: x"}


def test_connections_are_dealt_to_the_client_processes_without_an_empty_one():
    conns = list(range(5))
    assert bm.split_connections(conns, 2) == [[0, 2, 4], [1, 3]]
    assert bm.split_connections([0], 2) == [[0]]
