"""An answer on its way to a client that reads it slowly, without holding a thread (BTP's gunicorn worker,
httpworker/worker.py).

The response writes to an `Outbox` instead of the socket: what the socket takes at once is sent (never blocking),
the rest is kept, and once the app is done the worker's loop sends it as the client reads (`flush`, on the
selector's write events). The thread that served the request is free meanwhile. What all of a worker's outboxes
hold is bounded (`Budget`): past it, the serving thread sends itself, paced by the client.

Either way the client must read at `min_rate` bytes/s, measured over each `window` after a `grace` (Pace): a
client reading slower is cut off, so a slow reader of a big answer holds neither a thread nor its buffer for long.
Stdlib only.
"""
from __future__ import annotations

import select
import socket
import threading
import time
from collections import deque

PIECE = 256 * 1024  # the most one send offers the kernel


class Budget:
    """The bytes a worker's outboxes may hold together; the threads take and give back under a lock."""

    def __init__(self, limit: int):
        self.limit, self.held = limit, 0
        self.lock = threading.Lock()

    def take(self, size: int) -> bool:
        with self.lock:
            if self.held + size > self.limit:
                return False
            self.held += size
            return True

    def give(self, size: int) -> None:
        with self.lock:
            self.held -= size


class Pace:
    """A transfer must move `min_rate` bytes/s over each `window`; the first window also has `grace` seconds.
    `moved` counts the bytes; `check(now, left)` at `deadline` says whether it kept up (and starts the next window).
    `left`: what was still to move when the window began caps what the window asks for."""

    __slots__ = ("min_rate", "window", "moved", "since", "mark", "deadline", "began")

    def __init__(self, now: float, min_rate: float, window: float, grace: float):
        self.min_rate, self.window = min_rate, window
        self.moved = self.mark = 0
        self.began = self.since = now
        self.deadline = now + grace + window

    def check(self, now: float, left: float) -> bool:
        if now < self.deadline:
            return True
        if self.moved - self.mark < min(self.min_rate * self.window, left):
            return False
        self.mark, self.since, self.deadline = self.moved, now, now + self.window
        return True

    def rate(self, now: float) -> float:
        return self.moved / max(now - self.began, 1e-3)


class Outbox:
    """A socket-like object for gunicorn's Response (sendall, sendfile): the answer's bytes go out as the client
    takes them, the rest held here within `budget`, else sent by the calling thread at the client's pace."""

    __slots__ = ("sock", "budget", "pending", "held", "pace")

    def __init__(self, sock: socket.socket, budget: Budget, pace: Pace):
        self.sock, self.budget, self.pace = sock, budget, pace
        self.pending: deque = deque()
        self.held = 0  # bytes in `pending`, all counted in the budget

    def __getattr__(self, name):
        return getattr(self.sock, name)

    def sendall(self, data) -> None:
        view = memoryview(data if isinstance(data, bytes) else bytes(data))
        if not self.pending:
            view = view[self._send(view):]
        if not view:
            return
        if self.budget.take(len(view)):
            self.pending.append(view)
            self.held += len(view)
            return
        self._paced()  # over the worker's budget: this thread sends what is held, then the rest, at the client's pace
        while view:
            self._wait()
            view = view[self._send(view):]

    def sendfile(self, file, offset: int = 0, count: int | None = None) -> int:
        """gunicorn's Response.sendfile: the file's bytes through sendall (the loop sends what is held)."""
        file.seek(offset)
        total = 0
        while count is None or total < count:
            data = file.read(PIECE if count is None else min(PIECE, count - total))
            if not data:
                break
            self.sendall(data)
            total += len(data)
        return total

    def flush(self) -> bool:
        """Send what the socket takes now, without blocking; True once nothing is held. Raises OSError when the
        client is gone."""
        pending = self.pending
        while pending:
            view = pending[0]
            sent = self._send(view)
            if sent:
                self.held -= sent
                self.budget.give(sent)
            if sent < len(view):
                if sent:
                    pending[0] = view[sent:]
                return False
            pending.popleft()
        return True

    def overdue(self, now: float) -> bool:
        return not self.pace.check(now, self.held or 1)

    def discard(self) -> None:
        """The connection closes: the held bytes go, and the budget gets them back."""
        self.pending.clear()
        if self.held:
            self.budget.give(self.held)
            self.held = 0

    # ---------------------------------------------------------------------------------------------------------
    def _send(self, view) -> int:
        """Bytes the socket took at once (0 when its buffer is full)."""
        try:
            sent = self.sock.send(view[:PIECE], socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return 0
        self.pace.moved += sent
        return sent

    def _paced(self) -> None:
        while not self.flush():
            self._wait()

    def _wait(self) -> None:
        """Until the socket takes more, or the client is found reading under the floor (TimeoutError)."""
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLOUT)
        while True:
            now = time.monotonic()
            if not self.pace.check(now, float("inf")):
                raise TimeoutError("the client reads its answer under the floor")
            if poller.poll(max(0.0, self.pace.deadline - now) * 1000 + 1):
                return
