"""Benchmark: the bicycle router on an imported map, routes of 50, 200 and 480 km and a trip from 10 places, against
Valhalla on the same map.

    .venv/bin/python bench/bench_router.py [--database-url URL] [--spacing-m 1000] [--runs 5] [--span 6 8]
        [--routes 50 200 480] [--trip-km 3000] [--trip-places 10] [--valhalla-venv DIR | --no-peer]

A generated street grid imported with `flask osm import`'s code into SQLite or PostgreSQL + PostGIS, each route
searched by trips/osm/router.py on the prepared graph (and with pgRouting, when the database has it, up to 200 km);
Valhalla (its own venv, .cache/bench-valhalla) routes the same points on tiles built from the same map. Also the
cost of the prepared graph: its preparation at import, its merge into the instance copy, its size and the memory it
takes. What it reports: bench/README.md."""
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
from trips.osm.geometry import GEOD  # noqa: E402

MIN_LAT, MIN_LON, SPAN_LAT, SPAN_LON = 45.0, 3.0, 6.0, 8.0
ROUTES_KM = (50, 200, 480)
PGR_MAX_KM = 200  # pgRouting searches a band of edges read per leg: longer legs are left to the graph
TRIP_TARGET_S = 10.0  # the trip from places, every leg routed
LENGTH_TOLERANCE = 0.03  # BTP's length against Valhalla's on the longest route
SLOWER_50_KM = 2.0  # the 50 km route: at most this many times Valhalla's time


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
    parser.add_argument("--spacing-m", type=float, default=1000.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--span", type=float, nargs=2, default=(SPAN_LAT, SPAN_LON), metavar=("LAT", "LON"))
    parser.add_argument("--routes", type=int, nargs="+", default=ROUTES_KM, help="straight km of each route")
    parser.add_argument("--trip-km", type=float, default=3000.0, help="straight km of the trip from places (0: none)")
    parser.add_argument("--trip-places", type=int, default=10)
    parser.add_argument("--valhalla-venv", default=None, help="a venv with pyvalhalla-weekly (default: "
                        ".cache/bench-valhalla, installed from bench/peers/valhalla-requirements.txt): Valhalla "
                        "routes the same points on tiles built from the same map, the peer")
    parser.add_argument("--no-peer", action="store_true", help="skip Valhalla")
    parser.add_argument("--ready", type=int, default=0, metavar="WORKERS",
                        help="also create the trip through the places with create_trip under WORKERS real RQ "
                             "workers, timed to every computation settled")
    args = parser.parse_args(argv)
    if not args.no_peer and not args.valhalla_venv:
        args.valhalla_venv = ensure_valhalla_venv()
    import logging

    logging.getLogger("alembic").setLevel(logging.WARNING)
    from flask_migrate import upgrade

    from app import create_app
    from trips.core.db import db
    from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis
    from trips.osm import graph as prepared, router
    from trips.osm.importer import import_file

    tmp = tempfile.mkdtemp(prefix="btp-bench-router-")
    redis_url, _ = ensure_embedded_redis(Path(tmp))
    env = {"DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3", "REDIS_URL": redis_url,
           "BTP_INSTANCE_DIR": tmp, "BTP_SECRET_KEY": "bench"}
    app = create_app(env, environ={})
    rows, notes = [], []

    def note(text: str) -> None:
        notes.append(text)
        print(text)

    try:
        with app.app_context():
            upgrade()
            t = time.perf_counter()
            counts = write_map(Path(tmp) / "grid.osm.pbf", args.spacing_m, args.span)
            summary = import_file(db.engine, Path(tmp) / "grid.osm.pbf", name="bench-router")
            edges = summary["counts"]["network"]["edges"]
            note(f"map: {counts['nodes']:,} nodes, {counts['ways']:,} ways, {edges:,} edges, spacing "
                 f"{args.spacing_m:g} m, {args.span[0]:g}° × {args.span[1]:g}°; generated and imported in "
                 f"{time.perf_counter() - t:.1f} s")
            rows += prepare_cost(db.engine, prepared, summary["graph"], note)
            pg = db.engine.dialect.name == "postgresql"
            with db.engine.begin() as conn:
                pgr = pg and router.install_pgrouting(conn)
            lat0, lon0 = MIN_LAT + 0.15, MIN_LON + 0.15
            ends = {km: GEOD.fwd(lon0, lat0, 40.0, km * 1000.0)[:2] for km in args.routes}
            pairs = [[(lat0, lon0), (ends[km][1], ends[km][0])] for km in args.routes]
            peer = valhalla_peer(args.valhalla_venv, Path(tmp), pairs, args.runs, notes)
            engine_name = "PostgreSQL" if pg else "SQLite"
            for km, (a, b) in zip(args.routes, pairs):
                modes = [("graph", False)] + ([("pgRouting", True)] if pgr and km <= PGR_MAX_KM else [])
                for name, use in modes:
                    found, times = timed(lambda: router.route(db.engine, [a, b], use_pgrouting=use), args.runs)
                    median = statistics.median(times)
                    theirs = peer[args.routes.index(km)] if peer and name == "graph" else None
                    slower = SLOWER_50_KM if km <= 50 else 1.0 if km >= 480 else None
                    met = None if theirs is None or slower is None else median <= slower * theirs["ms"]
                    rows.append(row(f"{km} km route, {engine_name} {name}: median ms", "ms", round(median, 1),
                                    theirs and round(theirs["ms"], 1), theirs and "Valhalla",
                                    target=None if met is None else f"≤ {slower:g} × Valhalla", met=met))
                    print(f"{km:>4} km ({found.distance_km:6.1f} km routed, approximate={found.approximate}) "
                          f"{engine_name} {name:<10} median {median:8.1f} ms, slowest {max(times):8.1f} ms")
                    if theirs:
                        ratio = found.distance_km / theirs["km"]
                        tolerance = LENGTH_TOLERANCE if km >= 480 else 0.10
                        rows.append(row(f"{km} km route: length, BTP / Valhalla", "ratio", round(ratio, 3),
                                        target=f"within {tolerance:.0%}", met=abs(ratio - 1.0) <= tolerance))
                        print(f"{'':>4}    Valhalla {theirs['km']:6.1f} km in {theirs['ms']:.1f} ms (median): "
                              f"BTP's length / Valhalla's = {ratio:.3f}")
            places = trip_places(args.trip_km, args.trip_places, args.span) if args.trip_km else None
            if places is None and args.trip_km:
                note(f"trip: legs of {args.trip_km / (args.trip_places - 1):.0f} km do not fit in this map: not run")
            if places is not None:
                found, times = timed(lambda: router.route(db.engine, places), max(1, args.runs // 2))
                median = statistics.median(times) / 1000.0
                rows.append(row(f"trip of {args.trip_places} places ({args.trip_km:g} km straight), {engine_name}: "
                                "median s", "s", round(median, 2), target=f"≤ {TRIP_TARGET_S:g} s",
                                met=median <= TRIP_TARGET_S))
                print(f"trip of {args.trip_places} places: {found.distance_km:.0f} km routed, "
                      f"{sum(leg.routed for leg in found.legs)} of {len(found.legs)} legs routed, median {median:.2f} s")
                if args.ready:
                    rows.append(trip_ready(app, env, places, args.ready, engine_name, note))
            note(f"RSS of the bench process now {rss_mb():.0f} MB, peak "
                 f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0:.0f} MB")
    finally:
        stop_embedded_redis(redis_url)
    name = "router-postgresql" if args.database_url else "router"
    print(write_result(name, rows, notes))


def trip_ready(app, env: dict, places: list, workers: int, engine_name: str, note) -> dict:
    """create_trip from `places` (as POST /api/trips with waypoints), timed from the call to every computation of
    the trip settled, under `workers` real RQ workers (`flask worker`)."""
    import os
    import secrets

    from rq import Worker

    from bench_analysis import stop_workers, wait_settled
    from jobs.tasks import bind_app
    from oauth.kernel.tokens import create_user
    from trips.core.db import db
    from trips.core.redis_client import get_redis
    from trips.services.trips import create_trip

    started = [subprocess.Popen([sys.executable, "-m", "flask", "--app", "app", "worker"], cwd=ROOT,
                                env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(workers)]
    try:
        while len(Worker.all(connection=get_redis())) < workers:
            time.sleep(0.1)
        bind_app(app)
        user = create_user(f"router-{os.getpid()}-{secrets.token_hex(4)}@example.org")
        db.session.commit()
        start = time.perf_counter()
        trip, _ = create_trip(user, {"waypoints": [{"lat": a, "lon": b} for a, b in places]}, secrets.token_hex(16))
        db.session.commit()
        seconds = wait_settled(trip.id, start=start)
        db.session.refresh(trip)
        legs = trip.route_legs or []
        note(f"trip created from {len(places)} places: {trip.status}, {len(trip.stages)} days, "
             f"{sum(1 for leg in legs if leg['routed'])} of {len(legs)} legs routed, every computation settled in "
             f"{seconds:.2f} s ({workers} RQ workers)")
    finally:
        stop_workers(started)
    return row(f"trip of {len(places)} places created, {engine_name}: to every computation settled", "s",
               round(seconds, 2), target=f"≤ {TRIP_TARGET_S:g} s", met=seconds <= TRIP_TARGET_S)


def timed(call, runs: int):
    """(the answer, wall ms of `runs` calls after a warm-up)."""
    found = call()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        found = call()
        times.append((time.perf_counter() - t) * 1000.0)
    return found, times


def rss_mb() -> float:
    """This process's resident memory now (Linux), MB."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20


def prepare_cost(engine, prepared, at_import: dict, note) -> list:
    """The prepared graph's costs: at import (the part written to osm_graph), at the first route (the merge into the
    instance copy), in another process (the copy checked and opened), its files and this process's memory."""
    t = time.perf_counter()
    graph = prepared.current(engine)
    first = time.perf_counter() - t
    del graph
    prepared.forget()
    before = rss_mb()  # the merge's own arrays may stay with the allocator: measured from here
    t = time.perf_counter()
    graph = prepared.current(engine)
    opened = time.perf_counter() - t
    for name in ("indptr", "head", "cost", "edge", "xyz", "node"):
        getattr(graph, name).sum()  # every page in: the memory a search over the whole map can touch
    mb = graph.files_bytes() / 2**20
    note(f"graph: {len(graph.node):,} nodes, {len(graph.head):,} arcs; prepared at import in "
         f"{at_import['seconds']:.1f} s ({at_import['bytes'] / 2**20:.0f} MB in osm_graph); merged into the instance "
         f"copy in {first:.1f} s ({mb:.0f} MB of .npy files); opened by another process in {opened:.2f} s; "
         f"RSS {before:.0f} → {rss_mb():.0f} MB with every page of the copy read (pages the processes share)")
    return [row("graph prepared at import", "s", round(at_import["seconds"], 2)),
            row("graph merged into the instance copy (first route)", "s", round(first, 2)),
            row("graph files (.npy)", "MB", round(mb, 1)),
            row("graph part in osm_graph", "MB", round(at_import["bytes"] / 2**20, 1)),
            row("graph opened by another process", "s", round(opened, 3))]


def trip_places(km: float, count: int, span) -> list | None:
    """`count` places zigzagging across the map, legs of km / (count - 1) straight, inside the map by 10 km; None
    when such legs do not fit in it."""
    leg = km * 1000.0 / (count - 1)
    lat, lon = MIN_LAT + 0.3, MIN_LON + 0.3
    out = [(lat, lon)]
    for i in range(count - 1):
        for bearing in [(40.0 + 135.0 * i + 45.0 * k) % 360.0 for k in range(8)]:  # a new heading each leg
            lon1, lat1, _ = GEOD.fwd(lon, lat, bearing, leg)
            if MIN_LAT + 0.1 < lat1 < MIN_LAT + span[0] - 0.1 and MIN_LON + 0.1 < lon1 < MIN_LON + span[1] - 0.1:
                break
        else:
            return None
        lat, lon = lat1, lon1
        out.append((lat, lon))
    return out


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
