"""What `flask serve` runs: gunicorn and one RQ worker as supervised children, and the embedded Redis kept up.

A child that dies is started again after a backoff (1 s, doubling to BACKOFF_MAX_S; back to 1 s once it has run
STABLE_S). The worker is restarted for ever: the service keeps answering meanwhile, and the new worker takes
back the dead one's jobs (jobs/worker.py). gunicorn is given up after GIVE_UP quick deaths in a row (a port in
use, a broken configuration): then everything stops and `flask serve` exits 1.
"""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from trips.core.queue import forget

log = logging.getLogger("btp.serve")

BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 30.0
STABLE_S = 60.0
GIVE_UP = 5
TICK_S = 0.5
REDIS_CHECK_S = 2.0
STOP_GRACE_S = 15.0


@dataclass
class Child:
    """One supervised process. `argv` is called for every start (the worker gets a fresh name each time)."""

    label: str
    argv: Callable[[], list[str]]
    restart_for_ever: bool
    on_death: Callable[[Child, int], None] = lambda child, pid: None  # it died on its own (pid: the dead one's)
    proc: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_deaths: int = 0
    next_start: float = 0.0
    name: str = ""
    starts: int = 0


class Supervisor:
    def __init__(self, children: list[Child], env: dict, echo=print, redis_keeper: Callable[[], None] | None = None):
        self.children, self.env, self.echo, self.redis_keeper = children, env, echo, redis_keeper
        self.stopping = False

    def _start(self, child: Child) -> None:
        child.proc = subprocess.Popen(child.argv(), env=self.env, start_new_session=True)
        child.started_at = time.monotonic()
        child.starts += 1
        if child.starts > 1:
            self.echo(f"{child.label} started again (pid {child.proc.pid}).")

    def _reap(self, child: Child) -> bool:
        """Handle a child that exited. False when it must not be started again."""
        code, pid = child.proc.returncode, child.proc.pid
        ran = time.monotonic() - child.started_at
        child.proc = None
        child.on_death(child, pid)
        child.quick_deaths = 1 if ran >= STABLE_S else child.quick_deaths + 1
        if not child.restart_for_ever and child.quick_deaths >= GIVE_UP:
            self.echo(f"{child.label} exited (code {code}) {GIVE_UP} times in a row; stopping.")
            return False
        delay = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** (child.quick_deaths - 1))
        child.next_start = time.monotonic() + delay
        self.echo(f"{child.label} exited (code {code}); starting it again in {delay:.1f} s.")
        return True

    def request_stop(self, *_):
        self.stopping = True

    def run(self) -> int:
        """Supervise until SIGINT/SIGTERM (exit 0) or a child given up (exit 1)."""
        code, last_redis_check = 0, 0.0
        try:
            while not self.stopping:
                now = time.monotonic()
                if self.redis_keeper and now - last_redis_check >= REDIS_CHECK_S:
                    last_redis_check = now
                    try:
                        self.redis_keeper()
                    except Exception as exc:  # tried again in REDIS_CHECK_S; the children wait for it meanwhile
                        self.echo(f"The embedded Redis could not be started again: {exc}")
                for child in self.children:
                    if child.proc is None and now >= child.next_start:
                        self._start(child)
                    elif child.proc is not None and child.proc.poll() is not None and not self._reap(child):
                        code = 1
                        self.stopping = True
                time.sleep(TICK_S)
        finally:
            self.stop_all()
        return code

    def stop_all(self) -> None:
        running = [c for c in self.children if c.proc is not None and c.proc.poll() is None]
        for child in running:
            child.proc.terminate()  # the worker finishes its job (warm shutdown) or is killed after the grace
        deadline = time.monotonic() + STOP_GRACE_S
        for child in running:
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.terminate()  # a second SIGTERM is RQ's cold shutdown: it kills the horse and leaves
                try:
                    child.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    kill_group(child.proc.pid, signal.SIGKILL)
                    child.proc.wait(timeout=5)


def kill_group(pgid: int, sig: int) -> None:
    """Signal a child's process group (its session: the RQ scheduler process a dead worker leaves behind)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def worker_child(bin_dir: Path, redis_client: Callable) -> Child:
    """The RQ worker, named afresh at each start so that its death can be told to /readyz at once."""

    def argv() -> list[str]:
        worker.name = f"serve-{uuid.uuid4().hex[:12]}"
        return [str(bin_dir / "flask"), "--app", "app", "worker", "--name", worker.name]

    def on_death(child: Child, pid: int) -> None:
        kill_group(pid, signal.SIGTERM)  # its scheduler process outlives a SIGKILLed worker and holds the lock
        try:
            forget(redis_client(), child.name)
        except Exception:  # Redis away: the liveness key lapses by itself
            log.warning("could not tell Redis that worker %s died", child.name, exc_info=True)

    worker = Child("The worker", argv, restart_for_ever=True, on_death=on_death)
    return worker
