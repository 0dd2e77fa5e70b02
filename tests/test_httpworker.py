"""BTP's gunicorn worker (trips/core/httpworker.py), served for real: keep-alive on one connection, pipelined
requests, connections taking turns on one worker, an idle connection closed after `keepalive`, a stalled request
cut off, the connection cap, max_requests, and a prompt graceful stop with idle connections open."""
import re
import signal
import socket
import time

import pytest

from tests.live import gunicorn
from trips.core.httpworker import READ_TIMEOUT_S

REQUEST = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


@pytest.fixture(scope="module")
def one_worker(app_config, tmp_path_factory):
    """One worker (so connections must take turns), idle connections kept 2 s, at most 3 of them."""
    log = tmp_path_factory.mktemp("httpworker") / "gunicorn.log"
    with gunicorn(app_config, log, workers=1, args=("--keep-alive", "2", "--worker-connections", "3")) as live:
        yield live


def connect(live) -> socket.socket:
    host, port = live.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    return sock


def read_answer(sock) -> tuple[int, dict, bytes]:
    """One HTTP/1.1 answer with a Content-Length: (status, headers lower-cased, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
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


@pytest.mark.slow
def test_a_stalled_request_is_cut_off_and_the_worker_goes_on(one_worker):
    stalled = connect(one_worker)
    stalled.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127")  # and nothing more
    time.sleep(0.3)
    assert closed_by_server(stalled, READ_TIMEOUT_S + 3)
    stalled.close()
    other = connect(one_worker)
    other.sendall(REQUEST)
    assert read_answer(other)[0] == 200
    other.close()


def test_max_requests_restarts_the_worker_after_its_answer(app_config, tmp_path):
    with gunicorn(app_config, tmp_path / "g.log", workers=1, args=("--max-requests", "3")) as live:  # the start-up probe is the first
        sock = connect(live)
        sock.sendall(REQUEST)
        assert read_answer(sock)[0] == 200
        sock.sendall(REQUEST)
        status, headers, _ = read_answer(sock)
        assert status == 200 and headers.get("connection", "").lower() == "close"
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
