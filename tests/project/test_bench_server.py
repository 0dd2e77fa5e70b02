"""bench/bench_server.py's pure parts, without the benchmark itself (which needs PostgreSQL, wrk and minutes): the
rows and the verdict README "Which worker" follows."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_server as bs  # noqa: E402


def points(btp: list[float], gthread: list[float]) -> dict:
    return {"btp": {"get_trip at 8": [{"calls_s": v, "errors": 0} for v in btp]},
            "gthread": {"get_trip at 8": [{"calls_s": v, "errors": 1} for v in gthread]}}


def test_a_row_is_the_median_of_the_rounds_and_its_ratio_btp_over_gthread():
    rows, summary = bs.summarise(points([100, 300, 200], [100, 100, 100]), [("get_trip", 8)], 3)
    assert rows[0]["btp"] == 200 and rows[0]["baseline"] == 100 and rows[0]["ratio"] == 2 and rows[0]["met"]
    assert summary["get_trip at 8"]["ratio_min"] == 1 and summary["get_trip at 8"]["ratio_max"] == 3
    assert summary["get_trip at 8"]["errors"] == {"btp": 0, "gthread": 3}


def test_the_verdict_is_switch_only_when_gthread_is_within_15_percent_on_every_point():
    assert bs.decide({"a": {"ratio": 1.1}, "b": {"ratio": 0.8}})[0] is True
    assert bs.decide({"a": {"ratio": 1.1}, "b": {"ratio": 1.2}})[0] is False  # ahead on one point: keep
    assert bs.decide({"a": {"ratio": 1.15}})[0] is False
    assert bs.decide({"a": {"ratio": None}})[0] is False  # a point gthread did not serve proves nothing
    assert bs.decide({})[0] is False
