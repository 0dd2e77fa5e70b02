"""RQ's scheduler, stopped with its worker however the worker ends.

RQ 3.0 forks the scheduler from the worker (multiprocessing, `RQScheduler.start`) and stops it only from the
worker's own shutdown (`Worker.teardown` / `_shutdown`: SIGTERM, then join). A worker killed without that
(SIGKILL, the OOM killer, a crash) left its scheduler running on its own, re-parented to init, holding the queue's
scheduler lock for ever. Here the scheduler asks Linux to send it SIGTERM when the worker dies (prctl
PR_SET_PDEATHSIG, proc(5)); RQ's own SIGTERM handler then stops it at its next poll (1 s): it releases the lock
and unregisters, as on a clean stop.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

from rq.scheduler import RQScheduler

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def stop_with_parent(parent_pid: int) -> bool:
    """Ask for SIGTERM when the parent dies (Linux; elsewhere nothing is asked and False returned). True when the
    parent is gone already (it died between the fork and the request): the caller stops by itself then."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("scheduler: prctl(PR_SET_PDEATHSIG) failed (errno %d); it may outlive a killed worker",
                    ctypes.get_errno())
    return os.getppid() != parent_pid


class BTPScheduler(RQScheduler):
    """RQ's scheduler, its process stopped when the worker that forked it dies (module docstring)."""

    worker_pid = 0

    def start(self):
        self.worker_pid = os.getpid()  # the worker, before the fork
        # SIGTERM and SIGINT held back across the fork: until the scheduler has its own handlers, the forked process
        # would run the worker's (inherited), which stops a worker through the worker's Redis connection, shared
        # with the parent, and hung a worker told to stop just after it forked (its join waited for ever). Held in
        # the worker for the fork only: one sent meanwhile arrives right after, to the worker's own handler.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        try:
            return super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def work(self):
        # In the forked process, its stop signals still held (`start`): the handlers RQ installs in `work` (its
        # `request_stop`) first, then let them in.
        for stop in STOP_SIGNALS:
            signal.signal(stop, self.request_stop)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        # PR_SET_PDEATHSIG follows the thread that forked: the worker's main thread, where RQ starts the scheduler
        # (at start-up and from its maintenance).
        if self.worker_pid and stop_with_parent(self.worker_pid):
            self.request_stop()
        super().work()
