"""Whether a route carries elevation, and unknown elevation kept unknown (docs/RULES.md "Elevation").

A point without an elevation is NaN in the (n, 3) arrays and null (None) in stored JSON and on the wire; a
track's elevation is known when at least KNOWN_SHARE of its points carry one (the missing ones are then
interpolated along the distance), else unknown on every point: climbing, descent and gradients are then
null, never 0.
"""
from __future__ import annotations

import math

import numpy as np

from trips.errors import N_
from trips.route import geo

KNOWN_SHARE = 0.9  # at least 90 % of a track's points carry an elevation, or its elevation is unknown
NO_ELEVATION = N_("reason.no_elevation")


def settle(track: np.ndarray) -> np.ndarray:
    """`track` (n, 3) with its elevation known everywhere (gaps interpolated along the distance, the ends
    held) or nowhere (all NaN). Returns `track` itself when nothing or everything is missing."""
    ele = track[:, 2]
    known = np.isfinite(ele)
    if known.all() or not known.any():
        return track
    out = np.array(track, dtype=np.float64)
    if len(ele) and known.mean() >= KNOWN_SHARE:
        cum = geo.cumulative_km(out)
        out[~known, 2] = np.interp(cum[~known], cum[known], ele[known])
    else:
        out[:, 2] = np.nan
    return out


def value(x) -> float | None:
    """A stored elevation figure: None for an unknown (None or NaN) one."""
    return None if x is None or not math.isfinite(float(x)) else float(x)


def rows(points: np.ndarray) -> list[list]:
    """(n, 3) points as JSON rows, an unknown elevation as None (JSON has no NaN)."""
    out = points.tolist()
    if not np.isfinite(points[:, 2]).all():
        for row in out:
            if not math.isfinite(row[2]):
                row[2] = None
    return out


def add(a: float | None, b: float | None) -> float | None:
    """The climbing of two stretches together: unknown when either is."""
    return None if a is None or b is None else a + b


def rounded(x: float | None) -> int | None:
    """A figure in whole metres for the wire, None kept."""
    return None if x is None else round(x)
