"""The migrations build the schema from an empty database, match the models, and go back down cleanly."""
import os

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade

from tests.conftest import pg_url_with_schema, reset_pg_schema
from trips.core.db import db
from trips.osm.tables import SPATIAL, spatial_index_object


def _declared(obj, name, type_, reflected, compare_to) -> bool:
    """Leave out the map's spatial index, which is engine-specific DDL the models cannot declare: SQLite's
    R*Tree virtual tables (and the shadow tables SQLite makes for them), PostGIS geom columns and their GiST
    indexes (trips/osm/store.py install_spatial). Everything else is compared."""
    if type_ == "column" and name == "geom":
        return obj.table.name not in SPATIAL
    return not spatial_index_object(name or "")


def _empty_database_url(tmp_path) -> str:
    url = os.environ.get("DATABASE_URL")
    if url and url.startswith("postgresql"):
        reset_pg_schema(url, "btp_migration_test")
        return pg_url_with_schema(url, "btp_migration_test")
    return f"sqlite:///{tmp_path / 'empty.sqlite3'}"


# Reflection does not know PostGIS's geometry type (the geom columns, left out by _declared above).
@pytest.mark.filterwarnings("ignore:Did not recognize type '([a-z_]+\\.)?geometry':sqlalchemy.exc.SAWarning")
def test_upgrade_from_empty_matches_the_models_and_downgrades(tmp_path, redis_server):
    from app import create_app

    app = create_app({"DATABASE_URL": _empty_database_url(tmp_path), "REDIS_URL": redis_server,
                      "BTP_INSTANCE_DIR": str(tmp_path), "BTP_SECRET_KEY": "x"}, environ={})
    with app.app_context():
        upgrade()
        tables = set(sa.inspect(db.engine).get_table_names())
        assert {"user_account", "access_token", "trip", "stage", "trip_route", "computation",
                "idempotency_record", "alembic_version"} <= tables
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"include_object": _declared}), db.metadata)
        assert diff == [], diff
        downgrade(revision="base")
        assert set(sa.inspect(db.engine).get_table_names()) <= {"alembic_version"}
        upgrade()
        db.engine.dispose()


def _row(table: sa.Table, **given) -> dict:
    """A row of `table` with every required column filled with a plain value of its type."""
    from datetime import date, datetime

    plain = {sa.Integer: 1, sa.Float: 0.5, sa.Boolean: False, sa.DateTime: datetime(2031, 1, 1),
             sa.Date: date(2031, 1, 1), sa.LargeBinary: b"", sa.JSON: [], sa.String: "x", sa.Text: "x"}
    row = {}
    for column in table.columns:
        if column.name in given or column.nullable or column.server_default is not None:
            continue
        row[column.name] = next((v for t, v in plain.items() if isinstance(column.type, t)), "x")
    return {**row, **given}


def test_0013_keeps_unknown_elevation_null_and_downgrades_it_to_zero(tmp_path, redis_server):
    """docs/RULES.md "Elevation": the climbing columns take null (unknown) from 0013; going back down writes 0."""
    from app import create_app

    app = create_app({"DATABASE_URL": _empty_database_url(tmp_path), "REDIS_URL": redis_server,
                      "BTP_INSTANCE_DIR": str(tmp_path), "BTP_SECRET_KEY": "x"}, environ={})
    with app.app_context():
        upgrade(revision="0013")
        meta = sa.MetaData()
        meta.reflect(bind=db.engine, only=("user_account", "trip", "trip_route", "stage"))
        t = meta.tables
        with db.engine.begin() as conn:
            conn.execute(t["user_account"].insert().values(**_row(t["user_account"], id="u1", email="a@b.c")))
            conn.execute(t["trip"].insert().values(**_row(t["trip"], id="t1", user_id="u1")))
            conn.execute(t["trip_route"].insert().values(**_row(t["trip_route"], trip_id="t1", elevation_gain=None)))
            conn.execute(t["stage"].insert().values(**_row(t["stage"], id="s1", trip_id="t1", elevation=None,
                                                            start_ele=None)))
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT elevation, start_ele FROM stage")).one() == (None, None)
        downgrade(revision="0012")
        with db.engine.connect() as conn:
            assert conn.execute(sa.text("SELECT elevation, start_ele FROM stage")).one() == (0, 0)
            assert conn.execute(sa.text("SELECT elevation_gain FROM trip_route")).one() == (0,)
        downgrade(revision="base")
        db.engine.dispose()


@pytest.mark.filterwarnings("ignore:Did not recognize type '([a-z_]+\\.)?geometry':sqlalchemy.exc.SAWarning")
def test_0018_widens_an_imported_area_to_the_roads_it_kept(tmp_path, redis_server):
    """docs/RULES.md "Map coverage": an area imported with its header's box alone answers, from 0018, for the
    roads it kept beyond that box too; an area whose box holds its rows is left as it was."""
    from app import create_app

    app = create_app({"DATABASE_URL": _empty_database_url(tmp_path), "REDIS_URL": redis_server,
                      "BTP_INSTANCE_DIR": str(tmp_path), "BTP_SECRET_KEY": "x"}, environ={})
    with app.app_context():
        upgrade(revision="0017")
        meta = sa.MetaData()
        meta.reflect(bind=db.engine, only=("osm_area", "osm_way", "osm_place"))
        t = meta.tables
        box = {"min_lat": 45.0, "min_lon": 5.0, "max_lat": 45.01, "max_lon": 5.01}
        with db.engine.begin() as conn:
            for area_id in (1, 2):
                conn.execute(t["osm_area"].insert().values(**_row(t["osm_area"], id=area_id, status="ready",
                                                                  bbox_source="header", **box)))
            conn.execute(t["osm_way"].insert().values(**_row(t["osm_way"], area_id=1, osm_type="w", min_lat=45.005,
                                                             min_lon=5.005, max_lat=45.006, max_lon=5.04)))
            conn.execute(t["osm_place"].insert().values(**_row(t["osm_place"], id=1, area_id=1, osm_type="n",
                                                               lat=44.99, lon=5.02)))
            conn.execute(t["osm_place"].insert().values(**_row(t["osm_place"], id=2, area_id=2, osm_type="n",
                                                               lat=45.005, lon=5.005)))
        upgrade(revision="0018")
        with db.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT id, min_lat, min_lon, max_lat, max_lon, bbox_source FROM osm_area "
                                        "ORDER BY id")).all()
        assert rows == [(1, 44.99, 5.0, 45.01, 5.04, "union"), (2, 45.0, 5.0, 45.01, 5.01, "header")]
        downgrade(revision="0017")  # the boxes stay wide
        downgrade(revision="base")
        db.engine.dispose()
