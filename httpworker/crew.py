"""The threads of one BTP gunicorn worker (httpworker/worker.py), lazy leader and followers.

One thread at a time, the leader, runs the worker's loop (the selector: accept, read, sweep) and serves a whole
request inline, in the same thread: the fast path costs no handoff between threads. A monitor thread wakes every
WATCH_S and only reads a timestamp the leader writes when it starts a request: once the leader has been inside one
request for PROMOTE_AFTER_S (a slow upstream, a large answer to a slow reader), it makes another thread the leader
(an idle follower, or a new one while fewer than `size` exist), and that one runs the loop while the slow request
goes on in its own thread. When the slow request ends, its thread finds it is no longer the leader (`finish`,
under the lock that decides leadership, taken only there and by the monitor), hands its connection back to the
leader (the worker's queue and wake-up pipe: only the leader ever touches the selector) and becomes a follower.

With every thread inside a request, nobody runs the loop: the worker accepts nothing (the other workers, which watch
the same listening sockets, take the new clients) and its kept connections wait for a thread; the monitor says so
in the log. It also sends gunicorn's heartbeat, dated from the start of the oldest request under way: a worker
whose threads are all busy is not killed, and one whose request has run longer than the arbiter's `timeout` is, as
gunicorn's sync worker would be. Stdlib only.
"""
from __future__ import annotations

import threading
import time

PROMOTE_AFTER_S = 0.025  # a request the leader has served this long gets the loop handed to another thread
WATCH_S = 0.010  # how often the monitor looks
BEAT_S = 1.0  # how often it sends the heartbeat
MAIN_POLL_S = 0.25  # the main thread, as a follower, wakes this often: Python runs signal handlers there only
SATURATED_LOG_S = 60.0  # at most one "every thread busy" line per this long


class Member:
    __slots__ = ("started", "wake", "main")

    def __init__(self, main: bool = False):
        self.started = 0.0  # when the request this thread serves began (0.0: none)
        self.wake = threading.Event()
        self.main = main


class Crew:
    """`lead(member)` is the worker's loop: it returns once `member` is no longer the leader, or the worker is
    done. `beat(at)` is the heartbeat, `at` a time.monotonic() value."""

    def __init__(self, size: int, lead, beat, log):
        self.size, self.lead, self.beat, self.log = max(1, size), lead, beat, log
        self.lock = threading.Lock()
        self.members: list[Member] = []
        self.idle: list[Member] = []
        self.leader: Member | None = None
        self.done = False
        self.failed: BaseException | None = None
        self.promotions = 0
        self.saturated_at = 0.0  # when the last "every thread busy" line was written
        self.saturated_by = 0.0  # the start of the leader's request when every thread was last found busy
        self.saturations = 0

    def run(self) -> None:
        """The main thread's part: lead first, follow when another leads; returns when the worker is done."""
        main = Member(main=True)
        self.members.append(main)
        self.leader = main
        threading.Thread(target=self._watch, name="http-monitor", daemon=True).start()
        try:
            self._serve(main)
        finally:
            self.stop()
        if self.failed is not None:
            raise self.failed

    def stop(self) -> None:
        self.done = True
        for member in list(self.members):
            member.wake.set()

    def finish(self, member: Member) -> bool:
        """The request `member` served is over: True when it still leads (it goes on with the loop), else it is a
        follower from now on and must hand its connection back to the leader."""
        with self.lock:
            member.started = 0.0
            if self.leader is member:
                return True
            self.idle.append(member)
            return False

    def busy(self) -> int:
        return sum(1 for member in self.members if member.started)

    def oldest(self) -> float:
        return min((m.started for m in self.members if m.started), default=0.0)

    # --- the threads ------------------------------------------------------------------------------------------
    def _serve(self, me: Member) -> None:
        while not self.done:
            if self.leader is me:
                self.lead(me)
                continue
            me.wake.wait(MAIN_POLL_S if me.main else None)
            me.wake.clear()

    def _follower(self, me: Member) -> None:
        try:
            self._serve(me)
        except BaseException as exc:  # the worker cannot go on without its loop: stop it, the main thread raises
            self.log.exception("Worker thread failed")
            self.failed = exc
            self.stop()

    def _watch(self) -> None:
        next_beat = posted = 0.0
        while not self.done:
            time.sleep(WATCH_S)
            now = time.monotonic()
            leader = self.leader
            started = leader.started if leader is not None else 0.0
            if leader is not None and started and now - started >= PROMOTE_AFTER_S:
                try:
                    self._promote(leader, started, now)
                except Exception:  # a thread could not start: the leader goes on alone
                    self.log.exception("Could not hand the loop to another thread")
            dated = self.oldest() or now
            # every BEAT_S, and at once when the beat on record is older than it should be (it was dated from a
            # request that is over now): else the arbiter could kill the worker for a request that ended in time
            if now >= next_beat or dated - posted >= BEAT_S:
                next_beat, posted = now + BEAT_S, dated
                self.beat(dated)

    def _promote(self, leader: Member, started: float, now: float) -> None:
        with self.lock:
            if self.leader is not leader or leader.started != started or self.done:
                return  # that request is over already
            if self.idle:
                member = self.idle.pop()
            elif len(self.members) < self.size:
                member = Member()
                self.members.append(member)
                threading.Thread(target=self._follower, args=(member,), name=f"http-{len(self.members)}",
                                 daemon=True).start()
            else:
                self._saturated(started, now)
                return
            self.leader = member
            self.promotions += 1
        member.wake.set()

    def _saturated(self, started: float, now: float) -> None:
        if started == self.saturated_by:
            return  # the same time as the monitor's last look
        self.saturated_by = started
        self.saturations += 1
        if now - self.saturated_at >= SATURATED_LOG_S or not self.saturated_at:
            self.saturated_at = now
            self.log.warning("All %d threads of this worker are serving requests: it accepts nothing and its kept "
                             "connections wait until one is free (%d times since start)", self.size,
                             self.saturations)
