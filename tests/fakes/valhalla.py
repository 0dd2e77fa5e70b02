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
the session, reset before and after each test) and `fake.config(**overrides)` for a trips.providers.valhalla.RoutingConfig
aimed at it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Hashable, Sequence

from pyproj import Geod

from tests.fakes.server import FakeHandler, FakeServer, configured, fixture_for, singleton

_GEOD = Geod(ellps="WGS84")
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


@dataclass
class _Post:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # parsed JSON, or the raw bytes if not JSON


class _Handler(FakeHandler):
    methods = ("POST",)

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 1024 * 1024))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        _, state, release = self.owner._take(_Post(self.path, self.lowered_headers(), body))
        (status, answer, extra), delay, trickle = state
        if delay and release.wait(delay):
            return  # reset while waiting: drop the connection
        if self.path.split("?", 1)[0] != "/route":
            status, answer, extra = 404, b'{"error_code":106,"error":"Try any of: \'/route\'"}', {}
        self._send(status, answer, "application/json;charset=utf-8", extra, trickle=trickle, release=release)


class FakeValhalla(FakeServer):
    handler = _Handler
    thread_name = "fake-valhalla"

    def config(self, **overrides: Any):
        """A trips.providers.valhalla.RoutingConfig aimed at this server (2 s timeout)."""
        from trips.providers.valhalla import RoutingConfig

        return configured(RoutingConfig, overrides, valhalla_url=self.base_url, timeout=2.0)

    def _clear(self) -> None:
        """Forget the answer, delay and recorded requests."""
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
    def _record(self, request: _Post) -> None:
        super()._record(request)
        self.paths.append(request.path)
        self.headers.append(request.headers)
        self.bodies.append(request.body)

    def _state(self, key: Hashable) -> tuple[tuple[int, bytes, dict[str, str]], float, float]:
        return self._answer, self._delay, self._trickle


get_fake_valhalla = singleton(FakeValhalla)
fake_valhalla = fixture_for(get_fake_valhalla, "fake_valhalla")


__all__ = ["FakeValhalla", "encode_polyline6", "fake_valhalla", "geodesic_km", "get_fake_valhalla", "trip_json"]
