"""PostgreSQL: reads outside a unit of work run without BEGIN/ROLLBACK (autocommit), and everything else is still
transactional: atomic() blocks, a write outside one, a lock, a savepoint (trips/core/db.py)."""
import pytest
import sqlalchemy as sa

from oauth.kernel.models import User
from tests.factories import make_user
from trips.core.db import _plain_read, atomic, db, transactional

IDLE, INTRANS = 0, 2  # psycopg.pq.TransactionStatus


@pytest.fixture
def pg(ctx):
    if db.engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL only: SQLite begins its own transactions (trips/core/db.py)")
    yield
    db.session.rollback()


def driver():
    return db.session.connection().connection.dbapi_connection


def test_reads_run_in_autocommit_and_leave_no_transaction_open(pg):
    user = make_user()
    assert db.session.scalar(sa.select(User.email).where(User.id == user.id)) == user.email
    conn = driver()
    assert conn.autocommit and conn.info.transaction_status == IDLE  # no BEGIN sent, no ROLLBACK owed


def test_a_write_outside_atomic_opens_a_transaction_and_a_rollback_undoes_it(pg):
    user = make_user()
    db.session.execute(sa.select(User.id))  # a read first: autocommit
    db.session.execute(sa.update(User).where(User.id == user.id).values(email="changed@example.org"))
    conn = driver()
    assert not conn.autocommit and conn.info.transaction_status == INTRANS
    db.session.rollback()
    assert db.session.scalar(sa.select(User.email).where(User.id == user.id)) == user.email
    assert driver().autocommit  # back in the pool, back to autocommit


def test_atomic_is_one_transaction_a_failure_leaves_nothing(pg):
    user = make_user()
    with pytest.raises(RuntimeError):
        with atomic():
            db.session.execute(sa.update(User).where(User.id == user.id).values(email="half@example.org"))
            db.session.flush()
            raise RuntimeError("midway")
    assert db.session.scalar(sa.select(User.email).where(User.id == user.id)) == user.email
    with atomic():
        assert not driver().autocommit  # transactional from the block's first statement, reads included
        db.session.execute(sa.update(User).where(User.id == user.id).values(email="whole@example.org"))
    assert db.session.scalar(sa.select(User.email).where(User.id == user.id)) == "whole@example.org"


def test_a_lock_or_a_savepoint_is_never_taken_in_autocommit(pg):
    user = make_user()
    db.session.execute(sa.select(User).where(User.id == user.id).with_for_update())
    assert driver().info.transaction_status == INTRANS  # the row lock lasts until the transaction ends
    db.session.rollback()
    with db.session.begin_nested():
        db.session.execute(sa.select(User.id))
    assert driver().info.transaction_status == INTRANS
    db.session.rollback()
    transactional(db.session)
    assert not driver().autocommit


@pytest.mark.parametrize("statement, read", [
    ("SELECT 1", True), ("  select id FROM trip", True), (";", True),
    ("SELECT * FROM trip FOR UPDATE", False), ("SELECT * FROM trip FOR NO KEY UPDATE SKIP LOCKED", False),
    ("select * from trip for share", False), ("UPDATE trip SET title = 'x'", False), ("SAVEPOINT sa_1", False),
    ("WITH x AS (DELETE FROM trip RETURNING id) SELECT * FROM x", False), ("SET search_path TO public", False),
    ("INSERT INTO trip DEFAULT VALUES", False), ("CREATE TABLE t (id int)", False),
])
def test_only_a_plain_select_counts_as_a_read(statement, read):
    assert _plain_read(statement) is read


def _backend_pid() -> int:
    pid = db.session.scalar(sa.text("SELECT pg_backend_pid()"))
    db.session.remove()  # the connection back to the pool
    return pid


def test_a_pooled_connection_the_server_ended_is_replaced_at_checkout(pg):
    db.session.remove()
    db.engine.dispose()  # one pooled connection from here on: the next checkouts hand out that one
    first = _backend_pid()
    assert _backend_pid() == first  # the pool hands the same connection back
    admin = sa.create_engine(db.engine.url, poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:  # waits until that backend has exited, as after a restart or failover
            assert conn.scalar(sa.text("SELECT pg_terminate_backend(:pid, 5000)"), {"pid": first})
    finally:
        admin.dispose()
    assert _backend_pid() != first  # no error: the dead connection was dropped and another one made


def test_checkout_pings_only_a_connection_idle_for_long(pg, monkeypatch):
    import psycopg

    from trips.core import db as db_module

    _backend_pid()
    pings = []
    execute = psycopg.Connection.execute

    def spy(self, query, *args, **kwargs):
        if query == ";":
            pings.append(self)
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", spy)
    db.session.scalar(sa.text("SELECT 1"))
    db.session.remove()
    assert pings == []  # used a moment ago: the socket check alone, no round trip
    monkeypatch.setattr(db_module, "PING_IDLE_S", -1.0)  # every connection counts as idle for long now
    assert db.session.scalar(sa.text("SELECT 1")) == 1
    assert len(pings) == 1


def test_an_engine_or_connection_asked_for_autocommit_keeps_it(pg):
    """CREATE DATABASE and the like cannot run in a transaction: an AUTOCOMMIT engine or connection is left as is."""
    admin = sa.create_engine(db.engine.url, execution_options={"isolation_level": "AUTOCOMMIT"}, poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("CREATE TEMPORARY TABLE btp_scratch (id int)"))
            assert conn.connection.dbapi_connection.autocommit
    finally:
        admin.dispose()
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("CREATE TEMPORARY TABLE btp_scratch (id int)"))
        assert conn.connection.dbapi_connection.autocommit
