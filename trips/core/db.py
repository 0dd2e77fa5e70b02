"""Database handle, engine tuning per dialect, and the unit of work.

Services write inside `atomic()`: one commit per use case, taken in one place, with an optional per-trip
Redis lock held across the commit and the jobs the use case asked for enqueued only after the commit.
"""
from __future__ import annotations

import contextvars
import os
import re
import secrets
import select
import time
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone

from flask import Flask, current_app
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import DeclarativeBase

from trips.core.epochs import TrackedSession  # the session whose writes say whose trips they change
from trips.core.redis_client import get_redis
from trips.errors import Conflict


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base, session_options={"class_": TrackedSession})

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


# A web worker serves up to 8 requests at once (gunicorn.conf.py `threads`), and a request may hold two connections
# (the offline place search reads the map beside its session): 8 kept, 8 more while a burst lasts.
POOL = {"pool_size": 8, "max_overflow": 8}


def configure_engine_options(app: Flask) -> None:
    uri = app.config["SQLALCHEMY_DATABASE_URI"]
    if uri.startswith("sqlite"):
        pool = POOL if ":memory:" not in uri else {}
        app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"connect_args": {"timeout": 30}, **pool})
    else:
        # psycopg's pooled connections are checked at checkout without a round trip (_pg_on_checkout)
        app.config.setdefault("SQLALCHEMY_ENGINE_OPTIONS",
                              {"pool_pre_ping": not uri.startswith("postgresql+psycopg"), **POOL})


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


# PostgreSQL: a read outside a unit of work runs in autocommit, sparing BEGIN and ROLLBACK (under READ COMMITTED
# each statement has its own snapshot anyway); anything but a plain SELECT turns the connection transactional first.
_PLAIN_READS: dict[str, bool] = {}
_PG_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE
_LOCKING = re.compile(r"\bFOR\s+(UPDATE|SHARE|NO\s+KEY\s+UPDATE|KEY\s+SHARE)\b", re.IGNORECASE)


def _plain_read(statement: str) -> bool:
    known = _PLAIN_READS.get(statement)
    if known is None:
        head = statement.lstrip()[:7].upper()
        known = (head.startswith("SELECT") or head == ";") and not _LOCKING.search(statement)
        if len(_PLAIN_READS) < 4096:  # the statements SQLAlchemy compiles are a bounded set; ad-hoc text is not
            _PLAIN_READS[statement] = known
    return known


def _psycopg(dbapi_connection) -> bool:
    return type(dbapi_connection).__module__.startswith("psycopg")


@event.listens_for(Engine, "connect")
def _pg_on_connect(dbapi_connection, record):
    if _psycopg(dbapi_connection):
        dbapi_connection.autocommit = True
        record.info[_RETURNED] = time.monotonic()


@event.listens_for(Engine, "checkin")
def _pg_on_checkin(dbapi_connection, record):
    if dbapi_connection is not None and _psycopg(dbapi_connection) and not dbapi_connection.closed \
            and dbapi_connection.info.transaction_status == _PG_IDLE:
        dbapi_connection.autocommit = True
        record.info[_RETURNED] = time.monotonic()


# PostgreSQL, instead of a pre-ping round trip: a server that ended a pooled connection left its socket readable
# while idle, so the pool drops it; only one idle over PING_IDLE_S (a network may cut it silently) is pinged.
PING_IDLE_S = 30.0
_RETURNED = "btp_returned_at"


@event.listens_for(Engine, "checkout")
def _pg_on_checkout(dbapi_connection, record, _proxy):
    if not _psycopg(dbapi_connection):
        return
    try:
        ended = dbapi_connection.closed or dbapi_connection.pgconn.status != 0 or _ready(dbapi_connection.pgconn.socket)
        if not ended and time.monotonic() - record.info.get(_RETURNED, 0.0) > PING_IDLE_S:
            dbapi_connection.execute(";")  # one round trip
            if not dbapi_connection.autocommit:
                dbapi_connection.rollback()
    except Exception as exc:
        raise DisconnectionError(f"pooled connection unusable: {type(exc).__name__}") from exc
    if ended:
        raise DisconnectionError("the server ended this pooled connection")


def _ready(fd: int) -> bool:
    """True when the socket has something to read (or has closed): never so for an idle connection."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))


@event.listens_for(Engine, "before_cursor_execute")
def _pg_before_execute(conn, cursor, statement, parameters, context, executemany):
    if conn.dialect.name == "postgresql":
        dbapi_connection = cursor.connection
        if dbapi_connection.autocommit and not _plain_read(statement) and not _autocommit_asked(conn):
            dbapi_connection.autocommit = False  # idle in autocommit: this statement opens the transaction


def _autocommit_asked(conn) -> bool:
    """True when the engine or the connection was made AUTOCOMMIT on purpose (CREATE DATABASE, VACUUM …), through
    its execution options: `create_engine(url, execution_options={"isolation_level": "AUTOCOMMIT"})` or
    `.execution_options(isolation_level="AUTOCOMMIT")`."""
    return conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT"


def transactional(session) -> None:
    """The session's connection in a transaction from its next statement (PostgreSQL; SQLite begins its own)."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        dbapi_connection = connection.connection.dbapi_connection
        if dbapi_connection.autocommit:
            dbapi_connection.autocommit = False


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


def _begin_immediate(session) -> None:
    """BEGIN IMMEDIATE on SQLite (PostgreSQL's begins with the first statement)."""
    flag = _immediate.set(True)
    try:
        transactional(session)
    finally:
        _immediate.reset(flag)


@contextmanager
def atomic(lock: str | None = None, lock_timeout: float = 3.0):
    """One unit of work: commit on success, roll back on error, then run the after-commit callbacks.

    With `lock`, a Redis lock (30 s TTL) is held from before the first read to after the commit, so
    checks made inside the block still hold when the write lands.

    Raises Conflict when the lock cannot be had within `lock_timeout` seconds.
    """
    if _pending_jobs.get() is not None:
        raise RuntimeError("atomic() blocks do not nest")
    session = db.session()
    if session.in_transaction():
        session.commit()  # end the read-only transaction of the request (token lookup …)
    redis_lock = None
    if lock:
        redis_lock = get_redis().lock(f"btp:lock:{lock}", timeout=30, sleep=0.025, blocking_timeout=lock_timeout)
        if not redis_lock.acquire():
            raise Conflict("refusal.trip_busy")
    pending: list = []
    token = _pending_jobs.set(pending)
    try:
        _begin_immediate(session)
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
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
