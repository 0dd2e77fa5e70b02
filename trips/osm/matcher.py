"""Which imported ways a line rides (docs/RULES.md "Surfaces and way types"): the line is sampled every STEP_M, each
sample takes the nearest way segment within TOLERANCE_M whose heading agrees with the line's (so a crossing street
is not ridden), blips shorter than MIN_RUN samples between the same way are smoothed away, and the samples are
joined into stretches: one per way ridden, and the stretches no way was found for, said as such (`way` None)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trips.osm import geometry as G
from trips.osm import index
from trips.osm.tables import osm_ferry, osm_way
from trips.osm.waykinds import PATH_HIGHWAYS, surface_class, way_type

TOLERANCE_M = 25.0  # a sample further than this from every way agreeing in heading rides none
STEP_M = 15.0  # metres between samples
HEADING_DEG = 50.0  # the largest angle between the line and a way it rides
ANGLE_COST_M = 0.2  # metres of distance one degree of heading disagreement is worth, between two candidates
MIN_RUN = 3  # a run of fewer samples between two runs on one way is that way too
RING_M = 400.0  # a closed road longer than this is a loop, not a roundabout
EXIT_REACH_M, EXIT_NEAR_M = 20.0, 6.0  # a road meets the ring where the line passes within this of the join
GROUP_M = 1000.0  # samples asked of the index together
WAY_TAGS = ("name", "highway", "surface", "tracktype", "smoothness", "cycleway", "cycleway_left", "cycleway_right",
            "cycleway_both", "bicycle")


@dataclass(frozen=True)
class Way:
    key: tuple[str, int]  # ("w" | "f", osm id): a road or a ferry route
    tags: dict  # WAY_TAGS that are set; a ferry's: route=ferry and its name
    surface: str  # trips/osm/waykinds.py SURFACE_CLASSES
    kind: str  # trips/osm/waykinds.py WAY_TYPES
    roundabout: bool = False  # a small closed road: ridden in part, it is a roundabout

    @property
    def name(self) -> str | None:
        return self.tags.get("name")


@dataclass
class Stretch:
    from_m: float
    to_m: float
    way: Way | None  # None: no way found (off the map, or a line that leaves the roads)
    # (lat, lon, heading°) where the stretch starts and ends on the line
    start: tuple[float, float, float]
    end: tuple[float, float, float]
    exit: int | None = None  # on a roundabout: the exit taken (1: the first road after the entry)

    @property
    def from_km(self) -> float:
        return self.from_m / 1000

    @property
    def to_km(self) -> float:
        return self.to_m / 1000


def _way(prefix: str, row, coords: np.ndarray) -> Way:
    tags = {k: row[k] for k in WAY_TAGS if k in row and row[k] is not None}
    if prefix == "f":
        tags["route"] = "ferry"
    ring = prefix == "w" and len(coords) > 3 and bool((coords[0] == coords[-1]).all()) \
        and row["length_m"] <= RING_M and tags.get("highway") not in PATH_HIGHWAYS
    return Way((prefix, int(row["osm_id"])), tags, surface_class(tags), way_type(tags), ring)


def _samples(pts: np.ndarray):
    """(lat, lon, heading°, metres from the start, metres each sample stands for) every STEP_M along `pts`."""
    az, _, seg = G.GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])
    seg = np.asarray(seg, dtype=float)
    count = np.maximum(1, np.ceil(seg / STEP_M).astype(np.int64))
    owner = np.repeat(np.arange(len(seg)), count)
    k = np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)
    frac = (k + 0.5) / count[owner]
    lat = pts[owner, 0] + frac * (pts[owner + 1, 0] - pts[owner, 0])
    lon = pts[owner, 1] + frac * (pts[owner + 1, 1] - pts[owner, 1])
    weight = seg[owner] / count[owner]
    along = np.concatenate(([0.0], np.cumsum(weight)))
    return lat, lon, np.asarray(az, float)[owner] % 360, along, weight


def match_each(lines, engine=None, tolerance_m: float = TOLERANCE_M) -> list[list[Stretch]]:
    """The stretches of every line of `lines` ((n, 2+) lat, lon arrays), in one pass over the spatial index.
    A line of fewer than two distinct points rides nothing: no stretch."""
    prepared: list[Any] = []
    for line in lines:
        pts = index.as_line(line)
        prepared.append(_samples(pts) if len(pts) > 1 else None)
    groups: list[tuple[int, int, int]] = []  # (line, first sample, end sample)
    for n, s in enumerate(prepared):
        if s is None or not len(s[0]):
            continue
        cuts = np.searchsorted(s[3][:-1], np.arange(0.0, s[3][-1], GROUP_M), side="left").tolist() + [len(s[0])]
        groups += [(n, a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    boxes = index.grow_chunks([np.column_stack((prepared[n][0][a:b], prepared[n][1][a:b])) for n, a, b in groups],
                              tolerance_m)
    with index.engine_of(engine).connect() as conn:
        roads = index.select_chunks(conn, osm_way, boxes)
        ferries = index.select_chunks(conn, osm_ferry, boxes)
    lines_of: dict[tuple[str, int], tuple[Way, np.ndarray]] = {}
    rows = [(("w", r["id"]), "w", r) for per in roads for r in per] + \
        [(("f", r["id"]), "f", r) for per in ferries for r in per]
    fresh = {key: (prefix, r) for key, prefix, r in rows if key not in lines_of}
    for (key, (prefix, r)), coords in zip(fresh.items(), G.decode_many([r["line"] for _, r in fresh.values()])):
        lines_of[key] = (_way(prefix, r, coords), coords)
    picked: list[Any] = [np.full(len(s[0]), -1, dtype=np.int64) if s is not None else None for s in prepared]
    ways: list[Way] = []
    way_no: dict[tuple[str, int], int] = {}
    for (n, a, b), road_rows, ferry_rows in zip(groups, roads, ferries):
        keys = [("w", r["id"]) for r in road_rows] + [("f", r["id"]) for r in ferry_rows]
        if not keys:
            continue
        s = prepared[n]
        best = _nearest(s[0][a:b], s[1][a:b], s[2][a:b], [lines_of[k][1] for k in keys], tolerance_m)
        found = best >= 0
        for j in np.unique(best[found]).tolist():
            way = lines_of[keys[j]][0]
            if way.key not in way_no:
                way_no[way.key] = len(ways)
                ways.append(way)
        numbers = np.array([way_no.get(lines_of[k][0].key, -1) for k in keys], dtype=np.int64)
        picked[n][a:b][found] = numbers[best[found]]
    out = [[] if s is None else _stretches(s, _smooth(p), ways) for s, p in zip(prepared, picked)]
    if any(w.roundabout for w in ways):
        _exits(lines, out, lines_of)
    return out


def match(line, engine=None, tolerance_m: float = TOLERANCE_M) -> list[Stretch]:
    """`match_each` of one line."""
    return match_each([line], engine, tolerance_m)[0]


def _exits(lines, found: list[list[Stretch]], lines_of: dict) -> None:
    """Set each roundabout stretch's exit: the roads meeting the ring (a vertex of the ring that is a vertex of
    another road) that the line passes while on it, less the one it came in by."""
    rings = {way.key: coords for way, coords in lines_of.values() if way.roundabout}
    others = {(round(float(lat), 7), round(float(lon), 7)) for way, coords in lines_of.values()
              if not way.roundabout for lat, lon in coords}
    for line, stretches in zip(lines, found):
        pts = index.as_line(line)
        cum = np.concatenate(([0.0], np.cumsum(G.GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2])))
        for s in stretches:
            if s.way is None or not s.way.roundabout:
                continue
            ring = rings[s.way.key]
            joins = np.array([p for p in ring[:-1] if (round(float(p[0]), 7), round(float(p[1]), 7)) in others])
            part = (cum >= s.from_m - EXIT_REACH_M) & (cum <= s.to_m + EXIT_REACH_M)
            on = pts[max(0, int(np.argmax(part)) - 1):len(part) - int(np.argmax(part[::-1])) + 1]
            if not len(joins) or len(on) < 2:
                continue
            dist = G.nearest_on_line(joins[:, 0], joins[:, 1], on)[0]
            s.exit = max(1, int((dist <= EXIT_NEAR_M).sum()) - 1)


def _nearest(lat, lon, heading, candidates: list[np.ndarray], tolerance_m: float) -> np.ndarray:
    """Per sample, the index in `candidates` of the way it rides, -1 for none."""
    plane = G.LocalPlane(float(lat.mean()), float(lon.mean()))
    px, py = plane.xy(lat, lon)
    sizes = np.array([len(c) for c in candidates])
    verts = np.vstack(candidates)
    wx, wy = plane.xy(verts[:, 0], verts[:, 1])
    owner = np.repeat(np.arange(len(candidates)), sizes)
    real = owner[:-1] == owner[1:]  # a segment joins two vertices of one way
    lo_x, lo_y = px.min() - tolerance_m, py.min() - tolerance_m
    hi_x, hi_y = px.max() + tolerance_m, py.max() + tolerance_m
    ax, ay, bx, by = wx[:-1], wy[:-1], wx[1:], wy[1:]
    near = real & (np.maximum(ax, bx) >= lo_x) & (np.minimum(ax, bx) <= hi_x) & \
        (np.maximum(ay, by) >= lo_y) & (np.minimum(ay, by) <= hi_y)
    seg = np.flatnonzero(near)
    out = np.full(len(px), -1, dtype=np.int64)
    if not len(seg):
        return out
    ax, ay, bx, by = ax[seg], ay[seg], bx[seg], by[seg]
    dist = G.segment_distances(px, py, ax, ay, bx, by)
    way_heading = np.degrees(np.arctan2(bx - ax, by - ay)) % 180  # undirected: a way is ridden either way
    turn = np.abs((heading[:, None] % 180 - way_heading[None, :] + 90) % 180 - 90)
    score = np.where((dist <= tolerance_m) & (turn <= HEADING_DEG), dist + ANGLE_COST_M * turn, np.inf)
    best = np.argmin(score, axis=1)
    ok = np.isfinite(score[np.arange(len(px)), best])
    out[ok] = owner[seg[best[ok]]]
    return out


def _smooth(picked: np.ndarray) -> np.ndarray:
    """Runs shorter than MIN_RUN samples between two runs of one way (or of none) become that way."""
    out = picked.copy()
    starts = np.flatnonzero(np.concatenate(([True], out[1:] != out[:-1])))
    ends = np.append(starts[1:], len(out))
    for i in range(1, len(starts) - 1):
        if ends[i] - starts[i] < MIN_RUN and out[starts[i - 1]] == out[starts[i + 1]]:
            out[starts[i]:ends[i]] = out[starts[i - 1]]
    return out


def _stretches(s, picked: np.ndarray, ways: list[Way]) -> list[Stretch]:
    lat, lon, heading, along, _ = s
    starts = np.flatnonzero(np.concatenate(([True], picked[1:] != picked[:-1])))
    ends = np.append(starts[1:], len(picked))
    out = []
    for a, b in zip(starts.tolist(), ends.tolist()):
        k = int(picked[a])
        out.append(Stretch(float(along[a]), float(along[b]), ways[k] if k >= 0 else None,
                           (float(lat[a]), float(lon[a]), float(heading[a])),
                           (float(lat[b - 1]), float(lon[b - 1]), float(heading[b - 1]))))
    return out
