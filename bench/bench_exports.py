"""Benchmark: a long trip's FIT course made once and served from the store, in process and under gunicorn.

    .venv/bin/python bench/bench_exports.py [--days 90] [--repeat 5] [--warm 30] [--downloads 12] [--workers 3]
        [--database-url postgresql+psycopg://…] [--pg-schema S] [--redis-url redis://…] [--profile] [--keep]

A dated trip of `--days` days (40 km each, a point every 25 m: a dense uploaded route) on a fresh SQLite file or
the `--database-url` PostgreSQL (its own `--pg-schema`), shared by a link. In process (the web worker's app, the
test client): the shared `.fit` made cold (the store emptied before each), then served warm (200 with its bytes)
and named (If-None-Match: 304). Under `gunicorn -w --workers`: the store emptied, then `--downloads` clients ask the
shared `.fit` at once while a prober asks /healthz every 50 ms; then the same again warm. What it reports:
bench/README.md."""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from common import OUT, row, write_result  # noqa: E402

COLD_TARGET_S, WARM_TARGET_MS, BURST_TARGET_S, HEALTHZ_TARGET_MS = 2.0, 200.0, 5.0, 500.0
DAY_KM, STEP_M = 40, 25.0


def log(*parts) -> None:
    print("[bench_exports]", *parts, flush=True)


def setup(config: dict, days: int) -> tuple[str, str]:
    """The app migrated, a user, the long trip dated and shared: (trip id, share code)."""
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from flask_migrate import upgrade

    from app import create_app
    from oauth.kernel.tokens import create_user
    from tests.fakes.thirdparty import gpx_from_points, make_points
    from trips.core.db import db
    from trips.services import sharing
    from trips.services.trips import import_gpx

    app = create_app(config, environ={})
    with app.app_context():
        upgrade()
        user = create_user("bench-exports@example.org")
        db.session.commit()
        start = date.today() + timedelta(days=60)
        points = make_points(int(days * DAY_KM * 1000 / STEP_M) + 1, step_m=STEP_M, climb_m=900.0)
        trip = import_gpx(user, io.BytesIO(gpx_from_points(points, name=f"Bench {days} days")),
                          {"startDate": start.isoformat(), "endDate": (start + timedelta(days=days - 1)).isoformat(),
                           "maxDistancePerDay": DAY_KM + 10})
        log(f"trip of {len(trip.stages)} days, {len(points)} route points")
        code = sharing.share_trip(user, trip.id)[0].short_code
        trip_id = trip.id
        db.session.remove()
        db.engine.dispose()
    return trip_id, code


def empty_store(app) -> None:
    from trips.core.db import atomic, db
    from trips.models import TripExport

    with app.app_context():
        with atomic():
            db.session.query(TripExport).delete()
        db.session.remove()


def in_process(config: dict, code: str, repeat: int, warm: int, profile: bool) -> dict:
    """Cold makes, warm serves and 304s of the shared .fit through the test client: seconds each."""
    from app import create_app

    app = create_app(config, environ={}, serving=True)
    client = app.test_client()
    cold, cpu, size = [], [], 0
    for _ in range(repeat):
        empty_store(app)
        t, c = time.perf_counter(), time.process_time()
        answer = client.get(f"/s/{code}.fit")
        cold.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        assert answer.status_code == 200, answer.status_code
        size = len(answer.data)
    etag = answer.headers["ETag"]
    served, named = [], []
    for _ in range(warm):
        t = time.perf_counter()
        answer = client.get(f"/s/{code}.fit")
        assert answer.status_code == 200 and len(answer.data) == size
        served.append(time.perf_counter() - t)
        t = time.perf_counter()
        assert client.get(f"/s/{code}.fit", headers={"If-None-Match": etag}).status_code == 304
        named.append(time.perf_counter() - t)
    if profile:
        empty_store(app)
        profiler = cProfile.Profile()
        profiler.enable()
        client.get(f"/s/{code}.fit")
        profiler.disable()
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / "exports_profile.txt"
        with open(path, "w") as sink:
            pstats.Stats(profiler, stream=sink).sort_stats("cumulative").print_stats(40)
        log("cold make profiled:", path)
    return {"cold_s": cold, "cold_cpu_s": cpu, "warm_s": served, "named_s": named, "bytes": size}


def burst(url: str, code: str, downloads: int) -> dict:
    """`downloads` clients ask the shared .fit at once while a prober asks /healthz every 50 ms."""
    import requests

    barrier = threading.Barrier(downloads)
    answers: list = [None] * downloads
    probes: list[float] = []
    done = threading.Event()

    def download(i: int) -> None:
        barrier.wait()
        t = time.perf_counter()
        try:
            got = requests.get(f"{url}/s/{code}.fit", timeout=60)
            answers[i] = (got.status_code, time.perf_counter() - t, got.headers.get("ETag"))
        except requests.RequestException as exc:
            answers[i] = (type(exc).__name__, time.perf_counter() - t, None)

    def probe() -> None:
        with requests.Session() as session:
            while not done.is_set():
                t = time.perf_counter()
                try:
                    ok = session.get(f"{url}/healthz", timeout=30).status_code == 200
                except requests.RequestException:
                    ok = False
                probes.append(time.perf_counter() - t if ok else float("inf"))
                time.sleep(0.05)

    prober = threading.Thread(target=probe)
    prober.start()
    time.sleep(0.3)
    threads = [threading.Thread(target=download, args=(i,)) for i in range(downloads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(0.3)
    done.set()
    prober.join()
    return {"codes": [a[0] for a in answers], "times_s": [a[1] for a in answers],
            "etags": len({a[2] for a in answers}), "healthz_s": probes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--repeat", type=int, default=5, help="cold makes in process")
    parser.add_argument("--warm", type=int, default=30, help="warm serves (and as many 304s) in process")
    parser.add_argument("--downloads", type=int, default=12, help="shared .fit downloads at once under gunicorn")
    parser.add_argument("--workers", type=int, default=(os.cpu_count() or 1) + 1)
    env_db = os.environ.get("DATABASE_URL", "")
    parser.add_argument("--database-url", default=env_db if env_db.startswith("postgresql") else "")
    parser.add_argument("--pg-schema", default="btp_bench_exports")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--profile", action="store_true", help="cProfile one cold make: bench/out/exports_profile.txt")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (gunicorn.log)")
    args = parser.parse_args()

    from bench_edit_costs import start_redis
    from tests.live import gunicorn

    tmp = Path(tempfile.mkdtemp(prefix="btp-bench-exports-"))
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
            db_url, engine = pg_url_with_schema(args.database_url, args.pg_schema), "postgresql"
        else:
            db_url, engine = f"sqlite:///{tmp / 'btp.sqlite3'}", "sqlite"
        config = {"DATABASE_URL": db_url, "REDIS_URL": redis_url, "BTP_INSTANCE_DIR": str(tmp),
                  "BTP_SECRET_KEY": "bench-secret-key", "BTP_ENV": "production",
                  "BTP_BASE_URL": "http://127.0.0.1:8000"}
        t = time.perf_counter()
        trip_id, code = setup(config, args.days)
        log(f"{engine}: trip {trip_id} ready in {time.perf_counter() - t:.1f} s")

        local = in_process(config, code, args.repeat, args.warm, args.profile)
        cold, warm, named = (statistics.median(local[k]) for k in ("cold_s", "warm_s", "named_s"))
        log(f"cold make median {cold:.3f} s (best {min(local['cold_s']):.3f}, CPU {statistics.median(local['cold_cpu_s']):.3f} s)"
            f"; warm 200 median {warm * 1000:.1f} ms (max {max(local['warm_s']) * 1000:.1f}); 304 median "
            f"{named * 1000:.2f} ms; {local['bytes']} bytes")

        from app import create_app

        store_app = create_app(config, environ={})
        with gunicorn(config, tmp / "gunicorn.log", workers=args.workers, own_base_url=True) as live:
            empty_store(store_app)
            first = burst(live.url, code, args.downloads)
            again = burst(live.url, code, args.downloads)
        with store_app.app_context():
            from trips.core.db import db

            db.engine.dispose()
        rows, notes = [], []
        for name, got in (("cold", first), ("warm", again)):
            ok = sum(1 for c in got["codes"] if c == 200)
            slowest, worst = max(got["times_s"]), max(got["healthz_s"] or [float("nan")])
            log(f"{args.downloads} downloads at once ({name}): {ok} answered 200, slowest {slowest:.2f} s, "
                f"{got['etags']} ETag(s); /healthz worst {worst * 1000:.0f} ms, median "
                f"{statistics.median(got['healthz_s']) * 1000:.1f} ms over {len(got['healthz_s'])} probes")
            notes.append(f"{name} burst: codes {got['codes']}, times {[round(x, 2) for x in got['times_s']]}")
            met = ok == args.downloads and slowest <= BURST_TARGET_S and worst * 1000 <= HEALTHZ_TARGET_MS
            rows.append(row(f"{args.downloads} shared .fit downloads at once, store {name}: slowest ({engine})",
                            "s", round(slowest, 3), None, None, BURST_TARGET_S, met))
            rows.append(row(f"… /healthz worst meanwhile ({engine})", "ms", round(worst * 1000, 1), None, None,
                            HEALTHZ_TARGET_MS, worst * 1000 <= HEALTHZ_TARGET_MS))
        rows[:0] = [
            row(f"{args.days}-day FIT made cold, shared link, in process ({engine}): median", "s", round(cold, 3),
                None, None, COLD_TARGET_S, cold <= COLD_TARGET_S),
            row(f"{args.days}-day FIT served warm (200 with its bytes), in process ({engine}): median", "ms",
                round(warm * 1000, 2), None, None, WARM_TARGET_MS, warm * 1000 <= WARM_TARGET_MS),
            row(f"{args.days}-day FIT named in If-None-Match (304), in process ({engine}): median", "ms",
                round(named * 1000, 2)),
        ]
        notes.insert(0, f"{engine}; trip of {args.days} days of {DAY_KM} km, a route point every {STEP_M:g} m; "
                        f"FIT of {local['bytes']} bytes; gunicorn -w {args.workers}; cold makes "
                        f"{[round(x, 3) for x in local['cold_s']]}")
        log("written", write_result(f"exports{'' if engine == 'sqlite' else '-' + engine}", rows, notes))
        if any(code != 200 for got in (first, again) for code in got["codes"]):
            raise SystemExit("a download was not answered 200")
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(10)
        if args.keep:
            log("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
