"""The trip's budget for its nights (docs/RULES.md "Trip budget"): the price ranges of the places to sleep summed per
currency, never converted, and the nights whose price is not known named by their day."""
from __future__ import annotations

import re

from trips.models import Stage
from trips.readmodels.day import best_accommodation

DEFAULT_CURRENCY = "EUR"  # a price without its own currency is the map's estimate in euros ("Accommodations")
ISO_CURRENCY = re.compile(r"[A-Z]{3}\Z")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and value >= 0


def night_price(place: dict | None) -> tuple[str, float, float] | None:
    """(ISO 4217 currency, min, max) of a place's night, None without a price."""
    if not place:
        return None
    low, high = place.get("estimatedPriceMin"), place.get("estimatedPriceMax")
    if not (_number(low) and _number(high)):
        return None
    currency = place.get("currency")
    currency = currency if isinstance(currency, str) and ISO_CURRENCY.match(currency) else DEFAULT_CURRENCY
    return currency, float(min(low, high)), float(max(low, high))


def nights(stages: list[Stage]) -> list[tuple[Stage, dict | None, bool]]:
    """(day, its place to sleep, chosen) of each night: every day ends with one, but the last, where the trip ends,
    unless the rider chose a place there."""
    out = []
    for i, stage in enumerate(stages):
        place, chosen = best_accommodation(stage)
        if i == len(stages) - 1 and not chosen:
            continue
        out.append((stage, place, chosen))
    return out


def trip_budget(stages: list[Stage]) -> dict:
    """{totals: [{currency, min, max, nights}] (one per currency, most nights first), nights, chosen (of them with
    the rider's choice, the others priced at the best suggestion), unknown: [dayNumber of a night without a price]}."""
    totals: dict[str, list] = {}
    unknown, chosen_count, counted = [], 0, nights(stages)
    for stage, place, chosen in counted:
        chosen_count += chosen
        price = night_price(place)
        if price is None:
            unknown.append(stage.day_number)
            continue
        currency, low, high = price
        entry = totals.setdefault(currency, [0.0, 0.0, 0])
        entry[0] += low
        entry[1] += high
        entry[2] += 1
    ordered = sorted(totals.items(), key=lambda item: (-item[1][2], item[0]))
    return {"totals": [{"currency": c, "min": round(lo, 2), "max": round(hi, 2), "nights": n}
                       for c, (lo, hi, n) in ordered],
            "nights": len(counted), "chosen": chosen_count, "unknown": unknown}
