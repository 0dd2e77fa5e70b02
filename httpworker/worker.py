"""BTP's gunicorn worker (gunicorn.conf.py worker_class): keep-alive, whole requests, no request behind a slow one.

gunicorn's `sync` worker closes the connection after every request; its `gthread` worker keeps connections open but
hands every request from the thread that polls the sockets to a pool thread and back (bench/bench_mcp.py measured
that machinery at about 40 % of a served get_trip's CPU), and reads a request's head with a blocking read in that
pool thread, with no deadline: a client sending its head a byte at a time holds a thread.

This worker polls its listening sockets and the connections it keeps with one selector and reads each readable
connection without blocking (recv with MSG_DONTWAIT) into that connection's buffer. No app code runs before the
buffer holds a whole request (httpworker/frame.py: gunicorn's own parser judges it; the head within HEAD_TIMEOUT_S,
the body kept arriving at MIN_RATE, else 408; a body over MAX_BODY refused with 413 unread): a slow sender holds no
thread. The thread that reads a whole request serves it at once (no handoff), then goes back to the selector; bytes
after it (pipelining) are served next, in order. When one request takes long (a slow upstream), another thread takes
over the loop (httpworker/crew.py), so the requests of other connections are answered meanwhile. What a slow reader
does not take of its answer at once, the loop sends as it reads (httpworker/outbox.py), cut under SEND_RATE; and a
worker with `worker_connections` open sheds its idlest one for a new client (httpworker/conns.py).

What stays as gunicorn does it: the HTTP parser and the WSGI environ and response (gunicorn.http, reached through
httpworker/gunicorn_internals.py), `keepalive` seconds for an idle connection, `max_requests`, the pre/post request
hooks, the heartbeat the arbiter's `timeout` watches (dated from the oldest request under way), graceful stop (the
requests under way and those arriving whole are answered with `Connection: close`, idle connections closed at once,
none accepted). An answer given once `worker_connections` are open says `Connection: close`. HTTP/2, TLS and the
PROXY protocol's binary form are not served here: nginx terminates them.
"""
from __future__ import annotations

import errno
import os
import resource
import selectors
import socket
import ssl
import sys
import time
from collections import deque
from datetime import datetime
from itertools import count

from gunicorn.workers import base

from httpworker import gunicorn_internals as gi

from httpworker.conns import ACCEPT, CONN, LINGER, OUT, WAKE, Connections, _Conn, _readable
from httpworker.crew import Crew
from httpworker.frame import CONTINUE, NEED, WHOLE, Limits
from httpworker.outbox import Budget, Outbox, Pace
from httpworker.wire import _OneSendResponse, _Settled, _stalled

TICK_S = 0.25  # how often the loop sweeps connections past their deadline and checks its parent
RECV_BYTES = 64 * 1024  # one read of a readable connection
CONTINUE_BYTES = b"HTTP/1.1 100 Continue\r\n\r\n"


def _accepts_last(event) -> bool:
    return event[0].data[0] is ACCEPT


class KeepAliveWorker(Connections, base.Worker):
    """One selector, run by one thread at a time; whole requests served by the thread that read them."""
    crew: Crew  # made in run, when the loop starts (its threads, its size from the settled config)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.conns: dict[int, _Conn] = {}
        self.lingering: dict[int, tuple[socket.socket, float]] = {}  # fd -> (socket, until when)
        self.returned: deque = deque()  # (connection, keep it?) from a thread that no longer leads
        self.accepting = False
        self.next_tick = 0.0
        self.stop_by: float | None = None
        self.counter = count(1)  # requests served (self.nr), counted by whichever thread serves
        self.limits = Limits()
        self.budget = Budget(self.limits.outbox)
        self.keepalive = 1

    def init_process(self):
        self.poller = selectors.DefaultSelector()
        self._raise_fd_limit()
        super().init_process()

    def _raise_fd_limit(self) -> None:
        """Room for `worker_connections` clients, the ones lingering and the app's own files and connections."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 2 * self.cfg.worker_connections + 256
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard),
                                                        hard))

    def run(self):
        self.cfg = _Settled(self.cfg)
        self.limits = Limits.of(self.cfg)
        self.budget = Budget(self.limits.outbox)
        self.keepalive = max(self.cfg.keepalive, 1)
        if self.cfg.is_ssl or "h2" in self.cfg.http_protocols or self.cfg.proxy_protocol not in ("off", "v1"):
            self.log.warning("BTP's worker serves plain HTTP/1.1: TLS, HTTP/2 and PROXY v2 end at nginx")
        for listener in self.sockets:
            listener.setblocking(False)
        self.poller.register(gi.wake_pipe(self)[0], selectors.EVENT_READ, (WAKE, None))
        self._accepting(True)
        self.crew = Crew(self.cfg.threads, self._lead, self._beat, self.log)
        try:
            self.crew.run()
        finally:
            self._shut()

    # --- the loop (run by the leader) -------------------------------------------------------------------------
    def _lead(self, me) -> None:
        crew, select_ = self.crew, self.poller.select
        while crew.leader is me and not crew.done:
            now = time.monotonic()
            if now >= self.next_tick and not self._tick(now):
                crew.stop()
                return
            events = select_(self.next_tick - now)
            # Connections first, then at most one new connection per listener: every worker's selector sees the
            # same listening socket, and a busy worker accepts one client per round while an idle one takes the
            # next at once, so a burst of clients spreads over the workers.
            if len(events) > 1:
                events.sort(key=_accepts_last)
            for key, _ in events:
                kind, obj = key.data
                if kind is CONN:
                    if not self._on_readable(obj, me):
                        return  # another thread leads now
                elif kind is OUT:
                    if not self._on_writable(obj, me):
                        return
                elif kind is LINGER:
                    self._drain(obj)
                elif kind is ACCEPT:
                    self._accept(obj)
                else:
                    self._drain_wakeups()
                    if not self.alive:
                        self.next_tick = 0.0
                    if not self._take_back(me):
                        return

    def _tick(self, now: float) -> bool:
        """Connections past their deadline, lingering sockets past theirs; False once a stopping worker is done."""
        self.next_tick = now + TICK_S
        if self.alive and not self.is_parent_alive():
            self.alive = False
        for conn in [c for c in self.conns.values() if c.deadline <= now and not c.busy]:
            if conn.outbox is not None:
                if conn.outbox.overdue(now):
                    self.log.debug("Closing a connection that reads its answer under the floor")
                    self._close(conn, cut=True)
                else:
                    conn.deadline = conn.outbox.pace.deadline
            elif conn.incoming.started:
                if conn.incoming.overdue(now):
                    self._refuse(conn, (408, "Request Timeout", "the request did not arrive in time"))
                else:
                    conn.deadline = conn.incoming.deadline
            elif not _readable(conn.sock):  # a request that came in just now is read, not cut
                self._close(conn)
        for sock, _ in [entry for entry in self.lingering.values() if entry[1] <= now]:
            self._drain(sock, force=True)
        return self.alive or not self._stopped(now)

    def _stopped(self, now: float) -> bool:
        """Stopping: accept nothing, close idle connections; done once no request is under way or arriving (or
        graceful_timeout has passed)."""
        if self.stop_by is None:
            self.stop_by = now + self.cfg.graceful_timeout
            self._accepting(False)
        for conn in [c for c in self.conns.values() if not (c.busy or c.incoming.started or c.outbox)]:
            self._close(conn)
        if now < self.stop_by and (self.crew.busy() or self.returned or self.conns):
            return False
        self._shut()
        return True

    def _shut(self) -> None:
        for conn in list(self.conns.values()):
            self._close(conn)
        for sock, _ in list(self.lingering.values()):
            self._drain(sock, force=True)

    def is_parent_alive(self) -> bool:
        if self.ppid != os.getppid():
            self.log.info("Parent changed, shutting down: %s", self)
            return False
        return True

    def _beat(self, at: float) -> None:
        """gunicorn's heartbeat, dated `at` (time.monotonic()): the arbiter kills a worker beating too late."""
        gi.beat(self, at)

    def _wake(self) -> None:
        try:
            os.write(gi.wake_pipe(self)[1], b"\0")
        except OSError:  # full (the leader has wake-ups to read already) or closed (the worker is ending)
            pass

    def _drain_wakeups(self) -> None:
        try:
            while os.read(gi.wake_pipe(self)[0], 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _take_back(self, me) -> bool:
        """Connections whose request another thread served: kept, and what they sent meanwhile served."""
        returned = self.returned
        while returned:
            conn, keep = returned.popleft()
            conn.busy = False
            if conn.closed:
                continue
            if conn.outbox is not None:
                self._send_later(conn)
                continue
            if not keep:
                self._close(conn, after_answer=True)
                continue
            if not conn.registered:
                self._register(conn)
            if not self._process(conn, me):
                if returned:
                    self._wake()  # for the new leader
                return False
        return True

    # --- requests ---------------------------------------------------------------------------------------------
    def _on_readable(self, conn: _Conn, me) -> bool:
        """Read what the client sent and serve what is whole. False: another thread leads now."""
        if conn.busy or conn.closed:
            if conn.registered and not conn.closed:  # served elsewhere: it is registered again when handed back
                conn.registered = False
                self.poller.unregister(conn.sock)
            return True
        try:
            data = conn.sock.recv(RECV_BYTES, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            data = b""
        if not data:  # the client closed (a request it left unfinished goes with it) or reset
            self._close(conn)
            return True
        conn.incoming.add(data)
        return self._process(conn, me)

    def _send_later(self, conn: _Conn) -> None:  # the rest of the answer goes as the client reads it
        assert conn.outbox is not None  # its callers hand over only a connection with an answer held
        if conn.registered:
            self.poller.modify(conn.sock, selectors.EVENT_WRITE, (OUT, conn))
        else:
            self.poller.register(conn.sock, selectors.EVENT_WRITE, (OUT, conn))
            conn.registered = True
        conn.deadline = conn.outbox.pace.deadline

    def _on_writable(self, conn: _Conn, me) -> bool:
        """Send what the client takes of its answer; once all is sent, the connection reads again (or closes)."""
        if conn.closed or conn.outbox is None:
            return True
        try:
            done = conn.outbox.flush()
        except OSError:  # the client is gone
            self._close(conn)
            return True
        if not done:
            return True
        conn.outbox = None
        if not conn.keep:
            self._close(conn, after_answer=True)
            return True
        self.poller.modify(conn.sock, selectors.EVENT_READ, (CONN, conn))
        conn.deadline = time.monotonic() + self.keepalive
        return self._process(conn, me) if conn.incoming.buf else True

    def _process(self, conn: _Conn, me) -> bool:
        """Serve, in this thread, every request whole in the connection's buffer. False: another thread leads now
        (the connection went back to it)."""
        incoming = conn.incoming
        while True:
            outcome, detail = incoming.advance(time.monotonic())
            if outcome is WHOLE:
                keep, leads = self._serve(conn, detail, me)
                if not leads:
                    return False
                if conn.outbox is not None:
                    self._send_later(conn)
                    return True
                if not keep:
                    self._close(conn, after_answer=True)
                    return True
                if not incoming.buf:  # nothing pipelined: the connection is idle again
                    conn.deadline = time.monotonic() + self.keepalive
                    return True
            elif outcome is NEED:
                conn.deadline = incoming.deadline if incoming.started else time.monotonic() + self.keepalive
                return True
            elif outcome is CONTINUE:  # the head asked for it, and is one gunicorn accepts: ask for the body
                try:
                    conn.sock.send(CONTINUE_BYTES, socket.MSG_DONTWAIT)
                except OSError:
                    pass
            else:
                self._refuse(conn, detail)
                return True

    def _refuse(self, conn: _Conn, detail) -> None:
        """Answer a request refused before any app code (gunicorn's error page, `Connection: close`), then close."""
        if isinstance(detail, tuple):
            status, reason, mesg = detail
            log = self.log.info if status == 408 else self.log.warning
            log("Invalid request from ip=%s: %s %s", (conn.addr or ("",))[0], status, mesg)
            try:
                gi.error_page(conn.sock, status, reason, mesg)
            except Exception:
                self.log.debug("Failed to send error message.")
        else:
            self.handle_error(None, conn.sock, conn.addr, detail)
        self._close(conn, after_answer=True)

    def _serve(self, conn: _Conn, req, me) -> tuple[bool, bool]:
        """Answer a whole request: (keep the connection?, does this thread still lead?)."""
        conn.busy = True
        me.started = time.monotonic()  # what the monitor watches (httpworker/crew.py)
        keep = answered = False
        try:
            keep = self._handle_request(req, conn)
            answered = True
        except gi.NoMoreData as exc:
            self.log.debug("Ignored premature client disconnection. %s", exc)
        except StopIteration as exc:
            self.log.debug("Closing connection. %s", exc)
        except ssl.SSLError as exc:
            self.handle_error(req, conn.sock, conn.addr, exc)
        except OSError as exc:
            if _stalled(exc):  # read under the floor: reset, what the kernel holds for it dropped
                conn.cut = True
            elif exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.log.exception("Socket error processing request.")
        except Exception as exc:
            self.handle_error(req, conn.sock, conn.addr, exc)
        finally:
            conn.incoming.served()
            box = conn.outbox
            if box is not None and not (answered and box.held):  # all sent, or an answer cut short: none left
                box.discard()
                conn.outbox = None
            conn.keep = keep
            leads = self.crew.finish(me)
            if leads:
                conn.busy = False
        if not leads:
            self.returned.append((conn, keep))
            self._wake()
        return keep, leads

    def _handle_request(self, req, conn: _Conn) -> bool:
        environ, resp = {}, None
        try:
            self.cfg.pre_request(self, req)
            started = datetime.now() if self.cfg.accesslog else None
            resp, environ = gi.create(req, conn.sock, conn.addr, conn.server, self.cfg,
                                         response_class=_OneSendResponse)
            resp.worker = self
            limits = self.limits
            conn.outbox = Outbox(conn.sock, self.budget,
                                 Pace(time.monotonic(), limits.send_rate, limits.window, limits.grace))
            gi.write_through(resp, conn.outbox)
            environ["wsgi.multithread"] = True
            self.nr = next(self.counter)
            if self.nr >= self.max_requests:
                if self.alive:
                    self.log.info("Autorestarting worker after current request.")
                    self.alive = False
                resp.force_close()
            if not self.alive or not self.cfg.keepalive or len(self.conns) >= self.cfg.worker_connections:
                resp.force_close()  # stopping, no keep-alive, or full: this connection's slot goes to the next
            respiter = self.wsgi(environ, resp.start_response)
            try:
                if isinstance(respiter, environ["wsgi.file_wrapper"]):
                    resp.write_file(respiter)
                else:
                    for item in respiter:
                        resp.write(item)
                resp.close()
            finally:
                if started is not None:  # BTP writes its own access line (trips/core/observability.py)
                    self.log.access(resp, req, environ, datetime.now() - started)
                if hasattr(respiter, "close"):
                    respiter.close()
            return not resp.should_close()
        except OSError:
            gi.reraise(*sys.exc_info())
        except (Exception, SystemExit):
            if resp and resp.headers_sent:
                self.log.exception("Error handling request")
                raise StopIteration() from None
            raise
        finally:
            try:
                self.cfg.post_request(self, req, environ, resp)
            except Exception:
                self.log.exception("Exception in post_request hook")
