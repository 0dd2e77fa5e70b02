"""Whole requests before any app code runs: BTP's gunicorn worker (httpworker/worker.py) reads each connection
without blocking into that connection's buffer, and `Incoming` says when the buffer holds a whole request.

The head is whole at its first CRLF CRLF. gunicorn's own parser (RequestParser, over an in-memory source: `Feed`,
never the socket) then reads it, and it alone judges the head: a refusal is gunicorn's own 400/414/431/501, and the
body's framing is the one gunicorn chose (a Content-Length, chunked, or none). A Content-Length body is whole when
that many bytes are in; a chunked one when `ChunkScan`, a small state machine, has seen its last chunk and its
trailer section end, and then gunicorn's own chunked reader reads it, before the app does, over exactly those bytes:
if it fails, leaves bytes over or wants more, the answer is 400 and the connection closes. So a request served is
one gunicorn saw whole, ending where gunicorn says, and the bytes after it (a pipelined request) stay in the buffer
for the next one, in order; no second request is ever served from bytes two parsers read differently.

Bounds, each answered and the connection closed (gunicorn's error page, `Connection: close`):
- the head must be whole within HEAD_TIMEOUT_S of the request's first byte, and the body must keep arriving at
  MIN_RATE, measured over each RATE_WINDOW_S after RATE_GRACE_S (httpworker/outbox.py Pace), however large it says
  it is: else 408 (the worker's sweep, httpworker/worker.py);
- a head longer than gunicorn's own limits allow (limit_request_fields x limit_request_field_size, plus the request
  line): gunicorn's refusal, else 431; a bare LF in an unfinished head is handed to gunicorn at once (400);
- a Content-Length, or chunks adding up to, more than MAX_BODY: 413 at once, the body not read.
A body over BODY_IN_MEMORY goes to a temporary file (SpooledTemporaryFile) as it arrives, so slow or large uploads
on many connections do not add up in the worker's memory. A body the app leaves unread is already here: it is
dropped, never drained from the socket, and the connection serves its next request. Nothing here touches a socket.
"""
from __future__ import annotations

import io
import os
import tempfile
from collections import deque
from dataclasses import dataclass

from httpworker import gunicorn_internals as gi
from httpworker.gunicorn_internals import (DEFAULT_MAX_HEADERFIELD_SIZE, MAX_HEADERS, MAX_REQUEST_LINE, ChunkedReader,
                                           LengthReader, NoMoreData, Request, RequestParser)
from httpworker.outbox import Pace

HEAD_TIMEOUT_S = 10.0  # a request's head whole within this of its first byte
MIN_RATE = 32 * 1024  # bytes/s a body must keep arriving at (a weak mobile uplink: 256 kbit/s)
SEND_RATE = 16 * 1024  # bytes/s a client must keep reading its answer at
RATE_WINDOW_S = 10.0  # each rate is measured over this
RATE_GRACE_S = 5.0  # added to the first window (a connection's slow start, a client's pause before it reads)
OUTBOX_BYTES = 128 * 1024 * 1024  # what a worker's answers to slow readers may hold together (httpworker/outbox.py)
MAX_BODY = 32 * 1024 * 1024  # app.py MAX_CONTENT_LENGTH: a 30 MB GPX plus its multipart envelope
BODY_IN_MEMORY = 1024 * 1024  # a body over this is spooled to a temporary file as it arrives
FILE_PIECE = 256 * 1024  # how much of a spooled body gunicorn's reader gets at a time
ENV = {"head_timeout": ("HTTPWORKER_HEAD_TIMEOUT_S", float), "min_rate": ("HTTPWORKER_MIN_RATE", float),
       "max_body": ("HTTPWORKER_MAX_BODY", int), "send_rate": ("HTTPWORKER_SEND_RATE", float),
       "window": ("HTTPWORKER_RATE_WINDOW_S", float), "grace": ("HTTPWORKER_RATE_GRACE_S", float),
       "outbox": ("HTTPWORKER_OUTBOX_BYTES", int)}

NEED, WHOLE, CONTINUE, REFUSED = "need", "whole", "continue", "refused"  # what Incoming.advance found


@dataclass(frozen=True)
class Limits:
    head_timeout: float = HEAD_TIMEOUT_S
    min_rate: float = MIN_RATE
    max_body: int = MAX_BODY
    send_rate: float = SEND_RATE
    window: float = RATE_WINDOW_S
    grace: float = RATE_GRACE_S
    outbox: int = OUTBOX_BYTES
    in_memory: int = BODY_IN_MEMORY
    head_cap: int = 100 * (DEFAULT_MAX_HEADERFIELD_SIZE + 2) + 4 + 4094 + 4  # gunicorn's defaults
    line_cap: int = 4094  # limit_request_line (0: none)
    field_cap: int = DEFAULT_MAX_HEADERFIELD_SIZE  # a chunk-size line, as gunicorn's chunked reader bounds it
    trailer_cap: int = 100 * (DEFAULT_MAX_HEADERFIELD_SIZE + 2) + 4

    @classmethod
    def of(cls, cfg, environ=os.environ) -> Limits:
        """gunicorn's own head limits (as gunicorn.http.message computes them) and the body's bounds, each of which
        an environment variable may set (ENV; gunicorn's `raw_env` setting sets them for its workers)."""
        fields = cfg.limit_request_fields if 0 < cfg.limit_request_fields <= MAX_HEADERS else MAX_HEADERS
        field = cfg.limit_request_field_size if cfg.limit_request_field_size > 0 else DEFAULT_MAX_HEADERFIELD_SIZE
        line = min(cfg.limit_request_line, MAX_REQUEST_LINE) if cfg.limit_request_line else 0
        line = MAX_REQUEST_LINE if line < 0 else line
        headers = fields * (field + 2) + 4
        values = {key: kind(environ[name]) for key, (name, kind) in ENV.items() if environ.get(name)}
        return cls(head_cap=headers + (line or 1024 * 1024) + 4, line_cap=line, field_cap=field,
                   trailer_cap=headers, **values)


class Feed:
    """The source gunicorn's parser reads (as an IterUnreader's iterable): the pieces of the request being served,
    then a spooled body's file, then b"" (the end, for gunicorn) without ever stopping: the same source serves the
    connection's next request."""

    __slots__ = ("pieces", "file")

    def __init__(self):
        self.pieces: deque[bytes] = deque()
        self.file: tempfile.SpooledTemporaryFile[bytes] | None = None

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        if self.pieces:
            return self.pieces.popleft()
        if self.file is not None:
            data = self.file.read(FILE_PIECE)
            if data:
                return data
            self.file.close()
            self.file = None
        return b""

    def clear(self) -> None:
        self.pieces.clear()
        if self.file is not None:
            self.file.close()
            self.file = None


class ChunkScan:
    """Where a chunked body ends (RFC 9112 §7.1), fed its bytes as they come: size lines, data, CRLFs, the last
    chunk and the trailer section, ending where gunicorn's ChunkedReader ends. `bad` when the framing cannot be one
    gunicorn accepts (gunicorn's reader then says why); `size`: the data bytes announced so far."""

    __slots__ = ("state", "left", "line", "size", "done", "bad", "field_cap", "trailer_cap")

    def __init__(self, limits: Limits):
        self.state, self.left, self.line = "size", 0, bytearray()
        self.size, self.done, self.bad = 0, False, False
        self.field_cap, self.trailer_cap = limits.field_cap, limits.trailer_cap

    def scan(self, buf, pos: int) -> int:
        """Read `buf` from `pos`; returns where the body ends (done), where it went wrong (bad), or len(buf)."""
        end = len(buf)
        while pos < end and not (self.done or self.bad):
            state = self.state
            if state == "data":
                step = min(self.left, end - pos)
                pos += step
                self.left -= step
                if not self.left:
                    self.state = "crlf"
            elif state == "crlf":  # the CRLF after a chunk's data, perhaps split between two reads
                take = buf[pos:pos + 2 - len(self.line)]
                self.line += take
                pos += len(take)
                if len(self.line) == 2:
                    self.bad = self.line != b"\r\n"
                    self.state, self.line = "size", bytearray()
            elif state == "trailer":
                pos = self._trailer(buf, pos, end)
            else:  # a chunk-size line, up to its first LF
                stop = buf.find(b"\n", pos)
                if stop < 0:
                    self.line += buf[pos:end]
                    pos = end
                    self.bad = len(self.line) > self.field_cap
                else:
                    self.line += buf[pos:stop + 1]
                    pos = stop + 1
                    self._size_line()
        return pos

    def _size_line(self) -> None:
        line, self.line = bytes(self.line), bytearray()
        if not line.endswith(b"\r\n"):
            self.bad = True  # a bare LF
            return
        digits, semicolon, _ = line[:-2].partition(b";")
        if semicolon:
            digits = digits.rstrip(b" \t")
        if not digits or digits.strip(b"0123456789abcdefABCDEF"):
            self.bad = True
            return
        size = int(digits, 16)
        self.size += size
        self.state, self.left = ("data", size) if size else ("trailer", 0)

    def _trailer(self, buf, pos: int, end: int) -> int:
        """The trailer section after the last chunk: CRLF alone, or lines up to CRLF CRLF (gunicorn's
        parse_trailers); a bare LF in it or one longer than gunicorn allows is bad."""
        held = len(self.line)
        self.line += buf[pos:end]
        if self.line[:2] == b"\r\n":
            self.done = True
            return pos + 2 - held
        stop = self.line.find(b"\r\n\r\n")
        if stop >= 0:
            self.done = True
            return pos + stop + 4 - held
        if self.line.count(b"\n") != self.line.count(b"\r\n") or len(self.line) > self.trailer_cap:
            self.bad = True
        return end


class Incoming:
    """One connection's bytes on their way to whole requests: `add` what was received, `advance` to learn what the
    buffer holds now (NEED, CONTINUE, WHOLE with gunicorn's Request, REFUSED with an exception or a status), and
    `served` once the request is answered."""

    __slots__ = ("limits", "buf", "feed", "parser", "req", "need", "chunks", "spool", "scanned", "started",
                 "head_at", "deadline", "searched", "pace")

    def __init__(self, cfg, addr, limits: Limits):
        self.limits = limits
        self.buf: bytes | bytearray = b""
        self.feed = Feed()
        self.parser = RequestParser(cfg, self.feed, addr)
        self.req: Request | None = None  # gunicorn's Request once its head is read, until the request is whole
        self.need = 0  # body bytes still to come (a Content-Length)
        self.chunks: ChunkScan | None = None
        self.spool: tempfile.SpooledTemporaryFile[bytes] | None = None  # the body so far, once over BODY_IN_MEMORY
        self.scanned = 0  # how far into buf a chunked body is scanned
        self.started = 0.0  # when the request's first byte was seen (0: between requests)
        self.head_at = 0.0
        self.deadline = 0.0  # by when the request must be whole
        self.searched = 0  # where the search for the head's end resumes
        self.pace: Pace | None = None  # the body's, once its head is read

    def add(self, data: bytes) -> None:
        if self.pace is not None:
            self.pace.moved += len(data)
        buf = self.buf
        if not buf:
            self.buf = data
            return
        if type(buf) is bytes:
            buf = bytearray(buf)
        buf += data
        self.buf = buf

    def advance(self, now: float):
        """What the buffer holds now: (NEED, None), (CONTINUE, None), (WHOLE, gunicorn's Request), or (REFUSED, a
        gunicorn exception or (status, reason, message))."""
        if self.req is not None:
            return self._body(now)
        buf = self.buf
        if len(buf) <= 2 and b"\r\n".startswith(buf):
            return NEED, None  # nothing, or the one CRLF a client may send between requests (RFC 9112 §2.2)
        if not self.started:
            self.started, self.deadline = now, now + self.limits.head_timeout
        end = buf.find(b"\r\n\r\n", self.searched)
        if end >= 0:
            return self._parse(end + 4, now)
        self.searched = max(0, len(buf) - 3)
        if self._hopeless(buf):
            return self._parse(len(buf), now, whole=False)
        return NEED, None

    def overdue(self, now: float) -> bool:
        """At `deadline`, with a request under way: True when it must be cut (its head is not whole; its body came
        slower than MIN_RATE over the last window); else `deadline` is the next window's end."""
        pace = self.pace
        if self.req is None or pace is None:
            return True
        left = float("inf") if self.chunks is not None else self.need - (0 if self.spool is not None else len(self.buf))
        if not pace.check(now, left):
            return True
        self.deadline = pace.deadline
        return False

    def rate(self, now: float) -> float:
        """Bytes/s since the request began (the worker sheds the slowest first)."""
        return self.pace.rate(now) if self.pace is not None else 0.0

    def served(self) -> None:
        """The request is answered: what the app did not read of its body goes."""
        feed = self.feed
        if feed.pieces or feed.file is not None:
            feed.clear()
        if gi.held_ahead(self.parser):
            gi.take_held(self.parser)

    def discard(self) -> None:
        self.served()
        self.buf = b""
        if self.spool is not None:
            self.spool.close()
            self.spool = None

    # --- the head ---------------------------------------------------------------------------------------------
    def _hopeless(self, buf) -> bool:
        """An unfinished head gunicorn would refuse already: over its size, a bare LF, a request line too long."""
        limits = self.limits
        if len(buf) > limits.head_cap or buf.count(b"\n") != buf.count(b"\r\n"):
            return True
        line = limits.line_cap
        return bool(line) and len(buf) > line + 4 and buf.find(b"\r\n", 2, line + 4) < 0

    def _parse(self, end: int, now: float, whole: bool = True):
        buf = self.buf
        self.buf, self.searched = buf[end:], 0
        self.feed.pieces.append(bytes(buf[:end]))
        try:
            req = next(self.parser)
        except (StopIteration, NoMoreData):
            self.feed.clear()
            return REFUSED, (400, "Bad Request", "incomplete request head") if whole else \
                (431, "Request Header Fields Too Large", "request head too long")
        except Exception as exc:  # gunicorn's refusal: answered by the worker's handle_error, as gunicorn does
            self.feed.clear()
            return REFUSED, exc
        gi.let_go_of_message(self.parser)  # its body is delivered here: the parser never drains it from the source
        if not whole or gi.held_ahead(self.parser):  # gunicorn's head ends before the buffer's: bytes left
            return REFUSED, (400, "Bad Request", "request head ends elsewhere")
        reader = gi.body_reader(req)
        self.head_at = now
        limits = self.limits
        self.pace = Pace(now, limits.min_rate, limits.window, limits.grace)
        self.pace.moved = len(self.buf)  # body bytes that came with the head
        self.deadline = self.pace.deadline
        if type(reader) is ChunkedReader:
            self.req, self.chunks, self.scanned = req, ChunkScan(self.limits), 0
        elif type(reader) is LengthReader:
            if reader.length > self.limits.max_body:
                return REFUSED, (413, "Content Too Large", f"a body of {reader.length} bytes is over the limit")
            self.req, self.need = req, reader.length
            if reader.length > self.limits.in_memory:
                self.spool = tempfile.SpooledTemporaryFile(max_size=self.limits.in_memory)
        else:
            return REFUSED, (400, "Bad Request", "no body framing")
        outcome = self._body(now)
        if outcome[0] is NEED and gi.take_continue(req):  # the worker sends it now, gunicorn's wsgi.create not
            return CONTINUE, None
        return outcome

    # --- the body ---------------------------------------------------------------------------------------------
    def _body(self, now: float):
        if self.chunks is not None:
            return self._chunked(self.chunks, now)
        buf, need = self.buf, self.need
        if self.spool is not None:
            if buf:
                take = buf[:need] if len(buf) > need else buf
                self.spool.write(take)
                self.need = need = need - len(take)
                self.buf = buf[len(take):]
            if need:
                return NEED, None
            self.spool.seek(0)
            self.feed.file, self.spool = self.spool, None
        elif need:
            if len(buf) < need:
                return NEED, None
            self.feed.pieces.append(bytes(buf[:need]))
            self.buf = buf[need:]
        return self._whole()

    def _chunked(self, scan: ChunkScan, now: float):
        limits = self.limits
        self.scanned = scan.scan(self.buf, self.scanned)
        if scan.size > limits.max_body:
            return REFUSED, (413, "Content Too Large", f"chunks of {scan.size} bytes are over the limit")
        if self.spool is None and self.scanned > limits.in_memory:
            self.spool = tempfile.SpooledTemporaryFile(max_size=limits.in_memory)
        if self.spool is not None:  # what is scanned goes to the file
            self.spool.write(self.buf[:self.scanned])
            self.buf, self.scanned = self.buf[self.scanned:], 0
        if not (scan.done or scan.bad):
            return NEED, None
        taken = len(self.buf) if scan.bad else self.scanned  # bad: gunicorn gets all there is, to say why
        if self.spool is not None:
            self.spool.write(self.buf[:taken])
            self.spool.seek(0)
            self.feed.file, self.spool = self.spool, None
        else:
            self.feed.pieces.append(bytes(self.buf[:taken]))
        self.buf = self.buf[taken:]
        return self._dechunked(scan)

    def _dechunked(self, scan: ChunkScan):
        """gunicorn's chunked reader reads the body now, over exactly the bytes the scan took: the app then reads
        what it decoded (its trailers are on the request), and a disagreement is a 400 before any app code."""
        req, out = self.req, tempfile.SpooledTemporaryFile(max_size=self.limits.in_memory)
        assert req is not None  # read with its head, as `chunks` was; both are cleared together (_whole)
        try:
            while data := req.body.read(FILE_PIECE):
                out.write(data)
        except Exception as exc:  # gunicorn's own refusal (InvalidChunkSize, ChunkMissingTerminator, ...)
            out.close()
            self.feed.clear()
            return REFUSED, (400, "Bad Request", "chunked body ends elsewhere") if isinstance(exc, NoMoreData) else exc
        left = gi.take_held(self.parser) or next(self.feed)
        if scan.bad or left:
            out.close()
            self.feed.clear()
            return REFUSED, (400, "Bad Request", "chunked body ends elsewhere")
        size = out.tell()
        out.seek(0)
        self.feed.file = out
        gi.whole_body(req, self.parser, size)
        return self._whole()

    def _whole(self):
        req = self.req
        self.req, self.chunks, self.need, self.started, self.pace = None, None, 0, 0.0, None
        return WHOLE, req


def body_bytes(body) -> bytes:
    """All of a gunicorn Body (tests)."""
    out = io.BytesIO()
    while data := body.read(FILE_PIECE):
        out.write(data)
    return out.getvalue()
