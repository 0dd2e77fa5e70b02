"""Liveness, readiness and metrics."""
from rq import Worker

from jobs import get_queue, get_redis


def test_healthz(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}


def test_readiness_needs_a_live_worker(app, client, ctx):
    waiting = client.get("/readyz")
    assert waiting.status_code == 503
    assert waiting.get_json()["checks"] == {"database": "ok", "redis": "ok", "worker": "missing"}
    worker = Worker([get_queue()], connection=get_redis())
    worker.register_birth()
    try:
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.get_json()["status"] == "ready"
    finally:
        worker.register_death()
    assert client.get("/readyz").status_code == 503


def test_metrics_for_loopback_scrapers_only(app, client, rider):
    from tests.test_trips_api import seed_trip

    seed_trip(rider[0])
    text = client.get("/metrics").get_data(as_text=True)
    assert "# TYPE btp_jobs gauge" in text and 'btp_jobs{state="queued"} 0' in text
    assert "btp_trips 1" in text and "btp_users 1" in text and "btp_workers 0" in text
    outside = client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert outside.status_code == 404
