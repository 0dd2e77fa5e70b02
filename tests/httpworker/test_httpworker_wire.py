"""BTP's gunicorn worker on the wire, served for real (demo_app of tests/httpworker/test_httpworker.py): pipelined requests with
bodies (chunked ones too) answered in order however they are split; request-smuggling variants answered as
gunicorn's stock sync worker answers the same bytes, and never with more answers than gunicorn's parser sees
requests; a body over the cap refused with 413 before it is sent; Expect: 100-continue (raw, and curl)."""
import hashlib
import random
import shutil
import subprocess
import time

import pytest
from gunicorn.config import Config
from gunicorn.http.parser import RequestParser

from tests.rawhttp import Reader, connect, exchange, get
from tests.httpworker.test_httpworker import serve_demo
from httpworker.frame import body_bytes

# gunicorn served for real, the worker alike on every database engine: run once per CI (pyproject.toml "slow")
pytestmark = pytest.mark.slow

MAX_BODY = 200_000


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """BTP's worker, one process of 2 threads, a body at most MAX_BODY bytes."""
    with serve_demo(tmp_path_factory.mktemp("wire"), args=("--threads", "2", "-e", f"HTTPWORKER_MAX_BODY={MAX_BODY}")
                    ) as port:
        yield port


@pytest.fixture(scope="module")
def sync(tmp_path_factory):
    """gunicorn's stock sync worker on the same app: the oracle."""
    with serve_demo(tmp_path_factory.mktemp("sync"), worker="sync", name="sync") as port:
        yield port


def echo(body: bytes, n: str) -> bytes:
    return b"POST %d %s" % (len(body), hashlib.sha256(body).hexdigest()[:16].encode()) + b" " + n.encode()


def post(body: bytes, n: str) -> bytes:
    return b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: %s\r\nContent-Length: %d\r\n\r\n%s" % (n.encode(), len(body), body)


def chunked(parts: list[bytes], n: str) -> bytes:
    out = b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % n.encode()
    return out + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\nX-T: 1\r\n\r\n"


def test_pipelined_requests_with_bodies_are_answered_in_order_however_they_arrive(demo):
    rng = random.Random(5)
    bodies = [bytes(rng.randrange(256) for _ in range(size)) for size in (0, 10, 5000, 70_000, 150_000)]
    requests, expected = [], []
    for i, body in enumerate(bodies):
        requests.append(post(body, f"{i}cl"))
        expected.append(echo(body, f"{i}cl"))
        requests.append(chunked([body[:len(body) // 2], body[len(body) // 2:]] if body else [], f"{i}ch"))
        expected.append(echo(body, f"{i}ch"))
        requests.append(get("/one"))
        expected.append(None)
    data = b"".join(requests)
    for sends in ([data], [data[a:a + 997] for a in range(0, len(data), 997)]):
        with connect(demo) as sock:
            for piece in sends:
                sock.sendall(piece)
            reader = Reader(sock)
            for want in expected:
                answer = reader.answer()
                assert answer is not None and answer.status == 200 and not answer.closes()
                assert want is None or answer.body == want, (answer.body, want)


def gunicorn_view(data: bytes) -> tuple[int, str | None]:
    """How many requests gunicorn's own parser reads off `data` (one source), and the error that ends them."""
    parser, served = RequestParser(Config(), [data], ("127.0.0.1", 1)), 0
    try:
        for req in parser:
            body_bytes(req.body)
            served += 1
            if req.should_close():
                break
    except Exception as exc:  # noqa: BLE001 - the parser's verdict
        return served, type(exc).__name__
    return served, None


INNOCENT = b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: smuggled\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
H = b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: first\r\n"
ATTACKS = {
    "CL.TE": H + b"Content-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX",
    "TE.CL": H + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "two CLs, same": H + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "two CLs, different": H + b"Content-Length: 5\r\nContent-Length: 0\r\n\r\nhello",
    "CL list": H + b"Content-Length: 5, 5\r\n\r\nhello",
    "CL with a sign": H + b"Content-Length: +5\r\n\r\nhello",
    "CL negative": H + b"Content-Length: -5\r\n\r\nhello",
    "CL hex": H + b"Content-Length: 0x5\r\n\r\nhello",
    "CL with spaces around": H + b"Content-Length:  5 \r\n\r\nhello",
    "CL name with a space": H + b"Content-Length : 5\r\n\r\nhello",
    "CL with a tab inside": H + b"Content-Length: 5\t5\r\n\r\nhello",
    "TE chunked twice": H + b"Transfer-Encoding: chunked, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE on two lines": H + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "TE gzip alone": H + b"Transfer-Encoding: gzip\r\n\r\nhello",
    "TE identity": H + b"Transfer-Encoding: identity\r\n\r\nhello",
    "TE unknown coding": H + b"Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE gzip, chunked": H + b"Transfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE Chunked (case)": H + b"Transfer-Encoding: Chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE with a space in the name": H + b"Transfer-Encoding : chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE chunked in HTTP/1.0": b"POST /echo HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "chunk size with a space": H + b"Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
    "chunk size 0x": H + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
    "chunk size negative": H + b"Transfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
    "chunk longer than its size": H + b"Transfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
    "chunk size line with a bare LF": H + b"Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
    "chunk extension with a bare CR": H + b"Transfer-Encoding: chunked\r\n\r\n5;a\rb\r\nhello\r\n0\r\n\r\n",
    "last chunk without its CRLF": H + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n",
    "forbidden trailer": H + b"Transfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 9\r\n\r\n",
    "bare LF request line": b"POST /echo HTTP/1.1\nHost: x\r\nContent-Length: 0\r\n\r\n",
    "bare LF header line": H + b"Content-Length: 5\nX: y\r\n\r\nhello",
    "bare CR in a header": H + b"X: a\rb\r\nContent-Length: 5\r\n\r\nhello",
    "obs-fold": H + b"X-Folded: a\r\n b\r\nContent-Length: 5\r\n\r\nhello",
    "obs-fold of CL": H + b"Content-Length:\r\n 5\r\n\r\nhello",
    "NUL in a header": H + b"X: a\x00b\r\nContent-Length: 5\r\n\r\nhello",
    "two Hosts": b"POST /echo HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 5\r\n\r\nhello",
    "absolute URI": b"POST http://x/echo HTTP/1.1\r\nHost: y\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 without a Host": b"POST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
    "header name with an underscore": H + b"Content_Length: 5\r\n\r\nhello",
    "request line with two spaces": b"POST  /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.2": b"POST /echo HTTP/1.2\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    "CL short (the rest is the next request)": H + b"Content-Length: 2\r\n\r\nhello",
}


@pytest.mark.parametrize("name", ATTACKS)
def test_smuggling_variants_are_answered_as_gunicorns_sync_worker_answers_them(name, demo, sync):
    data = ATTACKS[name] + INNOCENT
    ours, closed = exchange(demo, data, timeout=3)
    theirs, _ = exchange(sync, data, timeout=3)
    served, error = gunicorn_view(data)
    # The first answer is the sync worker's (which answers one request a connection), status and body.
    assert theirs and ours, (ours, theirs)
    assert (ours[0].status, ours[0].body) == (theirs[0].status, theirs[0].body), (ours[0], theirs[0])
    # One answer per request gunicorn's parser sees, plus its refusal; then the connection is closed.
    assert len(ours) == served + (error is not None), (ours, served, error)
    assert closed and ours[-1].closes()
    if error is None and served == 2:
        assert ours[1].body == b"POST 0 e3b0c44298fc1c14 smuggled"


def test_a_chunk_size_no_body_could_have_is_refused_at_once(demo):
    data = H + b"Transfer-Encoding: chunked\r\n\r\nffffffffffffffffffffffffff\r\nhello\r\n0\r\n\r\n" + INNOCENT
    answers, closed = exchange(demo, data, timeout=3)
    assert [a.status for a in answers] == [413] and closed


def test_a_body_over_the_cap_is_refused_before_it_is_sent(demo):
    with connect(demo) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1))
        reader = Reader(sock)
        answer = reader.answer(timeout=5)
        assert answer.status == 413 and answer.closes() and time.monotonic() - started < 2
        assert reader.closed(5)
    answers, _ = exchange(demo, post(b"x" * MAX_BODY, "at the cap") + INNOCENT)
    assert [a.body for a in answers] == [echo(b"x" * MAX_BODY, "at the cap"), b"POST 0 e3b0c44298fc1c14 smuggled"]


def test_expect_100_continue_is_asked_for_once_then_the_body_is_read(demo):
    body = b"z" * 50_000
    with connect(demo) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: e\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n"
                     % len(body))
        reader = Reader(sock)
        interim = reader.answer(timeout=5)
        assert interim.status == 100
        sock.sendall(body)
        final = reader.answer()
        assert (final.status, final.body) == (200, echo(body, "e"))  # and no second 100 before it
        sock.sendall(get("/one"))
        assert reader.answer().status == 200


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_sending_expect_100_continue_gets_it_and_its_answer(demo, tmp_path):
    body = tmp_path / "body.bin"
    body.write_bytes(b"c" * 300_000)  # over the cap: refused before curl sends it
    small = tmp_path / "small.bin"
    small.write_bytes(b"c" * 150_000)
    url = f"http://127.0.0.1:{demo}/echo"
    started = time.monotonic()
    done = subprocess.run(["curl", "-sv", "--expect100-timeout", "10", "-H", "Expect: 100-continue", "-H", "X-N: curl",
                           "--data-binary", f"@{small}", url], capture_output=True, timeout=30)
    assert done.returncode == 0 and time.monotonic() - started < 8, done.stderr[-2000:]
    assert b"HTTP/1.1 100 Continue" in done.stderr and done.stdout == echo(b"c" * 150_000, "curl")
    refused = subprocess.run(["curl", "-sv", "--expect100-timeout", "10", "-H", "Expect: 100-continue",
                              "--data-binary", f"@{body}", url], capture_output=True, timeout=30)
    assert b"< HTTP/1.1 413" in refused.stderr and b"100 Continue" not in refused.stderr
