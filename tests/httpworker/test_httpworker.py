"""BTP's gunicorn worker (httpworker/worker.py), served for real: keep-alive on one connection, pipelined
requests, connections taking turns on one worker, an idle connection closed after `keepalive`, a stalled request
cut off with 408, the connection cap, max_requests, and a prompt graceful stop with idle connections open. And the
response (_OneSendResponse): a body handed over whole leaves with its head in one send, everything else on the wire
exactly as gunicorn's own Response puts it (in-process against a socketpair, and served for real by a small WSGI
app, demo_app, which tests/httpworker/test_httpworker_*.py serve too). Slow clients, slow upstreams, threads, smuggling and the
framing: tests/httpworker/test_httpworker_load.py, tests/httpworker/test_httpworker_wire.py, tests/httpworker/test_httpworker_frame.py."""
import hashlib
import io
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from urllib.parse import parse_qs

import pytest
from gunicorn import glogging
from gunicorn import util as gunicorn_util
from gunicorn.config import Config
from gunicorn.http import wsgi as gunicorn_wsgi

from tests.live import BIN, ROOT, free_port, gunicorn
from tests.live import stop
from httpworker import wire as httpwire
from httpworker import worker as httpworker
from httpworker.crew import Crew, Member
from httpworker.frame import WHOLE, Incoming, Limits
from httpworker.conns import _Conn
from httpworker.wire import READ_TIMEOUT_S
from httpworker.worker import KeepAliveWorker

# gunicorn served for real, the worker alike on every database engine: run once per CI (pyproject.toml "slow")
pytestmark = pytest.mark.slow

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
HEAD_TIMEOUT_S = 2  # the one_worker server's (HTTPWORKER_HEAD_TIMEOUT_S)


@pytest.fixture(scope="module")
def one_worker(app_config, tmp_path_factory):
    """One worker (so connections must take turns), idle connections kept 2 s, at most 3 of them, a request's head
    due within HEAD_TIMEOUT_S."""
    log = tmp_path_factory.mktemp("httpworker") / "gunicorn.log"
    with gunicorn(app_config, log, workers=1, args=("--keep-alive", "2", "--worker-connections", "3",
                                                    "-e", f"HTTPWORKER_HEAD_TIMEOUT_S={HEAD_TIMEOUT_S}")) as live:
        yield live


def connect(live) -> socket.socket:
    host, port = live.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def read_answer(sock) -> tuple[int, dict, bytes]:
    """One HTTP/1.1 answer with a Content-Length: (status, headers lower-cased, body)."""
    status, headers, rest = read_head(sock)
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed in the middle of a body"
        rest += chunk
    assert not rest[length:], "more than one answer"
    return status, headers, rest[:length]


def closed_by_server(sock, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_one_connection_serves_request_after_request(one_worker):
    sock = connect(one_worker)
    for _ in range(5):
        sock.sendall(REQUEST)
        status, headers, body = read_answer(sock)
        assert status == 200 and headers.get("connection", "keep-alive").lower() != "close", headers
    sock.close()


def test_bodies_read_unread_and_chunked_leave_the_connection_ready_for_the_next_request(one_worker):
    # /healthz reads no body: it is dropped (it was read whole before the app ran); /mcp reads its body whole; a
    # chunked body is decoded by gunicorn before the app. Each answer must be the right request's.
    sock = connect(one_worker)
    unread = b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 11\r\n\r\nhello world"
    read_whole = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 2\r\n\r\n{}")
    chunked = b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    for request, status in ((unread, 405), (read_whole, 401), (chunked, 405), (REQUEST, 200), (read_whole, 401)):
        sock.sendall(request)
        got, headers, _ = read_answer(sock)
        assert got == status and headers.get("connection", "keep-alive").lower() != "close", (request[:20], got)
    sock.close()


def test_a_large_body_refused_unread_leaves_the_connection_ready_for_the_next_request(one_worker):
    """/mcp and the REST API refuse a request without a token (401) before reading its body. Over 64 KB (gunicorn's
    drain cap) the connection used to close after an answer that said keep-alive: the next request on it was lost."""
    sock = connect(one_worker)
    pad = b"x" * 200_000
    mcp = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"' + pad + b'"}}'
    rest = b'{"title":"' + pad + b'"}'
    for path, body in ((b"/mcp", mcp), (b"/api/trips", rest), (b"/mcp", mcp)):
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (path, len(body), body))
        status, headers, _ = read_answer(sock)
        assert status == 401 and headers.get("connection", "keep-alive").lower() != "close", (path, headers)
        sock.sendall(REQUEST)
        assert read_answer(sock)[0] == 200
    sock.close()


def test_a_connection_keeps_the_kernels_stall_bound_and_blocking_mode():
    a, b = socket.socketpair()
    try:
        httpwire._stall_bound(a)
        assert a.gettimeout() is None  # blocking: no poll(2) before each recv and send
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            assert struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, option, 16)) == (int(READ_TIMEOUT_S), 0)
        a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 200_000))  # 0.2 s, for the test
        started = time.monotonic()
        with pytest.raises(OSError) as caught:
            a.recv(1)  # nothing comes: the kernel's bound ends the wait, as a stall is told apart
        assert httpwire._stalled(caught.value) and 0.15 <= time.monotonic() - started <= 3
    finally:
        a.close()
        b.close()


def test_pipelined_requests_are_all_answered(one_worker):
    sock = connect(one_worker)
    sock.sendall(REQUEST * 3)
    answers, pending = [], b""
    sock.settimeout(10)
    while len(answers) < 3:
        pending += sock.recv(65536)
        while b"\r\n\r\n" in pending:
            head, _, rest = pending.partition(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
            if len(rest) < length:
                break
            answers.append(head.split(b" ")[1])
            pending = rest[length:]
    assert answers == [b"200"] * 3
    sock.close()


def test_connections_take_turns_on_one_worker(one_worker):
    """Two open connections on one worker: each is answered while the other stays open and idle."""
    first, second = connect(one_worker), connect(one_worker)
    started = time.monotonic()
    for sock in (first, second, first, second):
        sock.sendall(REQUEST)
        assert read_answer(sock)[0] == 200
    assert time.monotonic() - started < 1.5, "a connection waited for the other's keep-alive to end"
    first.close()
    second.close()


def test_an_idle_connection_is_closed_after_keepalive(one_worker):
    sock = connect(one_worker)
    sock.sendall(REQUEST)
    assert read_answer(sock)[0] == 200
    assert not closed_by_server(sock, 1.0)  # still open within keepalive (2 s)
    assert closed_by_server(sock, 3.0)
    sock.close()
    other = connect(one_worker)  # and the worker goes on serving
    other.sendall(REQUEST)
    assert read_answer(other)[0] == 200
    other.close()


def test_the_connection_cap_makes_the_last_answer_close(one_worker):
    """At most 3 connections: the answer on the third says close (its slot goes to the next client), and the worker
    accepts again once it has closed."""
    socks, headers = [], []
    try:
        for _ in range(3):
            socks.append(connect(one_worker))
            socks[-1].sendall(REQUEST)
            status, answer_headers, _ = read_answer(socks[-1])
            assert status == 200
            headers.append(answer_headers.get("connection", "").lower())
        assert headers[:2] != ["close", "close"] and headers[2] == "close", headers
        assert closed_by_server(socks[2], 3.0)
        socks.append(connect(one_worker))
        socks[-1].sendall(REQUEST)
        assert read_answer(socks[-1])[0] == 200
    finally:
        for sock in socks:
            sock.close()


def test_a_stalled_request_is_cut_off_with_408_and_the_worker_goes_on(one_worker):
    stalled = connect(one_worker)
    stalled.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127")  # and nothing more
    started = time.monotonic()
    stalled.settimeout(HEAD_TIMEOUT_S + 5)
    status, headers, _ = read_answer(stalled)
    assert (status, headers["connection"]) == (408, "close")
    assert HEAD_TIMEOUT_S - 0.5 <= time.monotonic() - started <= HEAD_TIMEOUT_S + 3
    assert closed_by_server(stalled, 3)
    stalled.close()
    other = connect(one_worker)
    other.sendall(REQUEST)
    assert read_answer(other)[0] == 200
    other.close()


def test_max_requests_restarts_the_worker_after_its_answer(app_config, tmp_path):
    with gunicorn(app_config, tmp_path / "g.log", workers=1, args=("--max-requests", "3")) as live:
        sock = connect(live)
        # The start-up probe counts, once or more (a slow boot makes it ask again): the third answer at the latest
        # says close, and arrives whole.
        for _ in range(3):
            sock.sendall(REQUEST)
            status, headers, _ = read_answer(sock)
            assert status == 200
            if headers.get("connection", "").lower() == "close":
                break
        assert headers.get("connection", "").lower() == "close"
        assert closed_by_server(sock, 2.0)
        sock.close()
        deadline = time.monotonic() + 20
        while True:  # a new worker takes over
            try:
                with connect(live) as again:
                    again.sendall(REQUEST)
                    if read_answer(again)[0] == 200:
                        break
            except (OSError, AssertionError):
                pass
            assert time.monotonic() < deadline, live.log_tail()
            time.sleep(0.2)
        assert "Autorestarting worker" in live.log_tail(20000)


def test_a_stop_does_not_wait_for_idle_connections(app_config, tmp_path):
    with gunicorn(app_config, tmp_path / "g.log", workers=2) as live:
        idle = [connect(live) for _ in range(4)]
        for sock in idle:
            sock.sendall(REQUEST)
            assert read_answer(sock)[0] == 200
        started = time.monotonic()
        live.proc.send_signal(signal.SIGTERM)
        live.proc.wait(10)
        assert time.monotonic() - started < 4, "the stop waited for kept connections (keepalive is 5 s)"
        assert live.proc.returncode == 0, live.log_tail()
        for sock in idle:
            assert closed_by_server(sock, 1.0)
            sock.close()


# --- the response: head and a whole body in one send -------------------------------------------------------------
BODY = b'{"status":"ok"}\n'
HEALTHZ_BODY = BODY  # what /healthz answers (trips/api/ops.py)
PART = b"0123456789abcdef" * 64  # 1 KiB


def test_small_answers_arrive_whole_over_keep_alive(one_worker):
    sock = connect(one_worker)
    for _ in range(6):
        sock.sendall(REQUEST)
        status, headers, body = read_answer(sock)
        assert (status, body, headers["content-length"]) == (200, HEALTHZ_BODY, str(len(HEALTHZ_BODY)))
        assert headers.get("content-type") == "application/json" and "transfer-encoding" not in headers
    sock.close()


def read_head(sock) -> tuple[int, dict, bytes]:
    """One answer's status line and headers: (status, headers lower-cased, whatever came after them)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, rest


def test_head_gets_the_headers_only_with_the_get_content_length(one_worker):
    sock = connect(one_worker)
    for _ in range(2):
        sock.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, headers, rest = read_head(sock)
        assert (status, headers["content-length"], rest) == (200, str(len(HEALTHZ_BODY)), b"")
        # A body sent after the head would come before the next answer, and the next answer would not parse.
        sock.sendall(REQUEST)
        assert read_answer(sock)[::2] == (200, HEALTHZ_BODY)
    sock.close()


# A WSGI app of known answers, served in-process (below) and by a real gunicorn with the worker (demo_server).
def demo_app(environ, start_response):
    path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
    if path == "/one":  # one item, as werkzeug hands it over (an iterator, with the Content-Length)
        body = PART * 3
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return iter([body])
    if path == "/parts":  # known length, in three parts
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(3 * len(PART)))])
        return iter([PART, PART, PART])
    if path == "/stream":  # unknown length: chunked
        start_response("200 OK", [("Content-Type", "text/plain")])
        return (part for part in (b"first ", b"", PART, b" last"))
    if path == "/big":  # one item above ONE_SEND_MAX_BYTES
        body = PART * (httpwire.ONE_SEND_MAX_BYTES // len(PART) + 1)
        start_response("200 OK", [("Content-Length", str(len(body)))])
        return [body]
    if path == "/echo":  # what the app read of the body, and the trailers gunicorn saw
        body = environ["wsgi.input"].read()
        answer = f"{method} {len(body)} {hashlib.sha256(body).hexdigest()[:16]} {environ.get('HTTP_X_N', '')}"
        return _text(start_response, answer.encode())
    if path == "/sleep":  # a slow upstream: ?s=seconds
        time.sleep(float(parse_qs(environ["QUERY_STRING"]).get("s", ["1"])[0]))
        return _text(start_response, b"slept")
    if path == "/pid":
        return _text(start_response, str(os.getpid()).encode())
    start_response("404 Not Found", [("Content-Length", "0")])
    return [] if method == "HEAD" else [b""]


def _text(start_response, body: bytes):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


@contextmanager
def serve_demo(tmp_path, args: tuple = (), worker: str = "httpworker.worker.KeepAliveWorker", name: str = "demo"):
    """gunicorn with BTP's worker (or `worker`) serving demo_app (not the BTP app: no gunicorn.conf.py); `args`:
    more gunicorn options. Yields the port; the log is tmp_path/<name>.log."""
    port = free_port()
    conf = tmp_path / "empty.conf.py"
    conf.write_text("")
    with open(tmp_path / f"{name}.log", "wb") as sink:
        proc = subprocess.Popen([str(BIN / "gunicorn"), "-c", str(conf), "--no-control-socket", "--workers", "1",
                                 "--worker-class", worker, "--keep-alive", "5", *args,
                                 "--bind", f"127.0.0.1:{port}", "tests.httpworker.test_httpworker:demo_app"],
                                cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
                    probe.sendall(b"GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
                    if read_answer(probe)[0] == 200:
                        break
            except (OSError, AssertionError):
                pass
            assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / f"{name}.log").read_text()
            time.sleep(0.1)
        serve_demo.proc = proc
        yield port
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    with serve_demo(tmp_path_factory.mktemp("demo")) as port:
        yield port


def read_chunked(sock) -> tuple[int, dict, bytes]:
    """One chunked answer (no trailers): (status, headers, the body put together)."""
    status, headers, data = read_head(sock)
    assert headers.get("transfer-encoding") == "chunked" and "content-length" not in headers, headers
    body = b""
    while True:
        while b"\r\n" not in data:
            data += sock.recv(65536)
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        while len(data) < size + 2:
            chunk = sock.recv(65536)
            assert chunk, "closed in the middle of a chunk"
            data += chunk
        assert data[size:size + 2] == b"\r\n"
        body, data = body + data[:size], data[size + 2:]
        if size == 0:
            assert data == b"", "more than one answer"
            return status, headers, body


def test_demo_answers_in_one_part_in_parts_and_streamed_on_one_connection(demo_server):
    sock = socket.create_connection(("127.0.0.1", demo_server), timeout=10)
    for _ in range(3):
        for path, body in (("/one", PART * 3), ("/parts", PART * 3)):
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            status, headers, got = read_answer(sock)
            assert (status, got, headers["content-length"]) == (200, body, str(len(body)))
            assert headers.get("connection", "keep-alive").lower() == "keep-alive"
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_chunked(sock)[::2] == (200, b"first " + PART + b" last")
        sock.sendall(b"HEAD /one HTTP/1.1\r\nHost: x\r\n\r\n")  # the app writes its body: gunicorn drops it
        status, headers, rest = read_head(sock)
        assert (status, headers["content-length"], rest) == (200, str(len(PART * 3)), b"")
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, got = read_answer(sock)
        assert status == 200 and len(got) > httpwire.ONE_SEND_MAX_BYTES and got == PART * (len(got) // len(PART))
    sock.sendall(b"GET /one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, headers, got = read_answer(sock)
    assert (status, headers["connection"], got) == (200, "close", PART * 3)
    assert closed_by_server(sock, 3.0)
    sock.close()


class CountingSocket:
    """One end of a socketpair, counting what is sent on it: each send or sendall (its bytes) and sendfile."""

    def __init__(self, sock):
        self._sock, self.sends = sock, []

    def sendall(self, data):
        self.sends.append(bytes(data))
        return self._sock.sendall(data)

    def send(self, data, flags=0):  # the worker's Outbox sends with MSG_DONTWAIT
        sent = self._sock.send(data, flags)
        self.sends.append(bytes(data[:sent]))
        return sent

    def sendfile(self, file, offset=0, count=None):
        self.sends.append(("sendfile", count))
        return self._sock.sendfile(file, offset, count)

    def __getattr__(self, name):
        return getattr(self._sock, name)


def serve_in_process(app, request: bytes) -> tuple[bool, list, bytes]:
    """The worker's own path for one request (the bytes read, gunicorn's parser, KeepAliveWorker._serve:
    wsgi.create, the app, the response) on a socketpair: (keep the connection?, the sends, every byte the client
    receives)."""
    cfg = Config()
    worker = KeepAliveWorker(0, os.getppid(), [], None, 30, cfg, glogging.Logger(cfg))
    worker.wsgi, worker.crew, me = app, Crew(1, None, None, None), Member()
    worker.crew.leader = me
    ours, theirs = socket.socketpair()
    ours.settimeout(5)
    theirs.settimeout(5)
    try:
        theirs.sendall(request)
        sock = CountingSocket(ours)
        addr = ("127.0.0.1", 40000)
        conn = _Conn(sock, addr, ("127.0.0.1", 8000), Incoming(cfg, addr, Limits()))
        conn.incoming.add(ours.recv(65536))
        outcome, req = conn.incoming.advance(time.monotonic())
        assert outcome == WHOLE
        keep, leads = worker._serve(conn, req, me)
        assert leads and not conn.busy
        ours.shutdown(socket.SHUT_WR)
        wire = b""
        while chunk := theirs.recv(65536):
            wire += chunk
        return keep, sock.sends, wire
    finally:
        ours.close()
        theirs.close()
        worker.tmp.close()


def answering(status: str, headers: list, body):
    """A WSGI app answering `status`, `headers` and body(environ) (an iterable)."""
    def app(environ, start_response):
        start_response(status, headers)
        return body(environ)
    return app


def failing_after(first: bytes):
    def body(environ):
        yield first
        raise RuntimeError("the app failed after its first part")
    return body


def failing_app(environ, start_response):
    raise RuntimeError("the app failed before its answer")


GET = b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n"
HEAD = b"HEAD /x HTTP/1.1\r\nHost: x\r\n\r\n"
CL = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]
MAX = httpwire.ONE_SEND_MAX_BYTES
# name: (request, app, how many sends with the worker's response, with gunicorn's own)
CASES = {
    "one item": (GET, answering("200 OK", CL, lambda env: [BODY]), 1, 2),
    "one item in an iterator": (GET, answering("200 OK", CL, lambda env: iter([BODY])), 1, 2),
    "one item over the Content-Length, then more": (
        GET, answering("200 OK", [("Content-Length", "5")], lambda env: [BODY, b"more"]), 1, 2),
    "Content-Length 0": (GET, answering("200 OK", [("Content-Length", "0")], lambda env: [b""]), 1, 1),
    "nothing written": (GET, answering("200 OK", [("Content-Length", "0")], lambda env: []), 1, 1),
    "exactly ONE_SEND_MAX_BYTES": (
        GET, answering("200 OK", [("Content-Length", str(MAX))], lambda env: [b"x" * MAX]), 1, 2),
    "one byte above ONE_SEND_MAX_BYTES": (
        GET, answering("200 OK", [("Content-Length", str(MAX + 1))], lambda env: [b"x" * (MAX + 1)]), 2, 2),
    "HEAD, the app writes nothing": (HEAD, answering("200 OK", CL, lambda env: []), 1, 1),
    "HEAD, the app writes its body": (HEAD, answering("200 OK", CL, lambda env: [BODY]), 1, 1),
    "304": (GET, answering("304 Not Modified", CL, lambda env: []), 1, 1),
    "204 with a body": (GET, answering("204 No Content", CL, lambda env: [BODY]), 1, 1),
    "known length in parts": (
        GET, answering("200 OK", [("Content-Length", str(3 * len(PART)))], lambda env: [PART] * 3), 4, 4),
    "an empty first part": (GET, answering("200 OK", CL, lambda env: [b"", BODY]), 3, 3),
    "unknown length, one item (chunked)": (GET, answering("200 OK", [], lambda env: [BODY]), 3, 3),
    "unknown length, in parts (chunked)": (GET, answering("200 OK", [], lambda env: iter([BODY, b"", BODY])), 4, 4),
    "HTTP/1.0 without a length": (b"GET /x HTTP/1.0\r\n\r\n", answering("200 OK", [], lambda env: [BODY]), 2, 2),
    "HTTP/1.0": (b"GET /x HTTP/1.0\r\n\r\n", answering("200 OK", CL, lambda env: [BODY]), 1, 2),
    "the client says close": (
        b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", answering("200 OK", CL, lambda env: [BODY]), 1, 2),
    "a file (sendfile)": (GET, answering("200 OK", CL, lambda env: env["wsgi.file_wrapper"](
        open(os.path.join(ROOT, "tests", "httpworker", "test_httpworker.py"), "rb"))), 2, 2),
    "a file without a fileno": (
        GET, answering("200 OK", CL, lambda env: env["wsgi.file_wrapper"](io.BytesIO(BODY))), 1, 2),
    "the app fails before its answer": (GET, failing_app, 1, 1),
    "the app fails after its whole body": (GET, answering("200 OK", CL, failing_after(BODY)), 1, 2),
    "the app fails after a first part": (GET, answering("200 OK", [("Content-Length", "99")], failing_after(BODY)),
                                         2, 2),
}


@pytest.fixture
def fixed_date(monkeypatch):
    monkeypatch.setattr(gunicorn_util, "http_date", lambda *args: "Tue, 01 Dec 2026 00:00:00 GMT")


@pytest.mark.parametrize("name", CASES)
def test_the_wire_is_gunicorns_in_fewer_sends(name, fixed_date, monkeypatch):
    """Every byte the client receives, and whether the connection is kept, as with gunicorn's own Response; only
    the number of sends differs, and only when the first write is the whole (declared) body."""
    request, app, sends, stock_sends = CASES[name]
    keep, ours, wire = serve_in_process(app, request)
    monkeypatch.setattr(httpworker, "_OneSendResponse", gunicorn_wsgi.Response)
    stock_keep, stock, stock_wire = serve_in_process(app, request)
    assert (keep, wire) == (stock_keep, stock_wire)
    assert (len(ours), len(stock)) == (sends, stock_sends), (ours, stock)
    assert b"".join(part for part in ours if isinstance(part, bytes)) == b"".join(
        part for part in stock if isinstance(part, bytes))


def test_a_single_chunk_answer_leaves_in_one_send():
    """The head and the body of a small Flask-like answer in one sendall: gunicorn's own Response makes two."""
    keep, sends, wire = serve_in_process(answering("200 OK", CL, lambda env: iter([BODY])), GET)
    assert keep and len(sends) == 1 and sends[0] == wire, sends
    head, _, body = wire.partition(b"\r\n\r\n")
    assert body == BODY and head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"\r\nContent-Length: 16" in head and b"\r\nConnection: keep-alive" in head


def test_nothing_is_held_back_for_a_later_part():
    """A body in parts: each part is on the wire before the app is asked for the next."""
    seen = []

    def body(environ):
        sock = environ["gunicorn.socket"]
        yield PART
        seen.append(sock.sends[-1])
        yield b"second"
        seen.append(sock.sends[-1])

    keep, sends, wire = serve_in_process(answering("200 OK", [("Content-Length", str(len(PART) + 6))], body), GET)
    assert keep and seen == [PART, b"second"] and len(sends) == 3 and wire.endswith(PART + b"second")
    _, _, wire = serve_in_process(answering("200 OK", [], body), GET)  # chunked
    assert seen[2:] == [b"%X\r\n" % len(PART) + PART + b"\r\n", b"6\r\nsecond\r\n"]
    assert wire.endswith(b"6\r\nsecond\r\n0\r\n\r\n")


def test_the_apps_iterable_is_closed_once():
    closed = []

    class Body:
        def __init__(self, parts):
            self.parts = parts

        def __iter__(self):
            return iter(self.parts)

        def close(self):
            closed.append(len(self.parts))

    for parts in ([BODY], [b"", BODY], []):
        serve_in_process(answering("200 OK", CL, lambda env, parts=parts: Body(parts)), GET)
    serve_in_process(answering("200 OK", CL, lambda env: Body([BODY])), HEAD)
    assert closed == [1, 2, 0, 1]


def test_the_serving_worker_reads_each_setting_once_and_the_same_value():
    from gunicorn.config import Config

    from httpworker.wire import _Settled

    reads = []

    class Counting(Config):
        def __getattr__(self, name):
            reads.append(name)
            return super().__getattr__(name)

    cfg = Counting()
    cfg.set("keepalive", 7)
    settled = _Settled(cfg)
    for _ in range(3):
        assert settled.keepalive == 7 and settled.is_ssl == cfg.is_ssl
        assert settled.limit_request_line == cfg.limit_request_line
    assert reads.count("keepalive") == 1  # once, not 3
    assert reads.count("limit_request_line") == 1 + 3  # once through the settled view, 3 times straight
    with pytest.raises(AttributeError):
        settled.no_such_setting  # noqa: B018
    with pytest.raises(AttributeError):
        settled.keepalive = 1  # read-only once the worker serves


def test_the_heartbeat_is_fresh_again_as_soon_as_the_request_it_was_dated_from_ends():
    """A beat dated from a request under way must not outlive the request: the arbiter would kill the worker up to
    BEAT_S after a request that ended within `timeout` (seen in CI: a worker killed 0.5 s into a new request)."""
    beats: list[float] = []
    crew = Crew(2, None, beats.append, None)
    busy = Member()
    busy.started = time.monotonic() - 2.5  # a request 2.5 s old, still under way
    crew.members.append(busy)
    watcher = threading.Thread(target=crew._watch, daemon=True)
    watcher.start()
    try:
        deadline = time.monotonic() + 2
        while not beats:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert beats[-1] == busy.started  # dated from the oldest request under way
        crew.finish(busy)
        ended = time.monotonic()
        while beats[-1] < ended - 0.05:
            assert time.monotonic() - ended < 0.2, "the stale beat stayed on record"
            time.sleep(0.005)
    finally:
        crew.stop()
        watcher.join(2)
