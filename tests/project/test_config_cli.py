"""Configuration rules, the accounts and tokens CLI, and token storage."""
import pytest
import sqlalchemy as sa

from app import ConfigError, load_config
from oauth.kernel.models import AccessToken, User
from trips.core.db import db

SAFE = {"BTP_ENV": "production", "BTP_SECRET_KEY": "s" * 40, "BTP_BASE_URL": "https://btp.example.org",
        "REDIS_URL": "redis://127.0.0.1:6379/0"}


def test_defaults_are_the_embedded_setup():
    conf = load_config(environ={})
    assert conf["BTP_ENV"] == "development" and conf["BTP_BASE_URL"] == "http://127.0.0.1:8000"
    assert conf["REDIS_URL"] is None and conf["DATABASE_URL"] is None


def test_the_default_base_url_follows_host_and_port():
    assert load_config(environ={"BTP_PORT": "9000"})["BTP_BASE_URL"] == "http://127.0.0.1:9000"
    assert load_config(environ={"BTP_HOST": "0.0.0.0", "BTP_PORT": "8080"})["BTP_BASE_URL"] == \
        "http://127.0.0.1:8080"
    explicit = {"BTP_PORT": "9000", "BTP_BASE_URL": "https://btp.example.org/"}
    assert load_config(environ=explicit)["BTP_BASE_URL"] == "https://btp.example.org"


def test_production_accepts_a_safe_setup():
    assert load_config(environ=SAFE)["BTP_ENV"] == "production"
    assert load_config(environ={**SAFE, "BTP_BASE_URL": "http://127.0.0.1:8000"})  # loopback http is fine


@pytest.mark.parametrize("change,words", [
    ({"BTP_SECRET_KEY": ""}, "BTP_SECRET_KEY"),
    ({"BTP_BASE_URL": "http://btp.example.org"}, "https"),
    ({"REDIS_URL": ""}, "REDIS_URL"),
])
def test_production_refuses_unsafe_defaults(change, words):
    with pytest.raises(ConfigError, match=words):
        load_config(environ={**SAFE, **change})


@pytest.mark.parametrize("environ,words", [
    ({"BTP_SECRT_KEY": "typo"}, "BTP_SECRT_KEY"),
    ({"BTP_ENV": "staging"}, "BTP_ENV"),
    ({"BTP_BASE_URL": "btp.example.org"}, "BTP_BASE_URL"),
    ({"BTP_BASE_URL": "https://btp.example.org/app"}, "BTP_BASE_URL"),
])
def test_unknown_or_malformed_settings_are_refused(environ, words):
    with pytest.raises(ConfigError, match=words):
        load_config(environ=environ)


def test_development_secret_is_generated_once(tmp_path):
    from app import create_app

    conf = {"BTP_INSTANCE_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
            "REDIS_URL": "redis://127.0.0.1:1/0"}
    first = create_app(environ=conf).config["SECRET_KEY"]
    assert len(first) >= 48 and (tmp_path / "secret_key").stat().st_mode & 0o077 == 0
    assert create_app(environ=conf).config["SECRET_KEY"] == first


def test_users_create_is_case_insensitive(app, ctx):
    runner = app.test_cli_runner()
    assert runner.invoke(args=["users", "create", "Ada@Example.org"]).exit_code == 0
    again = runner.invoke(args=["users", "create", "ada@example.ORG"])
    assert again.exit_code != 0 and "exists already" in again.output
    bad = runner.invoke(args=["users", "create", "not-an-address"])
    assert bad.exit_code != 0 and "e-mail" in bad.output
    assert db.session.scalar(sa.select(sa.func.count()).select_from(User)) == 1


def test_tokens_issue_prints_only_the_token_and_stores_its_hash(app, ctx, client):
    runner = app.test_cli_runner()
    runner.invoke(args=["users", "create", "ada@example.org"])
    result = runner.invoke(args=["tokens", "issue", "ADA@example.org", "--audience", "api",
                                 "--scope", "trips:read trips:write", "--ttl", "600"])
    assert result.exit_code == 0
    token = result.stdout.strip()
    assert result.stdout == token + "\n" and token.startswith("btp_at_")
    db.session.rollback()
    row = db.session.scalar(sa.select(AccessToken))
    assert row.token_hash != token and token not in (row.token_hash, row.prefix) and row.scope == "trips:read trips:write"
    assert client.get("/api/trips", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    mcp = runner.invoke(args=["tokens", "issue", "ada@example.org", "--audience", "mcp", "--scope", "trips:read"])
    db.session.rollback()
    assert db.session.scalar(sa.select(AccessToken).where(AccessToken.scope == "trips:read")).audience == \
        app.config["BTP_BASE_URL"] + "/mcp"
    assert client.get("/api/trips", headers={"Authorization": f"Bearer {mcp.stdout.strip()}"}).status_code == 401


@pytest.mark.parametrize("args,words", [
    (["--audience", "api", "--scope", "trips:admin"], "scope"),
    (["--audience", "api", "--scope", "trips:read", "--ttl", "0"], "ttl"),
    (["--audience", "web", "--scope", "trips:read"], "audience"),
])
def test_tokens_issue_refuses_bad_options(app, ctx, args, words):
    runner = app.test_cli_runner()
    runner.invoke(args=["users", "create", "ada@example.org"])
    result = runner.invoke(args=["tokens", "issue", "ada@example.org", *args])
    assert result.exit_code != 0 and words in result.output
    assert "btp_at_" not in result.output


def test_purge_removes_expired_idempotency_records(app, ctx):
    from datetime import timedelta

    from trips.core.db import utcnow
    from tests.factories import make_user
    from trips.core.db import atomic
    from trips.models import IdempotencyRecord

    user = make_user()
    with atomic():
        for age in (1, 30):
            db.session.add(IdempotencyRecord(user_id=user.id, operation="create_trip", key=f"k{age}" * 8,
                                             request_digest="d", created_at=utcnow() - timedelta(hours=age)))
    result = app.test_cli_runner().invoke(args=["purge"])
    assert result.exit_code == 0 and "purged 1 idempotency" in result.output
    db.session.rollback()
    assert [r.key for r in db.session.scalars(sa.select(IdempotencyRecord))] == ["k1" * 8]
