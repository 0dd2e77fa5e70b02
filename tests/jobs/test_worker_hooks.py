"""The public parts of RQ that BTPWorker and BTPScheduler (jobs/worker.py, jobs/scheduler.py) build on, each doing
what BTP relies on: a change in RQ that breaks one fails here, not in production."""
import signal
from datetime import datetime, timedelta, timezone

import pytest
import redis as redis_lib
from rq import Queue, Worker
from rq.exceptions import StopRequested

from jobs.scheduler import BTPScheduler
from jobs.worker import BTPWorker
from trips.core.queue import get_queue
from trips.core.redis_client import get_redis

KEY = "btp:test:hooks"


def mark() -> None:
    get_redis().set(KEY, "ran")


@pytest.fixture
def signals():
    """RQ's request_stop installs its force-stop handlers: the test process gets its own back."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in kept.items():
        signal.signal(sig, handler)


def test_a_stop_request_reaches_the_warm_shutdown_hook_and_ends_an_idle_worker(app, ctx, signals):
    worker = BTPWorker([get_queue()], connection=get_redis())
    assert not worker.stopping
    with pytest.raises(StopRequested):  # idle: RQ raises where the signal landed (the loop breaks on it)
        worker.request_stop(signal.SIGTERM, None)
    assert worker.stopping, "RQ no longer calls handle_warm_shutdown_request on a stop request"


def test_a_stopped_worker_waits_for_redis_no_more(app, ctx):
    worker = BTPWorker([get_queue()], connection=get_redis())
    worker.stopping = True
    tried = []
    assert worker._until_redis_answers("testing", lambda: tried.append(1)) is None and tried == []


def test_a_worker_made_while_redis_refuses_waits_for_it(app, ctx, monkeypatch):
    """RQ's constructor asks Redis for the worker's address: refused twice, the worker is made on the third try."""
    real, refused = redis_lib.Redis.client_setname, []

    def setname(self, name):
        if len(refused) < 2:
            refused.append(name)
            raise redis_lib.ConnectionError("Connection refused.")
        return real(self, name)

    monkeypatch.setattr(redis_lib.Redis, "client_setname", setname)
    monkeypatch.setattr("jobs.worker.time.sleep", lambda s: None)
    worker = BTPWorker([get_queue()], connection=get_redis(), name="hooks-waiting")
    assert len(refused) == 2, "RQ's constructor no longer asks Redis: the wait in BTPWorker.__init__ is moot"
    assert worker.name == "hooks-waiting" and worker.ip_address not in (None, "unknown")


def test_work_with_scheduler_starts_btps_scheduler_at_bootstrap(app, ctx):
    """work(with_scheduler=True): BTPScheduler, not RQ's, is started once the worker is registered (in burst
    mode: the jobs due are enqueued, then run)."""
    redis = get_redis()
    redis.delete(KEY)
    queue: Queue = get_queue()
    queue.enqueue_at(datetime.now(timezone.utc) - timedelta(seconds=1), mark)
    worker = BTPWorker([queue], connection=redis)
    worker.work(burst=True, with_scheduler=True)
    assert isinstance(worker.scheduler, BTPScheduler)
    assert redis.get(KEY) == b"ran", "the scheduled job was not moved to the queue"
    assert not redis.exists(BTPScheduler.get_locking_key(queue.name))  # burst: the lock let go
    redis.delete(KEY)


def test_rqs_maintenance_starts_the_workers_scheduler_when_it_is_not_running(app, ctx, monkeypatch):
    """RQ's run_maintenance_tasks starts `worker.scheduler` again (acquire_locks(auto_start=True)) once the worker
    has cleaned before: BTP sets that attribute itself and relies on RQ keeping it running."""
    started = []
    monkeypatch.setattr(BTPScheduler, "start", lambda self: started.append(self))
    monkeypatch.setattr("jobs.worker.prune", lambda connection: None)
    monkeypatch.setattr("jobs.worker.reconcile.sweep", lambda connection, queue: None)
    redis = get_redis()
    queue = get_queue()
    redis.delete(BTPScheduler.get_locking_key(queue.name))
    worker = BTPWorker([queue], connection=redis)
    worker.scheduler = BTPScheduler(worker.queues, connection=redis)
    worker.last_cleaned_at = datetime.now(timezone.utc) - timedelta(hours=1)
    Worker.run_maintenance_tasks(worker)
    assert started == [worker.scheduler]
    worker.scheduler.release_locks()


def test_rqs_teardown_stops_the_workers_scheduler(app, ctx, monkeypatch):
    stopped = []
    worker = BTPWorker([get_queue()], connection=get_redis())
    worker.scheduler = BTPScheduler(worker.queues, connection=get_redis())
    monkeypatch.setattr(BTPWorker, "stop_scheduler", lambda self: stopped.append(self.scheduler))
    monkeypatch.setattr(BTPWorker, "register_death", lambda self: None)
    worker.teardown()
    assert stopped == [worker.scheduler]


def test_the_scheduler_installs_rqs_stop_request_for_its_signals(monkeypatch, signals):
    """BTPScheduler.work installs request_stop before it lets SIGTERM in; RQ's work installs the same."""
    installed = {}
    scheduler = BTPScheduler(["hooks"], connection=redis_lib.Redis(port=9))

    def stop_at_once(self):
        installed.update({sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)})
        self.request_stop()

    monkeypatch.setattr(BTPScheduler, "register_birth", stop_at_once)
    monkeypatch.setattr(BTPScheduler, "stop", lambda self: None)
    scheduler.work()
    assert installed == {signal.SIGINT: scheduler.request_stop, signal.SIGTERM: scheduler.request_stop}
