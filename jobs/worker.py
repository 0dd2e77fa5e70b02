"""The BTP worker: RQ's Worker with short heartbeats, a liveness key readiness can trust, and every job end settled.

RQ 3.0 leaves three gaps this class closes (see README "When something dies"):

* A work horse that dies (SIGKILL, OOM) on a job's last attempt is moved to the failed registry by
  `monitor_work_horse` → `handle_job_failure` without the job's failure callback (RQ runs that callback only
  inside the horse, or for abandoned jobs in `StartedJobRegistry.cleanup`). `handle_work_horse_killed`
  settles the job's computations then.
* RQ's heartbeats outlive a dead worker by minutes: the worker hash expires `worker_ttl + 60` s after the last
  beat (420 + 60 by default), an execution `job_monitoring_interval + 60` s after it, and an idle worker runs its
  maintenance (the abandoned-job detection) only when its blocking dequeue (`worker_ttl - 15` s) returns.
  Short intervals bring abandoned jobs back within a minute.
* Worker registration (`rq:workers:<queue>`) is written once, at birth: a Redis restarted empty forgets a
  worker that is alive and working. Each beat here re-registers and refreshes a `LIVENESS_TTL` key.
* A worker killed with its scheduler leaves the scheduler lock held for its TTL (61 s): no scheduler moves the
  retries RQ schedules (1 s, 5 s) to the queue meanwhile. Maintenance frees a lock its holder stopped refreshing
  (SCHEDULER_STALE_S) and takes it.
* A worker killed alone (SIGKILL, OOM) left its forked scheduler running for ever, holding that lock: the
  scheduler here stops when its worker dies (jobs/scheduler.py, PR_SET_PDEATHSIG) and releases the lock.
* RQ retries a lost Redis only around its blocking dequeue; a Redis error anywhere else in the loop (setting the
  worker's state, the suspension check, a beat while a horse works) ends the worker. Here the worker waits for
  Redis (at most RECONNECT_MAX_S between attempts) and goes on, so it is back within a beat of Redis. Start-up too
  (registration, the command channel, the scheduler): RQ's `work()` runs it outside its loop, so a Redis away or
  restarting while a worker starts ended it; here it waits, and the worker counts as live from its first beat.
"""
from __future__ import annotations

import gc
import logging
import time

from redis import Redis
from rq import Worker, worker_registration
from rq.worker import DequeueStrategy
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.exceptions import StopRequested
from rq.scheduler import RQScheduler
from rq.utils import now

from jobs import reconcile
from jobs.scheduler import BTPScheduler
from jobs.tasks import settle_failed
from trips.enrich import registry
from trips.core.queue import BEAT_S, beat, forget, prune
from trips.core.redis_client import REDIS_DOWN

log = logging.getLogger(__name__)

WORKER_TTL = BEAT_S + 15
ABANDON_SLACK_S = 20  # an execution outlives its last beat by this (RQ: 60 s), then maintenance takes it back
MAINTENANCE_S = 15  # registries cleaned (abandoned jobs) and computations reconciled this often, idle or busy
RECONNECT_MAX_S = 4.0  # at most this long between reconnection attempts while Redis is away (RQ: 60 s)
SCHEDULER_LOCK_TTL = 1 + 60  # RQ's scheduler lock: its interval (1 s) + 60 s, refreshed every interval
SCHEDULER_STALE_S = 10  # a scheduler lock not refreshed for this long is a dead scheduler's


# RQ's scheduler refreshes its lock (TTL interval + 60 s) every second; a lock left unrefreshed SCHEDULER_STALE_S is
# a dead scheduler's (killed with its worker). Atomic: a lock refreshed meanwhile is kept.
_FREE_STALE_LOCK = """
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('TTL', KEYS[1]) < tonumber(ARGV[1]) then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def free_stale_scheduler_lock(connection: Redis, queue_name: str) -> bool:
    """Free the queue's scheduler lock when its holder stopped refreshing it; True when it was freed.

    Otherwise a worker killed with its scheduler keeps every retry waiting in the scheduled registry until the lock
    expires (61 s); freed, the live worker's next maintenance takes the lock and enqueues them."""
    key = RQScheduler.get_locking_key(queue_name)
    return bool(connection.eval(_FREE_STALE_LOCK, 1, key, SCHEDULER_LOCK_TTL - SCHEDULER_STALE_S))


class BTPWorker(Worker):
    max_connection_wait_time = RECONNECT_MAX_S

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("worker_ttl", WORKER_TTL)
        kwargs.setdefault("job_monitoring_interval", BEAT_S)
        kwargs.setdefault("maintenance_interval", MAINTENANCE_S)
        self.stopping = False  # told to stop (`handle_warm_shutdown_request`): no more waiting for Redis
        self.scheduler_burst: bool | None = None  # `work(with_scheduler=True)`: whether in burst mode
        self._warm = False
        # RQ's constructor asks Redis for the worker's address (CLIENT SETNAME, CLIENT INFO): a worker made while
        # Redis is away waits for it here.
        self._until_redis_answers("starting", lambda: super(BTPWorker, self).__init__(*args, **kwargs))

    def work(self, burst=False, logging_level=None, date_format=DEFAULT_LOGGING_DATE_FORMAT,
             log_format=DEFAULT_LOGGING_FORMAT, max_jobs=None, max_idle_time=None, with_scheduler=False,
             dequeue_strategy=DequeueStrategy.DEFAULT):
        """RQ's loop, with BTPScheduler for its scheduler (jobs/scheduler.py: it stops when this worker dies):
        RQ makes its own scheduler inside `work` with no argument to choose its class, so RQ is asked for none
        and `bootstrap` starts this one; RQ's maintenance starts it again when it is not running and its
        teardown stops it (both use the worker's `scheduler`)."""
        self.scheduler_burst = burst if with_scheduler else None
        return super().work(burst, logging_level, date_format, log_format, max_jobs, max_idle_time,
                            with_scheduler=False, dequeue_strategy=dequeue_strategy)

    def handle_warm_shutdown_request(self):
        self.stopping = True
        super().handle_warm_shutdown_request()

    def fork_work_horse(self, job, queue):
        """RQ's fork, what every horse needs loaded once (trips/enrich/registry.py `warm`) and the worker's heap frozen
        first (gc.freeze): a work horse's collections then skip the objects
        it inherits instead of walking them all (about 0.1 s of CPU per job, and the pages they would copy). What the
        worker left unreachable is collected before, so nothing collectable is frozen."""
        if not self._warm:
            registry.warm()
            self._warm = True
        gc.collect()
        gc.freeze()
        super().fork_work_horse(job, queue)

    def _until_redis_answers(self, doing: str, step):
        """`step()`, tried again while Redis is unreachable (1 s, doubling to RECONNECT_MAX_S); None once asked to
        stop meanwhile."""
        wait = 1.0
        while not self.stopping:
            try:
                return step()
            except REDIS_DOWN as exc:
                log.error("worker %s: Redis unreachable while %s (%s); trying again in %.0f s",
                          getattr(self, "name", None), doing, exc, wait)
                time.sleep(wait)
                wait = min(wait * 2, RECONNECT_MAX_S)
        return None

    def register_birth(self):
        """RQ's registration, waiting for Redis: a worker started while Redis is away (or restarting) starts once
        it is back instead of exiting. It counts as live for /readyz only from its first beat, once it listens."""
        attempts = 0

        def register():
            nonlocal attempts
            attempts += 1
            if attempts > 1:  # an attempt cut short may have registered this name already: it is ours
                self.connection.delete(self.key)
            super(BTPWorker, self).register_birth()

        self._until_redis_answers("registering", register)

    def subscribe(self):
        self._until_redis_answers("subscribing to its command channel", super().subscribe)

    def bootstrap(self, logging_level="INFO", date_format=DEFAULT_LOGGING_DATE_FORMAT,
                  log_format=DEFAULT_LOGGING_FORMAT):
        """RQ's start-up (registration, the command channel), then the scheduler `work` was asked for, where RQ
        starts its own."""
        super().bootstrap(logging_level, date_format, log_format)
        if self.scheduler_burst is not None:
            self.start_scheduler(self.scheduler_burst, logging_level, date_format, log_format)

    def set_state(self, state, pipeline=None):
        if pipeline is not None:
            return super().set_state(state, pipeline)
        try:
            super().set_state(state)
        except REDIS_DOWN as exc:  # only shown by `rq info`; the next state change writes it again
            log.warning("worker %s: could not record its state %s, Redis unreachable: %s", self.name, state, exc)

    def start_scheduler(self, burst: bool = False, logging_level="INFO", date_format=DEFAULT_LOGGING_DATE_FORMAT,
                        log_format=DEFAULT_LOGGING_FORMAT):
        """What RQ's `work(with_scheduler=True)` does at start-up, with BTPScheduler: the queue's scheduler lock
        taken, then the scheduler forked (in burst mode: the jobs due enqueued once, the lock let go)."""
        try:
            self.scheduler = BTPScheduler(
                self.queues, connection=self.connection,
                logging_level=logging_level if logging_level is not None else self.log.level,
                date_format=date_format, log_format=log_format, serializer=self.serializer)
            self.scheduler.acquire_locks()
            if not self.scheduler.acquired_locks:
                return  # another worker's scheduler has the lock; RQ's maintenance tries again
            if not burst:
                self.scheduler.start()
                return
            try:
                self.scheduler.register_birth()
                self.scheduler.enqueue_scheduled_jobs()
            finally:
                self.scheduler.release_locks()
                self.scheduler.register_death()
        except REDIS_DOWN as exc:  # RQ's maintenance takes the scheduler lock and starts it once Redis is back
            log.warning("worker %s: scheduler not started yet, Redis unreachable: %s", self.name, exc)

    def register_death(self):
        try:
            forget(self.connection, self.name)
        except REDIS_DOWN:  # leaving while Redis is away: the liveness key lapses by itself
            log.warning("worker %s: could not unregister, Redis unreachable", self.name)
            return
        super().register_death()

    def heartbeat(self, timeout=None, pipeline=None):
        if pipeline is not None:
            super().heartbeat(timeout, pipeline)
            worker_registration.register(self, pipeline)
            beat(pipeline, self.name)
            return
        try:
            with self.connection.pipeline() as pipe:
                super().heartbeat(timeout, pipe)
                worker_registration.register(self, pipe)  # again: a Redis restarted empty lost it
                beat(pipe, self.name)
                pipe.execute()
        except REDIS_DOWN as exc:  # a missed beat; the dequeue that follows waits for Redis
            log.warning("worker %s: missed a beat, Redis unreachable: %s", self.name, exc)

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        """RQ's dequeue, waiting out a Redis outage instead of ending the worker. None when asked to stop."""
        return self._until_redis_answers(
            "waiting for a job", lambda: super(BTPWorker, self).dequeue_job_and_maintain_ttl(timeout, max_idle_time))

    def check_for_suspension(self, burst: bool):
        try:
            super().check_for_suspension(burst)
        except REDIS_DOWN:
            pass  # the dequeue that follows waits for Redis

    def execute_job(self, job, queue):
        try:
            super().execute_job(job, queue)
        except REDIS_DOWN as exc:  # its execution lapses and maintenance takes the job back (abandoned)
            log.error("worker %s: Redis lost while running job %s: %s", self.name, job.id, exc)

    def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
        """RQ's rule with ABANDON_SLACK_S in place of its 60 s: how long an execution outlives its last beat."""
        interval = self.job_monitoring_interval
        if job.timeout and job.timeout > 0:
            interval = min(job.timeout - working_time, interval)
        return int(max(interval, 0)) + ABANDON_SLACK_S

    def maintain_heartbeats(self, job, execution):
        """RQ beats here every monitoring tick while a horse works; maintenance is due here too, so a busy
        worker still takes back other workers' abandoned jobs and reconciles computations."""
        try:
            super().maintain_heartbeats(job, execution)
        except REDIS_DOWN as exc:  # the horse goes on; the next tick beats again
            log.warning("worker %s: missed a beat, Redis unreachable: %s", self.name, exc)
            return
        if self.should_run_maintenance_tasks:
            self.run_maintenance_tasks()

    def run_maintenance_tasks(self):
        # RQ stops an idle worker by raising StopRequested from its SIGTERM/SIGINT handler, wherever the signal
        # lands: a catch-all below must let it through, else the stop is lost and the worker runs on (the fault
        # suite's SIGTERM test timed out when the signal landed in the reconciler's query).
        try:  # before RQ's maintenance, which takes a free scheduler lock (its scheduler runs the retries)
            freed = [q.name for q in self.queues if free_stale_scheduler_lock(self.connection, q.name)]
            if freed:
                log.warning("worker %s: freed the scheduler lock of %s (its holder died)", self.name, freed)
                if self.scheduler:  # started unless it runs; RQ would take the lock only at the next maintenance
                    self.scheduler.acquire_locks(auto_start=True)
        except StopRequested:
            raise
        except Exception:
            log.exception("worker %s: checking the scheduler lock failed", self.name)
        try:
            super().run_maintenance_tasks()
        except StopRequested:
            raise
        except Exception:  # a maintenance hiccup must not stop the worker; it runs again in MAINTENANCE_S
            log.exception("worker %s: registry maintenance failed", self.name)
            self.last_cleaned_at = now()
        try:
            prune(self.connection)
            reconcile.sweep(self.connection, self.queues[0])
        except StopRequested:
            raise
        except Exception:
            log.exception("worker %s: reconciling computations failed", self.name)

    def handle_work_horse_killed(self, job, retpid, ret_val, rusage):
        """The horse died without a word (SIGKILL, OOM, a crash): on the last attempt RQ fails the job next,
        without its failure callback, so the computations are settled here. Earlier attempts are retried."""
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        if job.retries_left:
            return
        try:
            settle_failed(job, "work horse died")
        except Exception:  # the reconciler settles it within its bound
            log.exception("worker %s: could not settle job %s", self.name, job.id)
