"""The map store: the spatial index per engine (an R*Tree per table on SQLite, filled by the Loader, emptied by a
delete trigger; on PostgreSQL a PostGIS `geom` column with a GiST index, every PostGIS name qualified with the
extension's schema), bulk loading, and the life of an import. An import writes under a `loading` area in committed
batches and becomes visible in one short transaction (`publish`); queries read only `ready` areas, so a failed
import is never seen and leaves the previous one in place until it is purged.
"""
from __future__ import annotations

import json
from typing import Any, cast

import sqlalchemy as sa

from trips.core.db import utcnow
from trips.errors import DomainError
from trips.osm.tables import SPATIAL, osm_area

NO_POSTGIS = ("this PostgreSQL database has no PostGIS, which map data needs: install it "
              "(on Debian: apt-get install postgresql-15-postgis-3), then run CREATE EXTENSION postgis "
              "as a superuser, and import again")
_PURGE_BATCH = 20_000


class MapImportError(DomainError):
    """The map file cannot be imported (not OSM, truncated, empty) or the database cannot hold it."""

    code = "invalid_map"


def _rtree_box(table: str) -> str:
    return "lat, lat, lon, lon" if SPATIAL[table] == "Point" else "min_lat, max_lat, min_lon, max_lon"


def _sqlite_ddl(table: str) -> list[str]:
    # Loader fills the R*Tree set-wise after each batch (a per-row insert trigger would cost more than the
    # insert); deletes go through a trigger so no path can leave a box without its row.
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {table}_rtree USING rtree(id, min_lat, max_lat, min_lon, max_lon)",
        f"CREATE TRIGGER IF NOT EXISTS {table}_rtree_delete AFTER DELETE ON {table} "
        f"BEGIN DELETE FROM {table}_rtree WHERE id = old.id; END",
    ]


def postgis_schema(conn) -> str | None:
    """The schema PostGIS is installed in, or None."""
    return conn.exec_driver_sql(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'postgis'").scalar()


def _create_postgis(conn) -> str | None:
    """Create the extension if the server has it and we may; None when it cannot be had."""
    schema = postgis_schema(conn)
    if schema:
        return schema
    if not conn.exec_driver_sql("SELECT 1 FROM pg_available_extensions WHERE name = 'postgis'").scalar():
        return None
    target = "public" if conn.exec_driver_sql(
        "SELECT 1 FROM pg_namespace WHERE nspname = 'public'").scalar() else None
    try:
        with conn.begin_nested():  # a refusal (no privilege) must not abort the surrounding migration
            conn.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS postgis" + (" SCHEMA public" if target else ""))
    except sa.exc.DBAPIError:
        return None
    return postgis_schema(conn)


def install_spatial(conn, required: bool, tables=tuple(SPATIAL)) -> bool:
    """Create the spatial index objects of `tables` (default: every spatial table) if missing (idempotent; each
    migration that adds a spatial table calls it for its own, every import for all).

    Returns False when PostgreSQL has no PostGIS and `required` is false. Raises MapImportError(NO_POSTGIS)
    when it has none and `required` is true.
    """
    if conn.dialect.name == "sqlite":
        for table in tables:
            for statement in _sqlite_ddl(table):
                conn.exec_driver_sql(statement)
        return True
    schema = _create_postgis(conn)
    if schema is None:
        if required:
            raise MapImportError(NO_POSTGIS)
        return False
    for table in tables:
        conn.exec_driver_sql(f'ALTER TABLE {table} ADD COLUMN IF NOT EXISTS geom "{schema}".geometry({SPATIAL[table]}, 4326)')
        conn.exec_driver_sql(f"CREATE INDEX IF NOT EXISTS ix_{table}_geom ON {table} USING gist (geom)")
    return True


def drop_spatial(conn, tables=tuple(SPATIAL)) -> None:
    """Remove what install_spatial made for `tables` (a migration's downgrade); the PostGIS extension stays."""
    for table in tables:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {table}_rtree")


class Loader:
    """Bulk inserts on one raw DB-API connection: executemany on SQLite, COPY on PostgreSQL.

    Each `write` is its own short transaction. Rows are tuples in the column order given. The map tables
    are written only through here: on SQLite it is what puts each row's box into the R*Tree.
    """

    def __init__(self, engine: sa.Engine):
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        self.raw = engine.raw_connection()
        self.driver = cast(Any, self.raw.driver_connection)  # sqlite3's or psycopg's; None only once closed
        self.cache_size: int | None = None
        if self.sqlite:  # room for the R*Tree's nodes (32 MB): inserts stop re-reading them from disk
            self.cache_size = self.driver.execute("PRAGMA cache_size").fetchone()[0]
            self.driver.execute("PRAGMA cache_size = -32768")

    def write(self, batches: dict[str, tuple[tuple[str, ...], list[tuple]]]) -> None:
        """Insert every (columns, rows) batch of `batches` ({table: …}) in one transaction."""
        cur = self.raw.cursor()
        try:
            if self.sqlite:
                cur.execute("BEGIN IMMEDIATE")
                for table, (columns, rows) in batches.items():
                    if rows:
                        # Under BEGIN IMMEDIATE this connection is the only writer: ids above `last` are this batch.
                        last = cur.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
                        marks = ",".join("?" * len(columns))
                        cur.executemany(f"INSERT INTO {table} ({','.join(columns)}) VALUES ({marks})", rows)
                        if table in SPATIAL:
                            cur.execute(f"INSERT INTO {table}_rtree SELECT id, {_rtree_box(table)} FROM {table} "
                                        "WHERE id > ?", (last,))
                cur.execute("COMMIT")
            else:
                for table, (columns, rows) in batches.items():
                    if rows:
                        with cur.copy(f"COPY {table} ({','.join(columns)}) FROM STDIN") as copy:
                            for row in rows:
                                copy.write_row(row)
                self.raw.commit()
        except BaseException:
            if self.sqlite:
                if self.driver.in_transaction:
                    cur.execute("ROLLBACK")
            else:
                self.raw.rollback()
            raise
        finally:
            cur.close()

    def close(self) -> None:
        if self.cache_size is not None:  # the connection goes back to the pool as it came
            self.driver.execute(f"PRAGMA cache_size = {int(self.cache_size)}")
        self.raw.close()


def tags_json(tags: dict) -> str:
    return json.dumps(tags, ensure_ascii=False, separators=(",", ":"))


def begin_area(engine: sa.Engine, name: str, source_file: str) -> tuple[int, list[str]]:
    """A new `loading` area; unfinished leftovers of the same name (a killed import) are purged first.

    Returns (area id, notes about what was cleaned). Raises MapImportError(NO_POSTGIS) on a PostgreSQL
    without PostGIS.
    """
    notes = []
    with engine.begin() as conn:
        install_spatial(conn, required=True)
    with engine.begin() as conn:
        stale = conn.execute(sa.select(osm_area.c.id, osm_area.c.started_at).where(
            osm_area.c.name == name, osm_area.c.status != "ready")).all()
    for area_id, started in stale:
        purge(engine, area_id)
        notes.append(f"removed an unfinished import of {name} started {started:%Y-%m-%d %H:%M} UTC")
    with engine.begin() as conn:
        area_id = conn.execute(sa.text(
            "INSERT INTO osm_area (name, source_file, status, started_at) VALUES (:n, :f, 'loading', :t) "
            "RETURNING id"), {"n": name, "f": source_file[:255], "t": utcnow()}).scalar_one()
    return area_id, notes


def publish(engine: sa.Engine, area_id: int, name: str, bbox: tuple, bbox_source: str, counts: dict) -> list[int]:
    """Make `area_id` the visible import of `name` in one transaction; returns the areas to purge (the one
    it replaced, and any an interrupted purge left behind)."""
    update = sa.text(
        "UPDATE osm_area SET status = 'ready', imported_at = :t, bbox_source = :s, min_lat = :a, "
        "min_lon = :b, max_lat = :c, max_lon = :d, counts = :counts WHERE id = :id",
    ).bindparams(sa.bindparam("counts", type_=sa.JSON))
    with engine.begin() as conn:
        # Write first: on SQLite a transaction that reads, then writes, fails at once (SQLITE_BUSY_SNAPSHOT)
        # when another connection wrote in between; a first write waits for the lock instead.
        conn.execute(sa.text("UPDATE osm_area SET status = 'replaced' WHERE name = :n AND status = 'ready'"),
                     {"n": name})
        replaced = [r[0] for r in conn.execute(sa.text(
            "SELECT id FROM osm_area WHERE name = :n AND status = 'replaced'"), {"n": name})]
        conn.execute(update, {"t": utcnow(), "s": bbox_source, "a": bbox[0], "b": bbox[1], "c": bbox[2],
                              "d": bbox[3], "counts": counts, "id": area_id})
    return replaced


def refresh_statistics(engine: sa.Engine) -> None:
    """PostgreSQL: ANALYZE the map tables after an import, so the planner knows their size (a table millions of
    rows larger than its last statistics said gets plans made for the small one). SQLite: nothing."""
    if engine.dialect.name == "sqlite":
        return
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE osm_area, " + ", ".join(SPATIAL))


def purge(engine: sa.Engine, area_id: int) -> None:
    """Delete an area's rows in batches (short transactions), then the area itself."""
    for table in SPATIAL:
        while True:
            with engine.begin() as conn:
                done = conn.execute(sa.text(
                    f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE area_id = :a LIMIT {_PURGE_BATCH})"),
                    {"a": area_id}).rowcount
            if done < _PURGE_BATCH:
                break
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM osm_graph WHERE area_id = :a"), {"a": area_id})
        conn.execute(sa.text("DELETE FROM osm_area WHERE id = :a"), {"a": area_id})

