"""The worker forks each work horse from a frozen heap with the time-zone finder and the HTTP client loaded
(jobs/worker.py `fork_work_horse`, trips/enrich/registry.py `warm`): the horse's collections skip what it inherits,
and it loads neither again. A real BTPWorker runs a real job in a forked horse, which reports its frozen count."""
import gc
import sys

import pytest
from rq import Queue
from rq.exceptions import StopRequested

from jobs.worker import BTPWorker
from trips.core.queue import get_queue
from trips.core.redis_client import get_redis
from trips.route import clock

KEY = "btp:test:horse-frozen"


def report_frozen() -> None:
    from trips.route import clock

    loaded = clock._finder is not None and "requests" in sys.modules
    get_redis().set(KEY, gc.get_freeze_count() if loaded else -1)  # -1: the finder or the HTTP client not loaded


def test_a_work_horse_starts_with_the_worker_heap_frozen(app, ctx):
    redis = get_redis()
    redis.delete(KEY)
    gc.unfreeze()
    clock._finder = None  # as in a worker that has not run a job yet
    http = {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] == "requests"}
    queue: Queue = get_queue()
    queue.enqueue(report_frozen)
    try:
        BTPWorker([queue], connection=redis).work(burst=True)
        assert int(redis.get(KEY)) > 1000  # the finder and requests loaded, the worker's objects frozen (not a handful)
    finally:
        sys.modules.update(http)  # the modules every other test imported, not the copies made here
        gc.unfreeze()
        redis.delete(KEY)


@pytest.mark.parametrize("step", ["jobs.worker.reconcile.sweep", "jobs.worker.prune", "rq.Worker.run_maintenance_tasks"])
def test_a_stop_that_lands_in_the_maintenance_stops_the_worker(app, ctx, monkeypatch, step):
    """RQ stops an idle worker by raising StopRequested from its signal handler wherever the signal lands; the
    maintenance's catch-alls let it through (one swallowed it and a SIGTERMed worker ran on)."""
    def stopped(*args, **kwargs):
        raise StopRequested()

    monkeypatch.setattr(step, stopped)
    worker = BTPWorker([get_queue()], connection=get_redis())
    with pytest.raises(StopRequested):
        worker.run_maintenance_tasks()
