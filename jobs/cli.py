"""`flask worker` (an RQ worker with the app's configuration) and `flask serve` (what `make run` starts)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import urllib.request
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


READY_POLL_S = 0.5  # how often `serve` asks gunicorn whether it answers yet
READY_NAG_S = 15.0  # how often it says it is still waiting


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # our own port: never through http_proxy


def answers(url: str) -> bool:
    """True when `url` (the probe /healthz) answers 200."""
    try:
        with _DIRECT.open(url, timeout=2) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def tell_when_ready(url: str, lines: list[str], stop: threading.Event) -> threading.Thread:
    """Echo `lines` once `url` answers, from a thread of its own (the supervisor keeps the main one), saying every
    READY_NAG_S that it still waits meanwhile; nothing once `stop` is set."""

    def watch() -> None:
        started = time.monotonic()
        told = started
        while not stop.is_set():
            if answers(url):
                for line in lines:
                    click.echo(line)
                return
            if time.monotonic() - told >= READY_NAG_S:
                told = time.monotonic()
                click.echo(f"... still waiting for gunicorn to answer ({told - started:.0f} s)")
            stop.wait(READY_POLL_S)

    thread = threading.Thread(target=watch, name="btp-ready", daemon=True)
    thread.start()
    return thread


def _step(text: str) -> None:
    click.echo(f"==> {text}")


@click.command("serve")
@with_appcontext
def serve_command():
    """Migrate, then run gunicorn (2 workers) and one RQ worker until Ctrl-C, restarting whichever dies
    (jobs/supervisor.py). Embedded Redis when no REDIS_URL, started again if it dies. Each start-up step is said
    as it begins (a first run must never look stuck), and the URLs once gunicorn answers."""
    from flask_migrate import upgrade  # alembic: only this command migrates, never a web worker

    app = current_app
    env = dict(os.environ)
    instance = Path(app.instance_path)
    embedded = not app.config.get("REDIS_URL")
    started_redis = None
    if embedded:
        _step(f"Starting the embedded Redis (under {instance})")
        url, started = ensure_embedded_redis(instance)
        started_redis = url if started else None
        env["REDIS_URL"] = url
    else:
        _step("Redis: the one REDIS_URL names")
    _step("Migrating the database (flask db upgrade)")
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
    _step(f"Starting gunicorn (2 workers) on {host}:{port} and a job worker; the URLs follow once it answers")
    probe_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # a wildcard bind answers on loopback
    probe = f"http://{f'[{probe_host}]' if ':' in probe_host else probe_host}:{port}/healthz"
    stop = threading.Event()
    tell_when_ready(probe, [
        f"BTP is serving on http://{host}:{port}  (public URL {app.config['BTP_BASE_URL']})",
        f"  health:  http://{host}:{port}/healthz     API: http://{host}:{port}/api/trips",
        "Ctrl-C stops the server, the worker" + (" and the embedded Redis." if embedded else "."),
        f"Sign in at {app.config['BTP_BASE_URL']}/login (an account is made on first sign-in; without "
        f"BTP_MAIL_URL the link is written to {app.instance_path}/outbox).",
    ], stop)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    try:
        code = supervisor.run()
    finally:
        stop.set()
        if started_redis:
            stop_embedded_redis(started_redis)
    sys.exit(code)
