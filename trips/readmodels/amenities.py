"""What a day offers on the way, for a person reading the share page: food, water and bike shops, each with where it
is (km from the day's start), and in words when it is not known — still being looked up, failed, never looked up,
or looked up on a map that covers only part of the day (docs/RULES.md "Map coverage"). Never an empty list that
could be read as "nothing there" when nobody looked."""
from __future__ import annotations

from trips.enrich.pois import rank
from trips.readmodels.day import OFF_MAP

# kind → (the day read model's field, the alert group whose computation writes it, at most so many listed)
KINDS = {"food": ("resupply", "pois", 4), "water": ("waterPoints", "water_point", 6),
         "bikeShops": ("bikeShops", "bike_shop", 3)}
# What the reader is told, by state: listed (the items), none (looked up, nothing found), running, failed, off_map
# (no imported map touches the day: nothing could be looked up), unknown.
STATES = ("listed", "none", "running", "failed", "off_map", "unknown")


def off_map(day: dict) -> bool:
    """True when the day's stored map coverage says no imported map touches it (docs/RULES.md "Map coverage")."""
    cover = day.get("mapCoverage")
    return isinstance(cover, dict) and cover.get("share") == 0


def night(day: dict) -> str:
    """What the reader is told of a day's night when no place is named: running, off_map (no imported map touches
    the day), end_off_map (its end, where places to sleep are looked for, is off the map), failed, none (looked
    up, nothing found) or unknown."""
    status = (day.get("groups") or {}).get("accommodations")
    if status == "running":
        return "running"
    if off_map(day):
        return "off_map"
    if status == OFF_MAP:
        return "end_off_map"
    if status == "failed":
        return "failed"
    return "none" if status in ("done", "partial") else "unknown"


def day_services(day: dict) -> dict:
    """{food | water | bikeShops: {state, partial, items: [{name, kind, km}]}} of a day of the day read model
    (trips/readmodels/day.py stage_summary); a rest day: {}. `partial` is true when the map covers only part of the
    day, so "none" means none on the part looked at. Food is listed groceries first, then by km."""
    if day.get("isRestDay"):
        return {}
    groups = day.get("groups") or {}
    out = {}
    for kind, (field, group, most) in KINDS.items():
        status, items = groups.get(group), day.get(field)
        if status == "running":
            state = "running"
        elif off_map(day) or status == OFF_MAP:
            state = "off_map"
        elif status == "failed":
            state = "failed"
        elif status not in ("done", "partial") or items is None:
            state = "unknown"
        else:
            state = "listed" if items else "none"
        listed = []
        if state == "listed":
            chosen = sorted(items, key=lambda p: (rank(p.get("category")), _km(p)))[:most] if kind == "food" \
                else items[:most]
            listed = sorted(({"name": p.get("name"), "kind": p.get("category") or p.get("kind"), "km": p.get("km")}
                             for p in chosen), key=_km)
        out[kind] = {"state": state, "partial": status == "partial", "items": listed,
                     "more": max(0, len(items) - most) if state == "listed" else 0}
    return out


def _km(p: dict) -> float:
    km = p.get("km")
    return float(km) if isinstance(km, (int, float)) and not isinstance(km, bool) else float("inf")
