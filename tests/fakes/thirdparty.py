"""A local HTTP server standing in for Komoot, Strava and RideWithGPS, all on one port.

Paths: GET /tour/{id} and /collection/{id} (Komoot HTML with a `kmtBoot.setProps("…")` payload),
/routes/{id}/export_gpx (Strava GPX), /routes/{id}.json (RideWithGPS JSON with x/y/e track points).
Unknown ids answer 404. Failure modes are programmed per path (query string ignored) and consumed in order:

    fake.add_komoot_tour("1", "Alps", make_points(20))
    fake.fail("/tour/1", 500, times=2)           # two 500s, then the tour
    fake.redirect("/tour/1", "/tour/2")            # every request redirected (times=None)
    fake.slow("/tour/1", 1.5)                      # answer after 1.5 s, once
    fake.oversized("/tour/1", 50 * 1024 * 1024)    # stream 50 MB of junk (fake.streams records progress)
    fake.trickle("/tour/1", body, 0.05)            # one byte of `body` every 50 ms
    fake.requests_to("/tour/1") == 3

Use the `fake_thirdparty` fixture (one server for the session, reset before each test), and
`fake.source_config(**overrides)` for a trips.providers.routes.SourceConfig whose three base URLs point here.
"""
from __future__ import annotations

import json
import math
from typing import Any, Hashable, Sequence
from xml.sax.saxutils import escape as xml_escape

from pyproj import Geod

from tests.fakes.server import FakeHandler, FakeServer, RecordedRequest, StreamRecord, configured, fixture_for, singleton

Point = tuple[float, float, float]
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


class _Handler(FakeHandler):
    def _serve(self) -> None:
        bare = self.path.split("?", 1)[0]
        behaviour, route, release = self.owner._take(RecordedRequest("GET", self.path, self.lowered_headers()), bare)
        if self._apply(behaviour, release):
            return
        if route is None:
            return self._not_found()
        content_type, body = route
        self._send(200, body, content_type)


class FakeThirdParty(FakeServer):
    handler = _Handler
    thread_name = "fake-thirdparty"

    def source_config(self, **overrides: Any):
        """A trips.providers.routes.SourceConfig aimed at this server, with no retry backoff and a 2 s timeout."""
        from trips.providers.routes import SourceConfig

        return configured(SourceConfig, overrides, komoot_url=self.base_url, strava_url=self.base_url,
                          ridewithgps_url=self.base_url, timeout=2.0, backoff=0.0)

    def _clear(self) -> None:
        self._routes: dict[str, tuple[str, bytes]] = {}  # path -> (content type, body)

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
    def fail(self, path: str, status: int, times: int | None = 1, headers: dict[str, str] | None = None) -> None:
        self._queue_behaviour(path, "status", times, status=status, headers=headers or {})

    def redirect(self, path: str, location: str, times: int | None = None, status: int = 302) -> None:
        self._queue_behaviour(path, "redirect", times, status=status, location=location)

    def slow(self, path: str, seconds: float, times: int | None = 1) -> None:
        self._queue_behaviour(path, "slow", times, seconds=seconds)

    def trickle(self, path: str, body: bytes, interval: float, times: int | None = None) -> None:
        """Answer 200 with `body`, one byte per `interval` seconds (each read is quick, the whole body slow)."""
        self._queue_behaviour(path, "trickle", times, body=body, interval=interval)

    def oversized(self, path: str, size: int, content_length: bool = False, times: int | None = None) -> None:
        """Stream `size` junk bytes in 64 KB chunks, declaring Content-Length only if asked."""
        self._queue_behaviour(path, "oversized", times, size=size, content_length=content_length)

    # observations
    def requests_to(self, path: str) -> int:
        """How many requests hit `path` (query string ignored)."""
        return sum(1 for r in self.requests if r.path.split("?", 1)[0] == path)

    def _state(self, key: Hashable) -> tuple[str, bytes] | None:
        return self._routes.get(key)


get_fake_thirdparty = singleton(FakeThirdParty)
fake_thirdparty = fixture_for(get_fake_thirdparty, "fake_thirdparty")


__all__ = ["FakeThirdParty", "RecordedRequest", "StreamRecord", "fake_thirdparty", "get_fake_thirdparty",
           "gpx_from_points", "komoot_html", "make_points"]
