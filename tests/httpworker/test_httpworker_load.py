"""BTP's gunicorn worker under slow clients and slow upstreams, served for real: no request waits behind another
while a thread is free (BTP's place search on a Nominatim that takes 2 s; the same worker's other connections
while one request sleeps, that connection's next request served in order after it); heads and bodies sent slowly
hold nothing and are cut with 408 at their deadline, with no worker killed; 1 000 idle connections on one worker;
a client gone mid-body or before its answer; a graceful stop answering the slow requests under way; the arbiter's
timeout; threads handing connections back under a random mix of slow, fast and pipelined requests."""
import hashlib
import os
import random
import resource
import signal
import socket
import threading
import time

import pytest
import requests

from tests.live import gunicorn
from tests.rawhttp import Reader, connect, get
from tests.httpworker.test_httpworker import serve_demo

# gunicorn served for real, the worker alike on every database engine: run once per CI (pyproject.toml "slow")
pytestmark = pytest.mark.slow

HEAD_S, MIN_RATE, TIMEOUT_S = 2, 2000, 4  # the demo server's head deadline, body rate (bytes/s) and arbiter timeout
GRACE_S, WINDOW_S = 1, 1  # its body rate's grace and window: a body under the floor is cut GRACE_S + WINDOW_S on


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """BTP's worker, ONE process of 4 threads, short deadlines, room for 1 100 connections."""
    folder = tmp_path_factory.mktemp("load")
    with serve_demo(folder, args=("--threads", "4", "--timeout", str(TIMEOUT_S), "--keep-alive", "30",
                                  "--worker-connections", "1100", "-e", f"HTTPWORKER_HEAD_TIMEOUT_S={HEAD_S}",
                                  "-e", f"HTTPWORKER_MIN_RATE={MIN_RATE}", "-e", f"HTTPWORKER_RATE_GRACE_S={GRACE_S}",
                                  "-e", f"HTTPWORKER_RATE_WINDOW_S={WINDOW_S}")) as port:
        yield port, folder / "demo.log"


def pid_of(port: int, within: float = 0.0) -> int:
    """The pid of the worker that answers; `within`: seconds to keep asking while no worker answers (a killed
    worker's replacement still booting on a busy machine)."""
    deadline = time.monotonic() + within
    while True:
        with connect(port) as sock:
            sock.sendall(get("/pid"))
            answer = Reader(sock).answer()
        if answer is not None or time.monotonic() > deadline:
            return int(answer.body)
        time.sleep(0.2)


class Prober(threading.Thread):
    """Asks `path` every `every` seconds on one kept-alive connection (a new one if it closes) until stopped;
    records each answer's latency, and failures."""

    def __init__(self, port: int, path: str = "/one", every: float = 0.05):
        super().__init__(daemon=True)
        self.port, self.path, self.every = port, path, every
        self.latencies, self.failures, self.halt = [], [], threading.Event()

    def run(self):
        sock = reader = None
        while not self.halt.is_set():
            try:
                if sock is None:
                    sock = connect(self.port)
                    reader = Reader(sock)
                started = time.monotonic()
                sock.sendall(get(self.path))
                answer = reader.answer(timeout=10)
                if answer is None or answer.status != 200:
                    raise OSError(f"answer: {answer}")
                self.latencies.append(time.monotonic() - started)
            except OSError as exc:
                self.failures.append(repr(exc))
                sock = None
            self.halt.wait(self.every)
        if sock is not None:
            sock.close()

    def stop(self) -> "Prober":
        self.halt.set()
        self.join(15)
        return self


def test_clients_on_kept_connections_are_answered_while_place_searches_wait_on_a_slow_upstream(
        app_config, fake_nominatim, rider, tmp_path):
    """The issue's measurement: two workers, a place search service taking 2 s, eight clients on kept connections
    asking /healthz meanwhile (it took up to 2 s behind the searches with one request at a time per worker)."""
    _, auth = rider
    fake_nominatim.places = [fake_nominatim.place("Lyon", 45.76, 4.83)]
    fake_nominatim.slow(2.0, times=None)
    with gunicorn({**app_config, "BTP_NOMINATIM_URL": fake_nominatim.base_url}, tmp_path / "g.log",
                  workers=2) as live:
        searches = []

        def search(i):
            started = time.monotonic()
            answer = requests.get(f"{live.url}/api/geocode/search", params={"q": f"Lyon {i}"}, headers=auth,
                                  timeout=30)
            searches.append((answer.status_code, time.monotonic() - started))

        port = int(live.url.rsplit(":", 1)[1])
        probers = [Prober(port, "/healthz") for _ in range(8)]
        for prober in probers:
            prober.start()
        time.sleep(0.3)
        slow = [threading.Thread(target=search, args=(i,)) for i in range(4)]
        for thread in slow:
            thread.start()
        for thread in slow:
            thread.join(30)
        for prober in probers:
            prober.stop()
    assert len(searches) == 4 and all(status == 200 and took >= 1.8 for status, took in searches), searches
    latencies = [lat for prober in probers for lat in prober.latencies]
    assert not any(prober.failures for prober in probers), [prober.failures for prober in probers]
    assert len(latencies) >= 8 * 10 and max(latencies) < 1.0, sorted(latencies)[-5:]  # well under the 2 s


def test_a_slow_request_does_not_hold_its_workers_other_connections_and_its_next_request_follows(demo):
    port, _ = demo
    probers = [Prober(port) for _ in range(4)]
    for prober in probers:
        prober.start()
    with connect(port) as slow:
        reader = Reader(slow)
        slow.sendall(get("/sleep?s=1.5"))
        time.sleep(0.3)
        slow.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: next\r\nContent-Length: 3\r\n\r\nabc")  # meanwhile
        first = reader.answer()
        window = time.monotonic()
        second = reader.answer()
        assert (first.status, first.body, second.status) == (200, b"slept", 200)
        assert second.body.endswith(b" next") and not first.closes()
        slow.sendall(get("/one"))
        assert reader.answer().status == 200
    for prober in probers:
        prober.stop()
    assert not any(prober.failures for prober in probers)
    during = [lat for prober in probers for lat in prober.latencies]
    assert len(during) >= 4 * 10 and max(during) < 0.75, sorted(during)[-5:]
    assert window > 1.4


def test_slow_heads_and_bodies_hold_nothing_and_are_cut_with_408(demo):
    port, log = demo
    pid = pid_of(port)
    cut, lock = [], threading.Lock()

    def trickle(first: bytes, then: bytes, every: float, until: float):
        while time.monotonic() < until:
            try:
                with connect(port) as sock:
                    sock.sendall(first)
                    started = time.monotonic()
                    reader = Reader(sock)
                    for byte in then:
                        sock.sendall(bytes([byte]))
                        answer = reader.answer(timeout=every)
                        if answer is not None or reader.eof:
                            with lock:
                                cut.append((first[:4], answer and answer.status, time.monotonic() - started))
                            break
            except OSError:
                pass

    until = time.monotonic() + TIMEOUT_S + 2  # longer than the arbiter's timeout
    head = b"GET /one HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"p" * 200
    body_head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"  # a byte per 0.3 s: under the floor
    slowpokes = [threading.Thread(target=trickle, args=(b"G", head, 0.3, until)) for _ in range(4)]
    slowpokes += [threading.Thread(target=trickle, args=(body_head, b"b" * 1000, 0.3, until)) for _ in range(2)]
    probers = [Prober(port), Prober(port, every=0.2)]
    for thread in slowpokes + probers:
        thread.start()
    for thread in slowpokes:
        thread.join(30)
    for prober in probers:
        prober.stop()
    assert not any(prober.failures for prober in probers)
    latencies = [lat for prober in probers for lat in prober.latencies]
    assert len(latencies) >= 40 and max(latencies) < 0.75, sorted(latencies)[-5:]
    heads = [c for c in cut if c[0] == b"G"]
    bodies = [c for c in cut if c[0] == b"POST"]
    assert heads and all(status == 408 and HEAD_S - 0.5 <= took <= HEAD_S + 1.5 for _, status, took in heads), heads
    assert bodies and all(status == 408 and GRACE_S + WINDOW_S - 0.5 <= took <= GRACE_S + WINDOW_S + 1.5
                          for _, status, took in bodies), bodies
    assert pid_of(port) == pid and "WORKER TIMEOUT" not in log.read_text()


def test_a_thousand_idle_connections_on_one_worker_and_it_still_answers(demo):
    port, _ = demo
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    idle = []
    try:
        for i in range(1000):
            sock = connect(port)
            idle.append(sock)
            if i % 10 == 0:  # some of them served once, then idle
                sock.sendall(get("/one"))
                assert Reader(sock).answer().status == 200
        prober = Prober(port, every=0.01)
        prober.start()
        time.sleep(1.0)
        prober.stop()
        assert not prober.failures and len(prober.latencies) >= 20 and max(prober.latencies) < 0.5
        for sock in idle[::97]:  # and the idle ones are still served
            sock.sendall(get("/one"))
            assert Reader(sock).answer().status == 200
    finally:
        for sock in idle:
            sock.close()


def test_clients_gone_mid_body_or_before_their_answer_leave_the_worker_serving(demo):
    port, log = demo
    pid = pid_of(port)
    for _ in range(3):
        with connect(port) as sock:  # killed mid-body
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 50_000)
        reset = connect(port)  # reset mid-body
        reset.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 10)
        reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        reset.close()
        with connect(port) as sock:  # gone before its (slow) answer
            sock.sendall(get("/sleep?s=0.2") + get("/big"))
        with connect(port) as sock:  # gone before reading a large answer
            sock.sendall(get("/big") * 20)
    time.sleep(0.8)
    with connect(port) as sock:
        sock.sendall(get("/one"))
        assert Reader(sock).answer().status == 200
    assert pid_of(port) == pid
    assert "Traceback" not in log.read_text()


def test_a_graceful_stop_answers_the_slow_requests_under_way(tmp_path):
    with serve_demo(tmp_path, args=("--threads", "4")) as port:
        proc = serve_demo.proc
        slow = [connect(port) for _ in range(3)]
        idle = connect(port)
        idle.sendall(get("/one"))
        assert Reader(idle).answer().status == 200
        for i, sock in enumerate(slow):
            sock.sendall(get(f"/sleep?s={1.0 + i * 0.2}"))
        time.sleep(0.3)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert Reader(idle).closed(1.0)  # idle: closed at once
        for sock in slow:
            answer = Reader(sock).answer(timeout=10)
            assert (answer.status, answer.body, answer.closes()) == (200, b"slept", True)
        proc.wait(10)
        assert proc.returncode == 0 and time.monotonic() - started < 4
        for sock in slow + [idle]:
            sock.close()
    assert "Traceback" not in (tmp_path / "demo.log").read_text()
    assert os.path.exists(tmp_path / "demo.log")


def test_the_arbiters_timeout_kills_a_stuck_request_not_a_worker_whose_threads_are_all_busy(tmp_path):
    """The heartbeat is dated from the oldest request under way: every thread busy with requests younger than
    `timeout` keeps the worker (it says so in the log), one request older than `timeout` gets it killed, as
    gunicorn's sync worker would be."""
    with serve_demo(tmp_path, args=("--threads", "2", "--timeout", "3")) as port:
        pid = pid_of(port)
        busy = [connect(port) for _ in range(2)]
        for sock in busy:
            sock.sendall(get("/sleep?s=2.5"))
        for sock in busy:
            assert Reader(sock).answer(timeout=10).body == b"slept"
            sock.close()
        assert pid_of(port) == pid
        log = (tmp_path / "demo.log").read_text()
        assert "All 2 threads of this worker are serving requests" in log and "WORKER TIMEOUT" not in log
        with connect(port) as stuck:
            stuck.sendall(get("/sleep?s=30"))
            started = time.monotonic()
            assert Reader(stuck).answer(timeout=15) is None  # killed with it
            assert 2.5 <= time.monotonic() - started <= 10
        deadline = time.monotonic() + 10
        while "WORKER TIMEOUT" not in (tmp_path / "demo.log").read_text():
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert pid_of(port, within=30) != pid  # a new worker serves


def test_slow_fast_and_pipelined_requests_on_many_connections_are_each_answered_in_order(demo):
    """Threads take the loop over and hand connections back many times a second: every answer is its request's."""
    port, log = demo
    errors, counts = [], []

    def client(seed: int):
        rng, sent, done = random.Random(seed), 0, 0
        until = time.monotonic() + 3
        try:
            with connect(port) as sock:
                reader = Reader(sock)
                while time.monotonic() < until:
                    batch = []
                    for _ in range(rng.choice((1, 1, 2, 3))):  # pipelined now and then
                        tag = f"{seed}-{sent}"
                        sent += 1
                        kind = rng.random()
                        if kind < 0.3:
                            batch.append((get(f"/sleep?s={rng.choice((0.03, 0.06, 0.1))}"), b"slept"))
                        else:
                            body = bytes(rng.randrange(256) for _ in range(rng.choice((0, 10, 3000, 70_000))))
                            request = (b"POST /echo HTTP/1.1\r\nHost: x\r\nX-N: %s\r\nContent-Length: %d\r\n\r\n"
                                       % (tag.encode(), len(body)) + body)
                            batch.append((request, b"POST %d %s %s" % (len(body), hashlib.sha256(body).hexdigest()[
                                :16].encode(), tag.encode())))
                    sock.sendall(b"".join(request for request, _ in batch))
                    for _, want in batch:
                        answer = reader.answer(timeout=10)
                        if answer is None or answer.body != want:
                            errors.append((seed, want[:40], answer and answer.body[:40]))
                            return
                        done += 1
        except OSError as exc:
            errors.append((seed, repr(exc)))
        counts.append(done)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors[:5]
    assert len(counts) == 12 and sum(counts) >= 12 * 10, counts
    assert "Traceback" not in log.read_text()
