"""`flask worker` (an RQ worker with the app's configuration) and `flask serve` (what `make run` starts)."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext

from jobs.supervisor import Child, Supervisor, worker_child
from jobs.tasks import bind_app
from jobs.worker import BTPWorker
from trips.core.db import engine_pid_guard
from trips.core.embedded_redis import ensure_embedded_redis, stop_embedded_redis
from trips.core.observability import ObservedJob
from trips.core.queue import get_queue
from trips.core.redis_client import get_redis


@click.command("worker")
@click.option("--burst", is_flag=True, help="Stop when the queue is empty.")
@click.option("--name", default=None, help="The worker's name (default: a random one).")
@with_appcontext
def worker_command(burst, name):
    """Run an RQ worker on the BTP queue (jobs/worker.py: short heartbeats, every job end settled)."""
    bind_app(current_app._get_current_object())
    engine_pid_guard()
    BTPWorker([get_queue()], connection=get_redis(), name=name, job_class=ObservedJob).work(
        burst=burst, with_scheduler=True)


@click.command("serve")
@with_appcontext
def serve_command():
    """Migrate, then run gunicorn (2 workers) and one RQ worker until Ctrl-C, restarting whichever dies
    (jobs/supervisor.py). Embedded Redis when no REDIS_URL, started again if it dies."""
    from flask_migrate import upgrade  # alembic: only this command migrates, never a web worker

    app = current_app
    env = dict(os.environ)
    instance = Path(app.instance_path)
    embedded = not app.config.get("REDIS_URL")
    started_redis = None
    if embedded:
        url, started = ensure_embedded_redis(instance)
        started_redis = url if started else None
        env["REDIS_URL"] = url
    upgrade()
    host, port = app.config["BTP_HOST"], app.config["BTP_PORT"]
    bin_dir = Path(sys.executable).parent

    def keep_redis() -> None:
        nonlocal started_redis
        url, started = ensure_embedded_redis(instance)
        if started:
            click.echo("The embedded Redis had stopped; started it again.")
            started_redis = url

    # No gunicorn access log: the app writes one JSON line per request (trips/core/observability.py).
    web = Child("gunicorn", lambda: [str(bin_dir / "gunicorn"), "--workers", "2", "--bind", f"{host}:{port}",
                                     "wsgi:app"], restart_for_ever=False)
    supervisor = Supervisor([web, worker_child(bin_dir, get_redis)], env, echo=click.echo,
                            redis_keeper=keep_redis if embedded else None)
    click.echo(f"BTP is serving on http://{host}:{port}  (public URL {app.config['BTP_BASE_URL']})")
    click.echo(f"  health:  http://{host}:{port}/healthz     API: http://{host}:{port}/api/trips")
    click.echo("Ctrl-C stops the server, the worker" + (" and the embedded Redis." if embedded else "."))
    click.echo(f"Sign in at {app.config['BTP_BASE_URL']}/login (an account is made on first sign-in; without "
               f"BTP_MAIL_URL the link is written to {app.instance_path}/outbox).")
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    try:
        code = supervisor.run()
    finally:
        if started_redis:
            stop_embedded_redis(started_redis)
    sys.exit(code)
