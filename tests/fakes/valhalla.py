"""A local HTTP server standing in for a Valhalla routing service (POST /route).

The answer is programmed; every request body is recorded (parsed JSON, or the raw bytes if not JSON):

    fake.set_route(points, split_at=5)          # two legs sharing points[5]; length = geodesic sum
    fake.set_route(points, length_km=12.5)      # one leg, given length
    fake.fail(400, error_code=442)              # Valhalla's "No path could be found for input"
    fake.fail(500)                              # a bare 500
    fake.set_body(b"{not json")                 # any 200 body
    fake.redirect("http://elsewhere/route")     # a 302
    fake.delay(2.0)                             # wait before answering (cut short by reset)
    fake.trickle(0.1)                           # send the body a byte every 0.1 s after the headers
    fake.bodies[-1]["costing"] == "bicycle"

Until programmed it answers 400 with error 442 (no route); a programmed answer applies to every request
until `reset`. Use the `fake_valhalla` fixture (one server for
the session, reset before and after each test) and `fake.config(**overrides)` for a trips.routing.RoutingConfig
aimed at it.
"""
from __future__ import annotations

import atexit
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Sequence

import pytest
from pyproj import Geod

_GEOD = Geod(ellps="WGS84")
_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_ERRORS = {442: "No path could be found for input", 171: "No suitable edges near location",
           170: "Locations are in unconnected regions. Go check/edit the map at osm.org",
           154: "Path distance exceeds the max distance limit"}


def encode_polyline6(points: Sequence[Sequence[float]]) -> str:
    """Encode (lat, lon[, ...]) points as a polyline with 6-digit precision (extra columns ignored)."""
    out: list[str] = []
    prev_lat = prev_lon = 0
    for point in points:
        lat, lon = round(point[0] * 1e6), round(point[1] * 1e6)
        for delta in (lat - prev_lat, lon - prev_lon):
            value = ~(delta << 1) if delta < 0 else delta << 1
            while value >= 0x20:
                out.append(chr((0x20 | (value & 0x1F)) + 63))
                value >>= 5
            out.append(chr(value + 63))
        prev_lat, prev_lon = lat, lon
    return "".join(out)


def geodesic_km(points: Sequence[Sequence[float]]) -> float:
    if len(points) < 2:
        return 0.0
    lats, lons = [p[0] for p in points], [p[1] for p in points]
    return float(_GEOD.line_length(lons, lats)) / 1000.0


def trip_json(points: Sequence[Sequence[float]], split_at: int | None = None, length_km: float | None = None,
              units: str = "kilometers") -> dict:
    """A Valhalla /route answer over `points`: one leg, or two sharing points[split_at]."""
    parts = [points] if split_at is None else [points[: split_at + 1], points[split_at:]]
    legs = [{"maneuvers": [], "summary": {"length": round(geodesic_km(p), 3), "time": 60.0},
             "shape": encode_polyline6(p)} for p in parts]
    total = geodesic_km(points) if length_km is None else length_km
    return {"trip": {
        "locations": [{"type": "break", "lat": points[0][0], "lon": points[0][1]},
                      {"type": "break", "lat": points[-1][0], "lon": points[-1][1]}],
        "legs": legs, "summary": {"length": round(total, 3), "time": 600.0, "has_highway": False},
        "status_message": "Found route between points", "status": 0, "units": units, "language": "en-US",
    }}


class FakeValhalla:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._release = threading.Event()
        self.reset()

    # lifecycle
    def start(self) -> FakeValhalla:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, client_address: None  # disconnects are expected
        threading.Thread(target=self._server.serve_forever, name="fake-valhalla", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._release.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "server not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def config(self, **overrides: Any):
        """A trips.routing.RoutingConfig aimed at this server (2 s timeout)."""
        from trips.routing import RoutingConfig

        values: dict[str, Any] = {"valhalla_url": self.base_url, "timeout": 2.0}
        values.update(overrides)
        return RoutingConfig(**values)

    def reset(self) -> None:
        """Forget the answer, delay and recorded requests; wake up any delayed answer still waiting."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self._answer: tuple[int, bytes, dict[str, str]] = (
                400, json.dumps({"error_code": 442, "error": _ERRORS[442], "status_code": 400,
                                 "status": "Bad Request"}).encode(), {})
            self._delay = 0.0
            self._trickle = 0.0
            self.bodies: list[Any] = []
            self.paths: list[str] = []
            self.headers: list[dict[str, str]] = []

    # programming
    def set_route(self, points: Sequence[Sequence[float]], split_at: int | None = None,
                  length_km: float | None = None, units: str = "kilometers") -> None:
        self.set_body(json.dumps(trip_json(points, split_at, length_km, units)).encode())

    def set_body(self, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> None:
        with self._lock:
            self._answer = (status, body, headers or {})

    def fail(self, status: int, error_code: int | None = None, error: str | None = None) -> None:
        """Answer `status`, with a Valhalla error body when `error_code` is given."""
        if error_code is None:
            body = b"<html>internal error: must never reach the user</html>"
        else:
            body = json.dumps({"error_code": error_code, "error": error or _ERRORS.get(error_code, "error"),
                               "status_code": status, "status": "Bad Request"}).encode()
        self.set_body(body, status)

    def redirect(self, location: str, status: int = 302) -> None:
        self.set_body(b"", status, {"Location": location})

    def delay(self, seconds: float) -> None:
        with self._lock:
            self._delay = seconds

    def trickle(self, interval: float) -> None:
        with self._lock:
            self._trickle = interval

    # used by the handler
    def _take(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[tuple, float, float, threading.Event]:
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        with self._lock:
            self.paths.append(path)
            self.headers.append(headers)
            self.bodies.append(body)
            return self._answer, self._delay, self._trickle, self._release


class _Handler(BaseHTTPRequestHandler):
    owner: FakeValhalla
    server_version = "FakeValhalla/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        try:
            self._serve()
        except _DISCONNECTS:
            pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 1024 * 1024))
        headers = {k.lower(): v for k, v in self.headers.items()}
        (status, body, extra), delay, trickle, release = self.owner._take(self.path, headers, raw)
        if delay and release.wait(delay):
            return  # reset while waiting: drop the connection
        if self.path.split("?", 1)[0] != "/route":
            status, body, extra = 404, b'{"error_code":106,"error":"Try any of: \'/route\'"}', {}
        self.send_response(status)
        self.send_header("Content-Type", "application/json;charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        if not trickle:
            self.wfile.write(body)
            return
        for i in range(len(body)):
            self.wfile.write(body[i:i + 1])
            self.wfile.flush()
            if release.wait(trickle):
                return


_instance: FakeValhalla | None = None
_instance_lock = threading.Lock()


def get_fake_valhalla() -> FakeValhalla:
    """The process-wide server, started on first use and stopped at exit."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = FakeValhalla().start()
            atexit.register(_instance.stop)
        return _instance


@pytest.fixture
def fake_valhalla() -> Iterator[FakeValhalla]:
    """The shared fake, reset before and after the test."""
    fake = get_fake_valhalla()
    fake.reset()
    yield fake
    fake.reset()


__all__ = ["FakeValhalla", "encode_polyline6", "fake_valhalla", "geodesic_km", "get_fake_valhalla", "trip_json"]
