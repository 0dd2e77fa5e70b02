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
`fake.config(**overrides)` for a trips.providers.nominatim.GeocodeConfig aimed at it (2 s timeout).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Hashable
from urllib.parse import parse_qs, urlsplit

from tests.fakes.server import AnyPathAnswers, FakeHandler, FakeServer, configured, fixture_for, singleton


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


class _Handler(FakeHandler):
    failure_body = b"<html>upstream failure page</html>"
    failure_type = "text/html"

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        request = RecordedRequest(parts.path, parse_qs(parts.query), self.lowered_headers())
        answer, places, release = self.owner._take(request)
        if self._apply(answer, release):
            return
        if parts.path != "/search":
            return self._not_found()
        limit = request.query.get("limit", ["10"])[0]
        count = int(limit) if limit.isdigit() else 10
        self._send(200, json.dumps(places[:count]).encode(), "application/json; charset=utf-8")


class FakeNominatim(AnyPathAnswers, FakeServer):
    handler = _Handler
    thread_name = "fake-nominatim"
    place = staticmethod(place)

    def config(self, **overrides: Any):
        """A trips.providers.nominatim.GeocodeConfig aimed at this server, with a 2 s timeout."""
        from trips.providers.nominatim import GeocodeConfig

        return configured(GeocodeConfig, overrides, nominatim_url=self.base_url, timeout=2.0)

    def _clear(self) -> None:
        self.places: list[dict] = []

    def _state(self, key: Hashable) -> list[dict]:
        return list(self.places)


get_fake_nominatim = singleton(FakeNominatim)
fake_nominatim = fixture_for(get_fake_nominatim, "fake_nominatim")


__all__ = ["FakeNominatim", "RecordedRequest", "fake_nominatim", "get_fake_nominatim", "place"]
