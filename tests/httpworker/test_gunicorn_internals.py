"""Each private or undocumented part of gunicorn that BTP's worker relies on (httpworker/gunicorn_internals.py),
checked against the installed gunicorn: it exists and behaves as the worker relies on it. A gunicorn release that
changes one fails here, under the internal's name. And no other module of httpworker touches gunicorn's
internals itself."""
import ast
import inspect
import os
import socket
import time
from pathlib import Path

from gunicorn import glogging
from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.workers.workertmp import WorkerTmp

from httpworker import gunicorn_internals as gi
from httpworker.frame import Feed

ADDR = ("127.0.0.1", 40000)
HTTPWORKER = Path(gi.__file__).parent


def parsed(data: bytes):
    """gunicorn's parser over an in-memory source holding `data`: (parser, first request, source)."""
    feed = Feed()
    feed.pieces.append(data)
    parser = gi.RequestParser(Config(), feed, ADDR)
    return parser, next(parser), feed


def test_the_parser_reads_a_head_from_an_iterable_source_and_holds_what_it_read_ahead():
    parser, req, _ = parsed(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\n")
    assert req.path == "/a"
    assert gi.held_ahead(parser) == len(b"GET /b HTTP/1.1\r\n")  # unreader.buf: a BytesIO at its end
    assert gi.take_held(parser) == b"GET /b HTTP/1.1\r\n"  # unreader.take_buffered
    assert gi.held_ahead(parser) == 0 and gi.take_held(parser) == b""


def test_a_parser_let_go_of_its_message_does_not_drain_that_body_for_the_next_request():
    feed = Feed()
    feed.pieces.append(b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n")
    parser = gi.RequestParser(Config(), feed, ADDR)
    next(parser)
    gi.let_go_of_message(parser)  # parser.mesg = None
    feed.pieces.append(b"GET /n HTTP/1.1\r\nHost: x\r\n\r\n")  # the body never came: had the parser drained it,
    assert next(parser).path == "/n"  # it would have eaten five bytes of this head


def test_the_body_reader_is_gunicorns_length_or_chunked_reader():
    _, req, _ = parsed(b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n")
    reader = gi.body_reader(req)
    assert type(reader) is gi.LengthReader and reader.length == 7
    _, req, _ = parsed(b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert type(gi.body_reader(req)) is gi.ChunkedReader


def test_a_decoded_body_replaces_the_requests_body():
    parser, req, feed = parsed(b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    feed.pieces.append(b"decoded")
    gi.whole_body(req, parser, 7)  # Body(LengthReader(parser.unreader, size))
    assert req.body.read(100) == b"decoded" and req.body.read(100) == b""


def test_expect_100_continue_is_a_flag_on_the_request_that_wsgi_create_reads():
    head = b"POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    _, req, _ = parsed(head)
    assert gi.take_continue(req) is True  # req._expected_100_continue
    assert gi.take_continue(req) is False
    ours, theirs = socket.socketpair()
    with ours, theirs:
        _, again, _ = parsed(head)
        gi.create(again, ours, ADDR, ("127.0.0.1", 8000), Config())  # gunicorn sends it while the flag is set
        theirs.settimeout(2)
        assert theirs.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        gi.take_continue(req)
        gi.create(req, ours, ADDR, ("127.0.0.1", 8000), Config())  # cleared: nothing sent
        theirs.setblocking(False)
        try:
            sent = theirs.recv(100)
        except BlockingIOError:
            sent = b""
        assert sent == b""


def test_create_takes_a_response_class_and_the_response_knows_when_a_body_is_omitted():
    parameters = inspect.signature(gi.create).parameters
    assert list(parameters)[:5] == ["req", "sock", "client", "server", "cfg"] and "response_class" in parameters
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for method, status, omitted in (("HEAD", "200 OK", True), ("GET", "204 No Content", True),
                                        ("GET", "200 OK", False)):
            _, req, _ = parsed(b"%s / HTTP/1.1\r\nHost: x\r\n\r\n" % method.encode())
            resp, environ = gi.create(req, ours, ADDR, ("127.0.0.1", 8000), Config(), response_class=gi.Response)
            assert type(resp) is gi.Response and environ["REQUEST_METHOD"] == method
            resp.start_response(status, [("Content-Length", "0")])
            assert gi.omits_body(resp) is omitted  # Response._omits_body


def test_head_bytes_and_mark_sent_are_what_send_headers_sends_and_leaves():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        _, req, _ = parsed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = gi.Response(req, ours, Config())
        resp.start_response("200 OK", [("Content-Length", "2"), ("X-A", "b")])
        expected = gi.head_bytes(resp)
        assert resp.response_length == 2 and not resp.headers_sent
        resp.send_headers()
        theirs.settimeout(2)
        assert theirs.recv(65536) == expected
        other = gi.Response(req, ours, Config())
        other.start_response("200 OK", [("Content-Length", "2")])
        gi.mark_sent(other, 2)
        other.write(b"xx")  # gunicorn's write: the head is not sent again, the body is past its length: dropped
        other.close()
        theirs.setblocking(False)
        try:
            rest = theirs.recv(100)
        except BlockingIOError:
            rest = b""
        assert rest == b"" and other.sent == 2


def test_error_page_is_gunicorns_close_answer():
    ours, theirs = socket.socketpair()
    with ours, theirs:
        gi.error_page(ours, 408, "Request Timeout", "too slow")
        theirs.settimeout(2)
        answer = theirs.recv(65536)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"Connection: close" in answer
    assert b"too slow" in answer


def test_the_heartbeat_is_the_tmp_files_time_on_the_monotonic_clock_the_arbiter_reads():
    tmp = WorkerTmp(Config())
    try:
        tmp.notify()
        assert abs(tmp.last_update() - time.monotonic()) < 5  # gunicorn dates beats on time.monotonic()
        worker = type("W", (), {"tmp": tmp})()
        gi.beat(worker, 1234.5)
        assert tmp.last_update() == 1234.5
    finally:
        tmp.close()


def test_a_workers_wake_pipe_is_made_by_init_signals_and_woken_by_a_write():
    from gunicorn.workers.base import Worker

    cfg = Config()
    worker = Worker(0, os.getppid(), [], None, 30, cfg, glogging.Logger(cfg))
    try:
        worker.PIPE = os.pipe()  # base.Worker.init_process makes it so
        read, write = gi.wake_pipe(worker)
        os.write(write, b"\0")
        assert os.read(read, 1) == b"\0"
    finally:
        for fd in worker.PIPE:
            os.close(fd)
        worker.tmp.close()
    assert "self.PIPE = os.pipe()" in inspect.getsource(Worker.init_process)


def test_the_head_limits_are_gunicorns_constants():
    assert gi.MAX_REQUEST_LINE == 8190 and gi.MAX_HEADERS == 32768 and gi.DEFAULT_MAX_HEADERFIELD_SIZE == 8190
    assert issubclass(gi.NoMoreData, Exception)
    assert gi.Response is wsgi.Response and callable(gi.close_on_exec) and callable(gi.reraise)


def test_no_other_module_of_httpworker_touches_gunicorns_internals():
    """Only gunicorn_internals imports gunicorn.http or gunicorn.util, or reads another object's _private name
    (ruff's SLF001 says the same for attribute access: pyproject.toml)."""
    for path in HTTPWORKER.glob("*.py"):
        if path.name == "gunicorn_internals.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(("gunicorn.http", "gunicorn.util")), (path.name, node.module)
                assert not (node.module == "gunicorn" and {a.name for a in node.names} & {"http", "util"}), path.name
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                assert isinstance(owner, ast.Name) and owner.id in ("self", "cls"), (path.name, node.lineno, node.attr)
