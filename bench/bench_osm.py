"""Benchmark: `flask osm import` of a generated ~100 MB .osm.pbf (time, peak memory, objects per second).

    .venv/bin/python bench/bench_osm.py [--mb 100] [--database-url URL] [--keep DIR] [--country] [--pbf FILE]

The file is synthetic but shaped like a regional extract (streets, buildings, tagged nodes, villages, ferries, two
country boundaries; local ids and coordinates, so it compresses like one); `--country --mb 1100` makes a
country-sized one. The import runs in a fresh subprocess (`--worker`). What it reports: bench/README.md."""
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

import numpy as np  # noqa: E402
import osmium  # noqa: E402
from osmium.osm.mutable import Node, Relation, Way  # noqa: E402

MIN_LAT, MIN_LON, SPAN_LAT, SPAN_LON = 44.0, 3.0, 2.0, 3.0
REGION = (MIN_LAT, MIN_LON, MIN_LAT + SPAN_LAT, MIN_LON + SPAN_LON)  # the default ~100 MB regional extract
# --country: 10° of latitude × 12° of longitude (about 1 110 × 870 km, a country the size of Germany with its
# neighbours' edges), holding the whole 14-day route of bench_analysis.py (45.0–51.5° N, 5.0–14.8° E).
COUNTRY = (44.0, 4.0, 54.0, 16.0)
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


def _plan(blocks: int, seed: int, box: tuple = REGION):
    """The extract as a stream of ("n", id, lat, lon, tags) and ("w", id, refs, tags), block by block.

    Deterministic for a seed: generate() runs it twice, writing the nodes on the first pass and the ways on
    the second, because an OSM file lists every node before any way and holding a million ways would cost
    more memory than the import being measured."""
    min_lat, min_lon, max_lat, max_lon = box
    span_lat, span_lon = max_lat - min_lat, max_lon - min_lon
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
        lat0 = min_lat + (b // side + 0.5) * span_lat / side
        lon0 = min_lon + (b % side + 0.5) * span_lon / side
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
    mid = min_lon + span_lon / 2
    for ring in ([(min_lat, min_lon), (min_lat, mid), (max_lat, mid), (max_lat, min_lon)],
                 [(min_lat, mid), (min_lat, max_lon), (max_lat, max_lon), (max_lat, mid)]):
        yield from way([node(lat, lon) for lat, lon in ring], {}, closed=True)


def _stamps(seed: int):
    """Endless (version, changeset, timestamp) as public extracts carry them (no user names), drawn by numpy
    64 Ki at a time: one by one with `random` they would slow the generation down."""
    rng = np.random.default_rng(seed)
    while True:
        versions = rng.integers(1, 7, 65_536).tolist()
        changesets = rng.integers(1, 150_000_001, 65_536).tolist()
        seconds = rng.integers(1_200_000_000, 1_760_000_001, 65_536).tolist()
        for v, c, t in zip(versions, changesets, seconds):
            yield v, c, datetime.fromtimestamp(t, timezone.utc)


def generate(path: Path, blocks: int, seed: int = 7, box: tuple = REGION) -> dict:
    """Write the synthetic extract over `box` (min_lat, min_lon, max_lat, max_lon); returns the object counts."""
    header = osmium.io.Header()
    header.add_box(osmium.osm.Box(box[1], box[0], box[3], box[2]))
    counts = {"nodes": 0, "ways": 0, "relations": 0}
    stamps = _stamps(seed + 1)

    with osmium.SimpleWriter(str(path), header=header, overwrite=True) as writer:
        for item in _plan(blocks, seed, box):
            if item[0] == "n":
                v, c, t = next(stamps)
                writer.add_node(Node(id=item[1], location=(item[3], item[2]), tags=item[4], version=v, changeset=c,
                                     timestamp=t))
                counts["nodes"] += 1
        last_way = 0
        for item in _plan(blocks, seed, box):
            if item[0] == "w":
                v, c, t = next(stamps)
                writer.add_way(Way(id=item[1], nodes=item[2], tags=item[3], version=v, changeset=c, timestamp=t))
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


def _count(path: Path) -> dict:
    """Nodes, ways and relations in an existing file (--pbf)."""
    counts = {"nodes": 0, "ways": 0, "relations": 0}
    for obj in osmium.FileProcessor(str(path)):
        counts["nodes" if obj.is_node() else "ways" if obj.is_way() else "relations"] += 1
    return counts


def _pg_size_mb(url: str) -> float:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() / 1e6
    finally:
        engine.dispose()


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


def _write(args, file_bytes: int, counts: dict, report: dict, peak_mb: float, db_mb: float | None) -> None:
    """bench/out/osm.json: throughput and peak memory against their targets as baselines."""
    from common import row, write_result

    objects = sum(counts.values())
    rate = objects / report["seconds"]
    engine = "PostgreSQL + PostGIS" if args.database_url else "SQLite"
    rows = [row(f"import into {engine}: objects per second", "objects/s", round(rate), 100_000, "target",
                ">= 100 000 objects/s", rate >= 100_000),
            row(f"import into {engine}: peak RSS of the importing process", "MB", round(peak_mb, 1), 500,
                "target", "< 500 MB", peak_mb < 500),
            row(f"import into {engine}: wall time", "s", round(report["seconds"], 2))]
    notes = [f"{file_bytes / 1e6:.1f} MB .osm.pbf: {counts['nodes']:,} nodes, {counts['ways']:,} ways, "
             f"{counts['relations']} relations; kept: " + ", ".join(f"{v:,} {k}" for k, v in report["kept"].items()),
             f"RSS after imports and migrations: {report['rss_start_mb']:.0f} MB"]
    notes.append(f"{'PostgreSQL database size (pg_database_size)' if args.database_url else 'SQLite database on disk'}: "
                 f"{db_mb:,.0f} MB")
    notes.append(f"region: {'--country ' + str(COUNTRY) if args.country else str(REGION)} (min lat, min lon, max "
                 f"lat, max lon); {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC")
    name = "osm" if not args.database_url else "osm-postgresql"
    write_result(name + ("-country" if args.country else ""), rows, notes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="size of the generated .osm.pbf (MB)")
    parser.add_argument("--database-url", default=None, help="import into this database (default: SQLite)")
    parser.add_argument("--keep", default=None, help="directory to write the file and database into (kept)")
    parser.add_argument("--country", action="store_true",
                        help=f"spread the blocks over a country ({COUNTRY[2] - COUNTRY[0]:.0f}° × "
                             f"{COUNTRY[3] - COUNTRY[1]:.0f}° from {COUNTRY[0]}° N {COUNTRY[1]}° E) instead of "
                             "a 2° × 3° region; use with --mb 1100 for a ≥ 1 GB extract")
    parser.add_argument("--pbf", default=None,
                        help="import this file, written before by --keep (its --mb and --country), instead of "
                             "generating one")
    parser.add_argument("--worker", nargs=3, metavar=("FILE", "URL", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        path, url, instance = args.worker
        worker(path, url or None, instance)
        return
    if args.mb <= 0:
        parser.error("--mb: a size in MB above 0")
    work = Path(args.keep or tempfile.mkdtemp(prefix="btp-bench-osm-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.pbf:
        pbf = Path(args.pbf)
        if not pbf.is_file():
            parser.error(f"--pbf: no file {pbf}")
        counts = _count(pbf)
    else:
        pbf = work / ("bench-country.osm.pbf" if args.country else "bench-region.osm.pbf")
        t0 = time.perf_counter()
        counts = generate(pbf, max(1, int(args.mb * 1e6 / BYTES_PER_BLOCK)), box=COUNTRY if args.country else REGION)
        print(f"generated {pbf.stat().st_size / 1e6:.1f} MB: {counts['nodes']:,} nodes, {counts['ways']:,} ways, "
              f"{counts['relations']} relations in {time.perf_counter() - t0:.0f} s "
              f"({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC)", flush=True)
    objects = sum(counts.values())
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
    if args.database_url:
        db_mb = _pg_size_mb(args.database_url)
        print(f"PostgreSQL database size (pg_database_size): {db_mb:,.0f} MB")
    else:
        db_mb = _size_mb(work / "bench.sqlite3")
        print(f"SQLite database on disk: {db_mb:.0f} MB")
    _write(args, pbf.stat().st_size, counts, report, peak, db_mb)
    if not args.keep and not args.pbf:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()


if __name__ == "__main__":
    main()
