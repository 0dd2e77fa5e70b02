"""What BTP's gunicorn worker (httpworker/worker.py) puts on the wire, and how: a connection's socket stays
blocking with the kernel's bound on a stalled write, a response whose body is handed over whole leaves with its head
in one send (_OneSendResponse), and gunicorn's settings are read once per worker (_Settled). Stdlib and gunicorn only.
"""
from __future__ import annotations

import socket
import struct

from httpworker import gunicorn_internals as gi

READ_TIMEOUT_S = 10.0  # the longest a response's write (or a blocking read) may stall before the socket gives up
ONE_SEND_MAX_BYTES = 64 * 1024  # the largest body sent in the same send as its headers (_OneSendResponse)


_STALL = struct.pack("ll", int(READ_TIMEOUT_S), int(READ_TIMEOUT_S % 1 * 1_000_000))  # a struct timeval


def _stall_bound(sock: socket.socket) -> None:
    """A connection's socket stays blocking, its writes (and any blocking read) bounded by the kernel
    (SO_SNDTIMEO/SO_RCVTIMEO: READ_TIMEOUT_S, raised as BlockingIOError), set once when it is accepted. The worker
    reads it with recv(MSG_DONTWAIT), which never blocks, and the response is written with blocking sends. A Python
    timeout (settimeout) would do the same with a poll(2) before every send, and switching the socket between
    blocking and non-blocking mode costs an ioctl(2) each time: system calls a request that do nothing."""
    sock.setblocking(True)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _STALL)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _STALL)


def _stalled(exc: OSError) -> bool:
    """The client read nothing (or sent nothing) for READ_TIMEOUT_S (the kernel's bound, or a Python timeout)."""
    return isinstance(exc, (TimeoutError, BlockingIOError))  # BlockingIOError: EAGAIN / EWOULDBLOCK


class _OneSendResponse(gi.Response):
    """gunicorn's HTTP/1.1 response, except that the head (status line and headers) and the body leave in ONE sendall
    when the first bytes the app writes are its whole declared body: gunicorn sends the head in one sendall and the
    body in a second (Response.write: send_headers, then util.write), two syscalls and, with TCP_NODELAY, usually
    two TCP segments for a small answer. A Flask/werkzeug response is one bytes item with its Content-Length.

    It only joins bytes that are already there: nothing is held back to wait for a later part. Everything else is
    gunicorn's own code, so behaves as gunicorn does: a first part shorter than the Content-Length (a body in parts,
    the head sent alone first), no Content-Length (chunked), a body that must be empty (HEAD, 1xx/204/304: headers
    only), a file (write_file/sendfile), an app that writes nothing (close sends the head), a body above
    ONE_SEND_MAX_BYTES (joining would copy it, and it takes several segments anyway), any later write (past the
    Content-Length: dropped, as gunicorn's write does) and the Connection header (default_headers), except that
    an answer whose head leaves once its worker is stopping says `Connection: close`."""

    worker = None  # the worker serving it: an answer that has not begun when the worker stops says close

    def default_headers(self):
        if self.worker is not None and not self.worker.alive:
            self.must_close = True  # the worker closes its connections once its requests are answered: say so
        return super().default_headers()

    def write(self, arg):
        length = self.response_length
        if (self.headers_sent or gi.omits_body(self) or length is None or length > ONE_SEND_MAX_BYTES
                or not isinstance(arg, bytes) or len(arg) < length):
            return super().write(arg)
        body = arg if len(arg) == length else arg[:length]  # never more than declared, as gunicorn's write
        self.sock.sendall(self._head() + body)
        gi.mark_sent(self, length)  # after the send, as gunicorn's send_headers
        return None

    def _head(self) -> bytes:
        """The bytes gunicorn's send_headers sends (gunicorn/http/wsgi.py; tests/httpworker/test_httpworker.py compares the
        wire bytes with gunicorn's own Response's)."""
        if self.worker is not None and not self.worker.alive:  # default_headers above, without a call
            self.must_close = True
        return gi.head_bytes(self)


class _Settled:
    """A worker's gunicorn Config with each value read once: gunicorn's parser, environ and response read a dozen
    settings per request through Config.__getattr__ (its settings table, then the setting's getter), which cost
    20-35 us a request on the 2-core bench machine. The worker takes it when its loop starts (run): nothing sets a
    setting after that, a worker's settings never change while it lives (a reload starts new workers). Its threads
    share it: two first reads of a setting at once store the same value."""

    def __init__(self, cfg):
        object.__setattr__(self, "_cfg", cfg)

    def __getattr__(self, name):
        value = getattr(self._cfg, name)  # raises AttributeError as the Config does
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name, value):
        raise AttributeError(f"the worker's settings are read-only once it serves ({name})")
