"""The connections of BTP's gunicorn worker (httpworker/worker.py): taking clients from the listening sockets
(one per round), registering them with the selector, shedding one when `worker_connections` are open (the idlest
kept-alive connection first, then the slowest sender, then the slowest reader: never one a thread serves), so a
new client is still served however many connections others hold open, and closing them: at once when
nothing was answered, else lingering (our FIN first, then whatever the client still sends is read and dropped for at
most LINGER_S, without holding a thread: closing at once could reset the connection and cut the answer short,
RFC 9112 §9.6). Only the thread that runs the worker's loop calls these. Stdlib and gunicorn only.
"""
from __future__ import annotations

import errno
import select
import selectors
import socket
import struct
import time
from typing import Any

from httpworker import gunicorn_internals as gi
from httpworker.frame import Incoming, Limits
from httpworker.outbox import Outbox
from httpworker.wire import _stall_bound

LINGER_S = 2.0  # how long a connection told `Connection: close` may take to close its side
ACCEPT, CONN, WAKE, LINGER, OUT = "accept", "conn", "wake", "linger", "out"  # what a selector key is


def _readable(sock: socket.socket) -> bool:
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def _reset(sock: socket.socket) -> None:
    """Its close resets the connection (SO_LINGER 0): unsent bytes are dropped, not sent to a client cut off."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


class _Conn:
    __slots__ = ("sock", "addr", "server", "incoming", "deadline", "busy", "registered", "closed", "outbox", "keep",
                 "cut")

    def __init__(self, sock, addr, server, incoming: Incoming):
        self.sock, self.addr, self.server, self.incoming = sock, addr, server, incoming
        self.deadline = 0.0
        self.busy = False  # a thread serves its request: the leader reads nothing of it meanwhile
        self.registered = False  # with the selector
        self.closed = False
        self.outbox: Outbox | None = None  # the rest of an answer the loop sends as the client reads
        self.keep = False  # with an outbox: keep the connection once it is sent
        self.cut = False  # closed with a reset: what the kernel still holds for a client cut off goes at once


class Connections:
    """The worker's connection bookkeeping (a mixin of KeepAliveWorker, which sets the attributes below)."""

    poller: selectors.BaseSelector  # made in init_process, after the fork: the arbiter's process has none
    sockets: list[Any]  # gunicorn's listeners (gunicorn.sock), set by gunicorn's Worker
    conns: dict[int, _Conn]  # fd -> connection
    lingering: dict[int, tuple[socket.socket, float]]  # fd -> (socket, until when)
    accepting: bool
    cfg: Any  # gunicorn's Config, then its values read once (wire._Settled)
    limits: Limits
    keepalive: int
    alive: bool  # gunicorn's Worker: False once the worker is stopping

    def _accepting(self, on: bool) -> None:
        if on == self.accepting:
            return
        for listener in self.sockets:
            if on:
                self.poller.register(listener, selectors.EVENT_READ, (ACCEPT, listener))
            else:
                self.poller.unregister(listener)
        self.accepting = on

    def _accept(self, listener) -> None:
        """Take one waiting client, if any (the worker's loop takes one per round), shedding a connection first
        when the worker holds `worker_connections` already."""
        if len(self.conns) >= self.cfg.worker_connections and not self._shed(time.monotonic()):
            self._accepting(False)  # every connection is being served: the backlog waits until one closes
            return
        try:
            client, addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker took it
        except OSError as exc:
            if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE, errno.ENOBUFS,
                             errno.ENOMEM):
                return
            raise
        gi.close_on_exec(client)
        _stall_bound(client)
        if client.family != socket.AF_UNIX:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Conn(client, addr, listener.getsockname(), Incoming(self.cfg, addr, self.limits))
        conn.deadline = time.monotonic() + self.keepalive
        self.conns[client.fileno()] = conn
        self._register(conn)

    def _shed(self, now: float) -> bool:
        """Close the connection that least deserves its slot; False when every one is being served."""
        victim, worst = None, None
        for conn in self.conns.values():
            if conn.busy:
                continue
            if conn.outbox is not None:
                rank = (2, conn.outbox.pace.rate(now))
            elif conn.incoming.started:
                rank = (1, conn.incoming.rate(now))
            else:
                rank = (0, conn.deadline)  # idle: the one idle longest ends its keep-alive first
            if worst is None or rank < worst:
                victim, worst = conn, rank
                if rank[0] == 0 and conn.deadline <= now + self.keepalive / 2:
                    break  # idle for half its keep-alive at least: good enough, no need to look at them all
        if victim is None or worst is None:
            return False
        self._close(victim, cut=worst[0] > 0)
        return True

    def _register(self, conn: _Conn) -> None:
        self.poller.register(conn.sock, selectors.EVENT_READ, (CONN, conn))
        conn.registered = True

    def _close(self, conn: _Conn, after_answer: bool = False, cut: bool = False) -> None:
        """Forget the connection and close it: at once when nothing was answered; after an answer, by sending our
        FIN first and reading whatever the client still sends until it closes too, for at most LINGER_S, without
        holding the thread (`_drain`): closing at once could reset the connection and cut the answer short."""
        if conn.closed:
            return
        conn.closed = True
        self.conns.pop(conn.sock.fileno(), None)
        if conn.registered:
            conn.registered = False
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.incoming.discard()
        if conn.outbox is not None:
            conn.outbox.discard()
            conn.outbox = None
        if cut or conn.cut:
            _reset(conn.sock)
            conn.sock.close()
        elif after_answer:
            self._linger(conn.sock)
        else:
            conn.sock.close()
        if self.alive and not self.accepting and len(self.conns) < self.cfg.worker_connections:
            self._accepting(True)

    def _linger(self, sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.setblocking(False)
        except OSError:
            sock.close()
            return
        self.lingering[sock.fileno()] = (sock, time.monotonic() + LINGER_S)
        self.poller.register(sock, selectors.EVENT_READ, (LINGER, sock))

    def _drain(self, sock: socket.socket, force: bool = False) -> None:
        try:
            while not force:
                if not sock.recv(65536):
                    break
        except (BlockingIOError, InterruptedError):
            return  # the client has not closed yet: read again when it sends more
        except OSError:
            pass
        self.lingering.pop(sock.fileno(), None)
        try:
            self.poller.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()
