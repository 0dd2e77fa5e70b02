"""Processes for the tests that kill them: waiting with a deadline, the process table, a worker and its forks."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from tests.live import BIN, ROOT, server_env


def wait_for(predicate, timeout=60.0, what: str = "the condition", logs: tuple[Path, ...] = ()):
    """Poll `predicate` every 0.1 s until it is true; fails after `timeout` seconds, with the end of each of `logs`.
    Returns the seconds waited."""
    start = time.monotonic()
    deadline = start + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            tails = "".join(f"\n--- {log}:\n{_tail(log)}" for log in logs)
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{tails}")
        time.sleep(0.1)
    return time.monotonic() - start


def _tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"({exc})"


def _stats() -> dict[int, tuple[int, int]]:
    """pid → (parent pid, process group) of every process."""
    out = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(stat.parent.name)] = (int(fields[1]), int(fields[2]))
    return out


def descendants(pid: int) -> list[int]:
    """Child processes, recursively (the work horse runs in a process group of its own, so killpg misses it)."""
    stats = _stats()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, (ppid, _) in stats.items() if ppid == parent]
        found += children
        frontier += children
    return found


def horse_of(worker_pid: int) -> int | None:
    """The worker's work horse: the child RQ forked and moved into a process group of its own (os.setpgrp);
    the scheduler process stays in the worker's group."""
    return next((p for p, (ppid, pgid) in _stats().items() if ppid == worker_pid and pgid == p), None)


def start_worker(app_config: dict, log: Path | None = None, **env_overrides) -> subprocess.Popen:
    """A real `flask worker` (jobs/worker.py) on the test configuration (plus overrides), in a session of its own."""
    sink = open(log, "ab") if log else subprocess.DEVNULL
    try:
        return subprocess.Popen([str(BIN / "flask"), "--app", "app", "worker"], cwd=ROOT,
                                env=server_env(app_config, **env_overrides), start_new_session=True,
                                stdout=sink, stderr=subprocess.STDOUT)
    finally:
        if log:
            sink.close()


def kill(worker: subprocess.Popen) -> None:
    """SIGKILL the worker and its forks (scheduler, work horse), mid-job: nothing gets to clean up. Once only."""
    if worker.returncode is not None:
        return
    for pid in [worker.pid, *descendants(worker.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    worker.wait(timeout=10)


@contextmanager
def worker_running(app_config: dict, log: Path | None = None, **env_overrides):
    """`start_worker` for the length of a `with`, killed at its end (starting it first lets a server start meanwhile)."""
    worker = start_worker(app_config, log, **env_overrides)
    try:
        yield worker
    finally:
        kill(worker)
