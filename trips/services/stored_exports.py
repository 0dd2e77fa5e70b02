"""Export files made once: a trip's GPX, FIT course or calendar is made the first time it is asked for a version of
the trip, kept in the database (every web node shares it: trips/models.py TripExport) and served from there, with
a strong ETag from its content. Any kind plugs in: `stored_export(trip, kind, options, language, make)`.

The version is a digest of what the file is made from: the trip's row, its days' rows and its route's (on
PostgreSQL their row versions, `xmin`; elsewhere their stored values), and today's date while the trip has no start
date (its days are then dated from today). Any write to them gives another version; storing a version drops the
trip's files of every other. The kind is stored with its writer's format (FORMATS).

Concurrent first requests make the file once: the first takes a Redis lock on the key and makes it, the others wait
for the stored row (or take the lock over if its holder let it go without storing). A process makes at most
BUILDS_PER_PROCESS files at a time, so a burst of downloads of many trips leaves its other requests their share of
the CPU.
"""
from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Callable, Iterable, Iterator

import redis as redis_lib
import sqlalchemy as sa

from trips.core.db import atomic, db, utcnow
from trips.core.redis_client import get_redis
from trips.errors import ServiceUnavailable
from trips.models import Stage, Trip, TripExport, TripRoute

__all__ = ["Stored", "stored_export", "export_version", "etag_matches", "FORMATS"]

# The kind as stored, with its writer's format: a change to what a writer puts in its files names a new one here,
# so the files kept of the older writer are made again (a kind not named is stored as it is).
FORMATS = {"gpx": "gpx.1", "fit": "fit.1"}
LOCK_S = 60  # a maker's hold on a key: longer than any file takes to make
WAIT_S = 20.0  # how long a request waits for another's file before making it itself
POLL_S = (0.02, 0.05, 0.1, 0.2)  # the waits between two looks at the store, then the last one again
BUILD_WAIT_S = 30.0  # how long a request waits for its turn to make a file
CHUNK = 256 * 1024
BUSY = "refusal.briefly_unavailable"  # the slots stay busy: as when Redis is away, try again soon

# Files a process makes at a time: making a long trip's file is CPU-bound work under the GIL, which the process's
# other requests (a probe, a page) share with it.
BUILDS_PER_PROCESS = 1
_slot = threading.BoundedSemaphore(BUILDS_PER_PROCESS)


@dataclass(frozen=True)
class Stored:
    """A kept file: its strong ETag (quoted), media type, size, and its bytes (None when the caller's
    If-None-Match named it: nothing is read)."""
    etag: str
    media_type: str
    size: int
    content: bytes | None

    def chunks(self) -> Iterator[bytes]:
        """The file, decompressed a chunk at a time."""
        inflate = zlib.decompressobj()
        data = self.content or b""
        while data:
            yield inflate.decompress(data, CHUNK)
            data = inflate.unconsumed_tail
        rest = inflate.flush()
        if rest:
            yield rest


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Whether an If-None-Match header names `etag` (or is `*`); weak validators compare weakly (RFC 9110)."""
    if not if_none_match:
        return False
    tags = [t.strip() for t in if_none_match.split(",")]
    return "*" in tags or etag in (t.removeprefix("W/") for t in tags)


def _digest(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@lru_cache(maxsize=1)
def _pg_statement():
    return sa.text(
        "SELECT t.xmin::text, "
        "(SELECT string_agg(s.id || ':' || s.xmin::text, ',' ORDER BY s.position) FROM stage s "
        "WHERE s.trip_id = t.id), "
        "(SELECT r.xmin::text FROM trip_route r WHERE r.trip_id = t.id) "
        "FROM trip t WHERE t.id = :trip_id")


def _stored_values(connection, trip_id: str) -> str:
    """Elsewhere than PostgreSQL: a digest of the stored values of the trip, its days and its route."""
    digest = hashlib.sha256()
    for table, column, order in ((Trip.__table__, "id", None), (Stage.__table__, "trip_id", "position"),
                                 (TripRoute.__table__, "trip_id", None)):
        query = sa.select(*[sa.cast(c, sa.Text) if isinstance(c.type, sa.JSON) else c for c in table.c]) \
            .where(table.c[column] == trip_id)
        for row in connection.execute(query.order_by(table.c[order]) if order else query):
            for value in row:  # each value as itself: the repr of a route's megabytes would cost more than it
                digest.update(value if isinstance(value, bytes) else repr(value).encode())
                digest.update(b"\x1f")
    return digest.hexdigest()


def export_version(trip: Trip) -> str:
    """The version of `trip` its files are made from (the module's docstring)."""
    connection = db.session.connection()
    if connection.dialect.name == "postgresql":
        rows = tuple(connection.execute(_pg_statement(), {"trip_id": trip.id}).first() or ())
    else:
        rows = (_stored_values(connection, trip.id),)
    today = datetime.now(timezone.utc).date() if trip.start_date is None else None
    return _digest(rows, today)[:32]


def _key(trip_id: str, kind: str, options: str, language: str, version: str) -> sa.ColumnElement:
    t = TripExport
    return sa.and_(t.trip_id == trip_id, t.kind == kind, t.options == options, t.language == language,
                   t.version == version)


def _look(where, connection=None) -> Stored | None:
    """The kept file's validator (not its bytes), on `connection` (a fresh one sees every commit) or the session."""
    query = sa.select(TripExport.etag, TripExport.media_type, TripExport.size).where(where)
    found = (connection or db.session).execute(query).first()
    return Stored(f'"{found[0]}"', found[1], found[2], None) if found else None


def _make(make: Callable[[], tuple[Iterable[bytes], str]]) -> tuple[bytes, str, int, str]:
    """(the file compressed, its SHA-256, its size, its media type), made in one of the process's slots."""
    if not _slot.acquire(timeout=BUILD_WAIT_S):
        raise ServiceUnavailable(BUSY, 5)
    try:
        chunks, media_type = make()
        deflate, digest, size, parts = zlib.compressobj(6), hashlib.sha256(), 0, []
        for chunk in chunks:
            digest.update(chunk)
            size += len(chunk)
            parts.append(deflate.compress(chunk))
        parts.append(deflate.flush())
        return b"".join(parts), digest.hexdigest(), size, media_type
    finally:
        _slot.release()


def _store(trip_id: str, key: tuple, made: tuple[bytes, str, int, str]) -> None:
    """Keep the file under its key; the trip's files of other versions go (two makers of one key: the first wins)."""
    content, etag, size, media_type = made
    kind, options, language, version = key
    values = dict(trip_id=trip_id, kind=kind, options=options, language=language, version=version, etag=etag,
                  media_type=media_type, size=size, content=content, created_at=utcnow())
    with atomic() as session:
        dialect = session.connection().dialect.name
        session.execute(sa.delete(TripExport).where(TripExport.trip_id == trip_id, TripExport.version != version))
        if dialect in ("postgresql", "sqlite"):
            insert = (sa.dialects.postgresql.insert if dialect == "postgresql" else sa.dialects.sqlite.insert)
            session.execute(insert(TripExport).values(**values).on_conflict_do_nothing())
        elif session.execute(sa.select(TripExport.etag).where(_key(trip_id, *key))).first() is None:
            session.add(TripExport(**values))


def _lock(name: str):
    """The Redis lock of a key, taken; None when another holds it; False when Redis cannot be reached (each
    request then makes its own file)."""
    try:
        lock = get_redis().lock(name, timeout=LOCK_S)
        return lock if lock.acquire(blocking=False) else None
    except redis_lib.RedisError:
        return False


def _release(lock) -> None:
    try:
        lock.release()
    except redis_lib.RedisError:  # expired: another may be making it already, which is only work done twice
        pass


def _wait(where, name: str):
    """Wait for another request's file: (the kept file, None), or (None, the lock) once its holder let it go
    without storing, or (None, False) when the wait is over."""
    deadline = time.monotonic() + WAIT_S
    for attempt in range(10_000):
        time.sleep(POLL_S[min(attempt, len(POLL_S) - 1)])
        with db.engine.connect() as connection:
            found = _look(where, connection)
        if found is not None:
            return found, None
        lock = _lock(name)
        if lock:  # its maker let it go: stored just now, or failed
            with db.engine.connect() as connection:
                found = _look(where, connection)
            if found is not None:
                _release(lock)
                return found, None
        if lock is not None or time.monotonic() > deadline:
            return None, lock or False
    return None, False


def stored_export(trip: Trip, kind: str, options: str, language: str,
                  make: Callable[[], tuple[Iterable[bytes], str]], if_none_match: str | None = None) -> Stored:
    """The file of `kind` (with `options`, in `language`; "" for none) of `trip` as it is now: the kept one, else
    `make()` (its chunks and media type) once and kept. Its bytes are not read when `if_none_match` names it.
    Raises what `make` raises (nothing is kept then), ServiceUnavailable when the process's slots stay busy."""
    key = (FORMATS.get(kind, kind), options, language, export_version(trip))
    where = _key(trip.id, *key)
    found = _look(where)
    if found is None:
        name = f"btp:export:{_digest(trip.id, *key)[:40]}"
        lock = _lock(name)
        if lock is None:
            found, lock = _wait(where, name)
        elif lock:  # the lock may have been let go by a maker that has just stored the file
            with db.engine.connect() as connection:
                found = _look(where, connection)
            if found is not None:
                _release(lock)
        if found is None:
            try:
                content, etag, size, media_type = _make(make)
                _store(trip.id, key, (content, etag, size, media_type))
            finally:
                if lock:
                    _release(lock)
            found = Stored(f'"{etag}"', media_type, size, content)
    if etag_matches(if_none_match, found.etag):
        return dataclasses.replace(found, content=None)
    if found.content is None:
        with db.engine.connect() as connection:  # a connection of its own sees the rows another request stored
            found = dataclasses.replace(found, content=connection.scalar(sa.select(TripExport.content).where(where)))
        if found.content is None:  # a newer version replaced it between the two reads
            raise ServiceUnavailable(BUSY, 1)
    return found
