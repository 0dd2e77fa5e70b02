"""The job queue (RQ on the process's Redis) and the job workers' liveness.

Jobs are enqueued by dotted name (`enqueue("jobs.tasks.fetch_route", trip_id, generation)`) with ids and primitives
only: nothing below the jobs edge imports the job functions, and a web worker never loads them. Each job runs in its
own unit of work and is safe to run twice (jobs/tasks.py)."""
from __future__ import annotations

import logging

from redis import Redis
from rq import Callback, Queue
from rq import Retry as JobRetry

from trips.core.observability import job_meta
from trips.core.redis_client import REDIS_DOWN, get_redis

QUEUE_NAME = "btp"
JOB_TIMEOUT = 300
RETRIES = 2  # attempts after the first, also for a job whose worker died (RQ abandoned-job handling)
ON_FAILURE = "jobs.tasks.on_job_failure"  # settles the computations of a job that failed for good
log = logging.getLogger(__name__)


def get_queue() -> Queue:
    return Queue(QUEUE_NAME, connection=get_redis(), default_timeout=JOB_TIMEOUT)


def _options() -> dict:
    """What every job is queued with: retries, the failure callback, how long its traces stay, the request's id."""
    return dict(meta=job_meta(), retry=JobRetry(max=RETRIES, interval=[1, 5]), on_failure=Callback(ON_FAILURE),
                failure_ttl=7 * 24 * 3600, result_ttl=3600)


def enqueue(func: str, *ids, job_id: str | None = None):
    """Enqueue the job function named `func` (a dotted path under jobs.tasks) with `ids` (ids and primitives only),
    with retries and the failure callback; the job's meta carries the current request id
    (trips/core/observability.py), so the worker's log lines name the request.

    Called after a commit: when Redis is unreachable the change stands, the job is not queued (logged) and the
    reconciler fails the computation it would have run, with a reason, within its bound (jobs/reconcile.py).
    Returns the job, or None when it could not be queued."""
    try:
        return get_queue().enqueue(func, *ids, job_id=job_id, **_options())
    except REDIS_DOWN:
        log.error("could not queue %s%r: Redis unreachable; the reconciler will settle it", func, ids)
        return None


def enqueue_many(func: str, calls: list[tuple]) -> list | None:
    """`enqueue(func, *ids)` for each `ids` of `calls`, in one Redis round trip (RQ's enqueue_many: one pipeline),
    as `enqueue` otherwise: an analysis queues a dozen jobs at once. None (logged) when Redis is unreachable: the
    reconciler settles what they would have run."""
    if not calls:
        return []
    try:
        return get_queue().enqueue_many([Queue.prepare_data(func, args=tuple(ids), **_options()) for ids in calls])
    except REDIS_DOWN:
        log.error("could not queue %d × %s: Redis unreachable; the reconciler will settle them", len(calls), func)
        return None


# --- liveness: which job workers beat lately (read by /readyz and /metrics, written by jobs/worker.py) ---------------
BEAT_S = 5  # a worker beats every 5 s (jobs/worker.py)
LIVENESS_TTL = 3 * BEAT_S  # a worker missing three beats is dead for /readyz
ALIVE_SET = "btp:workers:alive"
ALIVE_KEY = "btp:worker:alive:{}"


def beat(connection, name: str) -> None:
    """Mark worker `name` alive for LIVENESS_TTL seconds (`connection` may be a pipeline)."""
    connection.set(ALIVE_KEY.format(name), 1, ex=LIVENESS_TTL)
    connection.sadd(ALIVE_SET, name)


def forget(connection: Redis, name: str) -> None:
    """Worker `name` is dead: it stops counting as live at once (graceful stop, or its supervisor saw it die)."""
    with connection.pipeline() as pipe:
        pipe.delete(ALIVE_KEY.format(name))
        pipe.srem(ALIVE_SET, name)
        pipe.execute()


def live_workers(connection: Redis) -> list[str]:
    """Names of the workers that beat within LIVENESS_TTL seconds. Raises redis errors."""
    names = sorted(_text(n) for n in connection.smembers(ALIVE_SET))
    with connection.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.exists(ALIVE_KEY.format(name))
        return [n for n, found in zip(names, pipe.execute() if names else []) if found]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


# Atomic, so a worker beating meanwhile is never dropped: a member goes only if its key is absent right then.
_PRUNE = """
local gone = 0
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. name) == 0 then
    gone = gone + redis.call('SREM', KEYS[1], name)
  end
end
return gone
"""


def prune(connection: Redis) -> int:
    """Drop the names of workers whose liveness key lapsed (they died without a word); returns how many."""
    return int(connection.eval(_PRUNE, 1, ALIVE_SET, ALIVE_KEY.format("")))
