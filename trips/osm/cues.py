"""Turn-by-turn cues from a matched line (docs/RULES.md "Cues"): one where the road ridden changes (its name, or an
unnamed way for another, unless straight on), the turn said by the change of bearing of the line across that point,
and one per roundabout ridden, with the exit taken."""
from __future__ import annotations

import numpy as np

from trips.osm import geometry as G
from trips.osm.matcher import Stretch

TURNS = ("continue", "slight_left", "slight_right", "left", "right", "sharp_left", "sharp_right", "u_turn",
         "roundabout")
LOOK_M = 40.0  # the bearing before and after a change is measured over this much line each side
SLIGHT_DEG, TURN_DEG, SHARP_DEG, U_TURN_DEG = 20.0, 45.0, 135.0, 170.0
GAP_M = 100.0  # an unmatched stretch up to this long between two roads is the junction between them
MIN_ROAD_M = 30.0  # a road ridden for less than this is part of the junction, not a road turned onto


def turn_of(change_deg: float) -> str:
    """The turn for a change of bearing (degrees, positive clockwise: to the right)."""
    size = abs(change_deg)
    if size < SLIGHT_DEG:
        return "continue"
    if size >= U_TURN_DEG:
        return "u_turn"
    side = "right" if change_deg > 0 else "left"
    if size < TURN_DEG:
        return f"slight_{side}"
    return f"sharp_{side}" if size >= SHARP_DEG else side


def _road(stretch: Stretch):
    """What makes a road one: its name, or for an unnamed way the way itself."""
    way = stretch.way
    return None if way is None else (way.name, None) if way.name else ("", way.key)


class _Line:
    """A line's positions and bearings by metres along it."""

    def __init__(self, pts: np.ndarray):
        self.pts = pts
        seg = G.GEOD.inv(pts[:-1, 1], pts[:-1, 0], pts[1:, 1], pts[1:, 0])[2] if len(pts) > 1 else np.zeros(0)
        self.cum = np.concatenate(([0.0], np.cumsum(seg)))

    def at(self, m: float) -> tuple[float, float]:
        m = min(max(m, 0.0), float(self.cum[-1]))
        return float(np.interp(m, self.cum, self.pts[:, 0])), float(np.interp(m, self.cum, self.pts[:, 1]))

    def bearing(self, a: float, b: float) -> float:
        (lat1, lon1), (lat2, lon2) = self.at(a), self.at(b)
        return float(G.GEOD.inv(lon1, lat1, lon2, lat2)[0])


def cues(line, stretches: list[Stretch]) -> list[dict]:
    """[{m, turn, exit, street, lat, lon}] along `line` ((n, 2+) lat, lon) from its `stretches`
    (trips/osm/matcher.py match). `street` is the road turned onto, None when unnamed; `exit` only on a
    roundabout (the stretch's exit, 1 when the matcher could not count it)."""
    pts = np.asarray(line, dtype=float)[:, :2]
    if len(pts) < 2 or not stretches:
        return []
    geo = _Line(pts)
    runs = _runs(stretches)
    out = []
    for k in range(1, len(runs)):
        (a, _ia, road_a, ring_a), (b, _ib, road_b, ring_b) = runs[k - 1], runs[k]
        if b.from_m - a.to_m > GAP_M or ring_a or (road_a == road_b and not ring_b):
            continue  # the line leaves the roads between them; a roundabout's exit is said at its entry
        at = (a.to_m + b.from_m) / 2
        lat, lon = geo.at(at)
        if ring_b:
            onto = runs[k + 1][0].way if k + 1 < len(runs) else None
            out.append({"m": at, "turn": "roundabout", "exit": b.exit or 1,
                        "street": onto.name if onto is not None else None, "lat": lat, "lon": lon})
            continue
        change = (geo.bearing(at, at + LOOK_M) - geo.bearing(at - LOOK_M, at) + 540.0) % 360.0 - 180.0
        turn = turn_of(change)
        street = b.way.name if b.way else None
        if turn == "continue" and street is None:
            continue  # straight on from one unnamed way to the next: nothing to say
        out.append({"m": at, "turn": turn, "street": street, "lat": lat, "lon": lon})
    return out


def _runs(stretches: list[Stretch]) -> list[tuple[Stretch, int, tuple, bool]]:
    """The matched stretches joined by road (consecutive stretches of one name, or of one unnamed way, are one),
    a road ridden for under MIN_ROAD_M left out unless a roundabout: (stretch, index of its first, road,
    roundabout)."""
    out: list[tuple[Stretch, int, tuple, bool]] = []
    for i, s in enumerate(stretches):
        road = _road(s)
        if road is None:
            continue
        ring = bool(s.way is not None and s.way.roundabout)
        if s.to_m - s.from_m < MIN_ROAD_M and not ring:
            continue
        if out and out[-1][2] == road and not ring and not out[-1][3]:
            first = out[-1][0]
            out[-1] = (Stretch(first.from_m, s.to_m, first.way, first.start, s.end), out[-1][1], road, False)
            continue
        out.append((s, i, road, ring))
    return out
