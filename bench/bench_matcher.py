"""Benchmark: a day's surfaces, way types and cues (trips/enrich/surfaces.py) for a 14-day trip on a generated grid.

    .venv/bin/python bench/bench_matcher.py [--database-url URL] [--days 14] [--km 80] [--runs 3]

The street grid of bench_router.py (400 m blocks) imported with `flask osm import`'s code into SQLite or PostgreSQL
+ PostGIS; each day rides `--km` along one row of streets, the next the other way along another, its line decimated
as a stored day's is (20 m). Reports the whole enrichment's compute for the trip (map coverage, matching, tables,
cues), best of `--runs`, and the matcher alone."""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from bench_router import MIN_LAT, MIN_LON, write_map  # noqa: E402
from common import row, write_result  # noqa: E402

SPACING_M = 400.0
TARGET_S = 5.0  # the analysis of a 14-day trip's surfaces, on SQLite


def days(n: int, km: float):
    """`n` days of about `km` each along the grid's streets: half along a row, 4 blocks along a column, the rest
    along the next row, east then west."""
    from trips.enrich.contract import StageSnap, TripSnap
    from trips.osm.geometry import GEOD
    from trips.route.geo import simplify

    dlat, dlon = SPACING_M / 111_132.0, SPACING_M / 78_850.0
    out = []
    for i in range(n):
        lat = MIN_LAT + (4 + 4 * i) * dlat
        lon_a = MIN_LON + 2 * dlon
        lon_m = lon_a + round(km * 500 / SPACING_M) * dlon  # a crossing, half way
        lon_b = lon_a + km * 1000 / 78_850.0
        corners = [(lat, lon_a), (lat, lon_m), (lat + 4 * dlat, lon_m), (lat + 4 * dlat, lon_b)]
        if i % 2:
            corners = [(lat, lon_b), (lat, lon_m), (lat + 4 * dlat, lon_m), (lat + 4 * dlat, lon_a)]
        line = []
        for (a_lat, a_lon), (b_lat, b_lon) in zip(corners[:-1], corners[1:]):
            steps = max(1, int(abs(b_lon - a_lon) * 78_850 / 50 + abs(b_lat - a_lat) * 111_132 / 50))
            line += [(a_lat + (b_lat - a_lat) * k / steps, a_lon + (b_lon - a_lon) * k / steps, 0.0) for k in range(steps)]
        line.append((*corners[-1], 0.0))
        kept = [tuple(p) for p in simplify(line)]
        length = GEOD.line_length([p[1] for p in kept], [p[0] for p in kept]) / 1000
        out.append(StageSnap(id=f"s{i}", index=i, day_number=i + 1, is_rest_day=False, distance_km=length,
                             elevation_gain_m=0.0, elevation_loss_m=0.0, start=kept[0][:2], end=kept[-1][:2],
                             geometry=tuple(kept)))
    return TripSnap(id="bench", generation=1, start_date=None, ebike_mode=False, departure_hour=8, average_speed=15.0,
                    enabled_accommodation_types=(), stages=tuple(out), bike_type="road")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="a PostgreSQL + PostGIS URL (default: SQLite)")
    parser.add_argument("--days", type=int, default=14)
    parser.add_argument("--km", type=float, default=80.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from flask_migrate import upgrade

    from app import create_app
    from trips.core.db import db
    from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis
    from trips.enrich import surfaces
    from trips.osm import matcher
    from trips.osm.importer import import_file

    tmp = tempfile.mkdtemp(prefix="btp-bench-matcher-")
    redis_url, _ = ensure_embedded_redis(Path(tmp))
    env = {"DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3", "REDIS_URL": redis_url,
           "BTP_INSTANCE_DIR": tmp, "BTP_SECRET_KEY": "bench"}
    app = create_app(env, environ={})
    rows, notes = [], []
    try:
        with app.app_context():
            upgrade()
            span = (0.1 + 4 * (args.days + 2) * SPACING_M / 111_132.0, 0.1 + (args.km + 2) * 1000 / 78_850.0)
            t = time.perf_counter()
            counts = write_map(Path(tmp) / "grid.osm.pbf", SPACING_M, span)
            import_file(db.engine, Path(tmp) / "grid.osm.pbf", name="bench-matcher")
            notes.append(f"map: {counts['nodes']:,} nodes, {counts['ways']:,} ways, {span[0]:.2f}° × {span[1]:.2f}°; "
                         f"generated and imported in {time.perf_counter() - t:.1f} s")
            snap = days(args.days, args.km)
            total_km = sum(s.distance_km for s in snap.stages)
            notes.append(f"trip: {args.days} days, {total_km:.0f} km, "
                         f"{sum(len(s.geometry) for s in snap.stages)} stored points")
            best_compute = best_match = float("inf")
            for _ in range(args.runs):
                t = time.perf_counter()
                result = surfaces.compute(snap, db.engine)
                best_compute = min(best_compute, time.perf_counter() - t)
                t = time.perf_counter()
                matcher.match_each([s.line for s in snap.stages], db.engine)
                best_match = min(best_match, time.perf_counter() - t)
            matched = sum(v for d in result.data.values() for k, v in (d["wayTypes"] or {}).items() if k != "unknown")
            notes.append(f"matched {matched:.1f} of {total_km:.1f} km; "
                         f"{sum(len(d['cues'] or []) for d in result.data.values())} cues")
            for note in notes:
                print(note)
            engine = db.engine.dialect.name
            rows.append(row(f"surfaces of a {args.days}-day trip ({engine})", "s", round(best_compute, 2),
                            target=TARGET_S, met=best_compute <= TARGET_S))
            rows.append(row(f"matching alone ({engine})", "s", round(best_match, 2)))
            print(f"surfaces.compute: {best_compute:.2f} s; matcher alone: {best_match:.2f} s")
    finally:
        stop_embedded_redis(redis_url)
    write_result("matcher-postgresql" if args.database_url else "matcher", rows, notes)


if __name__ == "__main__":
    main()
