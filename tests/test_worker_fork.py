"""The worker forks each work horse from a frozen heap (jobs/worker.py `fork_work_horse`): the horse's collections
skip what it inherits. A real BTPWorker runs a real job in a forked horse, which reports its frozen count."""
import gc

from rq import Queue

from jobs.worker import BTPWorker
from trips.core.queue import get_queue
from trips.core.redis_client import get_redis

KEY = "btp:test:horse-frozen"


def report_frozen() -> None:
    get_redis().set(KEY, gc.get_freeze_count())


def test_a_work_horse_starts_with_the_worker_heap_frozen(app, ctx):
    redis = get_redis()
    redis.delete(KEY)
    gc.unfreeze()
    queue: Queue = get_queue()
    queue.enqueue(report_frozen)
    try:
        BTPWorker([queue], connection=redis).work(burst=True)
        assert int(redis.get(KEY)) > 1000  # the worker's objects, not a handful made after the fork
    finally:
        gc.unfreeze()
        redis.delete(KEY)
