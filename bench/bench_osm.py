"""Benchmark: `flask osm import` of a generated ~100 MB .osm.pbf (time, peak memory, objects per second).

Run from the repository root:  .venv/bin/python bench/bench_osm.py [--mb 100] [--database-url URL] [--keep DIR]

The file is synthetic but shaped like a regional extract: a 3° × 2° region in blocks, each with streets
(10-node highway ways of mixed classes and surfaces, some with cycleway and maxspeed), buildings (closed
4-node ways, never kept), a landuse polygon, and tagged nodes (about 1 in 20: food shops with
opening_hours, accommodation, water, stations, pharmacies, benches that are not kept), villages, a few
ferries, and two country boundaries; every object carries a version, changeset and timestamp as public
extracts do, and node ids and coordinates are local as in real extracts, so the PBF compresses like one. The import runs in a fresh subprocess (`--worker`) on an empty SQLite database
(default) or the given PostgreSQL URL; its wall time and peak resident memory (ru_maxrss of the child,
interpreter and libraries included) are reported, with the database's size on disk for SQLite.
Objects per second = nodes + ways + relations in the file / import wall time.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (str(ROOT), str(ROOT / "bench")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import osmium  # noqa: E402
from osmium.osm.mutable import Node, Relation, Way  # noqa: E402

MIN_LAT, MIN_LON, SPAN_LAT, SPAN_LON = 44.0, 3.0, 2.0, 3.0
BYTES_PER_BLOCK = 8_900  # measured on this generator's output; --mb N writes N MB / this many blocks
HIGHWAYS = ["residential"] * 6 + ["unclassified"] * 3 + ["track"] * 3 + ["service"] * 4 + [
    "tertiary", "secondary", "primary", "footway", "path", "cycleway"]
SURFACES = [None, None, "asphalt", "asphalt", "gravel", "compacted", "ground", "paving_stones"]
POIS = [({"amenity": "bench"}, 6), ({"shop": "bakery", "opening_hours": "Mo-Sa 07:00-19:30"}, 2),
        ({"amenity": "restaurant", "opening_hours": "Tu-Su 12:00-14:00,19:00-22:00"}, 2),
        ({"shop": "supermarket", "opening_hours": "Mo-Sa 08:30-20:00"}, 1), ({"amenity": "drinking_water"}, 1),
        ({"tourism": "hotel", "stars": "2", "website": "https://example.org"}, 1), ({"tourism": "camp_site"}, 1),
        ({"amenity": "pharmacy"}, 1), ({"shop": "bicycle"}, 1), ({"railway": "station"}, 1),
        ({"historic": "castle"}, 1), ({"amenity": "place_of_worship", "religion": "christian"}, 1)]


def _plan(blocks: int, seed: int):
    """The extract as a stream of ("n", id, lat, lon, tags) and ("w", id, refs, tags), block by block.

    Deterministic for a seed: generate() runs it twice, writing the nodes on the first pass and the ways on
    the second, because an OSM file lists every node before any way and holding a million ways would cost
    more memory than the import being measured."""
    rnd = random.Random(seed)
    pois = [tags for tags, weight in POIS for _ in range(weight)]
    side = int(blocks ** 0.5) + 1
    ids = {"n": 0, "w": 0}

    def node(lat, lon, tags=None):
        ids["n"] += 1
        return ("n", ids["n"], lat, lon, tags or {})

    def way(nodes, tags, closed=False):
        ids["w"] += 1
        refs = [n[1] for n in nodes]
        return nodes + [("w", ids["w"], refs + refs[:1] if closed else refs, tags)]

    for b in range(blocks):
        lat0 = MIN_LAT + (b // side + 0.5) * SPAN_LAT / side
        lon0 = MIN_LON + (b % side + 0.5) * SPAN_LON / side
        out = []
        for s in range(30):  # streets
            lat, lon = lat0 + rnd.uniform(-0.02, 0.02), lon0 + rnd.uniform(-0.03, 0.03)
            dlat, dlon = rnd.uniform(-3e-4, 3e-4), rnd.uniform(-4e-4, 4e-4)
            tags = {"highway": rnd.choice(HIGHWAYS), "name": f"Rue {b}-{s}"}
            if (surface := rnd.choice(SURFACES)) is not None:
                tags["surface"] = surface
            if tags["highway"] in ("primary", "secondary", "tertiary"):
                tags["maxspeed"] = rnd.choice(["50", "70", "80", "FR:rural"])
                if rnd.random() < 0.3:
                    tags["cycleway:right"] = "lane"
            out += way([node(lat + i * dlat, lon + i * dlon) for i in range(10)], tags)
        for _ in range(60):  # buildings
            lat, lon = lat0 + rnd.uniform(-0.02, 0.02), lon0 + rnd.uniform(-0.03, 0.03)
            corners = [(lat, lon), (lat + 1e-4, lon), (lat + 1e-4, lon + 1.4e-4), (lat, lon + 1.4e-4)]
            out += way([node(*c) for c in corners], {"building": "yes"}, closed=True)
        ring = [node(lat0 + 0.01 * math.cos(2 * math.pi * i / 120), lon0 + 0.015 * math.sin(2 * math.pi * i / 120))
                for i in range(120)]
        out += way(ring, {"landuse": "farmland"}, closed=True)
        for _ in range(20):  # tagged nodes, most of them kept
            out.append(node(lat0 + rnd.uniform(-0.02, 0.02), lon0 + rnd.uniform(-0.03, 0.03), dict(rnd.choice(pois))))
        if b % 4 == 0:
            out.append(node(lat0, lon0, {"place": "village", "name": f"Village {b}",
                                         "population": str(rnd.randint(80, 5000))}))
        if b % 500 == 0:
            out += way([node(lat0 + i * 1e-3, lon0) for i in range(5)], {"route": "ferry", "name": f"Bac {b}"})
        yield from out
    # two countries split at the middle longitude, each ring one closed way
    mid = MIN_LON + SPAN_LON / 2
    top = MIN_LAT + SPAN_LAT
    for ring in ([(MIN_LAT, MIN_LON), (MIN_LAT, mid), (top, mid), (top, MIN_LON)],
                 [(MIN_LAT, mid), (MIN_LAT, MIN_LON + SPAN_LON), (top, MIN_LON + SPAN_LON), (top, mid)]):
        yield from way([node(lat, lon) for lat, lon in ring], {}, closed=True)


def generate(path: Path, blocks: int, seed: int = 7) -> dict:
    """Write the synthetic extract; returns the object counts."""
    header = osmium.io.Header()
    header.add_box(osmium.osm.Box(MIN_LON, MIN_LAT, MIN_LON + SPAN_LON, MIN_LAT + SPAN_LAT))
    counts = {"nodes": 0, "ways": 0, "relations": 0}
    meta = random.Random(seed + 1)

    def stamp():  # version, changeset and timestamp as public extracts carry them (no user names)
        return {"version": meta.randint(1, 6), "changeset": meta.randint(1, 150_000_000),
                "timestamp": datetime.fromtimestamp(meta.randint(1_200_000_000, 1_760_000_000), timezone.utc)}

    with osmium.SimpleWriter(str(path), header=header, overwrite=True) as writer:
        for item in _plan(blocks, seed):
            if item[0] == "n":
                writer.add_node(Node(id=item[1], location=(item[3], item[2]), tags=item[4], **stamp()))
                counts["nodes"] += 1
        last_way = 0
        for item in _plan(blocks, seed):
            if item[0] == "w":
                writer.add_way(Way(id=item[1], nodes=item[2], tags=item[3], **stamp()))
                counts["ways"] += 1
                last_way = item[1]
        for rid, (wid, iso, name) in enumerate(((last_way - 1, "FR", "France"), (last_way, "CH", "Switzerland")), 1):
            writer.add_relation(Relation(id=rid, members=[("w", wid, "outer")], version=1, tags={
                "type": "boundary", "boundary": "administrative", "admin_level": "2", "ISO3166-1:alpha2": iso,
                "name": name}))
            counts["relations"] += 1
    return counts


def worker(path: str, database_url: str | None, instance: str) -> None:
    """Import `path` into a fresh database; print a JSON line with the time and the child's peak RSS."""
    from flask_migrate import upgrade

    from app import create_app
    from trips.core.db import db
    from trips.osm.importer import import_file

    url = database_url or f"sqlite:///{instance}/bench.sqlite3"
    app = create_app({"DATABASE_URL": url, "REDIS_URL": "redis://127.0.0.1:1/0", "BTP_INSTANCE_DIR": instance,
                      "BTP_SECRET_KEY": "bench"}, environ={})
    with app.app_context():
        upgrade()
        rss_start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t0 = time.perf_counter()
        result = import_file(db.engine, path, echo=lambda line: print(line, file=sys.stderr, flush=True))
        elapsed = time.perf_counter() - t0
    print(json.dumps({"seconds": elapsed, "kept": result["counts"]["kept"], "rss_start_mb": rss_start}))


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


def _write(args, file_bytes: int, counts: dict, report: dict, peak_mb: float, db_mb: float | None) -> None:
    """bench/out/osm.json: throughput and peak memory against the issue-10 targets as their baselines."""
    from common import row, write_result

    objects = sum(counts.values())
    rate = objects / report["seconds"]
    engine = "PostgreSQL + PostGIS" if args.database_url else "SQLite"
    rows = [row(f"import into {engine}: objects per second", "objects/s", round(rate), 100_000, "target (issue 10)",
                ">= 100 000 objects/s", rate >= 100_000),
            row(f"import into {engine}: peak RSS of the importing process", "MB", round(peak_mb, 1), 500,
                "target (issue 10)", "< 500 MB", peak_mb < 500),
            row(f"import into {engine}: wall time", "s", round(report["seconds"], 2))]
    notes = [f"{file_bytes / 1e6:.1f} MB .osm.pbf: {counts['nodes']:,} nodes, {counts['ways']:,} ways, "
             f"{counts['relations']} relations; kept: " + ", ".join(f"{v:,} {k}" for k, v in report["kept"].items()),
             f"RSS after imports and migrations: {report['rss_start_mb']:.0f} MB",
             "previous figures (2026-12-01, load 4-9): SQLite 38.9-48.3 s, 180 000-222 000 objects/s, 375-383 MB, "
             "94 MB database; PostgreSQL + PostGIS 56.2 s, 155 000 objects/s, 366 MB"]
    if db_mb is not None:
        notes.append(f"SQLite database on disk: {db_mb:.0f} MB")
    write_result("osm" if not args.database_url else "osm-postgresql", rows, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of the generated .osm.pbf (MB)")
    parser.add_argument("--database-url", default=None, help="import into this database (default: SQLite)")
    parser.add_argument("--keep", default=None, help="directory to write the file and database into (kept)")
    parser.add_argument("--worker", nargs=3, metavar=("FILE", "URL", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        path, url, instance = args.worker
        worker(path, url or None, instance)
        return
    work = Path(args.keep or tempfile.mkdtemp(prefix="btp-bench-osm-"))
    work.mkdir(parents=True, exist_ok=True)
    pbf = work / "bench-region.osm.pbf"
    t0 = time.perf_counter()
    counts = generate(pbf, max(1, int(args.mb * 1e6 / BYTES_PER_BLOCK)))
    objects = sum(counts.values())
    print(f"generated {pbf.stat().st_size / 1e6:.1f} MB: {counts['nodes']:,} nodes, {counts['ways']:,} ways, "
          f"{counts['relations']} relations in {time.perf_counter() - t0:.0f} s", flush=True)
    t0 = time.perf_counter()
    child = subprocess.run([sys.executable, __file__, "--worker", str(pbf), args.database_url or "", str(work)],
                           cwd=ROOT, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if child.returncode:
        sys.exit(f"import failed ({child.returncode})")
    wall = time.perf_counter() - t0
    report = json.loads(child.stdout.strip().splitlines()[-1])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"import: {report['seconds']:.1f} s ({wall:.1f} s with interpreter start and migrations), "
          f"{objects / report['seconds']:,.0f} objects/s, peak RSS {peak:.0f} MB "
          f"(after imports and migrations: {report['rss_start_mb']:.0f} MB)")
    print("kept: " + ", ".join(f"{v:,} {k}" for k, v in report["kept"].items()))
    db_mb = None
    if not args.database_url:
        db_mb = _size_mb(work / "bench.sqlite3")
        print(f"SQLite database on disk: {db_mb:.0f} MB")
    _write(args, pbf.stat().st_size, counts, report, peak, db_mb)
    if not args.keep:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()


if __name__ == "__main__":
    main()
