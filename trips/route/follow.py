"""The full-resolution stretch of a stored route that each day's line follows (docs/RULES.md "GPX export").

A day cut by the pacing engine keeps its cuts as ends and route points (at 6 decimals) between them: it follows
the route when its ends lie on the route and its inner points are route points in order, after the day before's.
A day edited since (moved, rerouted, drawn by hand) does not, and keeps its own line.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["ON_ROUTE_M", "follow"]

ON_ROUTE_M = 1.0  # a day's end within 1 m of a route segment lies on it (the cut is interpolated on it exactly)
_M_PER_DEG = 111_195.0  # metres per degree of latitude on the mean sphere (a local, 1 m-scale comparison)
_E6 = 1e6  # the stored lines' 6 decimals as integers
_WINDOW = 4096  # route segments measured at a time


def _keys(points: np.ndarray) -> np.ndarray:
    """One int64 per point: its latitude and longitude at 6 decimals (what set_geometry stores)."""
    lat = np.rint(points[:, 0] * _E6).astype(np.int64) + 90_000_000
    lon = np.rint(points[:, 1] * _E6).astype(np.int64) + 200_000_000
    return lat * 400_000_000 + lon


def _on_segment(route: np.ndarray, start: int, point) -> int | None:
    """The first segment (i, i + 1) with i >= start that passes within ON_ROUTE_M of `point`, or None. Looked
    for a window at a time: the day's end is usually near, the whole route is measured only when it is not."""
    scale = math.cos(math.radians(point[0]))
    for begin in range(start, len(route) - 1, _WINDOW):
        a, b = route[begin:begin + _WINDOW, :2], route[begin + 1:begin + _WINDOW + 1, :2]
        a = a[:len(b)]
        ax, ay = (a[:, 1] - point[1]) * scale, a[:, 0] - point[0]
        dx, dy = (b[:, 1] - a[:, 1]) * scale, b[:, 0] - a[:, 0]
        length2 = dx * dx + dy * dy
        with np.errstate(invalid="ignore", divide="ignore"):
            t = np.clip(np.where(length2 > 0, -(ax * dx + ay * dy) / length2, 0.0), 0.0, 1.0)
        hits = np.flatnonzero(np.hypot(ax + t * dx, ay + t * dy) * _M_PER_DEG <= ON_ROUTE_M)
        if len(hits):
            return int(begin + hits[0])
    return None


class _Index:
    """The route's points by their 6-decimal key, each key's indices ascending (a stable sort)."""

    def __init__(self, route: np.ndarray):
        keys = _keys(route)
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]

    def walk(self, inner: np.ndarray, after: int) -> int | None:
        """The index of the last of `inner` matched to route points in order, each after the one before (the
        first after `after`); None when one is not a route point there."""
        keys = _keys(inner)
        low = np.searchsorted(self.sorted, keys, side="left")
        high = np.searchsorted(self.sorted, keys, side="right")
        for lo, hi in zip(low.tolist(), high.tolist()):
            same = self.order[lo:hi]
            j = int(np.searchsorted(same, after, side="right"))
            if j >= len(same):
                return None
            after = int(same[j])
        return after


def follow(route, lines) -> list[np.ndarray | None]:
    """For each day's line ((m, 3) rows, in day order; None or fewer than 2 points for a day without one), the
    stretch of `route` ((n, 3)) it follows, from its first point to its last, or None when it does not follow
    the route after the days before it."""
    route = np.asarray(route, dtype=np.float64).reshape(-1, 3)
    index = _Index(route) if len(route) >= 2 else None
    out: list[np.ndarray | None] = []
    cursor = 0
    for line in lines:
        pts = None if line is None else np.asarray(line, dtype=np.float64).reshape(-1, 3)
        found = None if index is None or pts is None or len(pts) < 2 else _one(route, index, pts, cursor)
        full = None
        if found is not None:
            full, cursor = found
        out.append(full)
    return out


def _one(route: np.ndarray, index: _Index, pts: np.ndarray, cursor: int) -> tuple[np.ndarray, int] | None:
    first = _on_segment(route, cursor, pts[0])
    if first is None:
        return None
    last_inner = index.walk(pts[1:-1], first) if len(pts) > 2 else first
    if last_inner is None:
        return None
    last = _on_segment(route, max(first, last_inner), pts[-1])
    if last is None:
        return None
    full = np.vstack((pts[:1], route[first + 1:last + 1], pts[-1:]))
    same = np.all(np.abs(np.diff(full[:, :2], axis=0)) < 0.5 / _E6, axis=1)  # a cut on a route point: once
    return full[np.concatenate(([True], ~same))], last
