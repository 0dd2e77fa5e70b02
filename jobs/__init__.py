"""RQ wiring: one Redis connection per process (embedded or REDIS_URL), one queue, jobs with ids only."""
from __future__ import annotations

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
        # Short timeouts and few retries: a Redis outage must surface in seconds, not stall every request.
        client = redis.Redis.from_url(
            redis_url(app), socket_connect_timeout=2, socket_timeout=10, health_check_interval=30,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2))
        app.extensions["btp_redis"] = client
    return client


def get_queue() -> Queue:
    return Queue(QUEUE_NAME, connection=get_redis(), default_timeout=JOB_TIMEOUT)


def enqueue(func, *ids, job_id: str | None = None):
    """Enqueue `func(*ids)` (ids and primitives only) with retries and the failure callback."""
    from jobs.tasks import on_job_failure

    return get_queue().enqueue(
        func, *ids, job_id=job_id, retry=JobRetry(max=RETRIES, interval=[1, 5]),
        on_failure=Callback(on_job_failure), failure_ttl=7 * 24 * 3600, result_ttl=3600,
    )
