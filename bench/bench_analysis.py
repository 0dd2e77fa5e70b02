"""Benchmark: the analysis of a 14-day trip on generated map data, from `analyze_trip` to every computation settled.

    .venv/bin/python bench/bench_analysis.py [--workers 2] [--simple] [--repeat 3] [--no-count] [--profile N]
        [--database-url URL]

Real RQ workers on SQLite, or on PostgreSQL + PostGIS beside the maps already imported there; then, unless
--no-count, the analysis in process as it is, with the map asked one day at a time, and one statement per 1 km
chunk. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import io
import os
import random
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

from tests.fakes.thirdparty import gpx_from_points, make_points  # noqa: E402
from tests.osm_maps import MapBuilder, offset_north  # noqa: E402

DAYS_KM = 1_100  # ceil(1 100 / 80 km per day) = 14 days
STEP_M = 100.0
HIGHWAYS = ["tertiary"] * 4 + ["secondary"] * 2 + ["primary", "unclassified", "track", "cycleway"]
SURFACES = ["asphalt"] * 5 + ["gravel", "compacted", "ground"]
ALONG = [  # (every n route points, tags, metres off the route)
    (10, {"shop": "bakery", "opening_hours": "Mo-Sa 07:00-19:30"}, 40),
    (20, {"amenity": "restaurant", "opening_hours": "Tu-Su 12:00-14:00,19:00-22:00"}, 80),
    (30, {"shop": "supermarket", "opening_hours": "Mo-Sa 08:30-20:00"}, 150),
    (25, {"amenity": "drinking_water"}, 30),
    (30, {"tourism": "camp_site", "name": "Camping"}, 600),
    (40, {"tourism": "hotel", "name": "Hotel", "stars": "2", "website": "https://example.org"}, 900),
    (45, {"tourism": "museum", "name": "Museum"}, 250),
    (60, {"historic": "castle", "name": "Castle"}, 400),
    (100, {"amenity": "pharmacy", "name": "Pharmacy"}, 500),
    (150, {"railway": "station", "name": "Station"}, 1500),
    (80, {"shop": "bicycle", "name": "Cycles"}, 700),
]


def route():
    return make_points(int(DAYS_KM * 1000 / STEP_M) + 1, step_m=STEP_M, climb_m=900.0)


def region(points, seed: int = 7) -> MapBuilder:
    """The map around `points` (see the module docstring)."""
    rnd = random.Random(seed)
    lats, lons = [p[0] for p in points], [p[1] for p in points]
    box = (min(lats) - 0.2, min(lons) - 0.2, max(lats) + 0.2, max(lons) + 0.2)
    m = MapBuilder(bounds=box)
    for i in range(0, len(points), 50):
        m.node(points[i][0], points[i][1], {"place": "village", "name": f"Village {i}"})
    for every, tags, off in ALONG:
        for i in range(every // 2, len(points), every):
            side = off if rnd.random() < 0.5 else -off
            m.node(*offset_north(points[i][0], points[i][1], side * rnd.uniform(0.5, 1.0)), dict(tags))
    for i in range(0, len(points) - 3, 3):  # the road the route follows, in 300 m ways
        tags = {"highway": rnd.choice(HIGHWAYS), "surface": rnd.choice(SURFACES)}
        if tags["highway"] in ("primary", "secondary"):
            tags["maxspeed"] = rnd.choice(["50", "70", "80"])
        m.way([offset_north(points[k][0], points[k][1], 3) for k in range(i, i + 4)], tags)
    for i in range(0, len(points), 10):  # a side street every km
        lat, lon = points[i][0], points[i][1]
        m.way([offset_north(lat, lon, -300), offset_north(lat, lon, 300)], {"highway": "residential"})
    for _ in range(20_000):  # places off the route: the index must sort them out
        tags = dict(rnd.choice(ALONG)[1])
        m.node(rnd.uniform(box[0], box[2]), rnd.uniform(box[1], box[3]), tags)
    return m


def settled(trip_id: str) -> bool:
    import sqlalchemy as sa

    from trips.computations import ACTIVE
    from trips.core.db import db
    from trips.models import Computation

    db.session.rollback()
    return not db.session.scalar(sa.select(sa.func.count()).select_from(Computation).where(
        Computation.trip_id == trip_id, Computation.status.in_(ACTIVE)))


def wait_settled(trip_id: str, simple_worker=None, timeout: float = 300.0, start: float | None = None) -> float:
    """Seconds from `start` (default: now) until every computation of the trip has settled."""
    start = time.perf_counter() if start is None else start
    if simple_worker is not None:
        simple_worker()
    while not settled(trip_id):
        if time.perf_counter() - start > timeout:
            raise SystemExit("the analysis did not settle")
        time.sleep(0.01)
    return time.perf_counter() - start


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="real RQ workers (flask worker)")
    parser.add_argument("--simple", action="store_true", help="one in-process burst SimpleWorker instead")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-count", action="store_true",
                        help="skip the in-process runs that count SQL statements (batched, per day, per chunk)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="instead of the timed runs: each enrichment's compute run N times in this process on "
                             "the trip's snapshot, its CPU (best of N) printed, and cProfile's top functions")
    parser.add_argument("--database-url", default=None,
                        help="a PostgreSQL + PostGIS database to run on, its imported maps kept (default: SQLite)")
    args = parser.parse_args(argv)
    import logging

    logging.getLogger("rq").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)

    from flask_migrate import upgrade
    from rq import SimpleWorker

    from app import create_app
    from trips.core.queue import get_queue
    from trips.core.redis_client import get_redis
    from trips.core.embedded_redis import ensure_embedded_redis, socket_path, stop_embedded_redis
    from jobs.tasks import bind_app
    from oauth.kernel.tokens import create_user
    from trips.services.analysis import analyze_trip
    from trips.core.db import db
    from trips.models import Trip
    from trips.osm.importer import import_file
    from trips.services.trips import import_gpx

    if args.database_url and not args.database_url.startswith("postgresql"):
        parser.error("--database-url: a postgresql+psycopg:// URL (the default is a temporary SQLite database)")
    tmp = tempfile.mkdtemp(prefix="btp-bench-analysis-")
    redis_url, _ = ensure_embedded_redis(Path(tmp))
    env = {"DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3", "REDIS_URL": redis_url,
           "BTP_INSTANCE_DIR": tmp, "BTP_SECRET_KEY": "bench"}
    app = create_app(dict(env), environ={})
    workers = []
    try:
        with app.app_context():
            upgrade()
            points = route()
            t = time.perf_counter()
            summary = import_file(db.engine, region(points).write(Path(tmp) / "region.osm.pbf"), name="bench")
            print(f"map: {sum(summary['counts']['kept'].values())} objects kept, generated and imported in "
                  f"{time.perf_counter() - t:.1f} s")
            tables = map_tables(db.engine)
            print("map tables (every ready area): " + ", ".join(f"{n:,} {t}" for t, n in tables.items()))
            if args.database_url:
                print(explain(db.engine, points))
            user = create_user(f"bench-{os.getpid()}-{int(time.time())}@example.org" if args.database_url
                               else "bench@example.org")
            db.session.commit()
            if args.profile:
                bind_app(app)
                trip = import_gpx(user, io.BytesIO(gpx_from_points(points, name="Bench 14 days")), {})
                wait_settled(trip.id, lambda: SimpleWorker([get_queue()], connection=get_redis()).work(
                    burst=True, logging_level="WARNING"))
                profile(db.session.get(Trip, trip.id), args.profile)
                profile_jobs(user, trip.id, lambda: SimpleWorker([get_queue()], connection=get_redis()).work(
                    burst=True, logging_level="WARNING"))
                return
            if not args.simple:
                workers = [subprocess.Popen([sys.executable, "-m", "flask", "--app", "app", "worker"], cwd=ROOT,
                                            env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL) for _ in range(args.workers)]
                from rq import Worker

                while len(Worker.all(connection=get_redis())) < args.workers:
                    time.sleep(0.1)
            bind_app(app)

            def burst():
                SimpleWorker([get_queue()], connection=get_redis()).work(burst=True, logging_level="WARNING")

            drive = burst if args.simple else None
            trip = import_gpx(user, io.BytesIO(gpx_from_points(points, name="Bench 14 days")), {})
            trip_id, days = trip.id, len(trip.stages)
            first = wait_settled(trip_id, drive)
            times = []
            cpus, server = [], []
            postmaster = postmaster_pid(db.engine)
            for _ in range(args.repeat):
                start, cpu, db_cpu = time.perf_counter(), workers_cpu(workers), proc_cpu(postmaster)
                analyze_trip(user, trip_id)
                times.append(wait_settled(trip_id, drive, start=start))
                cpus.append(workers_cpu(workers) - cpu)
                server.append(proc_cpu(postmaster) - db_cpu)
            trip = db.session.get(Trip, trip_id)
            statuses = sorted({(c.name, c.status) for c in trip.computations if c.name not in ("route", "stages")})
            jobs = slowest_jobs(get_queue())
            stop_workers(workers)  # the counted runs take every job in this process
            counted = {} if args.no_count else {
                form: counted_analysis(user, trip_id, burst, form) for form in ("batched", "per-day", "per-chunk")}
        mode = "1 in-process SimpleWorker" if args.simple else f"{args.workers} RQ worker(s), forked work horses"
        print(f"trip: {days} days, {len(statuses)} enrichments; {mode}")
        print(f"first analysis (dispatched by the upload, workers cold): {first:.2f} s")
        print(f"analyze → every computation settled: best {min(times):.2f} s, median "
              f"{statistics.median(times):.2f} s over {len(times)} runs (target < 5 s)")
        if not args.simple:
            print(f"CPU of the workers and their work horses per analysis: best {min(cpus):.2f} s, median "
                  f"{statistics.median(cpus):.2f} s (the database server's apart)")
            if postmaster:
                print(f"CPU of the PostgreSQL backends that ended per analysis (the work horses' connections; any "
                      f"other client's too): best {min(server):.2f} s, median {statistics.median(server):.2f} s")
        print("statuses:", ", ".join(f"{n}={s}" for n, s in statuses))
        print("slowest jobs (last run):", ", ".join(f"{n} {d:.2f} s" for n, d in jobs[:5]))
        for form, (n, n_map, seconds, cpu) in counted.items():
            print(f"in process, {form} map queries: {n} SQL statements ({n_map} of them on the map tables), "
                  f"analysis settled in {seconds:.2f} s ({cpu:.2f} s CPU)")
        _write(args, mode, first, times, statuses, jobs, counted, tables, (cpus, server if postmaster else []))
    finally:
        stop_workers(workers)
        stop_embedded_redis(f"unix://{socket_path(Path(tmp))}")


def profile(trip, runs: int) -> None:
    """CPU seconds of each enrichment's compute (best of `runs`, in this process, on the trip's snapshot) and
    the functions taking the most of the total (cProfile, cumulative, over every enrichment's last run)."""
    import cProfile
    import pstats

    from trips.core.db import db
    from trips.enrich import registry

    snap = registry.snapshot(trip)
    db.session.rollback()
    prof, cpu, wall = cProfile.Profile(), {}, {}
    for name in registry.ENRICHMENTS:
        for k in range(runs + 1):  # the last run profiled, not counted
            if k == runs:
                prof.enable()
            start, clock = time.process_time(), time.perf_counter()
            registry.run_compute(name, snap, db.engine)
            took, seconds = time.process_time() - start, time.perf_counter() - clock
            prof.disable()
            if k < runs:
                cpu[name], wall[name] = min(cpu.get(name, took), took), min(wall.get(name, seconds), seconds)
    for name, took in sorted(cpu.items(), key=lambda x: -wall[x[0]]):
        print(f"cpu {name:18s} {took:.3f} s, wall {wall[name]:.3f} s")
    print(f"cpu total {sum(cpu.values()):.3f} s, wall {sum(wall.values()):.3f} s (best of {runs} each, this process; "
          "the database server's CPU is in the wall)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(45)


def profile_jobs(user, trip_id: str, burst) -> None:
    """One whole analysis in this process (analyze_trip, then every job by a burst SimpleWorker: snapshot, compute,
    apply, RQ's bookkeeping), under cProfile: where a job's time goes besides its compute."""
    import cProfile
    import pstats

    from trips.services.analysis import analyze_trip

    prof = cProfile.Profile()
    start, cpu = time.perf_counter(), time.process_time()
    prof.enable()
    analyze_trip(user, trip_id)
    wait_settled(trip_id, burst)
    prof.disable()
    print(f"one analysis in process: {time.perf_counter() - start:.2f} s, {time.process_time() - cpu:.2f} s CPU "
          "(under cProfile)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(60)


def proc_cpu(pid: int | None) -> float:
    """CPU seconds used so far by a process and its reaped children (/proc: utime, stime, cutime, cstime), 0 where
    /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, TypeError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def workers_cpu(workers: list) -> float:
    """CPU seconds of the worker processes and their finished work horses."""
    return sum(proc_cpu(w.pid) for w in workers)


def postmaster_pid(engine) -> int | None:
    """The PostgreSQL server's main process when it runs on this machine (the parent of this connection's
    backend: it reaps every backend, so their CPU adds up in its children's), else None (SQLite, a remote server)."""
    if engine.dialect.name != "postgresql":
        return None
    import sqlalchemy as sa

    with engine.connect() as conn:
        backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar()
    try:
        status = Path(f"/proc/{backend}/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), None)


def stop_workers(workers: list) -> None:
    """Stop the `flask worker` processes (a warm shutdown: each unregisters from Redis) and wait for them."""
    for w in workers:
        if w.poll() is None:
            w.terminate()
    for w in workers:
        w.wait(30)


def counted_analysis(user, trip_id: str, burst, form: str) -> tuple[int, int, float, float]:
    """(SQL statements, of them on the map tables, seconds, CPU seconds of this process) of one analysis run in
    this process (a burst SimpleWorker). `form`: "batched" as it is; "per-day" with every per-trip map query
    of trips/osm/queries.py asked one day (one line, one point) at a time; "per-chunk" that and one statement
    per 1 km chunk of a line (tests/osm_maps.py `per_box_select`)."""
    import sqlalchemy as sa

    from tests.osm_maps import per_box_select
    from trips.core.db import db
    from trips.osm import index, queries as Q, store
    from trips.services.analysis import analyze_trip

    count = [0, 0]

    def on_statement(_conn, _cursor, statement, *_):
        count[0] += 1
        count[1] += "osm_" in statement

    def one_at_a_time(each):
        return lambda items, *a, **k: [each([item], *a, **k)[0] for item in items]

    saved = {name: getattr(Q, name) for name in (
        "points_along_each", "points_near_each", "ways_along_each", "ferries_along_each", "nearest_place_each",
        "countries_in")}
    saved_index = index.select_boxes, index.select_chunks, index._postgis_schema
    sa.event.listen(db.engine, "before_cursor_execute", on_statement)
    try:
        if form in ("per-day", "per-chunk"):
            for name, each in saved.items():
                setattr(Q, name, one_at_a_time(each) if name != "countries_in" else lambda *_a, **_k: None)
            index._postgis_schema = store.postgis_schema
        if form == "per-chunk":
            index.select_boxes = index.select_chunks = per_box_select
        start, cpu = time.perf_counter(), time.process_time()
        analyze_trip(user, trip_id)
        seconds = wait_settled(trip_id, burst, start=start)
        cpu = time.process_time() - cpu
    finally:
        for name, each in saved.items():
            setattr(Q, name, each)
        index.select_boxes, index.select_chunks, index._postgis_schema = saved_index
        sa.event.remove(db.engine, "before_cursor_execute", on_statement)
    return count[0], count[1], seconds, cpu


def map_tables(engine) -> dict[str, int]:
    """Rows of every ready area per map table (the country map's as well as the route's)."""
    import sqlalchemy as sa

    from trips.osm.tables import DATA_TABLES

    with engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT count(*) FROM {t} t JOIN osm_area r ON r.id = t.area_id "
                                        "AND r.status = 'ready'")).scalar() for t in DATA_TABLES}


def explain(engine, points) -> str:
    """The plan PostgreSQL picks for the first day's water query (points_along_each's statement): the GiST
    index (ix_osm_point_geom) must be in it, the big table never read whole."""
    import sqlalchemy as sa

    from trips.osm import index
    from trips.osm.tables import osm_point

    line = [p[:2] for p in points[:800]]
    boxes = [index.grow(index.box_of(c), 2000.0) for _, c, _ in index.line_chunks(index.as_line(line))]
    plans = []

    def grab(conn, cursor, statement, parameters, context, executemany):
        if "osm_point" in statement and not plans:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS OFF, COSTS OFF) " + statement, parameters)
            plans.append("\n".join(r[0] for r in cursor.fetchall()))

    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        with engine.connect() as conn:
            index.select_boxes(conn, osm_point, boxes, "AND t.kind IN :kinds", {"kinds": ["water"]})
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)
    plan = plans[0] if plans else "(no statement)"
    used = "uses" if "ix_osm_point_geom" in plan else "does NOT use"
    return f"EXPLAIN of a day's batched water query ({len(boxes)} chunk boxes) {used} ix_osm_point_geom:\n{plan}"


def _write(args, mode: str, first: float, times: list[float], statuses, jobs, counted: dict, tables: dict,
           cpu: tuple[list, list] = ([], [])) -> None:
    """bench/out/analysis.json (analysis-postgresql.json with --database-url): the time against its target (one
    on SQLite, a tighter one on PostgreSQL + PostGIS beside a country-sized map), the statements and the
    in-process times against the per-day and per-chunk forms."""
    from common import row, write_result

    best, median = min(times), statistics.median(times)
    target, name = (2.0, "target") if args.database_url else (5.0, "target")
    engine = "PostgreSQL + PostGIS" if args.database_url else "SQLite"
    rows = [row(f"analyze → settled, 14 days, {engine}, {mode} (best of {len(times)})", "s", round(best, 3), target,
                name, f"< {target:g} s", best < target),
            row("analyze → settled, median", "s", round(median, 3), target, name, f"< {target:g} s", median < target)]
    workers, server = cpu
    if workers and not args.simple:
        rows.append(row("CPU per analysis: the workers and their work horses (median)", "s",
                        round(statistics.median(workers), 3)))
    if server:
        rows.append(row("CPU per analysis: the PostgreSQL backends that ended (median)", "s",
                        round(statistics.median(server), 3)))
    if counted:
        n_new, m_new, t_new, c_new = counted["batched"]
        for form, before in (("per-day", "map queries one day at a time (before per-trip batching)"),
                             ("per-chunk", "one map query per 1 km chunk (before per-line batching)")):
            n_old, m_old, t_old, c_old = counted[form]
            rows += [row("SQL statements per analysis (in process)", "statements", n_new, n_old, before),
                     row("of them on the map tables", "statements", m_new, m_old, before),
                     row("analysis in one process, one job at a time: CPU time", "s", round(c_new, 3),
                         round(c_old, 3), before),
                     row("analysis in one process, one job at a time: wall time", "s", round(t_new, 3),
                         round(t_old, 3), before)]
    notes = [f"first analysis (dispatched by the upload, workers cold): {first:.2f} s",
             "map tables (every ready area): " + ", ".join(f"{n:,} {t}" for t, n in tables.items()),
             "statuses: " + ", ".join(f"{n}={s}" for n, s in statuses),
             "slowest jobs (last run): " + ", ".join(f"{n} {d:.2f} s" for n, d in jobs[:5])]
    write_result("analysis-postgresql" if args.database_url else "analysis", rows, notes)


def slowest_jobs(queue) -> list[tuple[str, float]]:
    """(computation, seconds) of the finished enrichment jobs of the last generation, slowest first."""
    from rq.job import Job

    jobs = [j for j in Job.fetch_many(queue.finished_job_registry.get_job_ids(), connection=queue.connection)
            if j is not None and j.func_name == "jobs.tasks.run_enrichment" and j.started_at and j.ended_at]
    if not jobs:
        return []
    last = max(j.args[2] for j in jobs)
    out = [(j.args[1], (j.ended_at - j.started_at).total_seconds()) for j in jobs if j.args[2] == last]
    return sorted(out, key=lambda x: -x[1])


if __name__ == "__main__":
    main()
