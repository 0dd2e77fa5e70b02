"""Surfaces, way types and cues (docs/RULES.md "Surfaces and way types", "Cues"): each riding day's stored line
matched to the imported ways (trips/osm/matcher.py), its km by surface class and by way type, its turns, and an
alert when the day is rougher than the trip's bike type is for.

The km of each table are the matched line's shares scaled to the day's distance and rounded to 0.1 km by largest
remainder, so they add up to the distance the day shows; the km no way was found for count as `unknown`. A day
on the map whose line meets no way at all has no table but a reason (`waysReason`), never zeros; a day off the map
is not looked at (the read model says so).
"""
from __future__ import annotations

import math

from trips.enrich import corridor as C
from trips.enrich.alerts import surfaces as A
from trips.enrich.contract import AlertFact, Result, StageSnap, TripSnap
from trips.errors import N_
from trips.osm import cues as K
from trips.osm import matcher
from trips.osm.waykinds import DEFAULT_BIKE, ROUGH_SHARE, SURFACE_CLASSES, WAY_TYPES, rough_km

NAME = "surfaces"
GROUP = A.GROUP
FIELDS = ("surfaces", "wayTypes", "cues", "waysReason")
NO_WAY = N_("reason.ways_no_road")
REST_DAY = N_("reason.ways_rest_day")


def tenths(metres: dict[str, float], keys: tuple[str, ...], km: float) -> dict[str, float]:
    """{key: km} of `metres` scaled to `km` and rounded to 0.1 by largest remainder: they add up to round(km, 1)."""
    total = sum(metres.values())
    target = int(round(km * 10))
    raw = {k: (metres.get(k, 0.0) / total * target if total > 0 else 0.0) for k in keys}
    if total <= 0:
        raw[keys[-1]] = float(target)
    out = {k: math.floor(v) for k, v in raw.items()}
    for k in sorted(keys, key=lambda k: (out[k] - raw[k], keys.index(k)))[:target - sum(out.values())]:
        out[k] += 1
    return {k: out[k] / 10 for k in keys}


def day_tables(stretches: list[matcher.Stretch], km: float) -> tuple[dict, dict] | None:
    """(km by surface class, km by way type) of a day's stretches, None when no way was matched."""
    surfaces: dict[str, float] = {}
    kinds: dict[str, float] = {}
    if not any(s.way is not None for s in stretches):
        return None
    for s in stretches:
        length = s.to_m - s.from_m
        surface, kind = (s.way.surface, s.way.kind) if s.way is not None else ("unknown", "unknown")
        surfaces[surface] = surfaces.get(surface, 0.0) + length
        kinds[kind] = kinds.get(kind, 0.0) + length
    return tenths(surfaces, SURFACE_CLASSES, km), tenths(kinds, WAY_TYPES, km)


def day_cues(line, stretches: list[matcher.Stretch], km: float) -> list[dict]:
    """The day's cues ({km, turn, exit?, street, lat, lon}), km scaled to the day's distance."""
    length = stretches[-1].to_m if stretches else 0.0
    scale = km * 1000 / length if length > 0 else 1.0
    out = []
    for c in K.cues(line, stretches):
        cue = {"km": round(c["m"] * scale / 1000, 2), "turn": c["turn"], "street": c["street"],
               "lat": round(c["lat"], 6), "lon": round(c["lon"], 6)}
        if c["turn"] == "roundabout":
            cue["exit"] = c["exit"]
        out.append(cue)
    return out


def compute(snap: TripSnap, engine) -> Result:
    """Per-day surfaces, wayTypes, cues (or waysReason) and the surface alert for every day of `snap`."""
    bike = snap.bike_type or DEFAULT_BIKE
    result, _cover, stages = C.on_map(snap, engine)  # a day off the map is not looked at (its group: off map)
    stages = sorted(stages, key=lambda s: s.index)
    riding = [s for s in stages if not s.is_rest_day]
    found = dict(zip([s.id for s in riding], matcher.match_each([s.line for s in riding], engine)))
    for stage in stages:
        if stage.is_rest_day:
            result.data[stage.id] = {"surfaces": None, "wayTypes": None, "cues": None, "waysReason": REST_DAY}
            continue
        tables = day_tables(found[stage.id], stage.distance_km)
        if tables is None:
            result.data[stage.id] = {"surfaces": None, "wayTypes": None, "cues": None, "waysReason": NO_WAY}
            continue
        surfaces, kinds = tables
        result.data[stage.id] = {"surfaces": surfaces, "wayTypes": kinds, "waysReason": None,
                                 "cues": day_cues(stage.line, found[stage.id], stage.distance_km)}
        _alert(stage, surfaces, bike, result)
    return result


def _alert(stage: StageSnap, surfaces: dict, bike: str, result: Result) -> None:
    limit = ROUGH_SHARE.get(bike)
    rough = rough_km(bike, surfaces)
    if limit is None or stage.distance_km <= 0 or rough / stage.distance_km <= limit:
        return
    result.add(AlertFact(A.SURFACE_BEYOND_BIKE.code, stage.id,
                         {"share": int(round(100 * rough / stage.distance_km)), "length": round(rough, 1)}))
