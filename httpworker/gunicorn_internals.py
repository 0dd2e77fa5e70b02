"""Every private or undocumented part of gunicorn BTP's worker relies on, in one place.

gunicorn documents its settings and the worker classes' entry points, not the parser's buffers, the request's
flags, the response's state or how the arbiter sees a heartbeat. The other modules of httpworker reach them only
through this one, and tests/httpworker/test_gunicorn_internals.py checks each against the installed gunicorn, so
a release that changes one fails there, by name, before the worker misbehaves. Stdlib and gunicorn only.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import NoReturn

from gunicorn import util
from gunicorn.http import wsgi
from gunicorn.http.body import Body, ChunkedReader, LengthReader
from gunicorn.http.errors import NoMoreData
from gunicorn.http.message import DEFAULT_MAX_HEADERFIELD_SIZE, MAX_HEADERS, MAX_REQUEST_LINE, Request
from gunicorn.http.parser import RequestParser

__all__ = ["DEFAULT_MAX_HEADERFIELD_SIZE", "MAX_HEADERS", "MAX_REQUEST_LINE", "Body", "ChunkedReader", "LengthReader",
           "NoMoreData", "Request", "RequestParser", "Response", "beat", "body_reader", "close_on_exec", "create",
           "error_page", "head_bytes", "held_ahead", "let_go_of_message", "mark_sent", "omits_body", "reraise",
           "take_continue", "take_held", "wake_pipe", "whole_body", "write_through"]

Response = wsgi.Response  # subclassed by wire._OneSendResponse
create = wsgi.create  # (req, sock, client, server, cfg, response_class=...) -> (response, environ)
close_on_exec = util.close_on_exec
reraise: Callable[..., NoReturn] = util.reraise  # (type, value, traceback): raises it again, never returns


# --- the parser (gunicorn.http.parser / unreader) ------------------------------------------------------------
def held_ahead(parser) -> int:
    """How many bytes gunicorn's parser read past what it has parsed (its unreader's buffer)."""
    return parser.unreader.buf.tell()


def take_held(parser) -> bytes:
    """The bytes gunicorn's parser holds read ahead, taken without reading its source."""
    return parser.unreader.take_buffered()


def let_go_of_message(parser) -> None:
    """The parser forgets the request it returned: on its next request it does not drain that one's body from the
    source (the worker has delivered the body itself)."""
    parser.mesg = None


def body_reader(req):
    """The reader gunicorn chose for the request's body: a LengthReader (.length), a ChunkedReader or an EOFReader."""
    return req.body.reader


def whole_body(req, parser, size: int) -> None:
    """The request's body is now `size` bytes the parser's source delivers as they are (a chunked body decoded)."""
    req.body = Body(LengthReader(parser.unreader, size))


def take_continue(req) -> bool:
    """Whether the head asked for `100 Continue`; the flag is cleared so gunicorn's wsgi.create does not send it
    a second time."""
    if not req._expected_100_continue:
        return False
    req._expected_100_continue = False
    return True


# --- the response (gunicorn.http.wsgi.Response) --------------------------------------------------------------
def omits_body(resp) -> bool:
    """The response must carry no body (HEAD, 1xx, 204, 304): gunicorn drops what the app writes."""
    return resp._omits_body


def mark_sent(resp, length: int) -> None:
    """The head and `length` body bytes left in one send: the response's state as after gunicorn's own writes."""
    resp.headers_sent = True
    resp.sent = length


def head_bytes(resp) -> bytes:
    """The bytes gunicorn's send_headers would send (its default headers, then the app's)."""
    tosend = Response.default_headers(resp)
    tosend.extend(["%s: %s\r\n" % (k, v) for k, v in resp.headers])
    return util.to_bytestring("%s\r\n" % "".join(tosend), "latin-1")


def write_through(resp, sink) -> None:
    """Everything the response writes (head, body, chunks, sendfile) goes to `sink` (sendall, sendfile) instead of
    the socket it was made with."""
    resp.sock = sink


def error_page(sock, status: int, reason: str, mesg: str) -> None:
    """gunicorn's own error answer (`Connection: close`), as its workers send it."""
    util.write_error(sock, status, reason, mesg)


# --- the worker (gunicorn.workers.base.Worker) ----------------------------------------------------------------
def beat(worker, at: float) -> None:
    """gunicorn's heartbeat (WorkerTmp.notify), dated `at` (a time.monotonic() value): the arbiter compares the
    worker's tmp file's time with its own monotonic clock and kills a worker whose beat is older than `timeout`."""
    os.utime(worker.tmp.fileno(), (at, at))


def wake_pipe(worker) -> tuple[int, int]:
    """The worker's self-pipe (read end, write end): gunicorn's signal handlers write to it."""
    return worker.PIPE[0], worker.PIPE[1]

