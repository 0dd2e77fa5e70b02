"""The registry of the page words (translations/<locale>/LC_MESSAGES/pages.po, read with `i18n.t`): every key the
code asks for is listed here, and tests/test_i18n.py holds each catalogue to exactly these keys (none missing,
none unused) and each listed page key to a use in the code or the templates.

The weather words are the WMO code table's (trips/enrich/weather.py): the stored forecast keeps its code and
icon, and a reader sees the word of that code in their own language (docs/RULES.md "Rendering at read time":
no language stored).
"""
from __future__ import annotations

from trips.core import i18n
from trips.enrich import weather

# The share page (templates/share.html, trips/api/share.py) and its pictures (trips/readmodels/pictures.py).
PAGE_KEYS = (
    "page.tagline", "share.untitled", "share.summary", "share.dates", "share.download", "share.route",
    "share.route_caption", "share.profile_caption", "share.trip_elevation", "share.day_elevation",
    "share.weather_legend", "share.not_ready", "share.day", "share.rest_day", "share.start", "share.end",
    "share.day_numbers", "share.arrival", "share.temps", "share.chance_rain", "share.chance_snow",
    "share.wind", "share.gusts", "share.night", "share.suggested_night", "share.unnamed", "share.per_night",
    "share.about_per_night", "share.count_critical", "share.count_warning", "share.count_nudge", "share.critical", "share.warning",
    "share.nudge", "share.max", "share.min", "share.no_elevation", "share.summary_unknown_climb",
    "share.day_numbers_unknown_climb", "wind.headwind", "wind.tailwind", "wind.crosswind", "wind.wind",
)
UNKNOWN = "unknown"


def weather_key(description: str) -> str:
    """The key of a WMO description of trips/enrich/weather.py ("rain showers" → "weather.rain_showers")."""
    return "weather." + description.replace(" ", "_")


WEATHER_KEYS = tuple(dict.fromkeys(weather_key(row[2]) for row in weather._WMO)) + (weather_key(UNKNOWN),)
KEYS = frozenset(PAGE_KEYS + WEATHER_KEYS)
_BY_DESCRIPTION = {row[2]: weather_key(row[2]) for row in weather._WMO} | {UNKNOWN: weather_key(UNKNOWN)}


def describe(forecast: dict, locale: str | None) -> str:
    """The weather word of a stored forecast (or hourly slot) in `locale`: its WMO code's, else (a forecast
    stored without a code) its English description's, else that description as stored."""
    code = forecast.get("weatherCode")
    if isinstance(code, (int, float)) and not isinstance(code, bool):
        return i18n.t(weather_key(weather.wmo(code)[0]), locale)
    stored = str(forecast.get("description") or UNKNOWN)
    key = _BY_DESCRIPTION.get(stored.strip().lower())
    return i18n.t(key, locale) if key else stored
