"""Crossings (docs/RULES.md "Alert catalogue"): a border, a ferry, a ford."""
from __future__ import annotations

from trips.enrich.alerts.catalogue import register

# No rule raises it: a stored fact naming only the country entered is still rendered.
BORDER_CROSSING = register(
    "border_crossing", "nudge", "border_crossing",
    "You are entering {country}. Check phone coverage, payment methods, and local regulations.", ("country",))
BORDER_CROSSED = register(
    "border_crossed", "nudge", "border_crossing",
    "Stage {stage} leaves {fromCountry} for {country}. Check phone coverage, payment methods, and local "
    "regulations.", ("fromCountry", "country"))
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

