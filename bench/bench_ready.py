"""Benchmark: time to ready, as an agent waits for it: from the create call to every computation of the trip settled.

    .venv/bin/python bench/bench_ready.py [--workers 2] [--repeat 3] [--places 10] [--database-url URL]

Two trips on the generated 14-day map of bench_analysis.py, each created anew per run under real RQ workers: a
14-day GPX upload (the route parsed, cut and every enrichment run) and a trip from `--places` places along the same
road (each leg routed on the imported map, then cut and enriched). The clock starts before the create call and
stops when no computation of the trip is pending or running. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from bench_analysis import region, route, stop_workers, wait_settled  # noqa: E402
from tests.fakes.thirdparty import gpx_from_points  # noqa: E402
from tests.osm_maps import offset_north  # noqa: E402

# What the original product claims for its analysis, beside which BTP's figure is reported.
ORIGINAL_CLAIM = "sub-second analysis"


def places_along(points, count: int) -> list[dict]:
    """`count` points spread along the route, from its start to its end: the places an agent would name. None is
    where a side street crosses the route (every tenth point), so each lies nearest the joined road."""
    step = (len(points) - 1) / (count - 1)
    at = [round(i * step) for i in range(count)]
    at = [k + (5 if k + 5 < len(points) else -5) if k % 10 == 0 else k for k in at]
    return [{"lat": points[k][0], "lon": points[k][1]} for k in at]


def with_connected_road(points):
    """bench_analysis's map plus one road along the route whose ways share their end nodes, so a router can follow
    it from place to place (that map's own road is cut in unjoined 300 m pieces)."""
    m = region(points)
    ids = [m.node(*offset_north(lat, lon, -1)) for lat, lon, *_ in points]
    for i in range(0, len(ids) - 1, 50):
        m.way(ids[i:i + 51], {"highway": "tertiary", "surface": "asphalt"})
    return m


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="real RQ workers (flask worker)")
    parser.add_argument("--repeat", type=int, default=3, help="trips created of each kind")
    parser.add_argument("--places", type=int, default=10, help="places of the trip planned from places")
    parser.add_argument("--database-url", default=None,
                        help="a PostgreSQL + PostGIS database (default: a temporary SQLite database)")
    args = parser.parse_args(argv)
    if args.database_url and not args.database_url.startswith("postgresql"):
        parser.error("--database-url: a postgresql+psycopg:// URL (the default is a temporary SQLite database)")
    if args.places < 2:
        parser.error("--places: at least 2")
    import logging

    logging.getLogger("rq").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)

    from flask_migrate import upgrade
    from rq import Worker

    from app import create_app
    from jobs.tasks import bind_app
    from oauth.kernel.tokens import create_user
    from trips.core.db import db
    from trips.core.embedded_redis import ensure_embedded_redis, socket_path, stop_embedded_redis
    from trips.core.redis_client import get_redis
    from trips.osm.importer import import_file
    from trips.services.trips import create_trip, import_gpx

    tmp = tempfile.mkdtemp(prefix="btp-bench-ready-")
    redis_url, _ = ensure_embedded_redis(Path(tmp))
    env = {"DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3", "REDIS_URL": redis_url,
           "BTP_INSTANCE_DIR": tmp, "BTP_SECRET_KEY": "bench"}
    app = create_app(dict(env), environ={})
    workers: list = []
    try:
        with app.app_context():
            upgrade()
            points = route()
            import_file(db.engine, with_connected_road(points).write(Path(tmp) / "region.osm.pbf"), name="bench")
            workers = [subprocess.Popen([sys.executable, "-m", "flask", "--app", "app", "worker"], cwd=ROOT,
                                        env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL) for _ in range(args.workers)]
            while len(Worker.all(connection=get_redis())) < args.workers:
                time.sleep(0.1)
            bind_app(app)
            gpx = gpx_from_points(points, name="Bench 14 days")
            places = places_along(points, args.places)
            times: dict[str, list[float]] = {"gpx": [], "places": []}
            for run in range(args.repeat):
                user = create_user(f"ready-{os.getpid()}-{run}-{secrets.token_hex(4)}@example.org")
                db.session.commit()
                start = time.perf_counter()
                trip = import_gpx(user, io.BytesIO(gpx), {})
                db.session.commit()
                times["gpx"].append(wait_settled(trip.id, start=start))
                start = time.perf_counter()
                trip, _ = create_trip(user, {"waypoints": places}, secrets.token_hex(16))
                db.session.commit()
                times["places"].append(wait_settled(trip.id, start=start))
                db.session.refresh(trip)
                legs = trip.route_legs or []
            routed = sum(1 for leg in legs if leg["routed"])
        engine = "PostgreSQL" if args.database_url else "SQLite"
        print(f"the trip from places: {routed} of its {len(legs)} legs routed on the map all the way")
        print(f"{engine}, embedded Redis, {args.workers} RQ worker(s); the original claims: {ORIGINAL_CLAIM}")
        for kind, label in (("gpx", "14-day GPX upload"), ("places", f"trip from {args.places} places")):
            print(f"{label} → every computation settled: median {statistics.median(times[kind]):.2f} s, "
                  f"best {min(times[kind]):.2f} s over {len(times[kind])} runs")
        out = ROOT / "bench" / "out"
        out.mkdir(exist_ok=True)
        (out / f"ready-{engine.lower()}.json").write_text(json.dumps(
            {"engine": engine, "workers": args.workers, "places": args.places, "seconds": times}, indent=1))
    finally:
        stop_workers(workers)
        stop_embedded_redis(f"unix://{socket_path(Path(tmp))}")


if __name__ == "__main__":
    main()
