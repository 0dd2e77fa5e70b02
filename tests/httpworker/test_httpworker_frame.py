"""The framing of BTP's gunicorn worker, in process (httpworker/frame.py): a request is whole when gunicorn's
own parser would read it whole, wherever the bytes are split; the bytes after it stay for the next request; chunked
bodies end where gunicorn's chunked reader ends them, and gunicorn decodes them before any app code; the bounds
(head size, body size, deadlines), 100-continue, the body spooled to a file, a body left unread dropped, and the
limits read from gunicorn's settings and the environment."""
import hashlib
import random

import pytest
from gunicorn.config import Config
from gunicorn.http import errors as gerrors
from gunicorn.http.parser import RequestParser

from httpworker import frame as httpframe
from httpworker.frame import CONTINUE, NEED, REFUSED, WHOLE, ChunkScan, Incoming, Limits, body_bytes

ADDR = ("127.0.0.1", 40000)
GET = b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n"


def post(body: bytes, extra: bytes = b"") -> bytes:
    return b"POST /p HTTP/1.1\r\nHost: x\r\n" + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body


def chunked(body_chunks: list[bytes], trailers: bytes = b"", ext: bytes = b"") -> bytes:
    out = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    for chunk in body_chunks:
        out += b"%x%s\r\n%s\r\n" % (len(chunk), ext, chunk)
    return out + b"0\r\n" + trailers + b"\r\n"


def incoming(limits: Limits | None = None) -> Incoming:
    return Incoming(Config(), ADDR, limits or Limits())


def feed(inc: Incoming, pieces, now: float = 100.0) -> list:
    """Add each piece and advance after each; every outcome, in order ((WHOLE, body bytes, path) for a request),
    up to a refusal (the worker then closes the connection)."""
    outcomes = []
    for piece in pieces:
        if outcomes and outcomes[-1][0] is REFUSED:
            break
        inc.add(piece)
        while True:
            outcome, detail = inc.advance(now)
            if outcome is WHOLE:
                outcomes.append((WHOLE, detail.path, body_bytes(detail.body), detail))
                inc.served()
                continue
            outcomes.append((outcome, detail))
            if outcome is not CONTINUE:
                break
    return outcomes


def wholes(outcomes) -> list:
    return [(o[1], o[2]) for o in outcomes if o[0] is WHOLE]


def gunicorn_view(data: bytes) -> list:
    """What gunicorn's parser makes of `data` read from one source: [(path, body)], then the error if any."""
    parser, out = RequestParser(Config(), [data], ADDR), []
    try:
        for req in parser:
            out.append((req.path, body_bytes(req.body)))
            if req.should_close():
                break
    except Exception as exc:  # noqa: BLE001 - the parser's verdict
        out.append(type(exc).__name__)
    return out


def splits(data: bytes, rng: random.Random, n: int = 40):
    """Every split in two, one byte at a time, and n random splits into pieces."""
    yield [data]
    yield [data[i:i + 1] for i in range(len(data))]
    for i in range(1, len(data)):
        yield [data[:i], data[i:]]
    for _ in range(n):
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 8))))
        yield [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


VALID = {
    "get": GET,
    "post": post(b"hello world"),
    "empty post": post(b""),
    "chunked": chunked([b"hello", b" ", b"world"]),
    "chunked, extensions": chunked([b"hello"], ext=b";a=b ;c"),
    "chunked, trailers": chunked([b"ab"], trailers=b"X-N: 7\r\nX-M: 8\r\n"),
    "chunked, sizes with zeros": b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 b"0005\r\nhello\r\n000\r\n\r\n",
    "chunked, gzip first": b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "one CRLF before the request": b"\r\n" + GET,
}


@pytest.mark.parametrize("name", VALID)
def test_a_request_is_whole_where_gunicorn_reads_it_whole_however_it_is_split(name):
    data = VALID[name] + GET  # and a pipelined request after it
    expected = gunicorn_view(data)
    assert all(isinstance(item, tuple) for item in expected) and len(expected) == (1 if "gzip" in name else 2)
    for pieces in splits(data, random.Random(name)):
        got = wholes(feed(incoming(), pieces))
        assert got[:len(expected)] == expected, pieces


def test_the_bytes_after_a_request_wait_for_the_next_one_in_order():
    data = post(b"one") + chunked([b"two"]) + GET + post(b"three" * 1000)
    inc = incoming()
    outcomes = feed(inc, [data])
    assert wholes(outcomes) == [("/p", b"one"), ("/c", b"two"), ("/x", b""), ("/p", b"three" * 1000)]
    assert outcomes[-1] == (NEED, None) and not inc.buf and not inc.started


def test_chunkscan_ends_where_gunicorns_chunked_reader_ends():
    rng = random.Random(7)
    for _ in range(200):
        pieces = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(rng.randrange(1, 4))]
        trailers = rng.choice([b"", b"A: b\r\n", b"A: b\r\nC: d\r\n"])
        data = chunked([p for p in pieces if p], trailers=trailers, ext=rng.choice([b"", b";x", b";x=y"]))
        head, _, body = data.partition(b"\r\n\r\n")
        scan = ChunkScan(Limits())
        assert scan.scan(body + b"NEXT", 0) == len(body) and scan.done and not scan.bad
        assert scan.size == sum(len(p) for p in pieces)


@pytest.mark.parametrize("body,error", [
    (b"5 \r\nhello\r\n0\r\n\r\n", "InvalidChunkSize"),  # a space without an extension
    (b"-5\r\nhello\r\n0\r\n\r\n", "InvalidChunkSize"),
    (b"0x5\r\nhello\r\n0\r\n\r\n", "InvalidChunkSize"),
    (b"+5\r\nhello\r\n0\r\n\r\n", "InvalidChunkSize"),
    (b"\r\nhello\r\n0\r\n\r\n", "InvalidChunkSize"),  # no size
    (b"5\nhello\r\n0\r\n\r\n", "InvalidChunkSize"),  # a bare LF ends the size line
    (b"5\r\nhello!\r\n0\r\n\r\n", "ChunkMissingTerminator"),  # more data than the size says
    (b"5;a b\r\nhello\r\n0\r\n\r\n", "InvalidChunkExtension"),
    (b"2\r\nab\r\n0\r\nContent-Length: 5\r\n\r\n", "InvalidHeaderName"),  # a forbidden trailer
    (b"2\r\nab\r\n0\r\nA: b\nC: d\r\n\r\n", "InvalidHeader"),  # a bare LF in the trailers
])
def test_bad_chunked_framing_is_gunicorns_refusal_before_any_app_code(body, error):
    data = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body + GET
    assert error in gunicorn_view(data), gunicorn_view(data)  # the oracle: gunicorn refuses it too
    for pieces in ([data], [data[i:i + 1] for i in range(len(data))]):
        outcomes = feed(incoming(), pieces)
        assert not wholes(outcomes)
        refused = [o for o in outcomes if o[0] is REFUSED]
        assert len(refused) == 1 and outcomes[-1] is refused[0]
        detail = refused[0][1]
        assert type(detail).__name__ == error or detail[0] == 400, detail


@pytest.mark.parametrize("head", [
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5 5\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
    b"POST /p HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"POST /p HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n",
    b"GET /x HTTP/1.1\nHost: x\n\n",
    b"GET /x HTTP/1.1\r\nHost: x\nX: y\r\n\r\n",
])
def test_an_ambiguous_head_is_gunicorns_refusal(head):
    data = head + b"hello" + GET
    view = gunicorn_view(data)
    assert len(view) == 1 and isinstance(view[0], str), view
    outcomes = feed(incoming(), [data])
    assert outcomes == [(REFUSED, outcomes[0][1])] and type(outcomes[0][1]).__name__ == view[0]


def test_a_bare_lf_in_an_unfinished_head_is_refused_at_once():
    outcomes = feed(incoming(), [b"GET /x HTTP/1.1\n", b"Host: x"])
    assert outcomes[0][0] is REFUSED and isinstance(outcomes[0][1], gerrors.InvalidRequestLine)


def test_a_head_over_gunicorns_limits_is_refused_without_waiting_for_its_end():
    limits = Limits.of(Config())
    inc = incoming(limits)
    line = b"X-Filler: " + b"a" * 8000 + b"\r\n"
    outcomes = feed(inc, [b"GET /x HTTP/1.1\r\n"] + [line] * (limits.head_cap // len(line) + 2))
    assert [o[0] for o in outcomes[:-1]] == [NEED] * (len(outcomes) - 1) and outcomes[-1][0] is REFUSED
    detail = outcomes[-1][1]
    assert isinstance(detail, gerrors.LimitRequestHeaders) or detail[0] == 431, detail
    long_line = feed(incoming(limits), [b"GET /" + b"a" * 5000])  # no CRLF within limit_request_line: 414
    assert long_line[-1][0] is REFUSED and isinstance(long_line[-1][1], gerrors.LimitRequestLine)


def test_a_body_over_the_cap_is_refused_on_its_head_alone():
    limits = Limits(max_body=1000)
    head = b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n"
    assert feed(incoming(limits), [head])[-1][:2] == (REFUSED, (413, "Content Too Large",
                                                               "a body of 1001 bytes is over the limit"))
    assert wholes(feed(incoming(limits), [post(b"x" * 1000)])) == [("/p", b"x" * 1000)]
    over = feed(incoming(limits), [b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                                   b"3e8\r\n" + b"x" * 1000 + b"\r\n", b"1\r\n"])  # the size line says 1001 in all
    assert [o[0] for o in over] == [NEED, NEED, REFUSED] and over[-1][1][0] == 413
    huge = feed(incoming(limits), [b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   b"ffffffffffffffffffffffff\r\n"])  # a size overflowing 64 bits
    assert huge[-1][0] is REFUSED and huge[-1][1][0] == 413


def test_expect_100_continue_is_answered_once_the_head_is_accepted():
    head = b"POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
    inc = incoming()
    outcomes = feed(inc, [head, b"hel", b"lo"])
    assert [o[0] for o in outcomes] == [CONTINUE, NEED, NEED, WHOLE, NEED]
    assert outcomes[3][3]._expected_100_continue is False  # gunicorn's wsgi.create sends no second one
    whole_at_once = feed(incoming(), [head + b"hello"])  # the body came with the head: gunicorn answers it
    assert [o[0] for o in whole_at_once] == [WHOLE, NEED] and whole_at_once[0][3]._expected_100_continue
    refused = feed(incoming(Limits(max_body=4)), [head])  # too large: 413, never 100
    assert [o[0] for o in refused] == [REFUSED]


def test_a_large_body_goes_to_a_file_as_it_arrives():
    body = bytes(random.Random(3).randrange(256) for _ in range(300_000))
    limits = Limits(in_memory=50_000)
    for data in (post(body) + GET, chunked([body[:100_000], body[100_000:]]) + GET):
        inc = incoming(limits)
        pieces = [data[i:i + 16384] for i in range(0, len(data), 16384)]
        seen_spool, got = False, []
        for piece in pieces:
            got += feed(inc, [piece])
            seen_spool = seen_spool or inc.spool is not None
            assert len(inc.buf) <= limits.in_memory + 2 * 16384  # what memory holds of the body
        assert seen_spool
        assert [(p, hashlib.sha256(b).hexdigest()) for p, b in wholes(got)][:1] == [
            (data[5:7].decode(), hashlib.sha256(body).hexdigest())]
        assert wholes(got)[1] == ("/x", b"")


def test_a_body_the_app_does_not_read_is_dropped_and_the_next_request_parses():
    inc = incoming()
    inc.add(post(b"unread" * 20_000) + GET)
    outcome, req = inc.advance(0.0)
    assert outcome is WHOLE and req.body.read(3) == b"unr"
    inc.served()  # answered: the rest of the body goes, nothing is drained
    outcome, req = inc.advance(0.0)
    assert outcome is WHOLE and req.path == "/x" and body_bytes(req.body) == b""


def test_the_head_is_due_from_its_first_byte_and_the_body_at_a_rate_over_each_window():
    limits = Limits(head_timeout=10, min_rate=1000, window=4, grace=2)
    inc = incoming(limits)
    assert feed(inc, [b"\r\n"], now=5.0) == [(NEED, None)] and not inc.started  # a CRLF between requests
    feed(inc, [b"POST /p HTTP/1.1\r\n"], now=50.0)
    assert (inc.started, inc.deadline) == (50.0, 60.0)
    assert inc.overdue(60.0)  # a head not whole at its deadline is cut
    # A huge declared body gets no more time than a small one: the first window (grace included) ends 6 s on.
    feed(inc, [b"Host: x\r\nContent-Length: 30000000\r\n\r\n"], now=55.0)
    assert inc.deadline == 55.0 + 2 + 4
    feed(inc, [b"x" * 4000], now=58.0)  # 4000 bytes in the window: the floor (1000 B/s over 4 s) is met
    assert not inc.overdue(61.0) and inc.deadline == 65.0
    feed(inc, [b"x" * 3999], now=63.0)  # one byte short in the next window: cut
    assert inc.overdue(65.0)
    inc.discard()  # its spooled body's file
    # The last window asks no more than what is left of the body.
    inc = incoming(limits)
    feed(inc, [b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"x" * 50], now=1.0)
    assert not inc.overdue(7.0)  # 50 bytes moved, 50 left (the head counts for nothing)
    assert inc.overdue(11.0)  # nothing in the next window
    # A chunked body, whatever it announces, the same.
    inc = incoming(limits)
    feed(inc, [b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"], now=1.0)
    assert inc.deadline == 7.0
    feed(inc, [b"1000000\r\n" + b"x" * 100], now=2.0)
    assert inc.deadline == 7.0 and inc.overdue(7.0)


def test_the_limits_are_gunicorns_and_the_environments():
    cfg = Config()
    cfg.set("limit_request_fields", 10)
    cfg.set("limit_request_field_size", 100)
    cfg.set("limit_request_line", 200)
    limits = Limits.of(cfg, {"HTTPWORKER_HEAD_TIMEOUT_S": "2.5", "HTTPWORKER_MIN_RATE": "100",
                             "HTTPWORKER_MAX_BODY": "12345", "HTTPWORKER_SEND_RATE": "200",
                             "HTTPWORKER_RATE_WINDOW_S": "3", "HTTPWORKER_RATE_GRACE_S": "1",
                             "HTTPWORKER_OUTBOX_BYTES": "999"})
    assert (limits.head_timeout, limits.min_rate, limits.max_body) == (2.5, 100.0, 12345)
    assert (limits.send_rate, limits.window, limits.grace, limits.outbox) == (200.0, 3.0, 1.0, 999)
    assert (limits.head_cap, limits.line_cap, limits.field_cap) == (10 * 102 + 4 + 200 + 4, 200, 100)
    defaults = Limits.of(Config(), {})
    assert (defaults.head_timeout, defaults.min_rate, defaults.max_body) == (
        httpframe.HEAD_TIMEOUT_S, httpframe.MIN_RATE, httpframe.MAX_BODY)
    assert defaults == Limits()
