"""Liveness, readiness and metrics."""
from rq import Worker

from trips.core.queue import get_queue
from trips.core.redis_client import get_redis
from jobs.worker import BTPWorker
from trips.core.queue import ALIVE_KEY, ALIVE_SET, LIVENESS_TTL, beat, live_workers, prune


def test_healthz(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}


def test_readiness_needs_a_live_worker(app, client, ctx):
    waiting = client.get("/readyz")
    assert waiting.status_code == 503
    assert waiting.get_json()["checks"] == {"database": "ok", "redis": "ok", "worker": "missing"}
    registered_only = Worker([get_queue()], connection=get_redis())
    registered_only.register_birth()  # RQ's registration outlives a dead worker by minutes: not liveness
    assert client.get("/readyz").status_code == 503
    registered_only.register_death()
    worker = BTPWorker([get_queue()], connection=get_redis())
    worker.register_birth()
    try:
        assert client.get("/readyz").status_code == 503  # registered, not listening yet: live from its first beat
        worker.heartbeat()
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.get_json()["status"] == "ready"
        get_redis().delete(ALIVE_KEY.format(worker.name))  # what LIVENESS_TTL does to a worker that stopped beating
        assert client.get("/readyz").get_json()["checks"]["worker"] == "missing"
        worker.heartbeat()
        assert client.get("/readyz").status_code == 200
    finally:
        worker.register_death()
    assert client.get("/readyz").status_code == 503


def test_a_beat_reregisters_a_worker_redis_forgot(app, ctx):
    """Redis restarted empty: the worker's next beat puts back its RQ registration and its liveness key."""
    worker = BTPWorker([get_queue()], connection=get_redis())
    worker.register_birth()
    try:
        get_redis().flushdb()
        assert live_workers(get_redis()) == [] and Worker.count(queue=get_queue()) == 0
        worker.heartbeat()
        assert live_workers(get_redis()) == [worker.name] and Worker.count(queue=get_queue()) == 1
        assert 0 < get_redis().ttl(ALIVE_KEY.format(worker.name)) <= LIVENESS_TTL
    finally:
        worker.register_death()


def test_metrics_for_loopback_scrapers_only(app, client, rider):
    from tests.trips.api.test_trips_api import seed_trip

    seed_trip(rider[0])
    text = client.get("/metrics").get_data(as_text=True)
    assert "# TYPE btp_jobs gauge" in text and 'btp_jobs{state="queued"} 0' in text
    assert "btp_trips 1" in text and "btp_users 1" in text and "btp_workers 0" in text
    outside = client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.9"})
    assert outside.status_code == 404


def test_metrics_count_workers_as_readiness_does(app, client, ctx):
    from trips.core.queue import forget

    beat(get_redis(), "w-live")
    get_redis().sadd(ALIVE_SET, "w-lapsed")  # listed, but its liveness key is gone: a dead worker
    assert "btp_workers 1" in client.get("/metrics").get_data(as_text=True)
    forget(get_redis(), "w-live")
    assert "btp_workers 0" in client.get("/metrics").get_data(as_text=True)


def test_prune_drops_only_the_workers_whose_liveness_lapsed(app, ctx):
    redis = get_redis()
    beat(redis, "alive-one")
    beat(redis, "dead-one")
    redis.delete(ALIVE_KEY.format("dead-one"))
    assert prune(redis) == 1
    assert {m.decode() for m in redis.smembers(ALIVE_SET)} == {"alive-one"} and live_workers(redis) == ["alive-one"]
