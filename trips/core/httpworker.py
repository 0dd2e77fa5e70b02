"""BTP's gunicorn worker (gunicorn.conf.py worker_class): gunicorn's sync worker with keep-alive, in one thread.

The app is synchronous WSGI, served one request at a time per worker process. gunicorn's `sync` worker closes the
connection after every request (an agent's run of tool calls, or nginx's upstream keep-alive, pays a TCP connect,
accept and close per call); its `gthread` worker keeps connections open but hands every request from the thread
that polls the sockets to a pool thread and back (two cross-thread handoffs, a wake-up pipe and two poller changes
per request): bench/bench_mcp.py measured that machinery at about 40 % of a served get_trip's CPU.

This worker polls its listening sockets and the connections it keeps with one selector, and serves a request in
the same thread when its connection turns readable, then goes back to the selector, so connections take turns
request by request (none holds the worker between two of its requests). What stays as gunicorn does it: the HTTP
parser and the WSGI environ and response (gunicorn.http), `keepalive` seconds for an idle connection,
`worker_connections` connections at most (beyond that a response says `Connection: close`, and no connection is
accepted while the worker is full), `max_requests`, the pre/post request hooks, the heartbeat the arbiter's
`timeout` watches, graceful stop (the request under way is answered, idle connections closed, none accepted).
One thing differs in the response: when the app hands over its whole body at once (a Flask response's one bytes item,
with its Content-Length), the status line, headers and body leave in one send, not two (_OneSendResponse).

A client that stops sending in the middle of a request holds the worker until READ_TIMEOUT_S, then its connection
is closed (gthread would hold its one thread the same way; sync would hold the worker until the arbiter's timeout
kills it). In production nginx reads each request whole before it passes it on (deploy/nginx.conf), so no client
stalls a worker. HTTP/2 and TLS are not served here: nginx terminates both.
"""
from __future__ import annotations

import errno
import io
import os
import select
import selectors
import socket
import ssl
import struct
import sys
import time
from datetime import datetime

from gunicorn import http, util
from gunicorn.http import wsgi
from gunicorn.http.body import LengthReader
from gunicorn.workers import base

READ_TIMEOUT_S = 10.0  # the longest a started request (or a response's write) may stall
NOTIFY_EVERY_S = 1.0  # the heartbeat: the arbiter kills a worker silent for `timeout` (120 s)
LINGER_S = 2.0  # how long a connection told `Connection: close` may take to close its side (RFC 9112 §9.6)
ONE_SEND_MAX_BYTES = 64 * 1024  # the largest body sent in the same send as its headers (_OneSendResponse)
_ACCEPT, _CONN, _WAKE, _LINGER = "accept", "conn", "wake", "linger"


_STALL = struct.pack("ll", int(READ_TIMEOUT_S), int(READ_TIMEOUT_S % 1 * 1_000_000))  # a struct timeval


def _stall_bound(sock: socket.socket) -> None:
    """A connection's socket stays blocking, its reads and writes bounded by the kernel (SO_RCVTIMEO/SO_SNDTIMEO:
    READ_TIMEOUT_S, raised as BlockingIOError), set once when it is accepted. A Python timeout (settimeout) would do
    the same with a poll(2) before every recv and send, and switching between it and non-blocking mode for the
    selector costs an ioctl(2) each time: four system calls a request that do nothing (the selector only says when
    a connection has something to read)."""
    sock.setblocking(True)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _STALL)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _STALL)


def _stalled(exc: OSError) -> bool:
    """The client sent nothing, or read nothing, for READ_TIMEOUT_S (the kernel's bound, or a Python timeout)."""
    return isinstance(exc, (TimeoutError, BlockingIOError))  # BlockingIOError: EAGAIN / EWOULDBLOCK


def _body_read(req) -> bool:
    """True when the request's body was read to its end already (an empty body, or a Content-Length read whole):
    then nothing is left to drain, and the parser's drain (finish_body, which sets and restores the socket's
    timeout: two ioctl(2)) is not needed. Anything else (chunked, a body left unread, another gunicorn) is drained."""
    body = getattr(req, "body", None)
    reader = getattr(body, "reader", None)
    buf = getattr(body, "buf", None)
    return (isinstance(reader, LengthReader) and reader.length == 0 and isinstance(buf, io.BytesIO)
            and not buf.getvalue())


def _readable(sock: socket.socket) -> bool:
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return False


class _OneSendResponse(wsgi.Response):
    """gunicorn's HTTP/1.1 response, except that the head (status line and headers) and the body leave in ONE sendall
    when the first bytes the app writes are its whole declared body: gunicorn sends the head in one sendall and the
    body in a second (Response.write: send_headers, then util.write), two syscalls and, with TCP_NODELAY, usually
    two TCP segments for a small answer. A Flask/werkzeug response is one bytes item with its Content-Length.

    It only joins bytes that are already there: nothing is held back to wait for a later part. Everything else is
    gunicorn's own code, so behaves as gunicorn does: a first part shorter than the Content-Length (a body in parts,
    the head sent alone first), no Content-Length (chunked), a body that must be empty (HEAD, 1xx/204/304: headers
    only), a file (write_file/sendfile), an app that writes nothing (close sends the head), a body above
    ONE_SEND_MAX_BYTES (joining would copy it, and it takes several segments anyway), any later write (past the
    Content-Length: dropped, as gunicorn's write does) and the Connection header (default_headers)."""

    def write(self, arg):
        length = self.response_length
        if (self.headers_sent or self._omits_body or length is None or length > ONE_SEND_MAX_BYTES
                or not isinstance(arg, bytes) or len(arg) < length):
            return super().write(arg)
        body = arg if len(arg) == length else arg[:length]  # never more than declared, as gunicorn's write
        self.sock.sendall(self._head() + body)
        self.headers_sent = True  # after the send, as gunicorn's send_headers
        self.sent = length
        return None

    def _head(self) -> bytes:
        """The bytes gunicorn's send_headers sends (gunicorn/http/wsgi.py; tests/test_httpworker.py compares the
        wire bytes with gunicorn's own Response's)."""
        tosend = self.default_headers()
        tosend.extend(["%s: %s\r\n" % (k, v) for k, v in self.headers])
        return util.to_bytestring("%s\r\n" % "".join(tosend), "latin-1")


class _Settled:
    """A worker's gunicorn Config with each value read once: gunicorn's parser, environ and response read a dozen
    settings per request through Config.__getattr__ (its settings table, then the setting's getter), which cost
    20-35 us a request on the 2-core bench machine. The worker takes it when its loop starts (run): nothing sets a
    setting after that, a worker's settings never change while it lives (a reload starts new workers)."""

    def __init__(self, cfg):
        object.__setattr__(self, "_cfg", cfg)

    def __getattr__(self, name):
        value = getattr(self._cfg, name)  # raises AttributeError as the Config does
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"the worker's settings are read-only once it serves ({name})")


class _Conn:
    __slots__ = ("sock", "addr", "server", "parser", "deadline")

    def __init__(self, sock, addr, server, cfg):
        self.sock, self.addr, self.server = sock, addr, server
        self.parser = http.get_parser(cfg, sock, addr)
        self.deadline = 0.0


class KeepAliveWorker(base.Worker):
    """One thread, one selector: accept, keep idle connections, serve whichever is readable."""

    def init_process(self):
        self.poller = selectors.DefaultSelector()
        self.conns: dict[int, _Conn] = {}
        self.lingering: dict[int, tuple[socket.socket, float]] = {}  # fd -> (socket, until when)
        self.accepting = False
        self.last_notify = 0.0
        super().init_process()

    def run(self):
        self.cfg = _Settled(self.cfg)
        if self.cfg.is_ssl or "h2" in self.cfg.http_protocols:
            self.log.warning("BTP's worker serves plain HTTP/1.1: TLS and HTTP/2 end at nginx")
        for listener in self.sockets:
            listener.setblocking(False)
        self.poller.register(self.PIPE[0], selectors.EVENT_READ, (_WAKE, None))
        self._accepting(True)
        try:
            while self.alive:
                self._heartbeat()
                events = self.poller.select(self._wait())
                # Connections first, then at most one new connection per listener: every worker's selector sees
                # the same listening socket, and a worker busy serving accepts one client per round while an
                # idle one takes the next at once, so a burst of clients spreads over the workers instead of
                # landing on whichever woke first.
                events.sort(key=lambda event: event[0].data[0] is _ACCEPT)
                for key, _ in events:
                    kind, obj = key.data
                    if kind is _CONN:
                        self._serve(obj)
                    elif kind is _LINGER:
                        self._drain(obj)
                    elif kind is _ACCEPT:
                        self._accept(obj)
                    else:
                        self._drain_wakeups()
                    if not self.alive:
                        break
                self._close_idle(time.monotonic())
                if not self.is_parent_alive():
                    break
        finally:
            for conn in list(self.conns.values()):
                self._close(conn)
            for sock, _ in list(self.lingering.values()):
                self._drain(sock, force=True)
            self.poller.close()

    # --- the loop's parts -------------------------------------------------------------------------------------
    def is_parent_alive(self) -> bool:
        if self.ppid != os.getppid():
            self.log.info("Parent changed, shutting down: %s", self)
            return False
        return True

    def _heartbeat(self) -> None:
        now = time.monotonic()
        if now - self.last_notify >= NOTIFY_EVERY_S:
            self.notify()
            self.last_notify = now

    def _wait(self) -> float:
        timeout = NOTIFY_EVERY_S
        deadlines = [conn.deadline for conn in self.conns.values()] + [until for _, until in self.lingering.values()]
        if deadlines:
            timeout = min(timeout, max(0.0, min(deadlines) - time.monotonic()))
        return timeout

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self.PIPE[0], 4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _accepting(self, on: bool) -> None:
        if on == self.accepting:
            return
        for listener in self.sockets:
            if on:
                self.poller.register(listener, selectors.EVENT_READ, (_ACCEPT, listener))
            else:
                self.poller.unregister(listener)
        self.accepting = on

    def _accept(self, listener) -> None:
        """Take one waiting client, if any (see run: one per round)."""
        try:
            client, addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            return  # another worker took it
        except OSError as exc:
            if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE, errno.ENOBUFS,
                             errno.ENOMEM):
                return
            raise
        util.close_on_exec(client)
        _stall_bound(client)
        if client.family != socket.AF_UNIX:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._keep(_Conn(client, addr, listener.getsockname(), self.cfg))
        if len(self.conns) >= self.cfg.worker_connections:
            self._accepting(False)  # full: the backlog waits until a connection closes

    def _keep(self, conn: _Conn) -> None:
        conn.deadline = time.monotonic() + max(self.cfg.keepalive, 1)
        self.conns[conn.sock.fileno()] = conn
        self.poller.register(conn.sock, selectors.EVENT_READ, (_CONN, conn))

    def _close(self, conn: _Conn, after_answer: bool = False) -> None:
        """Forget the connection and close it: at once when it is idle (nothing of the client's is unread); after
        an answer, by sending our FIN first and reading whatever the client still sends until it closes too, for at
        most LINGER_S, without holding the worker (`_drain`): closing at once could reset the connection and cut
        the answer short."""
        fd = conn.sock.fileno()
        if self.conns.pop(fd, None) is not None:
            try:
                self.poller.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        if fd >= 0:
            if after_answer:
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
        self.poller.register(sock, selectors.EVENT_READ, (_LINGER, sock))

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

    def _close_idle(self, now: float) -> None:
        for conn in [c for c in self.conns.values() if c.deadline <= now]:
            if not _readable(conn.sock):  # a request that came in just now is served, not cut
                self._close(conn)
        for sock, until in [entry for entry in self.lingering.values() if entry[1] <= now]:
            self._drain(sock, force=True)

    # --- one request ------------------------------------------------------------------------------------------
    def _serve(self, conn: _Conn) -> None:
        # The connection stays registered with the selector while it is served (one thread: nothing selects
        # meanwhile), and its socket stays as accepted (_stall_bound): no system call but the request's own.
        keep = False
        try:
            keep = self._one_request(conn)
            # A client may have sent its next request already (pipelining): it sits in the parser's buffer,
            # which the selector cannot see, so it is served now.
            while keep and self.alive and conn.parser.unreader.buf.getvalue():
                keep = self._one_request(conn)
        finally:
            if keep and self.alive:
                conn.deadline = time.monotonic() + max(self.cfg.keepalive, 1)
            else:
                self._close(conn, after_answer=True)

    def _one_request(self, conn: _Conn) -> bool:
        """Serve the connection's next request. True when the connection may serve another."""
        req = None
        try:
            req = next(conn.parser)
            if not req:
                return False
            keep = self._handle_request(req, conn)
            return keep and (_body_read(req)
                             or bool(conn.parser.finish_body(deadline=time.monotonic() + READ_TIMEOUT_S)))
        except http.errors.NoMoreData as exc:
            self.log.debug("Ignored premature client disconnection. %s", exc)
        except StopIteration as exc:
            self.log.debug("Closing connection. %s", exc)
        except ssl.SSLError as exc:
            self.handle_error(req, conn.sock, conn.addr, exc)
        except OSError as exc:
            if _stalled(exc):
                self.log.debug("Closing a connection that stalled for %s s", READ_TIMEOUT_S)
            elif exc.errno not in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
                self.log.exception("Socket error processing request.")
        except Exception as exc:
            self.handle_error(req, conn.sock, conn.addr, exc)
        return False

    def _handle_request(self, req, conn: _Conn) -> bool:
        environ, resp = {}, None
        try:
            self.cfg.pre_request(self, req)
            started = datetime.now() if self.cfg.accesslog else None
            resp, environ = wsgi.create(req, conn.sock, conn.addr, conn.server, self.cfg,
                                         response_class=_OneSendResponse)
            environ["wsgi.multithread"] = False
            self.nr += 1
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
            util.reraise(*sys.exc_info())
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
