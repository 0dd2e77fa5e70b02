"""RQ wiring: one Redis connection per process (embedded or REDIS_URL), one queue, jobs with ids only."""
from __future__ import annotations

import logging
from pathlib import Path

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry
from flask import Flask, current_app
from rq import Callback, Queue
from rq import Retry as JobRetry

QUEUE_NAME = "btp"
JOB_TIMEOUT = 300
RETRIES = 2  # attempts after the first, also for a job whose worker died (RQ abandoned-job handling)
# Redis unreachable (refused, reset, timed out, still loading its dataset): answered 503, never 500.
REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
RETRY_AFTER_S = 5
log = logging.getLogger(__name__)


def init_app(app: Flask) -> None:
    from jobs.cli import serve_command, worker_command

    app.extensions["btp_redis"] = None
    app.cli.add_command(worker_command)
    app.cli.add_command(serve_command)


def redis_url(app: Flask) -> str:
    if app.config.get("REDIS_URL"):
        return app.config["REDIS_URL"]
    from jobs.embedded import ensure_embedded_redis

    url, _ = ensure_embedded_redis(Path(app.instance_path))
    app.config["REDIS_URL"] = url
    return url


def get_redis() -> redis.Redis:
    app = current_app._get_current_object()
    client = app.extensions.get("btp_redis")
    if client is None:
        # Short timeouts: BTP's commands answer in milliseconds, so a Redis that does not answer within 1 s is
        # away; a request makes a handful of Redis calls, so it ends within a few seconds, never hangs. One retry,
        # on a broken connection only (a pooled connection Redis closed by restarting): a timeout is not retried.
        # The worker lengthens the read timeout of its own client past its blocking dequeue (rq
        # Worker._set_connection). Broken connections are dropped and re-made: Redis back, BTP is back.
        client = redis.Redis.from_url(
            redis_url(app), socket_connect_timeout=1, socket_timeout=1, health_check_interval=30,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1, supported_errors=(redis.exceptions.ConnectionError,)))
        app.extensions["btp_redis"] = client
    return client


def get_queue() -> Queue:
    return Queue(QUEUE_NAME, connection=get_redis(), default_timeout=JOB_TIMEOUT)


def redis_unavailable():
    """The domain error a caller is told when Redis cannot be reached (REST/OAuth 503, an MCP refusal)."""
    from trips.errors import ServiceUnavailable

    return ServiceUnavailable("BTP is briefly unavailable, try again in a few seconds.", RETRY_AFTER_S)


def enqueue(func, *ids, job_id: str | None = None):
    """Enqueue `func(*ids)` (ids and primitives only) with retries and the failure callback; the job's meta
    carries the current request id (trips.core.observability), so the worker's log lines name the request.

    Called after a commit: when Redis is unreachable the change stands, the job is not queued (logged) and the
    reconciler fails the computation it would have run, with a reason, within its bound (jobs/reconcile.py).
    Returns the job, or None when it could not be queued."""
    from jobs.tasks import on_job_failure
    from trips.core.observability import job_meta

    try:
        return get_queue().enqueue(
            func, *ids, job_id=job_id, meta=job_meta(), retry=JobRetry(max=RETRIES, interval=[1, 5]),
            on_failure=Callback(on_job_failure), failure_ttl=7 * 24 * 3600, result_ttl=3600,
        )
    except REDIS_DOWN:
        log.error("could not queue %s%r: Redis unreachable; the reconciler will settle it", func.__name__, ids)
        return None
