"""Open-Meteo hourly forecasts (docs/RULES.md "Weather") through the hardened client, cached in Redis for 3 h per
rounded point and date (`btp:weather:{lat 2dp}:{lon 2dp}:{date}`).

One batched GET asks every point the cache misses at once, in the points' local hours. Null values stay None, never
made up; an outage raises WeatherUnavailable with a sentence for the reader, never a response body.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from datetime import date
from typing import Any, Callable

import redis as redis_lib

from trips.errors import N_
from trips.providers import http
from trips.providers.cache import Cache

log = logging.getLogger(__name__)

HOURLY = ("temperature_2m", "apparent_temperature", "precipitation", "precipitation_probability",
          "weather_code", "wind_speed_10m", "wind_gusts_10m", "wind_direction_10m", "relative_humidity_2m",
          "uv_index")
CACHE_TTL_SECONDS = 3 * 3600  # 10800 s (docs/RULES.md "Weather")
CACHE_PREFIX = "btp:weather"
MAX_RESPONSE_BYTES = 8 * 1024 * 1024  # 17 days × 24 h × 10 variables × a few dozen points fits well inside
MAX_POINTS = 100  # points per request (a trip is at most a few dozen days)

UNAVAILABLE = N_("weather.unavailable")
REFUSED = N_("weather.refused")
UNREADABLE = N_("weather.unreadable")
MISCONFIGURED = N_("weather.misconfigured")


class WeatherUnavailable(Exception):
    """The forecast could not be fetched; `reason` (a key) is a sentence fit for the reader."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class WeatherConfig:
    openmeteo_url: str | None
    user_agent: str = "BTP/1.0 (bike trip planner)"
    timeout: float = 10.0
    retries: int = 2
    max_bytes: int = MAX_RESPONSE_BYTES

    def policy(self) -> http.HttpPolicy:
        # Asked from a job, not a rider's request: a transient 5xx/429 is worth two more tries.
        return http.HttpPolicy(user_agent=self.user_agent, timeout=self.timeout, deadline=3 * self.timeout,
                               max_bytes=self.max_bytes, retries=self.retries)


def rounded(lat: float, lon: float) -> tuple[float, float]:
    return round(lat, 2), round(lon, 2)


def cache_key(lat: float, lon: float, day: date) -> str:
    rlat, rlon = rounded(lat, lon)
    return f"{rlat:.2f}:{rlon:.2f}:{day.isoformat()}"


def day_forecasts(wanted: list[tuple[float, float, date]], config: WeatherConfig,
                  redis: redis_lib.Redis | None, *, sleep: Callable[[float], None] = time.sleep) -> dict[str, dict]:
    """{cache_key(lat, lon, day): {"hours": [{"hour": h, <variable>: value or None, ...}] on that local date}}
    for each (lat, lon, day) wanted, from the cache or one request for all misses. A point or date the answer
    lacks is absent from the result. Raises WeatherUnavailable on an outage, a refusal or an unreadable answer."""
    cache = Cache(redis, CACHE_PREFIX, CACHE_TTL_SECONDS, label="weather")
    out: dict[str, dict] = {}
    missing: dict[tuple[float, float], set[date]] = {}
    for lat, lon, day in wanted:
        key = cache_key(lat, lon, day)
        hit = cache.get(key) if key not in out else out[key]
        if isinstance(hit, dict) and isinstance(hit.get("hours"), list):
            out[key] = hit
        else:
            missing.setdefault(rounded(lat, lon), set()).add(day)
    points = list(missing)
    for chunk in (points[i:i + MAX_POINTS] for i in range(0, len(points), MAX_POINTS)):
        days = {d for p in chunk for d in missing[p]}
        locations = _fetch(config, chunk, min(days), max(days), sleep)
        for point, location in zip(chunk, locations):
            by_date = _split_days(location)
            for day in missing[point]:
                key = cache_key(*point, day)
                hours = by_date.get(day.isoformat())
                if hours:
                    out[key] = {"hours": hours}
                    cache.set(key, out[key])
    return out


def _fetch(config: WeatherConfig, points: list[tuple[float, float]], first: date, last: date,
           sleep: Callable[[float], None]) -> list[Any]:
    """The answer's location objects, one per point in order. Raises WeatherUnavailable."""
    try:
        client = http.HttpClient(config.openmeteo_url or "", config.policy(), sleep=sleep)
    except http.HttpFailure:
        raise WeatherUnavailable(MISCONFIGURED) from None
    params = {"latitude": ",".join(f"{lat:.2f}" for lat, _ in points),
              "longitude": ",".join(f"{lon:.2f}" for _, lon in points),
              "hourly": ",".join(HOURLY), "timezone": "auto",
              "start_date": first.isoformat(), "end_date": last.isoformat()}
    try:
        answer = client.request("GET", "/v1/forecast", params=params)
    except http.HttpFailure as exc:
        log.warning("open-meteo: %s", exc.kind)
        raise WeatherUnavailable(UNAVAILABLE) from None
    if answer.status != 200:
        log.warning("open-meteo: status %d", answer.status)  # the body's "reason" is logged nowhere: unbounded
        raise WeatherUnavailable(REFUSED if 400 <= answer.status < 500 else UNAVAILABLE)
    try:
        data = json.loads(answer.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise WeatherUnavailable(UNREADABLE) from None
    locations = data if isinstance(data, list) else [data]
    if len(locations) != len(points) or not all(isinstance(x, dict) for x in locations):
        raise WeatherUnavailable(UNREADABLE)
    return locations


def _value(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _split_days(location: dict) -> dict[str, list[dict]]:
    """{local ISO date: [hour slot]} from one location's `hourly` arrays (times "YYYY-MM-DDTHH:MM")."""
    hourly = location.get("hourly")
    times = hourly.get("time") if isinstance(hourly, dict) else None
    if not isinstance(times, list):
        return {}
    series = {v: hourly.get(v) if isinstance(hourly.get(v), list) else [] for v in HOURLY}
    days: dict[str, list[dict]] = {}
    for i, stamp in enumerate(times):
        if not isinstance(stamp, str) or len(stamp) < 13 or not stamp[11:13].isdigit():
            continue
        slot: dict[str, Any] = {"hour": int(stamp[11:13])}
        for v in HOURLY:
            slot[v] = _value(series[v][i]) if i < len(series[v]) else None
        days.setdefault(stamp[:10], []).append(slot)
    return days
