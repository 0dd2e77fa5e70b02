"""A day's elevation along its distance (docs/RULES.md "Climbs"): the compact profile and the climbs with their
category, and the steepest gradient over a stretch that terrain's `steepestPct` reads too.

A line is stored rows [[lat, lon, ele], …], ele null when unknown (docs/RULES.md "Elevation"); rows shorter than
two numbers are skipped, a row without an elevation still counts for the distance.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trips.route import geo

PROFILE_SAMPLES = 64       # at most this many (km, m) samples per day …
PROFILE_TOLERANCE_M = 1.0  # … fewer when they all lie this near the line
STEEPEST_OVER_M = 500.0    # the steepest gradient is the steepest 500 m of road (as terrain's steepestPct)
CLIMB_MIN_M = 500.0        # a climb is at least 500 m long …
CLIMB_MIN_GRADE = 3.0      # … at a mean gradient of 3 % or more …
CLIMB_MIN_SCORE = 8_000.0  # … and scores at least category 4
CLIMB_DROP_M = 20.0        # a climb ends once the road falls this far below its top …
CLIMB_FLAT_M = 1_000.0     # … or goes this far without reaching a new top
MAX_CLIMBS = 12            # per day, the highest scores (a day of many small bumps stays small)
# length (m) × mean gradient (%) from which a climb is in each category, hardest first (docs/RULES.md "Climbs")
CATEGORIES = (("HC", 80_000.0), ("1", 64_000.0), ("2", 32_000.0), ("3", 16_000.0), ("4", CLIMB_MIN_SCORE))


@dataclass(frozen=True)
class Climb:
    start_km: float
    length_km: float
    gain_m: float
    mean_pct: float
    steepest_pct: float
    category: str


def along(geometry) -> tuple[np.ndarray, np.ndarray]:
    """(km from the line's first point, elevation m, NaN when unknown) of each usable row of `geometry`."""
    rows = [(float(p[0]), float(p[1]), np.nan if len(p) < 3 or p[2] is None else float(p[2]))
            for p in geometry or [] if len(p) >= 2]
    if not rows:
        return np.zeros(0), np.zeros(0)
    pts = np.asarray(rows, dtype=np.float64)
    return geo.cumulative_km(pts), pts[:, 2]


def known(ele: np.ndarray) -> bool:
    """Whether a line's elevation is known: every point carries one (a stored line is settled: all or none)."""
    return len(ele) >= 2 and bool(np.isfinite(ele).all())


def sampled(km: np.ndarray, ele: np.ndarray, most: int = PROFILE_SAMPLES) -> list[list[float]]:
    """At most `most` [km, m] pairs of the line's own points that keep its shape: the first and the last, then
    each time the point farthest in height from the profile kept so far, until every point lies within
    PROFILE_TOLERANCE_M of it (a summit or a valley is never cut off); km to 0.01, metres whole."""
    keep = np.zeros(len(km), dtype=bool)
    if len(km):
        keep[[0, -1]] = True
    for _ in range(most - 2 if len(km) else 0):
        off = np.abs(ele - np.interp(km, km[keep], ele[keep]))
        far = int(np.argmax(off))
        if off[far] <= PROFILE_TOLERANCE_M:
            break
        keep[far] = True
    return [[round(float(k), 2), float(round(float(e)))] for k, e in zip(km[keep], ele[keep])]


def steepest_pct(cum_m: np.ndarray, ele: np.ndarray, over_m: float = STEEPEST_OVER_M) -> float | None:
    """The highest mean gradient (%) from any point to the first one at least `over_m` further, 0 at the least;
    None when the line is shorter than `over_m` or its elevation unknown."""
    j = np.searchsorted(cum_m, cum_m + over_m)
    ok = j < len(cum_m)
    if not ok.any():
        return None
    i, j = np.flatnonzero(ok), j[ok]
    grad = (ele[j] - ele[i]) / (cum_m[j] - cum_m[i]) * 100
    grad = grad[np.isfinite(grad)]
    return round(max(0.0, float(grad.max())), 1) if len(grad) else None


def category(score: float) -> str | None:
    """The category of a climb scoring length (m) × mean gradient (%), None under category 4."""
    return next((name for name, floor in CATEGORIES if score >= floor), None)


def _spans(ele: np.ndarray, cum_m: np.ndarray) -> list[tuple[int, int]]:
    """(foot, top) indices of each rise: from the lowest point before it to its highest, ended by a fall of
    CLIMB_DROP_M below the top or CLIMB_FLAT_M without a new top."""
    out, low, top, climbing = [], 0, 0, False
    for i in range(1, len(ele)):
        if climbing and ele[i] > ele[top]:
            top = i
        elif climbing and (ele[top] - ele[i] >= CLIMB_DROP_M or cum_m[i] - cum_m[top] >= CLIMB_FLAT_M):
            out.append((low, top))
            climbing, low = False, i
        elif not climbing and ele[i] <= ele[low]:
            low = i
        elif not climbing:
            climbing, top = True, i
    if climbing:
        out.append((low, top))
    return out


def climbs(km: np.ndarray, ele: np.ndarray) -> list[Climb]:
    """The categorised climbs of a line with a known elevation, in route order (docs/RULES.md "Climbs")."""
    if not known(ele):
        return []
    cum_m = km * 1000.0
    found = []
    for foot, top in _spans(ele, cum_m):
        length, gain = float(cum_m[top] - cum_m[foot]), float(ele[top] - ele[foot])
        if length < CLIMB_MIN_M or gain / length * 100 < CLIMB_MIN_GRADE:
            continue
        mean = gain / length * 100
        name = category(length * mean)
        if name is None:
            continue
        part = slice(foot, top + 1)
        steepest = steepest_pct(cum_m[part], ele[part]) or mean  # a climb shorter than the stretch: its mean
        found.append(Climb(round(float(km[foot]), 2), round(length / 1000, 2), round(gain),
                           round(mean, 1), round(max(steepest, mean), 1), name))
    kept = sorted(found, key=lambda c: c.length_km * c.mean_pct, reverse=True)[:MAX_CLIMBS]
    return sorted(kept, key=lambda c: c.start_km)
