"""Operators' endpoints: liveness, readiness (database, Redis, a live worker) and Prometheus metrics."""
from __future__ import annotations

import hmac
import ipaddress

import sqlalchemy as sa
from flask import Blueprint, Response, abort, current_app, jsonify, request
from rq.registry import FailedJobRegistry, ScheduledJobRegistry, StartedJobRegistry

from trips.core.queue import get_queue, live_workers
from trips.core.redis_client import get_redis
from oauth.kernel.models import User
from oauth.kernel.principal import bearer_token
from trips.core import metrics as observed
from trips.core.db import db
from trips.models import Computation, Trip

bp = Blueprint("ops", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


def _check(probe) -> str:
    try:
        return "ok" if probe() else "missing"
    except Exception:
        return "unavailable"


@bp.get("/readyz")
def readyz():
    """200 when the database and Redis answer and at least one worker is alive, else 503 naming what fails.

    A worker is alive while its liveness key is (trips/core/queue.py LIVENESS_TTL, refreshed by jobs/worker.py):
    RQ's own registration would keep a dead worker "live" long after, and forget a working one when Redis restarts
    empty."""
    checks = {
        "database": _check(lambda: db.session.execute(sa.text("SELECT 1")).scalar() == 1),
        "redis": _check(lambda: get_redis().ping()),
        "worker": _check(lambda: len(live_workers(get_redis())) > 0),
    }
    ready = all(value == "ok" for value in checks.values())
    response = jsonify({"status": "ready" if ready else "not ready", "checks": checks})
    response.status_code = 200 if ready else 503
    response.headers["Cache-Control"] = "no-store"
    return response


def _may_scrape() -> None:
    """Who may read /metrics. With BTP_METRICS_TOKEN: whoever sends it as a bearer token (401 otherwise),
    from any address. Without it: loopback callers only, and only when no proxy is trusted, because behind a
    proxy on the same host every outside request arrives from loopback, and the address that ProxyFix gives
    back is only as trustworthy as the proxy's configuration. Behind a proxy without a token: 404 for all.
    Raises HTTPException (401 or 404)."""
    token = current_app.config.get("BTP_METRICS_TOKEN")
    if token:
        sent = bearer_token() or ""
        if not hmac.compare_digest(sent.encode(), token.encode()):
            abort(Response("A valid bearer token is required.\n", 401, mimetype="text/plain",
                           headers={"WWW-Authenticate": 'Bearer realm="btp-metrics"', "Cache-Control": "no-store"}))
        return
    if current_app.config.get("BTP_TRUSTED_PROXIES"):
        abort(404)
    if not ipaddress.ip_address(request.remote_addr or "0.0.0.0").is_loopback:
        abort(404)


@bp.get("/metrics")
def metrics():
    """Prometheus text format (0.0.4): state gauges read now, and the counters of trips/core/metrics.py."""
    _may_scrape()
    queue = get_queue()
    lines = []

    def gauge(name: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.extend([f"# HELP {name} {help_text}", f"# TYPE {name} gauge"])
        lines.extend(f"{name}{labels} {value}" for labels, value in samples)

    gauge("btp_jobs", "Jobs of the BTP queue by state.", [
        ('{state="queued"}', queue.count),  # the queue depth
        ('{state="started"}', StartedJobRegistry(queue=queue).count),
        ('{state="scheduled"}', ScheduledJobRegistry(queue=queue).count),
        ('{state="failed"}', FailedJobRegistry(queue=queue).count),
    ])
    gauge("btp_workers", "Live BTP workers (a fresh liveness key, as /readyz counts them).",
          [("", len(live_workers(get_redis())))])
    counts = db.session.execute(sa.select(Computation.status, sa.func.count()).group_by(Computation.status)).all()
    gauge("btp_computations", "Trip computations by status.", [(f'{{status="{s}"}}', n) for s, n in sorted(counts)])
    gauge("btp_trips", "Trips stored.", [("", db.session.scalar(sa.select(sa.func.count()).select_from(Trip)))])
    gauge("btp_users", "Accounts.", [("", db.session.scalar(sa.select(sa.func.count()).select_from(User)))])
    lines.extend(observed.render(get_redis()))
    return Response("\n".join(lines) + "\n", mimetype="text/plain", headers={"Cache-Control": "no-store"})
