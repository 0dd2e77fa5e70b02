"""Database handle, engine tuning per dialect, and the unit of work.

Services write inside `atomic()`: one commit per use case, taken in one place, with an optional per-trip
Redis lock held across the commit and the jobs the use case asked for enqueued only after the commit.
"""
from __future__ import annotations

import contextvars
import os
import secrets
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone

from flask import Flask, current_app
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase

from trips.errors import Conflict


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)

# SQLite: begin write transactions with BEGIN IMMEDIATE so two writers queue on the busy timeout instead of
# one failing with SQLITE_BUSY_SNAPSHOT when it upgrades a read snapshot (https://sqlite.org/wal.html).
_immediate = contextvars.ContextVar("btp_sqlite_immediate", default=False)
_pending_jobs: contextvars.ContextVar[list | None] = contextvars.ContextVar("btp_pending_jobs", default=None)


def utcnow() -> datetime:
    """Now in UTC, naive: the columns are `DateTime` without a zone and every stored time is UTC."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def new_id() -> str:
    """A UUIDv7 (RFC 9562 §5.7) as a string: time-ordered, so indexes stay compact."""
    ms = time.time_ns() // 1_000_000
    value = (ms & (2**48 - 1)) << 80 | secrets.randbits(80)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def configure_engine_options(app: Flask) -> None:
    uri = app.config["SQLALCHEMY_DATABASE_URI"]
    if uri.startswith("sqlite"):
        app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"connect_args": {"timeout": 30}})
    else:
        app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"pool_pre_ping": True})


@event.listens_for(Engine, "connect")
def _sqlite_on_connect(dbapi_connection, _record):
    if type(dbapi_connection).__module__.startswith("sqlite3"):
        # Let SQLAlchemy drive transactions (pysqlite's own BEGIN handling breaks SAVEPOINT and IMMEDIATE).
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()


@event.listens_for(Engine, "begin")
def _sqlite_on_begin(conn):
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE" if _immediate.get() else "BEGIN")


def after_commit(func, *args, **kwargs) -> None:
    """Run `func(*args, **kwargs)` once the current atomic() block has committed (used to enqueue jobs)."""
    pending = _pending_jobs.get()
    if pending is None:
        raise RuntimeError("after_commit() outside atomic()")
    pending.append((func, args, kwargs))


@contextmanager
def atomic(lock: str | None = None, lock_timeout: float = 3.0):
    """One unit of work: commit on success, roll back on error, then run the after-commit callbacks.

    With `lock`, a Redis lock (30 s TTL) is held from before the first read to after the commit, so
    checks made inside the block still hold when the write lands.

    Raises Conflict when the lock cannot be had within `lock_timeout` seconds.
    """
    from jobs import get_redis

    if _pending_jobs.get() is not None:
        raise RuntimeError("atomic() blocks do not nest")
    session = db.session()
    if session.in_transaction():
        session.commit()  # end the read-only transaction of the request (token lookup …)
    redis_lock = None
    if lock:
        redis_lock = get_redis().lock(f"btp:lock:{lock}", timeout=30, sleep=0.025, blocking_timeout=lock_timeout)
        if not redis_lock.acquire():
            raise Conflict("Another change to this trip is in progress; try again in a moment.")
    pending: list = []
    token = _pending_jobs.set(pending)
    flag = _immediate.set(True)
    try:
        session.connection()  # BEGIN (IMMEDIATE on SQLite)
        _immediate.reset(flag)
        flag = None
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        if flag is not None:
            _immediate.reset(flag)
        _pending_jobs.reset(token)
        if redis_lock is not None:
            try:
                redis_lock.release()
            except Exception:  # expired under us: the commit already happened or rolled back
                current_app.logger.warning("lock %s expired before release", lock)
    for func, args, kwargs in pending:
        func(*args, **kwargs)


def engine_pid_guard() -> None:
    """After a fork (RQ work horse), drop the parent's pooled connections without closing them."""
    pid = os.getpid()
    engine = db.engine
    if _engine_pids.get(id(engine), pid) != pid:
        engine.dispose(close=False)
    _engine_pids[id(engine)] = pid


_engine_pids: dict[int, int] = {}
