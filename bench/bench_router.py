"""Benchmark: the bicycle router on an imported map (issue 24 item 4): routes of 5, 50 and 200 km.

Run from the repository root:  .venv/bin/python bench/bench_router.py [--database-url URL] [--spacing-m 400]
    [--runs 5] [--span 2.0 2.6] [--routes 5 50 200]

The map is generated: a 2.0° × 2.6° region (about 220 × 205 km; `--span LAT LON` degrees) of streets on a grid `--spacing-m` apart, every
crossing a shared node and every block side bent by one shape vertex; a primary road every 40th line, a tertiary
every 8th, a cycleway every 16th column, one street in ten one-way, one block side in thirty missing. It is imported
with `flask osm import`'s code (trips/osm/importer.py) into a temporary SQLite database (default) or the given
PostgreSQL + PostGIS (+ pgRouting) database, then each route is searched `--runs` times after one warm-up
(trips/osm/router.py route), with pgRouting and with scipy on PostgreSQL, with scipy on SQLite. Reported: the median
and the slowest wall time, the routed km and the edges the search box held. Target: a 50 km route in ≤ 200 ms on
PostgreSQL + PostGIS (the router's own search, scipy; pgRouting only when asked). Give PostgreSQL a fresh database:
the rows of a region an earlier run replaced stay dead until VACUUM, and the band's index scan visits their pages.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import osmium  # noqa: E402
from osmium.osm.mutable import Node, Way  # noqa: E402

from common import row, write_result  # noqa: E402

MIN_LAT, MIN_LON, SPAN_LAT, SPAN_LON = 45.0, 3.0, 2.0, 2.6
ROUTES_KM = (5, 50, 200)
TARGET_MS = 200.0  # a 50 km route on PostgreSQL + PostGIS


def write_map(path: Path, spacing_m: float, span=(SPAN_LAT, SPAN_LON), seed: int = 24) -> dict:
    """The grid region as an .osm.pbf; returns its counts."""
    rng = random.Random(seed)
    dlat, dlon = spacing_m / 111_132.0, spacing_m / 78_850.0  # metres per degree of longitude at 45.9° N
    ny, nx = int(span[0] / dlat), int(span[1] / dlon)

    def nid(i, j):
        return i * nx + j + 1

    next_id = ny * nx + 1
    counts = {"nodes": 0, "ways": 0}
    header = osmium.io.Header()
    header.add_box(osmium.osm.Box(MIN_LON, MIN_LAT, MIN_LON + nx * dlon, MIN_LAT + ny * dlat))
    ways = []
    with osmium.SimpleWriter(str(path), header=header, overwrite=True) as writer:
        for i in range(ny):
            for j in range(nx):
                writer.add_node(Node(id=nid(i, j), location=(MIN_LON + j * dlon, MIN_LAT + i * dlat), version=1))
        counts["nodes"] += ny * nx
        for horizontal in (True, False):
            for k in range(ny if horizontal else nx):
                tags = {"highway": "primary" if k % 40 == 0 else "tertiary" if k % 8 == 0 else "residential"}
                if not horizontal and k % 16 == 4:
                    tags = {"highway": "cycleway"}
                if tags["highway"] == "residential" and rng.random() < 0.1:
                    tags["oneway"] = "yes"
                span = nx if horizontal else ny
                for start in range(0, span - 1, 8):  # ways of 8 block sides, one shape vertex on each
                    refs = []
                    for m in range(start, min(start + 8, span - 1)):
                        a = nid(k, m) if horizontal else nid(m, k)
                        b = nid(k, m + 1) if horizontal else nid(m + 1, k)
                        if rng.random() < 1 / 30:  # a missing block side: the way stops there
                            if len(refs) > 1:
                                ways.append((refs, tags))
                            refs = []
                            continue
                        lat = MIN_LAT + (k + 0.02 if horizontal else m + 0.5) * dlat
                        lon = MIN_LON + (m + 0.5 if horizontal else k + 0.02) * dlon
                        writer.add_node(Node(id=next_id, location=(lon, lat), version=1))
                        counts["nodes"] += 1
                        refs += ([a] if not refs else []) + [next_id, b]
                        next_id += 1
                    if len(refs) > 1:
                        ways.append((refs, tags))
        for wid, (refs, tags) in enumerate(ways, start=1):
            writer.add_way(Way(id=wid, nodes=refs, tags=tags, version=1))
        counts["ways"] = len(ways)
    return counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="a PostgreSQL + PostGIS URL (default: SQLite)")
    parser.add_argument("--spacing-m", type=float, default=400.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--span", type=float, nargs=2, default=(SPAN_LAT, SPAN_LON), metavar=("LAT", "LON"))
    parser.add_argument("--routes", type=int, nargs="+", default=ROUTES_KM, help="straight km of each route")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from flask_migrate import upgrade

    from app import create_app
    from trips.core.db import db
    from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis
    from trips.osm import router
    from trips.osm.importer import import_file
    from trips.osm.geometry import GEOD

    tmp = tempfile.mkdtemp(prefix="btp-bench-router-")
    redis_url, _ = ensure_embedded_redis(Path(tmp))
    env = {"DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3", "REDIS_URL": redis_url,
           "BTP_INSTANCE_DIR": tmp, "BTP_SECRET_KEY": "bench"}
    app = create_app(env, environ={})
    rows, notes = [], []
    try:
        with app.app_context():
            upgrade()
            t = time.perf_counter()
            counts = write_map(Path(tmp) / "grid.osm.pbf", args.spacing_m, args.span)
            summary = import_file(db.engine, Path(tmp) / "grid.osm.pbf", name="bench-router")
            edges = summary["counts"]["network"]["edges"]
            notes.append(f"map: {counts['nodes']:,} nodes, {counts['ways']:,} ways, {edges:,} edges, spacing "
                         f"{args.spacing_m:g} m, {args.span[0]:g}° × {args.span[1]:g}°; generated and imported in {time.perf_counter() - t:.1f} s")
            print(notes[-1])
            pg = db.engine.dialect.name == "postgresql"
            with db.engine.begin() as conn:
                pgr = pg and router.install_pgrouting(conn)
            modes = ([("pgRouting", True)] if pgr else []) + [("scipy", False)]
            lat0, lon0 = MIN_LAT + 0.15, MIN_LON + 0.15
            for km in args.routes:
                lon1, lat1, _ = GEOD.fwd(lon0, lat0, 40.0, km * 1000.0)
                for name, use in modes:
                    router.route(db.engine, [(lat0, lon0), (lat1, lon1)], use_pgrouting=use)  # warm
                    times = []
                    for _ in range(args.runs):
                        t = time.perf_counter()
                        found = router.route(db.engine, [(lat0, lon0), (lat1, lon1)], use_pgrouting=use)
                        times.append((time.perf_counter() - t) * 1000.0)
                    median = statistics.median(times)
                    engine = f"{'PostgreSQL' if pg else 'SQLite'} {name}"
                    target = TARGET_MS if (km == 50 and pg) else None
                    rows.append(row(f"{km} km route, {engine}: median ms", "ms", round(median, 1), target=target,
                                    met=None if target is None else median <= target))
                    print(f"{km:>4} km ({found.distance_km:6.1f} km routed, approximate={found.approximate}) "
                          f"{engine:<22} median {median:8.1f} ms, slowest {max(times):8.1f} ms")
    finally:
        stop_embedded_redis(redis_url)
    name = "router-postgresql" if args.database_url else "router"
    print(write_result(name, rows, notes))


if __name__ == "__main__":
    main()
