"""Benchmark: GPX upload pipeline (parse -> simplify -> pace) of BTP against a gpxpy baseline.

    .venv/bin/python bench/bench_gpx.py [--points 250000] [--repeat 3]

A ~30 MB GPX written to a temporary file; each pipeline run in a fresh subprocess (`--worker NAME PATH`), which
reports its wall and CPU time around the pipeline and its peak resident memory (VmHWM reset just before the clock).
What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from trips.route import pacing  # noqa: E402
from trips.route.gpx import MAX_BYTES, parse_gpx  # noqa: E402

_HEADER = ('<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="btp-bench" '
           'xmlns="http://www.topografix.com/GPX/1/1">\n <metadata><name>Bench</name></metadata>\n'
           ' <trk>\n  <name>Bench route</name>\n  <trkseg>\n')
_FOOTER = "  </trkseg>\n </trk>\n</gpx>\n"


def generate_gpx(path: str | os.PathLike, n_points: int = 250_000, seed: int = 42) -> int:
    """Write a random-walk GPX track of `n_points` points (about 1.4 m apart) to `path`; return its size."""
    rng = np.random.default_rng(seed)
    heading = np.cumsum(rng.normal(0.0, 0.03, n_points)) + np.cumsum(rng.normal(0.0, 0.0005, n_points))
    step = rng.uniform(0.8, 2.0, n_points)
    lat = 45.0 + np.cumsum(np.cos(heading) * step) / 111_320.0
    lon = 5.0 + np.cumsum(np.sin(heading) * step) / (111_320.0 * np.cos(np.radians(lat)))
    ele = 300.0 + np.cumsum(rng.normal(0.0, 0.08, n_points)) + 40 * np.sin(np.arange(n_points) / 4000.0)
    start = 1_717_228_800  # 2024-06-01T08:00:00Z
    with open(path, "w", encoding="utf-8") as out:
        out.write(_HEADER)
        for i in range(0, n_points, 10_000):
            lines = []
            for la, lo, el, t in zip(lat[i:i + 10_000].tolist(), lon[i:i + 10_000].tolist(),
                                     ele[i:i + 10_000].tolist(), range(start + i, start + min(i + 10_000, n_points))):
                stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
                lines.append(f'   <trkpt lat="{la:.7f}" lon="{lo:.7f}">\n    <ele>{el:.1f}</ele>\n'
                             f'    <time>{stamp}</time>\n   </trkpt>\n')
            out.write("".join(lines))
        out.write(_FOOTER)
    return os.path.getsize(path)


def run_btp_pipeline(path: str | os.PathLike) -> dict:
    """BTP: parse_gpx -> plan_stages (default settings, which simplify the route and each stage)."""
    with open(path, "rb") as f:
        route = parse_gpx(f)
    stages = pacing.plan_stages(route.points, pacing.PacingSettings())
    return {"points": int(sum(len(t) for t in route.tracks)), "stages": len(stages),
            "km": round(sum(s.distance_km for s in stages), 1),
            "kept": int(sum(len(s.geometry) for s in stages))}


def prepare_btp_upload(path: str | os.PathLike, tmp: str):
    """Untimed set-up of the upload path: an app on a fresh SQLite database, a user, a token, the request body."""
    from flask_migrate import upgrade
    from werkzeug.datastructures import FileStorage
    from werkzeug.test import stream_encode_multipart

    from app import create_app
    from oauth.kernel.tokens import API_AUDIENCE, create_user, issue_token
    from trips.core.db import atomic

    from trips.core.embedded_redis import ensure_embedded_redis

    redis_url, _ = ensure_embedded_redis(Path(tmp))  # the upload checks the creation rate limit in Redis
    app = create_app({"DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite3", "BTP_INSTANCE_DIR": tmp,
                      "REDIS_URL": redis_url, "BTP_SECRET_KEY": "bench"}, environ={})
    with app.app_context():
        upgrade()
        with atomic():
            token = issue_token(create_user("bench@example.org"), API_AUDIENCE, "trips:write")
    body = os.path.join(tmp, "body.multipart")
    with open(path, "rb") as f, open(body, "wb") as out:  # the request body, on disk like a client's upload
        stream, _, boundary = stream_encode_multipart(
            {"gpxFile": FileStorage(f, "bench.gpx", content_type="application/gpx+xml")}, use_tempfile=True)
        shutil.copyfileobj(stream, out)
    return app, token, body, boundary


def run_btp_upload(prepared) -> dict:
    """BTP from upload to stored days: POST /api/trips/gpx-upload (multipart parsing, streamed GPX parse,
    pacing, the trip, its route and its days written to SQLite, the JSON answer). The request body is read
    from a file as the app reads it (wsgi.input), as a server hands it a socket: the process never holds the
    whole body unless the product does."""
    app, token, body, boundary = prepared
    with open(body, "rb") as stream:
        response = app.test_client().post(
            "/api/trips/gpx-upload", input_stream=stream, content_length=os.path.getsize(body),
            content_type=f"multipart/form-data; boundary={boundary}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.get_data(as_text=True)[:300]
    trip = response.get_json()
    return {"points": None, "stages": len(trip["stages"]), "km": trip["totalDistance"], "kept": None}


def run_gpxpy_pipeline(path: str | os.PathLike) -> dict:
    """Baseline: gpxpy.parse, gpxpy simplify at 20 m, then the same pacing over gpxpy points in plain Python
    with gpxpy's own distance and uphill/downhill functions."""
    import gpxpy
    import gpxpy.geo
    import gpxpy.gpx

    with open(path, encoding="utf-8") as f:
        gpx = gpxpy.parse(f)
    raw = [p for trk in gpx.tracks for seg in trk.segments for p in seg.points]
    raw_cum = _cumulative_km(raw)
    ascent, _ = gpx.get_uphill_downhill()
    settings = pacing.PacingSettings()
    n_days = pacing.day_count(raw_cum[-1], settings)
    targets = pacing.daily_targets(n_days, raw_cum[-1], ascent, settings.fatigue_factor,
                                   settings.elevation_penalty, settings.max_distance_per_day)
    gpx.simplify(max_distance=20)
    dec = [p for trk in gpx.tracks for seg in trk.segments for p in seg.points]
    dec_cum = _cumulative_km(dec)
    stages, d0, r0 = [], 0, 0
    for day, target in enumerate(targets):
        last = day == n_days - 1
        d1 = len(dec) - 1 if last else _cut(dec_cum, d0, target)
        r1 = len(raw) - 1 if last or d1 == len(dec) - 1 else _cut(raw_cum, r0, target)
        up, down = gpxpy.gpx.GPXTrackSegment(raw[r0:r1 + 1]).get_uphill_downhill()
        geometry = gpxpy.geo.simplify_polyline(dec[d0:d1 + 1], max_distance=20)
        stages.append((dec_cum[d1] - dec_cum[d0], up, down, len(geometry)))
        d0, r0 = d1, r1
        if d1 == len(dec) - 1:
            break
    return {"points": len(raw), "stages": len(stages), "km": round(sum(s[0] for s in stages), 1),
            "kept": sum(s[3] for s in stages)}


def _cumulative_km(points) -> list[float]:
    acc, out = 0.0, [0.0]
    for prev, cur in zip(points, points[1:]):
        acc += cur.distance_2d(prev) or 0.0
        out.append(acc / 1000.0)
    return out


def _cut(cum: list[float], start: int, target: float) -> int:
    for i in range(start + 1, len(cum)):
        if cum[i] - cum[start] >= target:
            return i
    return len(cum) - 1


PIPELINES = {"btp-upload": run_btp_upload, "btp-core": run_btp_pipeline, "gpxpy": run_gpxpy_pipeline}


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Start the peak resident memory afresh (Linux: clear_refs 5 resets VmHWM to the current RSS), so the
    peak is the pipeline's, not that of the set-up before it (the app's migrations, the body's encoding)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _worker(name: str, path: str) -> None:
    arg = path
    if name == "gpxpy":
        import gpxpy  # noqa: F401  (import outside the timed part)
    if name == "btp-upload":
        tmp = tempfile.mkdtemp()
        arg = prepare_btp_upload(path, tmp)
        from trips.core.embedded_redis import socket_path, stop_embedded_redis

        atexit.register(stop_embedded_redis, f"unix://{socket_path(Path(tmp))}")
    gc.collect()
    fresh = _reset_peak()
    start_kb = _status_kb("VmRSS") if fresh else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, c0 = time.perf_counter(), time.process_time()
    info = PIPELINES[name](arg)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_kb = _status_kb("VmHWM") if fresh else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "peak_mb": peak_kb / 1024, "start_mb": start_kb / 1024, **info}))


def _measure(name: str, path: str, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, __file__, "--worker", name, path], capture_output=True, text=True,
                              check=True)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["seconds"])
    best["peak_mb"] = max(r["peak_mb"] for r in runs)
    best["cpu_seconds"] = min(r["cpu_seconds"] for r in runs)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=250_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--worker", nargs=2, metavar=("PIPELINE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        _worker(*args.worker)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.gpx")
        size = generate_gpx(path, args.points)
        if size > MAX_BYTES:
            sys.exit(f"generated file is {size} bytes, over the {MAX_BYTES} bytes upload limit")
        print(f"GPX: {size / 1e6:.1f} MB, {args.points} track points; CPUs: {os.cpu_count()}; "
              f"best of {args.repeat} runs, each in a fresh subprocess\n")
        results = {name: _measure(name, path, args.repeat) for name in PIPELINES}
    print(f"{'pipeline':<9}{'time (s)':>10}{'CPU (s)':>9}{'peak RSS (MB)':>15}{'RSS at start':>14}{'stages':>8}"
          f"{'km':>9}{'kept pts':>10}")
    for name, r in results.items():
        print(f"{name:<9}{r['seconds']:>10.3f}{r['cpu_seconds']:>9.3f}{r['peak_mb']:>15.1f}{r['start_mb']:>14.1f}"
              f"{r['stages']:>8}"
              f"{r['km']:>9.1f}{r['kept'] if r['kept'] is not None else '-':>10}")
    g = results["gpxpy"]
    for name in ("btp-upload", "btp-core"):
        b = results[name]
        print(f"ratio {name}/gpxpy: time {b['seconds'] / g['seconds']:.3f}, CPU {b['cpu_seconds'] / g['cpu_seconds']:.3f}, "
              f"peak RSS {b['peak_mb'] / g['peak_mb']:.3f}")
    _write(results, size, args)


def _write(results: dict, size: int, args) -> None:
    """bench/out/gpx.json: each figure against the gpxpy pipeline measured in the same run."""
    from common import row, write_result

    g, rows = results["gpxpy"], []
    for name, time_target, rss_target in (("btp-upload", 0.06, 0.25), ("btp-core", None, None)):
        b = results[name]
        t_ratio, m_ratio = b["seconds"] / g["seconds"], b["peak_mb"] / g["peak_mb"]
        what = "upload → stored days" if name == "btp-upload" else "parse → paced days"
        rows += [
            row(f"{name}: {what}, time", "s", round(b["seconds"], 3), round(g["seconds"], 3), "gpxpy pipeline",
                f"ratio <= {time_target}" if time_target else None,
                (t_ratio <= time_target) if time_target else None),
            row(f"{name}: CPU time of the process (robust to a loaded machine)", "s", round(b["cpu_seconds"], 3),
                round(g["cpu_seconds"], 3), "gpxpy pipeline"),
            row(f"{name}: peak RSS (process)", "MB", round(b["peak_mb"], 1), round(g["peak_mb"], 1),
                "gpxpy pipeline", f"ratio <= {rss_target}" if rss_target else None,
                (m_ratio <= rss_target) if rss_target else None),
            row(f"{name}: peak RSS above the process at start", "MB", round(b["peak_mb"] - b["start_mb"], 1),
                round(g["peak_mb"] - g["start_mb"], 1), "gpxpy pipeline"),
        ]
    notes = [
        f"{size / 1e6:.1f} MB GPX, {args.points} track points; best time of {args.repeat} fresh subprocesses each, "
        "largest peak; the peak is VmHWM reset just before the clock (the set-up's own peak is not counted), "
        "whole process (interpreter, libraries, and for btp-upload the app) included",
        f"RSS at start: btp-upload {results['btp-upload']['start_mb']:.0f} MB (the app loaded), btp-core "
        f"{results['btp-core']['start_mb']:.0f} MB, gpxpy {g['start_mb']:.0f} MB",
        "btp-upload reads the request body from a file (wsgi.input), as a server hands it over: the test client "
        "holds no copy of it",
    ]
    write_result("gpx", rows, notes)


if __name__ == "__main__":
    main()
