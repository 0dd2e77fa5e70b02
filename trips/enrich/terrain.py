"""Terrain (docs/RULES.md "Terrain"): climbs, rough and busy roads, continuity, e-bike range and rest days, from
the day's stored line and the OpenStreetMap ways in a corridor around it.

A way counts by the stretch of route it accompanies, never by its own length. The rules that read the map only
raise what they find, so a day off the map raises no false alarm; `mapCoverage` says how much of it they saw.
"""
from __future__ import annotations

import math
import re

import numpy as np

from trips.enrich import corridor as C
from trips.enrich.alerts import terrain as A
from trips.enrich.contract import AlertFact, Result, StageSnap, TripSnap
from trips.osm import geometry as G
from trips.osm import queries as Q
from trips.route.elevation import NO_ELEVATION
from trips.route.profile import steepest_pct

NAME = "terrain"
GROUP = A.GROUP

CORRIDOR_M = 20.0                      # OSM ways in a 20 m corridor
CONTINUITY_CRITICAL_M = 500.0          # gap > 500 m: critical
CONTINUITY_WARNING_M = 100.0           # gap > 100 m and ≤ 500 m: warning
ELEVATION_GAIN_M = 1200.0              # stage D+ > 1200 m
STEEP_GRADIENT_PCT = 8.0               # a segment is steep at Δele/dist·100 ≥ 8 %
STEEP_SECTION_M = 500.0                # a section of steep segments counts from 500 m
ROUGH_TOTAL_M = 500.0                  # summed rough length ≥ 500 m: one alert
TRAFFIC_WAY_M = 500.0                  # a main/secondary road counts from 500 m (see _stretches)
STRETCH_GAP_M = 2 * CORRIDOR_M         # two ways further apart than this along the route are two stretches
SECONDARY_FAST_KMH = 50.0              # parsed maxspeed > 50: fast; ≤ 50 or unknown: slow
EBIKE_RANGE_KM = 80.0                  # range = max(0, 80 − D+/25) km
EBIKE_GAIN_M_PER_KM = 25.0
CHARGING_CORRIDOR_M = 2000.0           # the charging station the ebike alert navigates to
REST_DAY_EVERY = 3                     # a streak of 3, 6, 9 … riding days

ROUGH_SURFACES = frozenset((
    "unpaved", "gravel", "dirt", "ground", "grass", "sand", "mud", "compacted", "fine_gravel", "pebblestone",
    "earth", "clay", "rock", "stone", "woodchips", "wood", "metal", "sett", "cobblestone", "unhewn_cobblestone",
    "paving_stones"))
ROUGH_TRACKTYPES = frozenset(("grade3", "grade4", "grade5"))
ROUGH_SMOOTHNESS = frozenset(("bad", "very_bad", "horrible", "very_horrible", "impassable"))
MAIN_ROADS = frozenset(("primary", "trunk"))
CYCLEWAY_KEYS = ("cycleway", "cycleway:right", "cycleway:left", "cycleway:both")
CYCLE_BICYCLE = frozenset(("designated", "use_sidepath"))
# Any value counts but this: `cycleway=no` (very common) is a statement that there is none, so it does not count.
NO_CYCLEWAY = frozenset(("no", "none"))

MAX_SEGMENTS, MAX_SEGMENT_POINTS = 10, 32   # polylines an alert's action carries (kept small for get_stage)
_SPEED = re.compile(r"^(?:[a-z]{2}:)?(\d{1,3}(?:\.\d+)?)\s*(km/h|kmh|kph|mph|knots)?$")
_UNIT = {"mph": 1.609344, "knots": 1.852}


def parse_maxspeed(value) -> float | None:
    """km/h from an OSM maxspeed (`50`, `50 km/h`, `FR:50`, `30 mph`); several `;` values give the highest;
    `none`, `signals`, zone codes (`FR:urban`) and anything else give None."""
    if value is None:
        return None
    best = None
    for part in str(value)[:64].lower().split(";"):
        m = _SPEED.match(part.strip())
        if m:
            kmh = float(m.group(1)) * _UNIT.get(m.group(2) or "", 1.0)
            best = kmh if best is None else max(best, kmh)
    return best


def rough_values(tags: dict) -> list[str]:
    """What makes a way rough (docs/RULES.md "Terrain"): its rough `surface` values; only when `surface` is absent, a
    rough `tracktype` or `smoothness`. Empty when the way is not rough."""
    surface = tags.get("surface")
    if surface:
        return [v for v in (s.strip().lower() for s in str(surface).split(";")) if v in ROUGH_SURFACES]
    return [v for v in (tags.get("tracktype"), tags.get("smoothness"))
            if v in ROUGH_TRACKTYPES or v in ROUGH_SMOOTHNESS][:1]


def has_cycle_infra(tags: dict) -> bool:
    return any(str(tags.get(k) or "").strip().lower() not in ("", *NO_CYCLEWAY) for k in CYCLEWAY_KEYS) \
        or tags.get("bicycle") in CYCLE_BICYCLE


def compute(snap: TripSnap, engine) -> Result:
    """Terrain facts and per-day data (`data[stage]["terrain"]` on riding days) for every day of `snap`.
    Raises only what the map queries raise (database errors)."""
    result, cover = C.start(snap, engine)
    stages = sorted(snap.stages, key=lambda s: s.index)
    riding = [s for s in stages if not s.is_rest_day]
    ways = dict(zip([s.id for s in riding],  # every riding day's ways in one query
                    Q.ways_along_each([s.line for s in riding], CORRIDOR_M, engine=engine)))
    stations = _charging(snap, riding, engine)
    for stage in stages:
        result.ran_on(stage.id)
        if stage.is_rest_day:
            continue
        _elevation(stage, result)
        steepest = _steep(stage, result)
        summary = _ways(stage, ways[stage.id], result)
        _ebike(stage, result, stations)
        result.data[stage.id] = {"terrain": {**summary, "steepestPct": steepest, **_unknown(stage),
                                             "mapCoverage": round(cover[stage.id], 2)}}
    _continuity(stages, result)
    _rest_days(stages, result)
    return result


def _continuity(stages: list[StageSnap], result: Result) -> None:
    if len(stages) < 2:
        return
    ends, starts = np.array([s.end for s in stages[:-1]]), np.array([s.start for s in stages[1:]])
    gaps = G.GEOD.inv(ends[:, 1], ends[:, 0], starts[:, 1], starts[:, 0])[2]
    for stage, nxt, gap in zip(stages, stages[1:], gaps):
        action = C.navigate(*stage.end)
        if gap > CONTINUITY_CRITICAL_M:
            result.add(AlertFact(A.CONTINUITY_GAP_CRITICAL.code, stage.id,
                                 {"distance": round(gap / 1000, 2), "next": nxt.day_number}, action))
        elif gap > CONTINUITY_WARNING_M:
            result.add(AlertFact(A.CONTINUITY_GAP_WARNING.code, stage.id,
                                 {"gap": int(round(gap)), "next": nxt.day_number}, action))


def _elevation(stage: StageSnap, result: Result) -> None:
    if stage.elevation_gain_m is not None and stage.elevation_gain_m > ELEVATION_GAIN_M:  # unknown: nothing said
        result.add(AlertFact(A.ELEVATION_GAIN.code, stage.id, {"elevation": int(round(stage.elevation_gain_m))},
                             {"kind": "auto_fix", "splitAtKm": round(stage.distance_km / 2, 1)}))


def _unknown(stage: StageSnap) -> dict:
    """{"elevationReason": why} beside a null steepestPct when the day's elevation is unknown, else nothing."""
    return {"elevationReason": NO_ELEVATION} if stage.elevation_gain_m is None else {}


def _steep(stage: StageSnap, result: Result) -> float | None:
    """steep_gradient per section of consecutive steep segments ≥ 500 m; returns the steepest average gradient
    over any stretch of at least 500 m of the day (None when the day is shorter or has no elevation)."""
    pts = np.array(stage.geometry, dtype=float).reshape(-1, 3)  # an unknown elevation (None) becomes NaN
    if len(pts) < 2:
        return None
    dist = G.GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2]
    rise = np.diff(pts[:, 2])
    keep = dist > 0  # a repeated vertex is neither steep nor a break in a section
    dist, rise, first = dist[keep], rise[keep], np.flatnonzero(keep)
    with np.errstate(invalid="ignore"):
        steep = np.isfinite(rise) & (rise / np.where(dist > 0, dist, 1) * 100 >= STEEP_GRADIENT_PCT)
    edges = np.diff(np.concatenate(([0], steep.astype(np.int8), [0])))
    for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)):
        length = float(dist[a:b].sum())
        if length >= STEEP_SECTION_M:
            start = pts[first[a]]
            result.add(AlertFact(A.STEEP_GRADIENT.code, stage.id, {
                "gradient": round(float(rise[a:b].sum()) / length * 100, 1), "distance": round(length / 1000, 2)},
                C.navigate(start[0], start[1])))
    return steepest_pct(np.concatenate(([0.0], np.cumsum(dist))), np.concatenate(([pts[0, 2]], pts[1:, 2][keep])),
                        STEEP_SECTION_M)


def _ways(stage: StageSnap, ways: list, result: Result) -> dict:
    """surface_rough and the traffic codes from the ways in the corridor; returns the day's summary."""
    route = np.asarray(stage.line, dtype=float)
    route = route if len(route) > 1 else np.vstack((route, route))
    cum = np.concatenate(([0.0], np.cumsum(G.GEOD.inv(route[:-1, 1], route[:-1, 0], route[1:, 1],
                                                      route[1:, 0])[2])))
    runs = _corridor_segments(route, cum, ways)
    rough, surfaces, main, secondary = [], {}, [], []
    order = np.argsort(runs["way"], kind="stable")
    found, at = np.unique(runs["way"][order], return_index=True)
    for k, idx in zip(found, np.split(order, at[1:])):  # each way with segments in the corridor, once
        way = ways[k]
        seg = {key: value[idx] for key, value in runs.items()}
        values = rough_values(way.tags)
        if values:
            rough.append(seg)
            for v in values:
                surfaces[v] = surfaces.get(v, 0.0) + _union(seg["lo"], seg["hi"])
        highway = way.tags.get("highway")
        if has_cycle_infra(way.tags):
            continue
        if highway in MAIN_ROADS:
            main.append(seg)
        elif highway == "secondary":
            speed = parse_maxspeed(way.tags.get("maxspeed"))
            secondary.append({**seg, "speed": np.full(len(seg["lo"]), np.nan if speed is None else speed)})
    rough_m = _union_of(rough)
    if rough_m >= ROUGH_TOTAL_M:
        names = sorted(surfaces, key=lambda v: (-surfaces[v], v))[:3]
        result.add(AlertFact(A.SURFACE_ROUGH.code, stage.id, {
            "length": round(rough_m / 1000, 2), "surface": ", ".join(names)}, _navigate(route, cum, rough)))
    long_main = _stretches(main)
    if long_main:
        result.add(AlertFact(A.TRAFFIC_MAIN_ROAD.code, stage.id, {
            "count": len(long_main), "length": round(sum(s["length"] for s in long_main) / 1000, 2)},
            _navigate(route, cum, [s["segs"] for s in long_main])))
    fast, slow = [], []
    for s in _stretches(secondary):
        (fast if s["speed"] > SECONDARY_FAST_KMH else slow).append(s)  # an unknown limit (NaN) is slow
    for kind, found in ((A.TRAFFIC_SECONDARY_FAST, fast), (A.TRAFFIC_SECONDARY_SLOW, slow)):
        if found:
            known = [s["speed"] for s in found if not math.isnan(s["speed"])]
            speed = max(known) if known else SECONDARY_FAST_KMH  # "≤ 50" when no way says its limit
            result.add(AlertFact(kind.code, stage.id, {
                "count": len(found), "length": round(sum(s["length"] for s in found) / 1000, 2),
                "maxspeed": int(round(speed))}, _navigate(route, cum, [s["segs"] for s in found])))
    return {"roughKm": round(rough_m / 1000, 2), "mainRoadKm": round(_union_of(main) / 1000, 2)}


def _stretches(parts: list[dict]) -> list[dict]:
    """The stretches of route at least TRAFFIC_WAY_M long that these ways' segments accompany without a
    break (of more than STRETCH_GAP_M): {length, speed (highest known, NaN if none), segs}.

    The original asked for a *way* of 500 m; OpenStreetMap splits a road into ways at every junction, bridge or change
    of tags (a main road is often a chain of 100–400 m ways), so the unit here is the stretch of road the
    route rides, whichever ways it is drawn as."""
    if not parts:
        return []
    cat = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    order, first, last, start, end = _spans(cat["lo"], cat["hi"], STRETCH_GAP_M)
    out = []
    for f, la, a, b in zip(first, last, start, end):
        if b - a >= TRAFFIC_WAY_M:
            members = order[f:la + 1]
            speeds = cat["speed"][members] if "speed" in cat else np.full(1, np.nan)
            out.append({"length": float(b - a), "speed": float(np.nanmax(speeds)) if np.isfinite(speeds).any()
                        else math.nan, "segs": {k: v[members] for k, v in cat.items()}})
    return out


def _corridor_segments(line: np.ndarray, cum: np.ndarray, ways: list) -> dict[str, np.ndarray]:
    """Every way segment lying wholly in the corridor of `line` (metres from its start at each vertex:
    `cum`), as arrays: `way` (index in `ways`) and `lo`/`hi` (metres along the route its ends project to)."""
    empty = {"way": np.zeros(0, int), "lo": np.zeros(0), "hi": np.zeros(0)}
    if not ways:
        return empty
    verts = np.vstack([w.points for w in ways])
    owner = np.repeat(np.arange(len(ways)), [len(w.points) for w in ways])
    dist, along = _project(verts, line, cum)
    inside = dist <= CORRIDOR_M
    seg = inside[:-1] & inside[1:] & (owner[:-1] == owner[1:])
    i = np.flatnonzero(seg)
    if not len(i):
        return empty
    a, b = verts[i], verts[i + 1]
    length = G.GEOD.inv(a[:, 1], a[:, 0], b[:, 1], b[:, 0])[2]
    lo, hi = np.minimum(along[i], along[i + 1]), np.maximum(along[i], along[i + 1])
    ok = hi - lo <= length + 2 * CORRIDOR_M  # more would mean the ends sit on two passes of a folded route
    return {"way": owner[i][ok], "lo": lo[ok], "hi": hi[ok]}


def _project(verts: np.ndarray, line: np.ndarray, cum: np.ndarray, per_chunk: int = 32):
    """(distance to the line, metres along it) of each vertex, the line taken a few segments at a time so
    that each vertex is measured only against the stretches whose box (grown by the corridor) holds it."""
    dist, along = np.full(len(verts), np.inf), np.zeros(len(verts))
    seglen = np.diff(cum)
    for s in range(0, len(line) - 1, per_chunk):
        chunk = line[s:s + per_chunk + 1, :2]
        lo = G.box_around(float(chunk[:, 0].min()), float(chunk[:, 1].min()), CORRIDOR_M)
        hi = G.box_around(float(chunk[:, 0].max()), float(chunk[:, 1].max()), CORRIDOR_M)
        near = np.flatnonzero((verts[:, 0] >= lo[0]) & (verts[:, 0] <= hi[2]) & (verts[:, 1] >= lo[1])
                              & (verts[:, 1] <= hi[3]))
        if not len(near):
            continue
        d, k, t, _, _ = G.nearest_on_line(verts[near, 0], verts[near, 1], chunk)
        better = d < dist[near]
        dist[near[better]] = d[better]
        along[near[better]] = cum[s + k[better]] + t[better] * seglen[s + k[better]]
    return dist, along


def _spans(lo: np.ndarray, hi: np.ndarray, gap: float = 0.0):
    """The intervals [lo, hi] merged where they overlap (or are less than `gap` apart): (order that sorts
    them, index in that order of each span's first and last interval, each span's start and end metres)."""
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    first = np.flatnonzero(np.concatenate(([True], lo[1:] > hi[:-1] + gap)))
    last = np.concatenate((first[1:], [len(lo)])) - 1
    return order, first, last, lo[first], hi[last]


def _union(lo: np.ndarray, hi: np.ndarray) -> float:
    """The length of the union of the intervals [lo, hi]."""
    if not len(lo):
        return 0.0
    _order, _first, _last, start, end = _spans(lo, hi)
    return float((end - start).sum())


def _union_of(parts: list[dict]) -> float:
    if not parts:
        return 0.0
    return _union(np.concatenate([p["lo"] for p in parts]), np.concatenate([p["hi"] for p in parts]))


def _navigate(route: np.ndarray, cum: np.ndarray, parts: list[dict]) -> dict:
    """Navigate to where the route first meets these segments, with the stretches of the day's route they
    accompany as polylines (at most MAX_SEGMENTS, in route order, each of at most MAX_SEGMENT_POINTS
    vertices at 1e-5° ≈ 1 m): small, and what a map highlights."""
    _order, _first, _last, start, end = _spans(np.concatenate([p["lo"] for p in parts]),
                                               np.concatenate([p["hi"] for p in parts]), STRETCH_GAP_M)
    polylines = []
    for a, b in zip(start[:MAX_SEGMENTS], end[:MAX_SEGMENTS]):
        at = np.concatenate(([a], cum[(cum > a) & (cum < b)], [b]))
        if len(at) > MAX_SEGMENT_POINTS:
            at = at[np.unique(np.linspace(0, len(at) - 1, MAX_SEGMENT_POINTS).round().astype(int))]
        lat, lon = np.interp(at, cum, route[:, 0]), np.interp(at, cum, route[:, 1])
        polylines.append([[round(float(x), 5), round(float(y), 5)] for x, y in zip(lat, lon)])
    first = start[0]
    return {**C.navigate(np.interp(first, cum, route[:, 0]), np.interp(first, cum, route[:, 1])),
            "segments": polylines}


def _reach(stage: StageSnap) -> float:
    # an unknown climbing gives the flat range: a day longer than that is beyond any range (docs/RULES.md "Elevation")
    return max(0.0, EBIKE_RANGE_KM - (stage.elevation_gain_m or 0.0) / EBIKE_GAIN_M_PER_KM)


def _charging(snap: TripSnap, riding: list[StageSnap], engine) -> dict[str, list]:
    """{day id: charging stations along it} for the e-bike days beyond the range, in one query."""
    beyond = [s for s in riding if s.distance_km > _reach(s)] if snap.ebike_mode else []
    return dict(zip([s.id for s in beyond], Q.points_along_each(
        [s.line for s in beyond], CHARGING_CORRIDOR_M, kinds=["charging"], engine=engine)))


def _ebike(stage: StageSnap, result: Result, found: dict[str, list]) -> None:
    if stage.id not in found:
        return  # not in e-bike mode, or within the range
    reach = _reach(stage)
    stations = found[stage.id]
    if stations:
        best = min(stations, key=lambda p: (p.distance_m, p.along_m))
        action = C.navigate(best.lat, best.lon)
    else:
        action = {"kind": "auto_fix", "maxDistance": math.floor(reach * 10) / 10}
    result.add(AlertFact(A.EBIKE_RANGE_EXCEEDED.code, stage.id, {
        "distance": round(stage.distance_km, 1), "range": round(reach, 1)}, action))


def _rest_days(stages: list[StageSnap], result: Result) -> None:
    streak = 0
    for k, stage in enumerate(stages):
        streak = 0 if stage.is_rest_day else streak + 1
        last = k == len(stages) - 1
        if streak >= REST_DAY_EVERY and streak % REST_DAY_EVERY == 0 and not last and not stages[k + 1].is_rest_day:
            result.add(AlertFact(A.REST_DAY_SUGGESTED.code, stage.id, {"days": streak},
                                 {"kind": "auto_fix", "afterStage": stage.day_number}))
