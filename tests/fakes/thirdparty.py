"""A local HTTP server standing in for Komoot, Strava and RideWithGPS, all on one port.

Paths: GET /tour/{id} and /collection/{id} (Komoot HTML with a `kmtBoot.setProps("…")` payload),
/routes/{id}/export_gpx (Strava GPX), /routes/{id}.json (RideWithGPS JSON with x/y/e track points).
Unknown ids answer 404. Failure modes are programmed per path (query string ignored) and consumed in order:

    fake.add_komoot_tour("1", "Alps", make_points(20))
    fake.fail("/tour/1", 500, times=2)           # two 500s, then the tour
    fake.redirect("/tour/1", "/tour/2")            # every request redirected (times=None)
    fake.slow("/tour/1", 1.5)                      # answer after 1.5 s, once
    fake.oversized("/tour/1", 50 * 1024 * 1024)    # stream 50 MB of junk (fake.streams records progress)
    fake.requests_to("/tour/1") == 3

Use the `fake_thirdparty` fixture (one server for the session, reset before each test), and
`fake.source_config(**overrides)` for a trips.sources.SourceConfig whose three base URLs point here.
"""
from __future__ import annotations

import atexit
import json
import math
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Sequence
from xml.sax.saxutils import escape as xml_escape

import pytest
from pyproj import Geod

Point = tuple[float, float, float]
_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_GEOD = Geod(ellps="WGS84")


def make_points(
    n: int = 50, start: tuple[float, float] = (45.0, 5.0), step_m: float = 100.0,
    ele_start: float = 250.0, climb_m: float = 120.0, wiggle_deg: float = 30.0,
) -> list[Point]:
    """`n` points (lat, lon, ele) heading north-east from `start`, each exactly `step_m` metres (WGS-84
    geodesic) after the previous one, so the route is (n-1)*step_m long. The heading swings by ±`wiggle_deg`
    every 50 points so the line meanders like a road (0 gives a straight geodesic, which simplification
    reduces to its two ends). The elevation rises by `climb_m` over the first half and falls back."""
    lat, lon = start
    points: list[Point] = []
    for i in range(n):
        ele = ele_start + climb_m * math.sin(math.pi * i / max(n - 1, 1))
        points.append((round(lat, 7), round(lon, 7), round(ele, 1)))
        heading = 45.0 + wiggle_deg * math.sin(2 * math.pi * i / 50)
        lon, lat, _ = _GEOD.fwd(lon, lat, heading, step_m)
    return points


def gpx_from_points(points: Sequence[Point], name: str | None = "Strava Route") -> bytes:
    """A GPX 1.1 document in Strava's export shape: one <trk> (with <name>) and one <trkseg>."""
    pts = "\n".join(f'   <trkpt lat="{lat}" lon="{lon}">\n    <ele>{ele}</ele>\n   </trkpt>' for lat, lon, ele in points)
    title = f"  <name>{xml_escape(name)}</name>\n" if name is not None else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<gpx creator="StravaGPX" version="1.1" xmlns="http://www.topografix.com/GPX/1/1">\n'
        f" <trk>\n{title}  <type>cycling</type>\n  <trkseg>\n{pts}\n  </trkseg>\n </trk>\n</gpx>\n"
    ).encode()


def komoot_html(props: dict) -> bytes:
    """A Komoot-like page whose script passes `props` as a JSON string to kmtBoot.setProps."""
    literal = json.dumps(json.dumps(props)).replace("</", "<\\/")
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>komoot</title></head><body><div id=app></div>"
        f"<script>window.kmtBoot && kmtBoot.setProps({literal});</script></body></html>"
    ).encode()


@dataclass
class RecordedRequest:
    method: str
    path: str  # with the query string
    headers: dict[str, str]  # lower-cased names


@dataclass
class StreamRecord:
    """Progress of one oversized answer; `done` is set when the handler stops writing."""

    total: int
    sent: int = 0
    aborted: bool = False
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class _Behaviour:
    kind: str  # status | redirect | slow | oversized
    remaining: int | None  # None = forever
    params: dict[str, Any]


class FakeThirdParty:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._release = threading.Event()
        self.reset()

    # lifecycle
    def start(self) -> FakeThirdParty:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, client_address: None  # disconnects are expected
        threading.Thread(target=self._server.serve_forever, name="fake-thirdparty", daemon=True).start()
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

    def url(self, path: str) -> str:
        return self.base_url + path

    def source_config(self, **overrides: Any):
        """A trips.sources.SourceConfig aimed at this server, with no retry backoff and a 2 s timeout."""
        from trips.sources import SourceConfig

        values = {"komoot_url": self.base_url, "strava_url": self.base_url, "ridewithgps_url": self.base_url,
                  "timeout": 2.0, "backoff": 0.0}
        values.update(overrides)
        return SourceConfig(**values)

    def reset(self) -> None:
        """Forget routes, behaviours and recorded requests; wake up any slow answer still waiting."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self._routes: dict[str, tuple[str, bytes]] = {}  # path -> (content type, body)
            self._behaviours: dict[str, list[_Behaviour]] = {}
            self._requests: list[RecordedRequest] = []
            self.streams: list[StreamRecord] = []

    # routes
    def set_response(self, path: str, body: bytes, content_type: str = "text/plain") -> None:
        """Serve `body` with 200 at `path` (any content, e.g. a malformed page)."""
        with self._lock:
            self._routes[path] = (content_type, body)

    def add_komoot_tour(self, tour_id: str | int, name: str | None, points: Sequence[Point]) -> None:
        tour: dict[str, Any] = {"id": str(tour_id), "type": "tour_planned", "_embedded": {"coordinates": {
            "items": [{"lat": lat, "lng": lon, "alt": ele, "t": i * 1000} for i, (lat, lon, ele) in enumerate(points)]
        }}}
        if name is not None:
            tour["name"] = name
        self.set_response(f"/tour/{tour_id}", komoot_html({"page": {"_embedded": {"tour": tour}}}),
                          "text/html; charset=utf-8")

    def add_collection(self, collection_id: str | int, name: str | None, tour_ids: Sequence[str | int]) -> None:
        items = [{"id": int(t), "type": "tour_planned", "name": f"Tour {t}"} for t in tour_ids]
        hal: dict[str, Any] = {"id": int(collection_id), "_embedded": {"compilation": {"_embedded": {"items": items}}}}
        if name is not None:
            hal["name"] = name
        self.set_response(f"/collection/{collection_id}", komoot_html({"page": {"_embedded": {"collectionHal": hal}}}),
                          "text/html; charset=utf-8")

    def add_strava(self, route_id: str | int, gpx: bytes) -> None:
        self.set_response(f"/routes/{route_id}/export_gpx", gpx, "application/gpx+xml")

    def add_rwgps(self, route_id: str | int, name: str | None, points: Sequence[Point], style: str = "xy") -> None:
        """style "xy" is the real RideWithGPS shape {x: lon, y: lat, e}; "latlng" gives {lat, lng, e}."""
        if style == "xy":
            pts = [{"x": lon, "y": lat, "e": ele, "d": i * 10.0} for i, (lat, lon, ele) in enumerate(points)]
        else:
            pts = [{"lat": lat, "lng": lon, "e": ele} for lat, lon, ele in points]
        route: dict[str, Any] = {"id": int(route_id), "track_points": pts}
        if name is not None:
            route["name"] = name
        self.set_response(f"/routes/{route_id}.json", json.dumps({"type": "route", "route": route}).encode(),
                          "application/json")

    # failure modes (queued per path, consumed in order; times=None means every request from then on)
    def _add(self, path: str, kind: str, times: int | None, **params: Any) -> None:
        with self._lock:
            self._behaviours.setdefault(path, []).append(_Behaviour(kind, times, params))

    def fail(self, path: str, status: int, times: int | None = 1, headers: dict[str, str] | None = None) -> None:
        self._add(path, "status", times, status=status, headers=headers or {})

    def redirect(self, path: str, location: str, times: int | None = None, status: int = 302) -> None:
        self._add(path, "redirect", times, status=status, location=location)

    def slow(self, path: str, seconds: float, times: int | None = 1) -> None:
        self._add(path, "slow", times, seconds=seconds)

    def oversized(self, path: str, size: int, content_length: bool = False, times: int | None = None) -> None:
        """Stream `size` junk bytes in 64 KB chunks, declaring Content-Length only if asked."""
        self._add(path, "oversized", times, size=size, content_length=content_length)

    # observations
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> int:
        """How many requests hit `path` (query string ignored)."""
        return sum(1 for r in self.requests if r.path.split("?", 1)[0] == path)

    # used by the handler
    def _take(self, method: str, path: str, headers: dict[str, str]) -> tuple[_Behaviour | None, Any, Any]:
        with self._lock:
            self._requests.append(RecordedRequest(method, path, headers))
            bare = path.split("?", 1)[0]
            queue = self._behaviours.get(bare) or []
            behaviour = queue[0] if queue else None
            if behaviour is not None and behaviour.remaining is not None:
                behaviour.remaining -= 1
                if behaviour.remaining <= 0:
                    queue.pop(0)
            return behaviour, self._routes.get(bare), self._release


class _Handler(BaseHTTPRequestHandler):
    owner: FakeThirdParty
    server_version = "FakeThirdParty/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        try:
            self._serve()
        except _DISCONNECTS:
            pass

    def _serve(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        behaviour, route, release = self.owner._take("GET", self.path, headers)
        if behaviour is not None:
            p = behaviour.params
            if behaviour.kind == "status":
                return self._send(p["status"], b"failure body: must never reach the user", "text/plain", p["headers"])
            if behaviour.kind == "redirect":
                return self._send(p["status"], b"", "text/plain", {"Location": p["location"]})
            if behaviour.kind == "oversized":
                return self._stream(p["size"], p["content_length"])
            if behaviour.kind == "slow" and release.wait(p["seconds"]):
                return  # reset while waiting: drop the connection
        if route is None:
            return self._send(404, b'{"error":"not found"}', "application/json")
        content_type, body = route
        self._send(200, body, content_type)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, size: int, content_length: bool) -> None:
        record = StreamRecord(total=size)
        with self.owner._lock:
            self.owner.streams.append(record)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            if content_length:
                self.send_header("Content-Length", str(size))
            self.end_headers()
            chunk = b"x" * 65536
            while record.sent < size:
                part = chunk[: size - record.sent]
                self.wfile.write(part)
                record.sent += len(part)
        except _DISCONNECTS:
            record.aborted = True
        finally:
            record.done.set()


_instance: FakeThirdParty | None = None
_instance_lock = threading.Lock()


def get_fake_thirdparty() -> FakeThirdParty:
    """The process-wide server, started on first use and stopped at exit."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = FakeThirdParty().start()
            atexit.register(_instance.stop)
        return _instance


@pytest.fixture
def fake_thirdparty() -> Iterator[FakeThirdParty]:
    """The shared fake, reset before and after the test."""
    fake = get_fake_thirdparty()
    fake.reset()
    yield fake
    fake.reset()


__all__ = ["FakeThirdParty", "RecordedRequest", "StreamRecord", "fake_thirdparty", "get_fake_thirdparty",
           "gpx_from_points", "komoot_html", "make_points"]
