"""bench/bench_mcp.py's reads-beside-slow-requests point, its parts without the benchmark itself (which needs
PostgreSQL, wrk and minutes): the slow place search service, the slow callers, a slow search_places call through a
real gunicorn serving BTP, and the rows and notes the point writes."""
import json
import sys
import time
import urllib.request

import pytest

from tests.live import ROOT, gunicorn

sys.path.insert(0, str(ROOT / "bench"))
import bench_mcp  # noqa: E402


@pytest.fixture
def upstream():
    service = bench_mcp.SlowUpstream(0.3)
    yield service
    service.stop()


def test_the_slow_upstream_answers_a_nominatim_search_after_its_delay(upstream):
    from trips.providers.nominatim import _member

    started = time.monotonic()
    with urllib.request.urlopen(upstream.url + "/search?q=Lyon&format=jsonv2", timeout=5) as answer:
        hits = json.loads(answer.read())
    assert time.monotonic() - started >= 0.3 and upstream.calls == 1
    assert _member(hits[0])["name"] == "Lyon"  # BTP reads it as a place


def test_slow_callers_keep_their_calls_in_flight_each_asking_something_new():
    asked = []

    def one(n):
        asked.append(n)
        time.sleep(0.05)
        return "refused" if n == 3 else None

    with bench_mcp.SlowCallers(one, 2) as slow:
        time.sleep(0.5)
    assert len(slow.done) >= 10 and len(set(asked)) == len(asked)
    assert all(seconds >= 0.05 for seconds, _ in slow.done)
    assert [error for _, error in slow.done if error] == ["refused"]


def test_a_slow_search_places_call_through_btp_waits_on_the_upstream(app, app_config, rider, tmp_path, upstream):
    from tests.mcp_helpers import mcp_token

    user, _ = rider
    token = mcp_token(app, user)
    with gunicorn({**app_config, "BTP_NOMINATIM_URL": upstream.url}, tmp_path / "g.log", workers=1) as live:
        one = bench_mcp.slow_search(int(live.url.rsplit(":", 1)[1]), token)
        started = time.monotonic()
        assert one(1) is None and one(2) is None  # two queries, two upstream calls (none kept)
        assert time.monotonic() - started >= 0.6 and upstream.calls == 2
        assert bench_mcp.slow_search(int(live.url.rsplit(":", 1)[1]), "btp_at_" + "x" * 43)(3).startswith("HTTP 401")


def test_the_slow_points_rows_and_notes():
    wrk = {"p50_us": 1500, "p99_us": 9000, "calls_s": 900.0, "errors_total": 0, "sample_error": None}
    alone = {"p50_us": 1200, "p99_us": 6000, "calls_s": 1000.0, "errors_total": 0}
    rows, notes = bench_mcp.slow_point_rows(wrk, alone, [(2.01, None), (2.03, None)], 2.0, 2)
    by = {r["figure"]: r for r in rows}
    p99 = by["get_trip p99, 8 clients beside 2 slow calls (2 s upstream)"]
    assert (p99["btp"], p99["baseline"], p99["ratio"], p99["met"]) == (9.0, 6.0, 1.5, True)
    assert by["slow search_places calls failed, beside the reads (2 s upstream)"]["met"] is True
    assert "2.01–2.03 s" in notes[0]
    slow_reads = {**wrk, "p99_us": 2_050_000, "errors_total": 3, "sample_error": "timeout"}
    rows, notes = bench_mcp.slow_point_rows(slow_reads, None, [(2.0, "HTTP 503")], 2.0, 2)
    by = {r["figure"]: r for r in rows}
    assert by["get_trip p99, 8 clients beside 2 slow calls (2 s upstream)"]["met"] is False
    assert by["get_trip errors, 8 clients beside 2 slow calls (2 s upstream)"]["met"] is False
    assert by["slow search_places calls failed, beside the reads (2 s upstream)"]["btp"] == 1
    assert "first failure: HTTP 503" in notes[0] and "timeout" in notes[1]
