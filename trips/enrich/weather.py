"""Weather (docs/RULES.md "Weather"): the Open-Meteo hourly forecast at each day's start point over its riding
window, stored as `enrichment["weather"]` on each day that has one. It raises no alert (wind.py and fords.py read
it); an outage fails the computation with the provider's reason, never a made-up forecast.
"""
from __future__ import annotations

import math
from datetime import date, datetime, timezone

from trips.core.redis_client import get_redis
from trips.enrich.contract import Result, StageSnap, TripSnap
from trips.providers import openmeteo
from trips.providers.settings import configs
from trips.route import clock
from trips.route.pacing import rider_time

NAME = "weather"
GROUP = None

HORIZON_DAYS = 16  # Open-Meteo forecasts today + 16 days
HEADWIND_MAX_DEG = 60.0   # |wind from − bearing| ≤ 60°: headwind
TAILWIND_MIN_DEG = 120.0  # ≥ 120°: tailwind; between: crosswind
POINTS = ("N", "NE", "E", "SE", "S", "SO", "O", "NO")  # French-style labels (O = west), as the original
POINT_DEG = {p: 45.0 * i for i, p in enumerate(POINTS)}
# defaults when a comfort input is missing (docs/RULES.md "Comfort index")
DEFAULT_WIND, DEFAULT_HUMIDITY, DEFAULT_PROBABILITY = 0.0, 50.0, 0.0

WMO = ((0, 0, "clear", "01d"), (1, 1, "mainly clear", "02d"), (2, 2, "partly cloudy", "03d"),
        (3, 3, "overcast", "04d"), (45, 45, "fog", "50d"), (48, 48, "fog", "50d"), (51, 57, "drizzle", "09d"), (61, 67, "rain", "10d"),
        (71, 77, "snow", "13d"), (80, 82, "rain showers", "09d"), (85, 86, "snow showers", "13d"),
        (95, 99, "thunderstorm", "11d"))


def today_utc() -> date:
    return datetime.now(timezone.utc).date()


def in_horizon(day: date | None, today: date) -> bool:
    return day is not None and 0 <= (day - today).days <= HORIZON_DAYS


def wmo(code: float | None) -> tuple[str, str]:
    """(description, icon) of a WMO weather code; unknown (01d) otherwise."""
    if code is not None:
        for low, high, description, icon in WMO:
            if low <= code <= high:
                return description, icon
    return "unknown", "01d"


def compass(deg: float | None) -> str | None:
    """Degrees → one of 8 points: `POINTS[round(deg/45) % 8]`."""
    return None if deg is None else POINTS[round(deg / 45.0) % 8]


def comfort_index(t_max: float | None, wind: float | None, humidity: float | None, probability: float | None) -> int:
    """docs/RULES.md "Comfort index", the missing inputs at their defaults (no temperature: no index
    is asked for: the caller has none without one)."""
    wind = DEFAULT_WIND if wind is None else wind
    humidity = DEFAULT_HUMIDITY if humidity is None else humidity
    probability = DEFAULT_PROBABILITY if probability is None else probability
    score = 100
    if t_max is not None and t_max > 30:
        score -= int(min(20, (t_max - 30) * 2))
    elif t_max is not None and t_max < 5:
        score -= int(min(20, (5 - t_max) * 2))
    if wind > 20:
        score -= int(min(30, (wind - 20) * 1.5))
    if humidity > 80:
        score -= int(min(20, (humidity - 80) * 0.5))
    if probability > 20:
        score -= int(min(30, (probability - 20) * 0.5))
    return max(0, score)


def bearing(start: tuple[float, float], end: tuple[float, float]) -> float | None:
    """Initial bearing start→end in degrees 0–360; None when the points coincide (|Δlat| + |Δlon| < 1e-6)."""
    (lat1, lon1), (lat2, lon2) = start, end
    if abs(lat2 - lat1) + abs(lon2 - lon1) < 1e-6:
        return None
    p1, p2, dl = math.radians(lat1), math.radians(lat2), math.radians(lon2 - lon1)
    theta = math.atan2(math.sin(dl) * math.cos(p2), math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl))
    return (math.degrees(theta) + 360.0) % 360.0


def relative_wind(direction: str | None, travel: float | None) -> str:
    """headwind | tailwind | crosswind | unknown (docs/RULES.md "Relative wind"): the wind's 8-point `direction`
    (where it blows from) against the bearing of travel."""
    if direction not in POINT_DEG or travel is None:
        return "unknown"
    diff = abs(POINT_DEG[direction] - travel) % 360.0
    diff = 360.0 - diff if diff > 180.0 else diff
    if diff <= HEADWIND_MAX_DEG:
        return "headwind"
    return "tailwind" if diff >= TAILWIND_MIN_DEG else "crosswind"


def half_up(value: float, digits: int = 0) -> float:
    """PHP's round() (the original's): halves away from zero, so 2.5 → 3 and 0.25 → 0.3 (Python's round
    takes halves to even)."""
    scale = 10 ** digits
    return math.copysign(math.floor(abs(value) * scale + 0.5) / scale, value)


def _r(value: float | None) -> float | None:
    return None if value is None else half_up(value, 1)


def _agg(slots: list[dict], var: str, fn):
    values = [s[var] for s in slots if s.get(var) is not None]
    return fn(values) if values else None


def window(stage: StageSnap, snap: TripSnap) -> tuple[int, int]:
    """The riding window's hour buckets floor(departure) .. ceil(arrival), within the local day of the start point
    (the forecast's hours are that point's): the arrival is an instant read on the start's clock
    (docs/RULES.md "Times"), so a day crossing a time zone or a clock change keeps its true length."""
    timing = rider_time(stage.distance_km, stage.elevation_gain_m, snap.average_speed, float(snap.departure_hour))
    arrival = timing.arrival_hour if stage.date is None else \
        clock.hours_since_midnight(timing.passage(stage.date, stage.start), stage.date)
    return math.floor(snap.departure_hour), min(23, math.ceil(arrival - 1e-9))


def derive(hours: list[dict], first: int, last: int, travel: float | None) -> dict | None:
    """The derived forecast over the slots first..last with a temperature; None when there are none."""
    slots = [h for h in hours if first <= h.get("hour", -1) <= last and h.get("temperature_2m") is not None]
    if not slots:
        return None
    median = slots[len(slots) // 2]
    description, icon = wmo(median.get("weather_code"))
    direction = compass(median.get("wind_direction_10m"))
    t_max, wind = _agg(slots, "temperature_2m", max), _agg(slots, "wind_speed_10m", max)
    humidity, probability = median.get("relative_humidity_2m"), _agg(slots, "precipitation_probability", max)
    uv = _agg(slots, "uv_index", max)
    return {
        "icon": icon, "description": description,
        "weatherCode": None if median.get("weather_code") is None else int(median["weather_code"]),
        "tempMin": _r(_agg(slots, "temperature_2m", min)), "tempMax": _r(t_max),
        "apparentTempMin": _r(_agg(slots, "apparent_temperature", min)),
        "apparentTempMax": _r(_agg(slots, "apparent_temperature", max)),
        "windSpeed": _r(wind), "windGusts": _r(_agg(slots, "wind_gusts_10m", max)), "windDirection": direction,
        "precipitationProbability": _r(probability), "precipitationMm": _r(_agg(slots, "precipitation", sum)),
        "humidity": _r(humidity), "uvIndex": None if uv is None else int(half_up(uv)),
        "comfortIndex": comfort_index(t_max, wind, humidity, probability),
        "relativeWindDirection": relative_wind(direction, travel),
        "hourly": [{
            "hour": s["hour"], "temp": _r(s["temperature_2m"]), "apparentTemp": _r(s.get("apparent_temperature")),
            "precipitationMm": _r(s.get("precipitation")),
            "precipitationProbability": _r(s.get("precipitation_probability")),
            "windSpeed": _r(s.get("wind_speed_10m")), "windGusts": _r(s.get("wind_gusts_10m")),
            "windDirectionDeg": _r(s.get("wind_direction_10m")),
            "relativeWindDirection": relative_wind(compass(s.get("wind_direction_10m")), travel),
            "weatherCode": None if s.get("weather_code") is None else int(s["weather_code"]),
        } for s in slots],
    }


APP = object()  # compute's default provider config and Redis: the app's (the job runs in an app context)


def compute(snap: TripSnap, engine, *, config=None, redis=APP, today: date | None = None) -> Result:
    """One batched forecast for the days within the horizon (`redis=None`: no cache). Never raises for an
    outage: `Result.failure` carries the reason."""
    today = today or today_utc()
    result = Result()
    days = [s for s in snap.stages if in_horizon(s.date, today)]
    for stage in snap.stages:
        result.ran_on(stage.id)
    if not days:
        return result
    if config is None or redis is APP:
        config = config or configs().openmeteo
        redis = get_redis() if redis is APP else redis
    try:
        found = openmeteo.day_forecasts([(*s.start, s.date) for s in days], config, redis)
    except openmeteo.WeatherUnavailable as exc:
        result.failure = exc.reason
        return result
    for stage in days:
        entry = found.get(openmeteo.cache_key(*stage.start, stage.date))
        if entry is None:
            continue
        first, last = window(stage, snap)
        forecast = derive(entry["hours"], first, last, bearing(stage.start, stage.end))
        if forecast is not None:
            result.data[stage.id] = {"weather": {"date": stage.date.isoformat(), **forecast}}
    return result
