"""No client holds BTP's server as `make run` serves it (gunicorn.conf.py's worker and settings, the two workers of
jobs/cli.py's serve): 4 500 connections each declaring a 32 MB body and sending nothing, or 20 clients reading a
17 MB GPX 2 KB every 4 s, and a client opening a new connection for /healthz is still answered within a second
(nine times in ten at least). The silent bodies and the slow readers are cut by the worker's floor rates
(httpworker/frame.py), the new connections get slots the idlest held ones give up (httpworker/conns.py), and once
they are gone the workers hold no connection and no temporary file more than before."""
from __future__ import annotations

import os
import resource
import runpy
import selectors
import socket
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest

from tests.live import BIN, ROOT, free_port, gunicorn, stop
from tests.rawhttp import Reader, get

pytestmark = pytest.mark.slow

WORKERS = 2  # jobs/cli.py serve_command: `gunicorn --workers 2 wsgi:app`, settings from gunicorn.conf.py
CONF = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
FLOOD = 4500
SILENT_HEAD = b"POST /api/trips/gpx-upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/gpx+xml\r\n" \
              b"Content-Length: %d\r\n\r\n" % (32 * 1024 * 1024)
GPX_POINTS = 180_000  # about 17 MB of GPX
READERS, READ_BYTES, READ_EVERY_S = 20, 2048, 4.0


def room_for(n: int) -> None:
    """This process may open `n` more descriptors (the soft limit raised within the hard one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"ulimit -n: a hard limit of {hard} descriptors, {want} needed")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def workers_of(master: int) -> list[int]:
    with open(f"/proc/{master}/task/{master}/children") as f:
        return [int(pid) for pid in f.read().split()]


def _connection_inodes(port: int) -> set[str]:
    """The socket inodes of TCP connections (not the listener) whose local port is `port`."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] != "0A":
                    inodes.add(fields[9])
    return inodes


def held(master: int, port: int) -> dict[int, tuple[int, set[str]]]:
    """Each worker: (its connections on `port`, the deleted files it has open: temporary files)."""
    out = {}
    inodes = _connection_inodes(port)
    for pid in workers_of(master):
        conns, deleted = 0, set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                conns += 1
            elif target.endswith("(deleted)"):
                deleted.add(target)
        out[pid] = (conns, deleted)
    return out


def settled(master: int, port: int, before: dict, within: float = 30.0) -> dict:
    """The workers' holdings once they are back to what they held `before` (or after `within` seconds)."""
    deadline = time.monotonic() + within
    while True:
        now = held(master, port)
        if all(pid in now and now[pid][0] == 0 and now[pid][1] <= before[pid][1] for pid in before) \
                or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


class Probes(threading.Thread):
    """A new connection every `every` seconds asking `path`: the time each took to be answered whole (None:
    refused, failed or not answered within 5 s)."""

    def __init__(self, port: int, path: str = "/healthz", every: float = 0.2):
        super().__init__(daemon=True)
        self.port, self.path, self.every = port, path, every
        self.times: list[float | None] = []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.wait(self.every):
            started = time.monotonic()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    sock.sendall(get(self.path, "Connection: close"))
                    answer = Reader(sock).answer(timeout=5)
                ok = answer is not None and answer.status == 200
            except OSError:
                ok = False
            self.times.append(time.monotonic() - started if ok else None)

    def stop(self) -> list[float | None]:
        self.halt.set()
        self.join(15)
        return self.times


def assert_served(times: list[float | None]) -> None:
    fast = sum(1 for t in times if t is not None and t <= 1.0)
    assert len(times) >= 50 and fast >= 0.9 * len(times), \
        f"{fast} of {len(times)} probes answered within 1 s; slowest: {sorted(t or 99 for t in times)[-10:]}"


def silent_bodies(port: int, n: int, within: float = 60.0) -> list[socket.socket]:
    """`n` connections, each sending a head that declares a 32 MB body, then nothing."""
    selector = selectors.DefaultSelector()
    socks = []
    for _ in range(n):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        selector.register(sock, selectors.EVENT_WRITE)
        socks.append(sock)
    left, deadline = n, time.monotonic() + within
    while left and time.monotonic() < deadline:
        for key, _ in selector.select(1.0):
            try:
                key.fileobj.send(SILENT_HEAD)
            except OSError:
                pass  # refused or shed already: it counts as sent
            selector.unregister(key.fileobj)
            left -= 1
    selector.close()
    return socks


def test_4500_connections_declaring_32_mb_and_sending_nothing_do_not_hold_the_server(app_config, tmp_path):
    room_for(FLOOD + 200)
    with gunicorn(app_config, tmp_path / "g.log", workers=WORKERS) as live:
        port = int(live.url.rsplit(":", 1)[1])
        before = held(live.proc.pid, port)
        probes = Probes(port)
        probes.start()
        socks = silent_bodies(port, FLOOD)
        try:
            time.sleep(20)  # the silent bodies held as long as the floor lets them
            assert_served(probes.stop())
            # what became of them: a 408 once under the floor, or closed for a newer client
            deadline, open_ = time.monotonic() + 30, socks
            while open_ and time.monotonic() < deadline:
                open_ = [s for s in open_ if not _answered_or_closed(s)]
                time.sleep(0.5)
            assert not open_, f"{len(open_)} silent connections still open"
        finally:
            probes.stop()
            for sock in socks:
                sock.close()
        after = settled(live.proc.pid, port, before)
        assert after.keys() == before.keys(), "a worker was replaced"
        for pid, (conns, deleted) in after.items():
            assert conns == 0 and deleted <= before[pid][1], (pid, conns, deleted - before[pid][1])


def _answered_or_closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        data = sock.recv(65536)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return not data or data.startswith(b"HTTP/1.1 408")


# --- slow readers of a big answer ------------------------------------------------------------------------------
def big_gpx_app(environ, start_response):
    """A GPX of GPX_POINTS points streamed in pieces (as trips/api/exports.py's download), and /healthz."""
    if environ["PATH_INFO"] == "/healthz":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
        return [b"ok"]
    start_response("200 OK", [("Content-Type", "application/gpx+xml")])
    return _gpx_pieces()


def _gpx_pieces():
    yield b'<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="test"><trk><trkseg>\n'
    point = '<trkpt lat="{:.6f}" lon="{:.6f}"><ele>{:.1f}</ele><time>2026-06-01T08:00:00Z</time></trkpt>\n'
    for start in range(0, GPX_POINTS, 500):
        yield "".join(point.format(45 + i * 1e-5, 5 + i * 1e-5, 200 + i % 50)
                      for i in range(start, min(start + 500, GPX_POINTS))).encode()
    yield b"</trkseg></trk></gpx>\n"


@contextmanager
def served_like_make_run(tmp_path, app: str = "tests.httpworker.test_httpworker_hold:big_gpx_app", extra=()):
    """`app` (big_gpx_app) under gunicorn with BTP's worker and gunicorn.conf.py's own settings for it; `extra`:
    more gunicorn options. Yields (the master process, the port, the log)."""
    port = free_port()
    log = tmp_path / "gpx.log"
    args = ["--no-control-socket", "-c", "/dev/null", "--workers", str(WORKERS), "--worker-class",
            CONF["worker_class"], "--threads", str(CONF["threads"]), "--worker-connections",
            str(CONF["worker_connections"]), "--keep-alive", str(CONF["keepalive"]), "--timeout", str(CONF["timeout"]),
            *extra, "--bind", f"127.0.0.1:{port}", app]
    with open(log, "wb") as sink:
        proc = subprocess.Popen([str(BIN / "gunicorn"), *args], cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                    sock.sendall(get("/healthz"))
                    if (answer := Reader(sock).answer(timeout=5)) is not None and answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()
            time.sleep(0.1)
        yield proc, port, log
    finally:
        stop(proc)


class SlowReader(threading.Thread):
    """Asks for the GPX, then takes READ_BYTES of it every READ_EVERY_S until `halt` (or the connection ends)."""

    def __init__(self, port: int, halt: threading.Event):
        super().__init__(daemon=True)
        self.port, self.halt = port, halt
        self.got = 0

    def run(self):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)  # a small window, as a slow client's
        try:
            sock.settimeout(10)
            sock.connect(("127.0.0.1", self.port))
            sock.sendall(get("/gpx"))
            while not self.halt.wait(READ_EVERY_S):
                try:
                    data = sock.recv(READ_BYTES)
                except OSError:
                    data = b""
                if not data:
                    return
                self.got += len(data)
        finally:
            sock.close()


def test_20_clients_reading_a_17_mb_gpx_2_kb_every_4_s_do_not_hold_the_server(tmp_path):
    assert len(b"".join(_gpx_pieces())) > 16 * 1024 * 1024
    with served_like_make_run(tmp_path) as (proc, port, log):
        before = held(proc.pid, port)
        halt = threading.Event()
        readers = [SlowReader(port, halt) for _ in range(READERS)]
        probes = Probes(port)
        probes.start()
        for reader in readers:
            reader.start()
        try:
            time.sleep(25)
            assert_served(probes.stop())
            # the readers still read (or would): the workers have let them go all the same
            after = settled(proc.pid, port, before)
            assert all(reader.is_alive() for reader in readers)
        finally:
            halt.set()
            probes.stop()
            for reader in readers:
                reader.join(15)
        assert all(reader.got < 1024 * 1024 for reader in readers)  # cut long before they had the file
        assert after.keys() == before.keys(), "a worker was replaced"
        for pid, (conns, deleted) in after.items():
            assert conns == 0 and deleted <= before[pid][1], (pid, conns, deleted - before[pid][1])
