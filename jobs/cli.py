"""`flask worker` (an RQ worker with the app's configuration) and `flask serve` (what `make run` starts)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import click
from flask import current_app
from flask.cli import with_appcontext


@click.command("worker")
@click.option("--burst", is_flag=True, help="Stop when the queue is empty.")
@with_appcontext
def worker_command(burst):
    """Run an RQ worker on the BTP queue."""
    from rq import Worker

    from jobs import get_queue, get_redis
    from jobs.tasks import bind_app
    from trips.db import engine_pid_guard

    bind_app(current_app._get_current_object())
    engine_pid_guard()
    Worker([get_queue()], connection=get_redis(), maintenance_interval=60).work(burst=burst, with_scheduler=True)


@click.command("serve")
@with_appcontext
def serve_command():
    """Migrate, then run gunicorn (2 workers) and one RQ worker until Ctrl-C. Embedded Redis when no REDIS_URL."""
    from flask_migrate import upgrade

    from jobs.embedded import ensure_embedded_redis, stop_embedded_redis

    app = current_app
    env = dict(os.environ)
    started_redis = None
    if not app.config.get("REDIS_URL"):
        url, started = ensure_embedded_redis(Path(app.instance_path))
        started_redis = url if started else None
        env["REDIS_URL"] = url
    upgrade()
    host, port = app.config["BTP_HOST"], app.config["BTP_PORT"]
    bin_dir = Path(sys.executable).parent
    children = [
        subprocess.Popen([str(bin_dir / "gunicorn"), "--workers", "2", "--bind", f"{host}:{port}",
                          "--access-logfile", "-", "wsgi:app"], env=env),
        subprocess.Popen([str(bin_dir / "flask"), "--app", "app", "worker"], env=env),
    ]
    click.echo(f"BTP is serving on http://{host}:{port}  (public URL {app.config['BTP_BASE_URL']})")
    click.echo(f"  health:  http://{host}:{port}/healthz     API: http://{host}:{port}/api/trips")
    click.echo("Ctrl-C stops the server, the worker" + (" and the embedded Redis." if started_redis else "."))
    click.echo(f"Sign in at {app.config['BTP_BASE_URL']}/login (an account is made on first sign-in; without "
               f"BTP_MAIL_URL the link is written to {app.instance_path}/outbox).")
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and all(c.poll() is None for c in children):
            time.sleep(0.5)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()
        if started_redis:
            stop_embedded_redis(started_redis)
    sys.exit(0 if stopping else 1)
