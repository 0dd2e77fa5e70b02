"""Accommodation candidates near each day's end (docs/RULES.md "Accommodations"): discovery, dedup, ranking, heuristic
pricing and seasonality, from the local map (kind `accommodation`, trips/osm/tags.py).

A day whose lodging the rider chose, or whose end point the map does not hold, is not scanned: it gets neither
data nor `ran_on`, so the registry leaves its stored group as it is.
"""
from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import date

import numpy as np

from trips.enrich import corridor as C
from trips.enrich import prices as P
from trips.enrich.alerts.accommodations import ACCOMMODATION_SEASONAL_CLOSURE
from trips.enrich.contract import AlertFact, Result, StageSnap, TripSnap
from trips.enrich.countries import nearest_country
from trips.osm import queries as Q

NAME = "accommodations"
GROUP = "accommodations"

DEFAULT_RADIUS_KM = 5.0            # docs/RULES.md "Accommodations"
MIN_RADIUS_KM, MAX_RADIUS_KM = 1.0, 15.0   # the rider's wider search
DEDUP_M = 200.0                    # same lowercased, trimmed name within 200 m is one place
MAX_CANDIDATES_PER_STAGE = 5       # kept per day by `rank`
FAMILY_CAP = max(1, MAX_CANDIDATES_PER_STAGE - 1)   # per family, before backfill
OUTDOOR = frozenset({"camp_site", "wilderness_hut"})  # every other type is the indoor family
EXCLUDED_TYPES = frozenset({"shelter"})             # never lodging, whatever the trip enables
SAME_PLACE_DEG = 1e-6              # a merged candidate at the same coordinates is the same place

# The lodging types a trip may enable, each with a price bracket in every region's table (trips/enrich/prices.py).
PRICE_BRACKETS = P.REGIONS["eurozone_west"][1]

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# Seasonality: the first `;` rule of opening_hours, when it is a month range `Mmm-Mmm` (a time or
# other selector after it is ignored). This reads only that season form, by rule: the full opening_hours
# grammar (opening-hours-py) answers a different question, "open at this hour".
MONTH_RANGE = re.compile(r"^\s*([A-Za-z]{3})\s*-\s*([A-Za-z]{3})(?=$|[\s:])")
SEASONAL_CLOSED_MONTHS = frozenset({11, 12, 1, 2, 3})   # seasonal=yes: closed November to March

OSM_TYPES = {"n": "node", "w": "way", "r": "relation"}


def compute(snap: TripSnap, engine, radius_km: float = DEFAULT_RADIUS_KM, stage_ids=None) -> Result:
    """Scan the days of `snap` (only those in `stage_ids` when given; ids not in the snapshot, days deleted since,
    are ignored) around their end points within `radius_km`. Raises ValueError if radius_km is not a number from 1
    to 15."""
    if isinstance(radius_km, bool) or not isinstance(radius_km, (int, float)) or not math.isfinite(radius_km) \
            or not MIN_RADIUS_KM <= radius_km <= MAX_RADIUS_KM:
        raise ValueError(f"radius_km must be a number from {MIN_RADIUS_KM:g} to {MAX_RADIUS_KM:g}")
    wanted = None if stage_ids is None else set(stage_ids)
    days = [s for s in snap.stages if (wanted is None or s.id in wanted) and s.selected_accommodation is None]
    if not days:
        return Result()   # every asked-for day has the rider's choice: nothing to scan, nothing failed
    result, _cover = C.start(replace(snap, stages=tuple(days)), engine)
    if not result.covered:
        return result
    areas = Q.ready_areas(engine)  # one query for every day's end
    days = [d for d in days if Q.clipped_coverage(np.array([d.end[:2]], dtype=float), areas)[0] > 0]
    types = frozenset(snap.enabled_accommodation_types) - EXCLUDED_TYPES
    found = _discover(days, radius_km * 1000.0, types, engine)
    for day, country in zip(days, _end_countries(days, engine)):
        result.ran_on(day.id)
        ranked = rank(dedup([c | {"country": country} for c in found.get(day.id, [])]))
        out = [_describe(c, day.date) for c in ranked]
        result.data[day.id] = {"accommodations": out}
        if out and all(c["possibleClosed"] for c in out):
            result.add(AlertFact(ACCOMMODATION_SEASONAL_CLOSURE.code, day.id, {"count": len(out)}))
    return result


def _end_countries(days: list[StageSnap], engine) -> list[str | None]:
    """The ISO code of the country each day ends in (the imported boundaries, else the offline geocoder): its
    lodgings' prices are said in that country's currency, from its table (trips/enrich/prices.py)."""
    if not days:  # every asked-for day ends off the map
        return []
    owner: list[str | None] = [None] * len(days)
    for run in Q.countries_along([d.end for d in days], engine=engine):
        for i in range(run.start_index, run.end_index + 1):
            owner[i] = run.iso
    return [iso or nearest_country(*d.end[:2]) for iso, d in zip(owner, days)]


def merge(existing: list[dict], found: list[dict], limit: int = MAX_CANDIDATES_PER_STAGE) -> list[dict]:
    """An "expand" scan (a wider search): the day's `existing` candidates stay, in their order, and the `found` ones
    (a wider scan's ranked list) that are not already there follow, up to `limit` in all. The same place is
    the same OSM object, the same coordinates (to 1e-6°, a manual entry), or the same name within 200 m."""
    out = [dict(c) for c in existing]
    for cand in found:
        if len(out) >= limit:
            break
        if not any(_same_place(cand, have) for have in out):
            out.append(dict(cand))
    return out


# --- discovery ------------------------------------------------------------------------------------------

def _discover(days: list[StageSnap], radius_m: float, types: frozenset, engine) -> dict[str, list[dict]]:
    """{stage id: its candidates (nearest end first)}: each lodging goes to the nearest end point among
    `days`, to every one of them on an exact tie."""
    points: dict[tuple, tuple[object, list]] = {}   # (osm type, id) -> (point, the ends it is near)
    ends = sorted({d.end for d in days})   # a rest day sharing an end point is searched once
    for end, near in zip(ends, Q.points_near_each(ends, radius_m, kinds=["accommodation"], engine=engine)):
        for p in near:
            if lodging(p.subkind, types):
                points.setdefault((p.osm_type, p.osm_id), (p, []))[1].append(end)
    by_end: dict[tuple, list[dict]] = {}
    for p, ends in points.values():
        dist = [C.haversine_m(p.lat, p.lon, *end) for end in ends]
        best = min(dist)
        for end, d in zip(ends, dist):
            if d == best:   # exact ties only
                by_end.setdefault(end, []).append(_candidate(p, d))
    return {d.id: sorted((dict(c) for c in by_end.get(d.end, [])),
                         key=lambda c: (c["distance_m"], c["osmType"], c["osmId"])) for d in days}


def lodging(subkind: str, types) -> bool:
    """Whether a map object of this accommodation subkind is offered: enabled by the trip, never shelter."""
    return subkind in types and subkind not in EXCLUDED_TYPES


def _candidate(p, distance_m: float) -> dict:
    """The working form of a map lodging: its tags kept aside for ranking, pricing and seasonality."""
    return {"name": p.name, "type": p.subkind, "lat": p.lat, "lon": p.lon, "osmType": OSM_TYPES.get(p.osm_type,
            p.osm_type), "osmId": p.osm_id, "distance_m": distance_m, "tags": dict(p.tags),
            "tag_count": p.tag_count}


# --- dedup and ranking ----------------------------------------------------------------------------------

def _key(name) -> str:
    return (name or "").strip().lower()


def dedup(cands: list[dict]) -> list[dict]:
    """Drop a candidate whose lowercased, trimmed name an earlier one has within 200 m (nameless ones are
    never duplicates). The first copy stays: callers pass the nearest first."""
    kept: list[dict] = []
    for c in cands:
        key = _key(c.get("name"))
        if key and any(_key(k.get("name")) == key and _metres(c, k) <= DEDUP_M for k in kept):
            continue
        kept.append(c)
    return kept


def completeness(c: dict) -> int:
    """The ranking score of how much the map says about a place (docs/RULES.md "Accommodations")."""
    t = c["tags"]
    return (3 * bool(_url(t)) + 3 * bool(t.get("description")) + 2 * bool(t.get("opening_hours"))
            + 2 * bool(t.get("wikidata")) + 2 * (stars(t) is not None) + 1 * (t.get("capacity") is not None)
            + min(2, int(c.get("tag_count") or 0) // 3))


def family(kind: str) -> str:
    return "outdoor" if kind in OUTDOOR else "indoor"


def rank(cands: list[dict], limit: int = MAX_CANDIDATES_PER_STAGE) -> list[dict]:
    """The `limit` best by completeness (desc) then minimum price (asc), stable; at most FAMILY_CAP of one
    family while the other has candidates left, the capped ones backfilling any slot still free."""
    order = sorted(cands, key=lambda c: (-completeness(c), _low(price(c))))
    cap = max(1, limit - 1)
    picked, capped, per = [], [], {"outdoor": 0, "indoor": 0}
    for c in order:
        if len(picked) >= limit:
            break
        fam = family(c["type"])
        if per[fam] >= cap:
            capped.append(c)
            continue
        per[fam] += 1
        picked.append(c)
    picked += capped[:limit - len(picked)]
    position = {id(c): i for i, c in enumerate(order)}
    return sorted(picked, key=lambda c: position[id(c)])


# --- pricing and seasonality ----------------------------------------------------------------------------

def stars(tags: dict) -> float | None:
    """The leading number of `stars` (`4`, `3S` → 3), or None."""
    return P.stars(tags)


def price(c: dict) -> P.Price:
    """The candidate's price a night in its own currency (trips/enrich/prices.py), from its type, tags and the
    country its day ends in (`country`, None: unknown)."""
    return P.price(c["type"], c["tags"], c.get("country"))


def _low(p: P.Price) -> float:
    return math.inf if p.low is None else p.low


def likely_open(tags: dict, day: date | None) -> bool | None:
    """Seasonality: True or False from an `Mmm-Mmm` opening_hours season (wrap-around allowed,
    Oct-Mar) or `seasonal=yes` (closed November to March); None when undated or undetermined."""
    if day is None:
        return None
    rule = (tags.get("opening_hours") or "").split(";")[0]
    m = MONTH_RANGE.match(rule)
    if m and m.group(1).lower() in MONTHS and m.group(2).lower() in MONTHS:
        first, last = MONTHS.index(m.group(1).lower()) + 1, MONTHS.index(m.group(2).lower()) + 1
        if first <= last:
            return first <= day.month <= last
        return day.month >= first or day.month <= last
    if (tags.get("seasonal") or "").strip().lower() == "yes":
        return day.month not in SEASONAL_CLOSED_MONTHS
    return None


# --- the stored shape -----------------------------------------------------------------------------------

def _url(tags: dict) -> str | None:
    return tags.get("website") or tags.get("url") or tags.get("contact:website")


def _wikipedia(value: str | None) -> str | None:
    """`fr:Titre` → its article URL; anything else is left out."""
    if not value or ":" not in value:
        return None
    lang, title = value.split(":", 1)
    if not re.fullmatch(r"[a-z]{2,3}(?:-[a-z]+)?", lang) or not title.strip():
        return None
    return f"https://{lang}.wikipedia.org/wiki/{title.strip().replace(' ', '_')}"


def _address(tags: dict) -> str | None:
    street = " ".join(x for x in (tags.get("addr:housenumber"), tags.get("addr:street")) if x)
    town = " ".join(x for x in (tags.get("addr:postcode"), tags.get("addr:city")) if x)
    return ", ".join(x for x in (street, town) if x) or None


def _describe(c: dict, day: date | None) -> dict:
    """The stored `Accommodation` of a ranked candidate; None values are left out."""
    t = c["tags"]
    cost = price(c)
    out = {
        "name": c["name"], "type": c["type"], "lat": c["lat"], "lon": c["lon"],
        "estimatedPriceMin": cost.low, "estimatedPriceMax": cost.high, "isExactPrice": cost.exact,
        "currency": cost.currency, "priceReason": cost.reason, "country": c.get("country"), "url": _url(t),
        "possibleClosed": likely_open(t, day) is False,
        "distanceToEndPoint": round(c["distance_m"] / 1000.0, 3), "source": "osm",
        "description": t.get("description"), "imageUrl": t.get("image"),
        "wikipediaUrl": _wikipedia(t.get("wikipedia")), "openingHours": t.get("opening_hours"),
        "phone": t.get("phone") or t.get("contact:phone"), "address": _address(t),
        "osmType": c["osmType"], "osmId": c["osmId"],
    }
    return {k: v for k, v in out.items() if v is not None}


def _metres(a: dict, b: dict) -> float:
    return C.haversine_m(a["lat"], a["lon"], b["lat"], b["lon"])


def _same_place(a: dict, b: dict) -> bool:
    if a.get("osmId") is not None and (a.get("osmType"), a.get("osmId")) == (b.get("osmType"), b.get("osmId")):
        return True
    if abs(a["lat"] - b["lat"]) <= SAME_PLACE_DEG and abs(a["lon"] - b["lon"]) <= SAME_PLACE_DEG:
        return True
    key = _key(a.get("name"))
    return bool(key) and key == _key(b.get("name")) and _metres(a, b) <= DEDUP_M
