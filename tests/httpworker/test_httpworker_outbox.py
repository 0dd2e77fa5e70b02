"""What BTP's worker does with answers to slow readers and with a full worker: the outbox (httpworker/outbox.py)
holds what the socket does not take, within the worker's budget, and sends it in order; over the budget the
serving thread sends at the client's pace, and a client reading under the floor is cut; the floor's windows.
Served for real: a big answer to a slow reader, then its pipelined request; a full worker sheds its idlest
connection (idle longest first, then the slowest sender, never one being served) so a new client is answered."""
import socket
import threading
import time

import pytest

from httpworker.outbox import Budget, Outbox, Pace
from tests.httpworker.test_httpworker_hold import served_like_make_run
from tests.rawhttp import Reader, connect, get

HUGE = bytes(range(256)) * 8192  # 2 MiB


def pair(sndbuf: int = 8192):
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, sndbuf)
    return ours, theirs


def drain(sock, size: int) -> bytes:
    sock.settimeout(5)
    out = b""
    while len(out) < size:
        out += sock.recv(65536)
    return out


def test_the_pace_asks_the_floor_over_each_window_after_the_grace_and_no_more_than_is_left():
    pace = Pace(100.0, min_rate=1000, window=2, grace=3)
    assert pace.deadline == 105.0 and pace.check(104.9, float("inf"))  # not due yet
    pace.moved = 2000
    assert pace.check(105.0, float("inf")) and pace.deadline == 107.0
    pace.moved = 3999  # one byte short of 2000 in the next window
    assert not pace.check(107.0, float("inf"))
    assert pace.check(107.0, 1999)  # ... but only 1999 were left to move


def test_what_the_socket_does_not_take_is_held_within_the_budget_and_sent_in_order():
    ours, theirs = pair()
    budget = Budget(64 * 1024 * 1024)
    box = Outbox(ours, budget, Pace(time.monotonic(), 1000, 10, 5))
    with ours, theirs:
        box.sendall(HUGE[:1024])
        box.sendall(bytearray(HUGE[1024:]))  # returns at once: the rest is held
        assert 0 < box.held < len(HUGE) and budget.held == box.held
        got = b""
        while not box.flush():
            got += theirs.recv(65536)
        got += drain(theirs, len(HUGE) - len(got))
        assert got == HUGE and box.held == 0 and budget.held == 0 and box.pace.moved == len(HUGE)


def test_over_the_budget_the_thread_sends_itself_and_a_client_reading_nothing_is_cut():
    ours, theirs = pair()
    budget = Budget(0)
    box = Outbox(ours, budget, Pace(time.monotonic(), 1000, 0.3, 0.2))
    with ours, theirs:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            box.sendall(HUGE)
        assert time.monotonic() - started < 5 and budget.held == 0


def test_over_the_budget_a_client_reading_at_the_floor_gets_it_all():
    ours, theirs = pair()
    box = Outbox(ours, Budget(0), Pace(time.monotonic(), 1000, 0.3, 0.2))
    with ours, theirs:
        reader = threading.Thread(target=lambda: got.append(drain(theirs, len(HUGE))))
        got: list = []
        reader.start()
        box.sendall(HUGE)
        reader.join(10)
        assert got == [HUGE]


def test_a_cut_connection_gives_its_held_bytes_back_to_the_budget():
    ours, theirs = pair()
    budget = Budget(64 * 1024 * 1024)
    box = Outbox(ours, budget, Pace(time.monotonic(), 1000, 10, 5))
    with ours, theirs:
        box.sendall(HUGE)
        now = time.monotonic()
        box.overdue(now + 16)  # the first window may count what the socket took at once
        assert budget.held > 0 and box.overdue(now + 30)  # nothing read for a window: under the floor
        box.discard()
        assert budget.held == 0 and box.held == 0 and not box.pending


# --- served for real ---------------------------------------------------------------------------------------------
def outbox_app(environ, start_response):
    path = environ["PATH_INFO"]
    body = HUGE if path == "/huge" else path.encode()
    if path == "/sleep":
        time.sleep(3)
    start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(body)))])
    return [body]


APP = "tests.httpworker.test_httpworker_outbox:outbox_app"


@pytest.mark.slow
def test_a_big_answer_read_slowly_then_the_pipelined_request_in_order(tmp_path):
    with served_like_make_run(tmp_path, APP, ("--workers", "1")) as (_, port, _log):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
        sock.connect(("127.0.0.1", port))
        with sock:
            sock.sendall(get("/huge") + get("/after"))
            time.sleep(1.0)  # the answer waits in the outbox meanwhile; another client is served
            with connect(port) as other:
                other.sendall(get("/other"))
                assert Reader(other).answer(timeout=5).body == b"/other"
            reader = Reader(sock)
            first, second = reader.answer(timeout=20), reader.answer(timeout=5)
            assert first.status == 200 and first.body == HUGE
            assert second.status == 200 and second.body == b"/after"


@pytest.mark.slow
def test_a_full_worker_sheds_the_connection_idle_longest_first(tmp_path):
    extra = ("--workers", "1", "--worker-connections", "4", "--keep-alive", "30")
    with served_like_make_run(tmp_path, APP, extra) as (_, port, _log):
        time.sleep(0.3)  # the start-up probe's connection is gone
        busy = connect(port)
        busy.sendall(get("/sleep"))  # served for 3 s: never shed
        silent = connect(port)
        silent.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")  # its body comes later
        old = connect(port)
        old.sendall(get("/old"))
        assert Reader(old).answer(timeout=5).body == b"/old"  # kept: the worker is not full yet
        time.sleep(0.2)
        idle = [old, connect(port)]  # the second has asked nothing yet: idle since it came, after the first
        time.sleep(0.2)
        with connect(port) as fifth:  # every slot taken, and still served
            fifth.sendall(get("/fifth"))
            assert Reader(fifth).answer(timeout=5).body == b"/fifth"
        assert Reader(idle[0]).closed(2.0)  # the one idle longest gave its slot
        idle[1].sendall(get("/again"))
        assert Reader(idle[1]).answer(timeout=5).body == b"/again"
        silent.sendall(b"b" * 100)  # a request on its way is not shed while an idle one can be
        assert Reader(silent).answer(timeout=5).body == b"/x"
        assert Reader(busy).answer(timeout=10).body == b"/sleep"
        for sock in [busy, silent, *idle]:
            sock.close()


@pytest.mark.slow
def test_with_none_idle_the_slowest_sender_is_shed_never_one_being_served(tmp_path):
    extra = ("--workers", "1", "--worker-connections", "3", "--keep-alive", "30")
    with served_like_make_run(tmp_path, APP, extra) as (_, port, _log):
        time.sleep(0.3)
        busy = connect(port)
        busy.sendall(get("/sleep"))
        halfway = connect(port)
        halfway.sendall(b"POST /y HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b"b" * 50)
        silent = connect(port)
        silent.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
        time.sleep(0.3)
        with connect(port) as fourth:
            fourth.sendall(get("/fourth"))
            assert Reader(fourth).answer(timeout=5).body == b"/fourth"
        assert Reader(silent).closed(2.0)  # nothing of its body: the slowest
        halfway.sendall(b"b" * 50)
        assert Reader(halfway).answer(timeout=5).body == b"/y"
        assert Reader(busy).answer(timeout=10).body == b"/sleep"
        for sock in (busy, halfway, silent):
            sock.close()
