"""The application factory: configuration, extensions, blueprints, error handlers, CLI. No routes, no logic."""
from __future__ import annotations

import ipaddress
import logging
import os
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from flask import Flask, Response
from werkzeug.exceptions import SecurityError
from werkzeug.middleware.proxy_fix import ProxyFix

import oauth.kernel.models  # noqa: F401  (the tables migrations know)
import trips.models  # noqa: F401
import trips.osm.tables  # noqa: F401
from jobs.cli import serve_command, worker_command
from mcp.endpoint import init_app as serve_mcp
from mcp.tools import PRODUCT as MCP_TOOLS
from oauth.web.wiring import init_app as init_oauth
from trips.providers.settings import init_app as init_providers
from trips.api.web import init_app as init_rest
from trips.cli.osm import osm_cli
from trips.cli.trips import purge_command, trips_cli
from trips.core import limits, observability, problems
from trips.core.db import configure_engine_options, db
from trips.core.jsonio import StrictJSONProvider

# Every BTP_* variable the product knows (README.md "Running it for real (sysadmins)"). Any other BTP_* is refused.
KNOWN_ENV = (
    "BTP_ENV", "BTP_INSTANCE_DIR", "BTP_BASE_URL", "BTP_SECRET_KEY", "BTP_MAIL_URL",
    "BTP_ALLOWED_ORIGINS", "BTP_KOMOOT_URL", "BTP_STRAVA_URL", "BTP_RIDEWITHGPS_URL",
    "BTP_NOMINATIM_URL", "BTP_OPENMETEO_URL", "BTP_VALHALLA_URL",
    "BTP_HOST", "BTP_PORT",  # read by `make run` / `flask serve`
    "BTP_TRUSTED_PROXIES", "BTP_METRICS_TOKEN",
    *limits.ENV_NAMES,  # BTP_LIMIT_<BUCKET>=COUNT/SECONDS, one per rate limit and budget (trips/core/limits.py)
)

DEFAULTS = {
    "BTP_ENV": "development",
    "BTP_INSTANCE_DIR": "./instance",
    "BTP_BASE_URL": "http://127.0.0.1:8000",
    "BTP_SECRET_KEY": None,
    "BTP_MAIL_URL": None,
    "BTP_ALLOWED_ORIGINS": "",
    "BTP_KOMOOT_URL": "https://www.komoot.com",
    "BTP_STRAVA_URL": "https://www.strava.com",
    "BTP_RIDEWITHGPS_URL": "https://ridewithgps.com",
    "BTP_NOMINATIM_URL": None,  # unset: the offline gazetteer answers place searches
    "BTP_OPENMETEO_URL": "https://api.open-meteo.com",
    "BTP_VALHALLA_URL": None,
    "BTP_HOST": "127.0.0.1",
    "BTP_PORT": "8000",
    "BTP_TRUSTED_PROXIES": "0",  # reverse proxies in front that set X-Forwarded-For/-Proto (nginx: 1)
    "BTP_METRICS_TOKEN": None,  # bearer secret for /metrics; unset: loopback only, and never behind a proxy
    **{name: None for name in limits.ENV_NAMES},  # unset: the defaults of trips/core/limits.py
    "DATABASE_URL": None,
    "REDIS_URL": None,
}

MAX_CONTENT_LENGTH = 32 * 1024 * 1024  # a 30 MB GPX plus the multipart envelope


PROBES = frozenset(("/healthz", "/readyz", "/metrics"))


class App(Flask):
    """Flask with the Host allow-list."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._hosts_seen: dict = {}

    # The Host allow-list: a DNS-rebinding page or a stray name pointed at the server gets nothing. The host of
    # BTP_BASE_URL; loopback names in development or when that host is loopback itself; and for /healthz, /readyz
    # and /metrics also a loopback name or an IP address (a probe on the node, a load balancer or Prometheus on
    # the node's address: a name someone else points here is never an address). Behind BTP_TRUSTED_PROXIES the Host
    # is the one the proxy forwarded
    # (ProxyFix x_host). Checked where Flask reads the Host anyway (werkzeug's get_host: default port dropped,
    # characters checked); werkzeug's own TRUSTED_HOSTS matches neither IPv6 literals nor other letter cases.
    hosts: frozenset = frozenset()  # set by create_app; empty: no check
    any_loopback = True

    def create_url_adapter(self, request):
        adapter = super().create_url_adapter(request)
        if request is not None and self.hosts and request.host not in self._hosts_seen and not self._allowed(request):
            raise SecurityError("This server does not answer for that host name.")
        return adapter

    def _allowed(self, request) -> bool:
        try:
            name = (urlsplit("//" + request.host).hostname or "").rstrip(".")
        except ValueError:
            return False
        if name in self.hosts or (self.any_loopback and _loopback_name(name)):
            if len(self._hosts_seen) < 64:  # the Host values this server answers for: a handful
                self._hosts_seen[request.host] = True
            return True
        return request.path in PROBES and (_loopback_name(name) or _address(name) is not None)


def _address(name: str):
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _loopback_name(name: str | None) -> bool:
    """localhost, 127.0.0.0/8 or ::1 (not a name that merely starts with "127.")."""
    address = _address(name or "")
    return name == "localhost" or (address is not None and address.is_loopback)


class ConfigError(RuntimeError):
    """The configuration is unsafe or inconsistent; the process must not start."""


def load_config(environ: dict | None = None, overrides: dict | None = None) -> dict:
    """Defaults, then the environment, then overrides. Raises ConfigError on unknown or unsafe settings."""
    environ = os.environ if environ is None else environ
    unknown = sorted(k for k in environ if k.startswith("BTP_") and k not in KNOWN_ENV)
    if unknown:
        raise ConfigError(f"unknown configuration variable(s): {', '.join(unknown)}")
    conf = dict(DEFAULTS)
    conf.update({k: environ[k] for k in DEFAULTS if environ.get(k)})
    conf.update(overrides or {})
    if not environ.get("BTP_BASE_URL") and "BTP_BASE_URL" not in (overrides or {}):
        # Without a public URL, the local one: `make run` on another port still links to itself.
        host = conf["BTP_HOST"] if conf["BTP_HOST"] not in ("0.0.0.0", "::", "") else "127.0.0.1"
        conf["BTP_BASE_URL"] = f"http://{'[' + host + ']' if ':' in host else host}:{conf['BTP_PORT']}"
    conf["BTP_BASE_URL"] = conf["BTP_BASE_URL"].rstrip("/")
    _check_base_url(conf["BTP_BASE_URL"])
    conf["BTP_TRUSTED_PROXIES"] = _trusted_proxies(conf["BTP_TRUSTED_PROXIES"])
    _check_metrics_token(conf["BTP_METRICS_TOKEN"])
    try:
        conf["BTP_LIMITS"] = limits.from_settings(conf)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if conf["BTP_ENV"] not in ("development", "production"):
        raise ConfigError("BTP_ENV must be 'development' or 'production'")
    if conf["BTP_ENV"] == "production":
        _refuse_unsafe_production(conf)
    return conf


def _check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ConfigError("BTP_BASE_URL must be an http(s) origin such as https://btp.example.org")


MAX_TRUSTED_PROXIES = 5
MIN_METRICS_TOKEN = 32


def _trusted_proxies(value) -> int:
    text = str(value).strip()
    if not text.isdigit() or len(text) > 2 or int(text) > MAX_TRUSTED_PROXIES:
        raise ConfigError(f"BTP_TRUSTED_PROXIES must be a whole number from 0 to {MAX_TRUSTED_PROXIES}")
    return int(text)


def _check_metrics_token(token: str | None) -> None:
    # A bearer secret compared in constant time (trips/api/ops.py); long enough that it cannot be guessed online.
    if token is not None and (len(token) < MIN_METRICS_TOKEN or len(token) > 512 or not token.isprintable()
                              or " " in token):
        raise ConfigError(f"BTP_METRICS_TOKEN must be {MIN_METRICS_TOKEN} to 512 printable characters without "
                          "spaces (e.g. `openssl rand -hex 32`)")


def _is_loopback(host: str | None) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or (host or "").startswith("127.")


def _wrong_host(exc: SecurityError):
    # Plain text whatever the path: no page can be drawn (no URL adapter for a refused host) and none is owed.
    return Response(exc.description + "\n", status=400, mimetype="text/plain", headers={"Cache-Control": "no-store"})


def _refuse_unsafe_production(conf: dict) -> None:
    if not conf.get("BTP_SECRET_KEY"):
        raise ConfigError("production needs BTP_SECRET_KEY")
    parts = urlsplit(conf["BTP_BASE_URL"])
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ConfigError("production needs an https BTP_BASE_URL (http is allowed on loopback only)")
    if not conf.get("REDIS_URL"):
        raise ConfigError("production needs REDIS_URL (the embedded Redis is for development)")


def _secret_key(conf: dict, instance: Path) -> str:
    """BTP_SECRET_KEY, or in development a key generated once into the instance directory."""
    if conf.get("BTP_SECRET_KEY"):
        return conf["BTP_SECRET_KEY"]
    path = instance / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    key = secrets.token_urlsafe(48)
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key


def create_app(overrides: dict | None = None, environ: dict | None = None, *, serving: bool = False) -> Flask:
    """`serving`: the app of a web worker (wsgi.py), which never migrates: no `flask db` and no alembic in it."""
    conf = load_config(environ, overrides)
    instance = Path(conf["BTP_INSTANCE_DIR"]).resolve()
    instance.mkdir(parents=True, exist_ok=True)
    app = App(__name__, instance_path=str(instance), template_folder="templates")
    base_host = urlsplit(conf["BTP_BASE_URL"]).hostname
    app.hosts = frozenset((base_host,))
    app.any_loopback = conf["BTP_ENV"] == "development" or _loopback_name(base_host)
    app.register_error_handler(SecurityError, _wrong_host)
    app.config.update(conf)
    app.config.update(
        SECRET_KEY=_secret_key(conf, instance),
        SQLALCHEMY_DATABASE_URI=conf["DATABASE_URL"] or f"sqlite:///{instance / 'btp.sqlite3'}",
        MAX_CONTENT_LENGTH=MAX_CONTENT_LENGTH,
        MCP_RESOURCE=conf["BTP_BASE_URL"] + "/mcp",
    )
    app.json = StrictJSONProvider(app)  # request JSON refuses lone surrogates (trips/core/jsonio.py)
    app.json.sort_keys = False  # answers keep the read models' order
    app.config.update({k: v for k, v in (overrides or {}).items() if k not in conf})
    # A served web worker sums its request counters in process for up to a second (trips/core/metrics.py _Pending)
    app.config.setdefault("BTP_METRICS_DEFER_S", 1.0 if serving else 0.0)
    # How long the MCP endpoint may believe a token it found live without looking it up again (oauth/services/live_tokens.py:
    # a revocation holds at once through the token epoch in Redis; this bounds a change made outside BTP). 0: off.
    app.config.setdefault("BTP_TOKEN_CACHE_S", 60.0)
    # How long the MCP endpoint may give a get_trip or list_trips answer again without reading the database
    # (mcp/kept.py kept_answer: a change through BTP shows at once through the trips epochs in Redis,
    # trips/core/epochs.py; this bounds a change made outside BTP). 0: off.
    app.config.setdefault("BTP_READ_CACHE_S", 60.0)
    observability.configure_logging(logging.INFO)
    observability.init_app(app)
    if conf["BTP_TRUSTED_PROXIES"]:
        # The client address, scheme and host the proxy saw (X-Forwarded-For / -Proto / -Host), from as many
        # proxies as are trusted. The host is only checked (App above): URLs come from BTP_BASE_URL, never the request.
        hops = conf["BTP_TRUSTED_PROXIES"]
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=0, x_prefix=0)

    configure_engine_options(app)
    db.init_app(app)
    if not serving:  # `flask db …` and flask_migrate.upgrade(); alembic costs a web worker ~8 MB for nothing
        from flask_migrate import Migrate  # alembic: only `flask db` and `flask serve` need it, never a web worker

        Migrate(app, db, directory=str(Path(__file__).parent / "migrations"))

    problems.register(app)  # JSON problem documents and HTML error pages, security headers
    init_providers(app)  # each third-party provider's config, built once
    init_oauth(app)  # the session, the authorization server, its pages and endpoints, `flask users|tokens`
    init_rest(app)  # /api, the share pages, /healthz, /readyz, /metrics
    serve_mcp(app, MCP_TOOLS)  # /mcp and the thirteen tools
    for command in (trips_cli, purge_command, osm_cli, worker_command, serve_command):
        app.cli.add_command(command)
    return app
