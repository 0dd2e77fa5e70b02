"""The worker forks each work horse from a frozen heap with the time-zone finder and the HTTP client loaded
(jobs/worker.py `fork_work_horse`, trips/enrich/registry.py `warm`): the horse's collections skip what it inherits,
and it loads neither again. A real BTPWorker runs a real job in a forked horse, which reports its frozen count."""
import gc
import sys

from rq import Queue

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
