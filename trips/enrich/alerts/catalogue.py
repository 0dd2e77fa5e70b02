"""The alert catalogue (docs/RULES.md "Alert catalogue"): one registry of codes, each with severity, group and message.

A duplicate code is refused at import. Facts store only the code and raw parameters; `render` makes the text at
read time in the reader's language (docs/RULES.md "Rendering at read time"). `message` is the English source: a new
code needs its `alert.<code>` entry in translations/en and translations/fr (tests/trips/core/test_i18n.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from trips.core import i18n

SEVERITIES = ("critical", "warning", "nudge")
# Each enrichment replaces only its own group, so two computations never share one (docs/RULES.md "Daylight").
GROUPS = ("terrain", "surface", "daylight", "pois", "accommodations", "calendar", "wind", "bike_shop", "water_point",
          "health_service", "cultural_poi", "railway_station", "border_crossing", "ferry", "ford")
# Parameters that count days or segments: written as plain integers, never grouped ("day 1000", not "1,000").
COUNTERS = frozenset({"next", "days", "count", "stage"})
# The parameters that hold OpenStreetMap values, by the catalogue table (pages.po `osm.<tag>.<value>`) that says them:
# `surface` the rough surfaces of surface_rough, `type` the kind of place of cultural_poi_suggestion.
OSM_PARAMS = {"surface": "surface", "type": "culture"}


@dataclass(frozen=True)
class AlertKind:
    code: str
    severity: str
    group: str
    # English template with {name} placeholders, `{stage}` included where the day is named; a message that counts
    # is its plural forms (singular, plural), chosen by the `count` parameter (gettext's, trips/core/i18n.py `pick`)
    message: str | tuple[str, ...]
    params: tuple[str, ...] = ()
    # (name, value) of a parameter facts stored before the message named it lack (rendered as if stored)
    defaults: tuple[tuple[str, object], ...] = ()


CATALOGUE: dict[str, AlertKind] = {}


def register(code: str, severity: str, group: str, message: str | tuple[str, ...], params: tuple[str, ...] = (),
             defaults: tuple[tuple[str, object], ...] = ()) -> AlertKind:
    """Add a code. Raises ValueError on a duplicate code, an unknown severity or group."""
    if code in CATALOGUE:
        raise ValueError(f"alert code {code!r} is registered twice")
    if severity not in SEVERITIES or group not in GROUPS:
        raise ValueError(f"alert code {code!r}: unknown severity {severity!r} or group {group!r}")
    kind = CATALOGUE[code] = AlertKind(code, severity, group, message, params, defaults)
    return kind


def render(fact: dict, day_number: int, locale: str | None = None) -> dict:
    """A stored fact as the reader sees it, in `locale` (default: the request's, trips/core/i18n.py):
    {code, severity, group, message, action?}. The template comes from the locale's catalogue (key
    `alert.<code>`), else the English one, else the code's registered English text; numbers are written the
    locale's way, a `country` code is named in it. Unknown codes (a catalogue that lost one) render with their
    code only, never fail the read."""
    locale = i18n.normalize(locale) or i18n.current_locale()
    kind = CATALOGUE.get(fact.get("code"))
    if kind is None:
        return {"code": fact.get("code"), "severity": "nudge", "group": None, "message": fact.get("code")}
    stored = {**dict(kind.defaults), **(fact.get("params") or {})}
    values = {**{k: _format(k, v, locale) for k, v in stored.items()}, "stage": day_number}
    count = (fact.get("params") or {}).get("count")
    text = i18n.template(kind.code, locale, count) or (
        kind.message if isinstance(kind.message, str) else i18n.pick(kind.message, i18n.DEFAULT, count))
    try:
        message = text.format(**values)
    except (KeyError, IndexError, ValueError):
        message = text
    out = {"code": kind.code, "severity": kind.severity, "group": kind.group, "message": message}
    if fact.get("action"):
        out["action"] = fact["action"]
    return out


def _format(name: str, value, locale: str):
    """A raw parameter as `locale` writes it: numbers (one decimal at most, grouped), `country` (an ISO code)
    (and `fromCountry`) by its name; day numbers are counters, written plainly. Anything else as stored."""
    if isinstance(value, bool):
        return value
    if name in ("country", "fromCountry") and isinstance(value, str):
        return i18n.country(value, locale)
    if name in OSM_PARAMS and isinstance(value, str):  # OSM values in words, never raw (trips/readmodels/words.py)
        return i18n.osm_words(OSM_PARAMS[name], value, locale)
    if isinstance(value, int) and name in COUNTERS:
        return value
    if isinstance(value, (int, float)):
        return i18n.number(value, locale)
    return value
