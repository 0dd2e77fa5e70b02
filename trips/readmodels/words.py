"""The page keys no extraction can see: keys made from data rather than written in a `t`, `tn` or `N_` call
(tests/trips/core/test_i18n.py holds each catalogue to the extracted keys and these). The weather words of the WMO
codes, and the OpenStreetMap values a page or an alert names, said in the reader's language, never raw
(docs/RULES.md "Rendering at read time").
"""
from __future__ import annotations

from trips.enrich import weather
from trips.enrich.terrain import ROUGH_SMOOTHNESS, ROUGH_SURFACES, ROUGH_TRACKTYPES
from trips.models import ACCOMMODATION_TYPES
from trips.osm.tags import CULTURE_HISTORIC, CULTURE_TOURISM, RESUPPLY_AMENITY, RESUPPLY_SHOP
from trips.core import i18n

# The wind words of the share page's pictures (trips/readmodels/pictures.py `_WIND_WORDS`).
WIND_KEYS = ("wind.headwind", "wind.tailwind", "wind.crosswind", "wind.wind")
# The OSM values said in words (i18n.osm_word): the rough surfaces, track grades and smoothness of the terrain alert, the kinds of cultural
# place of the nearby alert (each table with its `other`, i18n.osm_words), the kinds of lodging of the share page.
OSM_VALUES = {"surface": sorted(ROUGH_SURFACES | ROUGH_TRACKTYPES | ROUGH_SMOOTHNESS), "culture": sorted(CULTURE_TOURISM | CULTURE_HISTORIC),
              "tourism": list(ACCOMMODATION_TYPES), "resupply": sorted(RESUPPLY_AMENITY | RESUPPLY_SHOP),
              "water": ["drinking_water", "water_point", "water_tap", "fountain", "spring"],  # trips/osm/tags.py _water
              "bike_shop": ["repair", "shop", "repair_station"]}  # the share page's services (trips/readmodels/amenities.py)
OSM_KEYS = tuple(f"osm.{tag}.{v}" for tag, values in OSM_VALUES.items() for v in values) + (
    "osm.surface.other", "osm.culture.other")
UNKNOWN = "unknown"


def weather_key(description: str) -> str:
    """The key of a WMO description of trips/enrich/weather.py ("rain showers" → "weather.rain_showers")."""
    return "weather." + description.replace(" ", "_")


WEATHER_KEYS = tuple(dict.fromkeys(weather_key(row[2]) for row in weather.WMO)) + (weather_key(UNKNOWN),)
DYNAMIC_KEYS = frozenset(WEATHER_KEYS + WIND_KEYS + OSM_KEYS)
_BY_DESCRIPTION = {row[2]: weather_key(row[2]) for row in weather.WMO} | {UNKNOWN: weather_key(UNKNOWN)}


def describe(forecast: dict, locale: str | None) -> str:
    """The weather word of a stored forecast (or hourly slot) in `locale`: its WMO code's, else (a forecast
    stored without a code) its English description's, else that description as stored."""
    code = forecast.get("weatherCode")
    if isinstance(code, (int, float)) and not isinstance(code, bool):
        return i18n.t(weather_key(weather.wmo(code)[0]), locale)
    stored = str(forecast.get("description") or UNKNOWN)
    key = _BY_DESCRIPTION.get(stored.strip().lower())
    return i18n.t(key, locale) if key else stored
