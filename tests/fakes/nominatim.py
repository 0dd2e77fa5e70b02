"""A local HTTP server standing in for Nominatim's /search (jsonv2).

By default every GET /search answers 200 with the programmed places (`fake.places = [...]`, see `place()`).
Other answers are queued and consumed in order (times=None: every request from then on):

    fake.places = [place("Grenoble", 45.18, 5.72)]   # also fake.place(...)
    fake.fail(403)                    # one 403, then the places again
    fake.answer(b"not json")          # a 200 with this raw body
    fake.redirect("http://elsewhere.example/search")
    fake.slow(1.0)                    # answer after 1 s (reset() wakes it and drops the connection)
    fake.trickle(b"[]" * 50, 0.1)     # a 200 whose body arrives one byte every 0.1 s
    fake.requests[-1].query["q"] == ["Grenoble"]; fake.requests[-1].headers["user-agent"]

Use the `fake_nominatim` fixture (one server per process, reset before and after each test) and
`fake.config(**overrides)` for a trips.geocode.GeocodeConfig aimed at it (2 s timeout).
"""
from __future__ import annotations

import atexit
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

_DISCONNECTS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def place(name: str, lat: float, lon: float, *, country: str = "France", address: dict | None = None,
          addresstype: str | None = "city", kind: str = "administrative", **extra: Any) -> dict:
    """One jsonv2 search result in Nominatim's shape (coordinates as strings, as Nominatim sends them)."""
    result: dict[str, Any] = {
        "place_id": abs(hash(name)) % 10**8, "licence": "Data © OpenStreetMap contributors, ODbL 1.0.",
        "lat": f"{lat:.7f}", "lon": f"{lon:.7f}", "category": "boundary", "type": kind, "place_rank": 16,
        "importance": 0.7, "name": name, "display_name": f"{name}, {country}",
        "address": address if address is not None else {"city": name, "country": country},
        "boundingbox": [str(lat - 0.1), str(lat + 0.1), str(lon - 0.1), str(lon + 0.1)],
    }
    if addresstype is not None:
        result["addresstype"] = addresstype
    result.update(extra)
    return result


@dataclass
class RecordedRequest:
    path: str  # without the query string
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-cased names


@dataclass
class _Answer:
    kind: str  # status | body | redirect | slow | trickle
    remaining: int | None
    params: dict[str, Any]


class FakeNominatim:
    place = staticmethod(place)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._release = threading.Event()
        self.reset()

    def start(self) -> FakeNominatim:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, client_address: None  # client disconnects are expected
        threading.Thread(target=self._server.serve_forever, name="fake-nominatim", daemon=True).start()
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
        """A trips.geocode.GeocodeConfig aimed at this server, with a 2 s timeout."""
        from trips.geocode import GeocodeConfig

        values: dict[str, Any] = {"nominatim_url": self.base_url, "timeout": 2.0}
        values.update(overrides)
        return GeocodeConfig(**values)

    def reset(self) -> None:
        """Forget places, queued answers and recorded requests; wake up any slow answer still waiting."""
        with self._lock:
            self._release.set()
            self._release = threading.Event()
            self.places: list[dict] = []
            self._queue: list[_Answer] = []
            self._requests: list[RecordedRequest] = []

    # programmed answers
    def _add(self, kind: str, times: int | None, **params: Any) -> None:
        with self._lock:
            self._queue.append(_Answer(kind, times, params))

    def fail(self, status: int, times: int | None = 1, headers: dict[str, str] | None = None) -> None:
        self._add("status", times, status=status, headers=headers or {})

    def answer(self, body: bytes, status: int = 200, times: int | None = 1,
               content_type: str = "application/json") -> None:
        self._add("body", times, status=status, body=body, content_type=content_type)

    def redirect(self, location: str, status: int = 302, times: int | None = None) -> None:
        self._add("redirect", times, status=status, location=location)

    def slow(self, seconds: float, times: int | None = 1) -> None:
        self._add("slow", times, seconds=seconds)

    def trickle(self, body: bytes, interval: float, times: int | None = 1) -> None:
        self._add("trickle", times, body=body, interval=interval)

    # observations
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    # used by the handler
    def _take(self, request: RecordedRequest) -> tuple[_Answer | None, list[dict], threading.Event]:
        with self._lock:
            self._requests.append(request)
            answer = self._queue[0] if self._queue else None
            if answer is not None and answer.remaining is not None:
                answer.remaining -= 1
                if answer.remaining <= 0:
                    self._queue.pop(0)
            return answer, list(self.places), self._release


class _Handler(BaseHTTPRequestHandler):
    owner: FakeNominatim
    server_version = "FakeNominatim/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        try:
            self._serve()
        except _DISCONNECTS:
            pass

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        request = RecordedRequest(parts.path, parse_qs(parts.query), {k.lower(): v for k, v in self.headers.items()})
        answer, places, release = self.owner._take(request)
        if answer is not None:
            p = answer.params
            if answer.kind == "status":
                return self._send(p["status"], b"<html>upstream failure page</html>", "text/html", p["headers"])
            if answer.kind == "body":
                return self._send(p["status"], p["body"], p["content_type"])
            if answer.kind == "redirect":
                return self._send(p["status"], b"", "text/plain", {"Location": p["location"]})
            if answer.kind == "trickle":
                return self._trickle(p["body"], p["interval"], release)
            if answer.kind == "slow" and release.wait(p["seconds"]):
                return  # reset while waiting: drop the connection
        if parts.path != "/search":
            return self._send(404, b'{"error":"not found"}', "application/json")
        limit = request.query.get("limit", ["10"])[0]
        count = int(limit) if limit.isdigit() else 10
        self._send(200, json.dumps(places[:count]).encode(), "application/json; charset=utf-8")

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _trickle(self, body: bytes, interval: float, release: threading.Event) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i in range(len(body)):
            self.wfile.write(body[i:i + 1])
            self.wfile.flush()
            if release.wait(interval):
                return  # reset: stop sending


_instance: FakeNominatim | None = None
_instance_lock = threading.Lock()


def get_fake_nominatim() -> FakeNominatim:
    """The process-wide server, started on first use and stopped at exit."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = FakeNominatim().start()
            atexit.register(_instance.stop)
        return _instance


@pytest.fixture
def fake_nominatim() -> Iterator[FakeNominatim]:
    """The shared fake, reset before and after the test."""
    fake = get_fake_nominatim()
    fake.reset()
    yield fake
    fake.reset()


__all__ = ["FakeNominatim", "RecordedRequest", "fake_nominatim", "get_fake_nominatim", "place"]
