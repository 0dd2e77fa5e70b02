"""A local HTTP server standing in for Open-Meteo's GET /v1/forecast (hourly variables, timezone=auto).

By default it answers every location and hour asked with the programmed values, shaped like the real API: a
bare location object for one point, a list of them (in the order asked) for comma-separated points, each with
`latitude`, `longitude`, `utc_offset_seconds`, `timezone`, `hourly_units` and `hourly` arrays keyed by
variable beside `time` ("YYYY-MM-DDTHH:MM", local). Values:

    fake.values["temperature_2m"] = 31.0                 # every hour
    fake.values["precipitation"] = [0.0] * 12 + [2.0] * 12   # per hour of the day (24 values)
    fake.values["wind_speed_10m"] = [None] * 24          # null, as Open-Meteo sends for a missing value
    fake.by_point[(45.0, 5.0)] = {"wind_direction_10m": 90.0}  # overrides for one point (2 dp)
    fake.error(400, "Latitude must be in range of -90 to 90°.")  # {"error": true, "reason": ...} once
    fake.fail(503); fake.redirect(url); fake.slow(1.0); fake.trickle(body, 0.1); fake.answer(b"...")
    fake.requests[-1].query["latitude"] == ["45.00,45.10"]

Use the `fake_openmeteo` fixture (one server per process, reset before and after each test) and
`fake.config(**overrides)` for a trips.providers.openmeteo.WeatherConfig aimed at it (2 s timeout).
"""
from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any, Hashable
from urllib.parse import parse_qs, urlsplit

from tests.fakes.nominatim import RecordedRequest
from tests.fakes.server import AnyPathAnswers, FakeHandler, FakeServer, configured, fixture_for, singleton

DEFAULTS: dict[str, Any] = {
    "temperature_2m": 18.0, "apparent_temperature": 17.0, "precipitation": 0.0, "precipitation_probability": 10.0,
    "weather_code": 1.0, "wind_speed_10m": 10.0, "wind_gusts_10m": 20.0, "wind_direction_10m": 270.0,
    "relative_humidity_2m": 60.0, "uv_index": 3.0,
}
UNITS = {"temperature_2m": "°C", "apparent_temperature": "°C", "precipitation": "mm",
         "precipitation_probability": "%", "weather_code": "wmo code", "wind_speed_10m": "km/h",
         "wind_gusts_10m": "km/h", "wind_direction_10m": "°", "relative_humidity_2m": "%", "uv_index": ""}


def _hourly_value(spec: Any, hour: int) -> Any:
    return spec[hour] if isinstance(spec, (list, tuple)) else spec


def location(lat: float, lon: float, first: date, last: date, variables: list[str], values: dict) -> dict:
    """One location object of an hourly answer over first..last (24 hours a day, UTC+1 as a fixed zone)."""
    times, series = [], {v: [] for v in variables}
    day = first
    while day <= last:
        for hour in range(24):
            times.append(f"{day.isoformat()}T{hour:02d}:00")
            for v in variables:
                series[v].append(_hourly_value(values.get(v), hour))
        day += timedelta(days=1)
    return {"latitude": lat, "longitude": lon, "generationtime_ms": 0.5, "utc_offset_seconds": 3600,
            "timezone": "Europe/Paris", "timezone_abbreviation": "CET", "elevation": 250.0,
            "hourly_units": {"time": "iso8601", **{v: UNITS.get(v, "") for v in variables}},
            "hourly": {"time": times, **series}}


class _Handler(FakeHandler):
    failure_body = b"<html>upstream failure page</html>"
    failure_type = "text/html"

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        request = RecordedRequest(parts.path, parse_qs(parts.query), self.lowered_headers())
        answer, state, release = self.owner._take(request)
        if self._apply(answer, release):
            return
        if parts.path != "/v1/forecast":
            return self._not_found()
        values, by_point = state
        q = {k: v[0] for k, v in request.query.items()}
        try:
            lats = [float(x) for x in q["latitude"].split(",")]
            lons = [float(x) for x in q["longitude"].split(",")]
            first, last = date.fromisoformat(q["start_date"]), date.fromisoformat(q["end_date"])
            variables = q["hourly"].split(",")
            if len(lats) != len(lons):
                raise ValueError("Parameter 'latitude' and 'longitude' must have the same number of elements")
        except (KeyError, ValueError) as exc:
            body = json.dumps({"error": True, "reason": f"Cannot initialize from invalid input: {exc}"})
            return self._send(400, body.encode(), "application/json; charset=utf-8")
        found = [location(lat, lon, first, last, variables,
                          {**values, **by_point.get((round(lat, 2), round(lon, 2)), {})})
                 for lat, lon in zip(lats, lons)]
        body = found[0] if len(found) == 1 else found
        self._send(200, json.dumps(body).encode(), "application/json; charset=utf-8")


class FakeOpenMeteo(AnyPathAnswers, FakeServer):
    handler = _Handler
    thread_name = "fake-openmeteo"

    def config(self, **overrides: Any):
        """A trips.providers.openmeteo.WeatherConfig aimed at this server, with a 2 s timeout."""
        from trips.providers.openmeteo import WeatherConfig

        return configured(WeatherConfig, overrides, openmeteo_url=self.base_url, timeout=2.0)

    def _clear(self) -> None:
        self.values: dict[str, Any] = dict(DEFAULTS)
        self.by_point: dict[tuple[float, float], dict[str, Any]] = {}

    def error(self, status: int, reason: str, times: int | None = 1) -> None:
        """Open-Meteo's error answer: {"error": true, "reason": ...}."""
        body = json.dumps({"error": True, "reason": reason}).encode()
        self.answer(body, status=status, times=times)

    def _state(self, key: Hashable) -> tuple[dict, dict]:
        return dict(self.values), {k: dict(v) for k, v in self.by_point.items()}


get_fake_openmeteo = singleton(FakeOpenMeteo)
fake_openmeteo = fixture_for(get_fake_openmeteo, "fake_openmeteo")


__all__ = ["DEFAULTS", "FakeOpenMeteo", "fake_openmeteo", "get_fake_openmeteo", "location"]
