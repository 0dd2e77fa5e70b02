"""A `flask worker` killed alone, outside `make run` (SIGKILL, as the OOM killer does; or SIGTERM): the RQ
scheduler it forked stops too and lets go of the queue's scheduler lock (jobs/scheduler.py, PR_SET_PDEATHSIG).
Before, a SIGKILLed worker left its scheduler running for ever, re-parented to init, holding that lock."""
import os
import signal
from pathlib import Path

import pytest
from rq.scheduler import RQScheduler

from tests.procs import descendants, start_worker, wait_for
from trips.core.queue import get_queue
from trips.core.redis_client import get_redis

pytestmark = pytest.mark.slow


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan is reaped by whoever adopts it; a container's init may not reap)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _scheduler_of(worker_pid: int) -> int | None:
    """The worker's scheduler: its forked child named by RQ's multiprocessing Process ('Scheduler'), which stays
    in the worker's process group (a work horse moves to its own)."""
    for pid in descendants(worker_pid):
        try:
            if os.getpgid(pid) == os.getpgid(worker_pid):
                return pid
        except ProcessLookupError:
            continue
    return None


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_the_scheduler_stops_with_its_worker(app, app_config, ctx, tmp_path, sig):
    lock = RQScheduler.get_locking_key(get_queue().name)
    log = tmp_path / "worker.log"
    worker = start_worker(app_config, log)
    scheduler = None
    try:
        wait_for(lambda: get_redis().exists(lock) and _scheduler_of(worker.pid), timeout=60,
                 what="the worker's scheduler holding the lock", logs=(log,))
        scheduler = _scheduler_of(worker.pid)
        os.kill(worker.pid, sig)  # the worker only: its scheduler is left to itself
        worker.wait(timeout=30)
        wait_for(lambda: not _running(scheduler), timeout=10, what=f"the scheduler (pid {scheduler}) to stop",
                 logs=(log,))
        # It stopped as RQ stops it cleanly: the lock is let go at once, not left to its 61 s TTL.
        wait_for(lambda: not get_redis().exists(lock), timeout=5, what="the scheduler lock released", logs=(log,))
    finally:
        for pid in [worker.pid, *([scheduler] if scheduler else [])]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        worker.wait(timeout=10)
