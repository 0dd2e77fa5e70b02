"""Benchmark: the bicycle router on an imported map, routes of 5, 50 and 200 km, against Valhalla on the same map.

    .venv/bin/python bench/bench_router.py [--database-url URL] [--spacing-m 400] [--runs 5] [--span 2.0 2.6]
        [--routes 5 50 200] [--valhalla-venv DIR | --no-peer]

A generated street grid imported with `flask osm import`'s code into SQLite or PostgreSQL + PostGIS, each route
searched by trips/osm/router.py (scipy, and pgRouting when the database has it); Valhalla (its own venv,
.cache/bench-valhalla) routes the same points on tiles built from the same map. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
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
    parser.add_argument("--valhalla-venv", default=None, help="a venv with pyvalhalla-weekly (default: "
                        ".cache/bench-valhalla, installed from bench/peers/valhalla-requirements.txt): Valhalla "
                        "routes the same points on tiles built from the same map, the peer")
    parser.add_argument("--no-peer", action="store_true", help="skip Valhalla")
    args = parser.parse_args(argv)
    if not args.no_peer and not args.valhalla_venv:
        args.valhalla_venv = ensure_valhalla_venv()
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
            ends = {km: GEOD.fwd(lon0, lat0, 40.0, km * 1000.0)[:2] for km in args.routes}
            peer = valhalla_peer(args.valhalla_venv, Path(tmp), [[(lat0, lon0), (ends[km][1], ends[km][0])]
                                                                 for km in args.routes], args.runs, notes)
            rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
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
                    if peer and name == modes[-1][0]:
                        theirs = peer[args.routes.index(km)]
                        ratio = found.distance_km / theirs["km"]
                        rows.append(row(f"{km} km route: length, BTP / Valhalla", "ratio", round(ratio, 3),
                                        target=1.10, met=abs(ratio - 1.0) <= 0.10))
                        print(f"{'':>4}    Valhalla {theirs['km']:6.1f} km in {theirs['ms']:.1f} ms (median): "
                              f"BTP's length / Valhalla's = {ratio:.3f}")
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
            notes.append(f"peak RSS of the bench process: {rss_before:.0f} MB after the import, {rss:.0f} MB after "
                         f"the routes (+{rss - rss_before:.0f} MB for the searches)")
            print(notes[-1])
    finally:
        stop_embedded_redis(redis_url)
    name = "router-postgresql" if args.database_url else "router"
    print(write_result(name, rows, notes))


def ensure_valhalla_venv() -> str | None:
    """The peer's venv (.cache/bench-valhalla), installed once per requirements; None when pip cannot install it."""
    venv, requirements = ROOT / ".cache" / "bench-valhalla", ROOT / "bench" / "peers" / "valhalla-requirements.txt"
    stamp = venv / (".installed-" + hashlib.sha256(requirements.read_bytes()).hexdigest()[:12])
    if stamp.exists():
        return str(venv)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--only-binary=:all:", "-r", str(requirements)], check=True)
    except subprocess.CalledProcessError as exc:
        print(f"peer: Valhalla could not be installed ({exc}); routes measured without it")
        return None
    stamp.touch()
    return str(venv)


def valhalla_peer(venv: str | None, tmp: Path, pairs: list, runs: int, notes: list) -> list | None:
    """Valhalla's answers for `pairs` ([{"km", "ms"}]), on tiles built from the bench's map; None without a venv."""
    if not venv:
        return None
    binaries = next(Path(venv).glob("lib/python*/site-packages/valhalla/bin"))
    for exe in binaries.iterdir():
        exe.chmod(exe.stat().st_mode | 0o111)  # pip leaves the wheel's executables without the x bit
    python = str(Path(venv) / "bin" / "python")
    config = tmp / "valhalla.json"
    config.write_text(subprocess.run(
        [python, "-m", "valhalla.valhalla_build_config", "--mjolnir-tile-dir", str(tmp / "tiles"),
         "--mjolnir-tile-extract", str(tmp / "tiles.tar")], check=True, capture_output=True, text=True).stdout)
    t = time.perf_counter()
    subprocess.run([str(binaries / "valhalla_build_tiles"), "-c", str(config), str(tmp / "grid.osm.pbf")],
                   check=True, capture_output=True, cwd=tmp)  # it writes duplicateways.txt where it runs
    notes.append(f"peer: Valhalla (pyvalhalla-weekly), tiles built from the same map in {time.perf_counter() - t:.1f} s")
    print(notes[-1])
    subprocess.run([python, str(ROOT / "bench" / "peers" / "valhalla_route.py"), str(config), str(runs),
                    str(tmp / "valhalla.out.json")], input=json.dumps(pairs), check=True, capture_output=True, text=True)
    return json.loads((tmp / "valhalla.out.json").read_text())


if __name__ == "__main__":
    main()
