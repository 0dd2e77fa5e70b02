"""Pacing: day count, daily distance targets, slicing a route into stages, rider time (domain.md §3.5–§3.7).

Distances are kept at full precision; rounding for display is the caller's job.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from trips import geo

__all__ = [
    "MINIMUM_STAGE_DISTANCE_KM", "PacingSettings", "RiderTime", "StagePlan", "daily_targets", "day_count",
    "plan_collection", "plan_stages", "rider_time",
]

MINIMUM_STAGE_DISTANCE_KM = 30.0


@dataclass
class PacingSettings:
    fatigue_factor: float = 0.9
    elevation_penalty: float = 50.0
    max_distance_per_day: float = 80.0
    start_date: date | None = None
    end_date: date | None = None


@dataclass
class StagePlan:
    """One day. `start`/`end` are (lat, lon, ele); `geometry` is the simplified (n, 3) stage polyline."""

    day_number: int
    distance_km: float
    elevation_gain_m: float
    elevation_loss_m: float
    start: tuple[float, float, float]
    end: tuple[float, float, float]
    geometry: np.ndarray = field(repr=False)


def day_count(total_km: float, settings: PacingSettings) -> int:
    """(end - start).days + 1 when both dates are set, else max(1, ceil(total_km / max_distance_per_day)).

    Raises ValueError when the end date is before the start date, or when the count depends on a
    max_distance_per_day that is not > 0.
    """
    if settings.start_date is not None and settings.end_date is not None:
        days = (settings.end_date - settings.start_date).days + 1
        if days < 1:
            raise ValueError("end_date is before start_date")
        return days
    if not settings.max_distance_per_day or settings.max_distance_per_day <= 0:
        raise ValueError("max_distance_per_day must be > 0")
    return max(1, math.ceil(total_km / settings.max_distance_per_day))


def daily_targets(n_days: int, total_km: float, ascent_m: float, fatigue_factor: float,
                  elevation_penalty: float, cap: float | None) -> list[float]:
    """Target distance (km) of each day (domain.md §3.6).

    base = (D + E/p) / Σ f^i and target[n] = max(30, base·f^n − E/p/N), then min(target, cap) when a cap is
    given (the cap is applied after the 30 km floor). A penalty p <= 0 means no elevation penalty.
    Raises ValueError when n_days < 1.
    """
    if n_days < 1:
        raise ValueError("n_days must be >= 1")
    weights = [fatigue_factor ** i for i in range(n_days)]
    sum_f = sum(weights)
    penalty_per_day = (ascent_m / elevation_penalty) / n_days if elevation_penalty > 0 else 0.0
    adjusted_total = total_km + penalty_per_day * n_days
    base = adjusted_total / sum_f if sum_f > 0 else total_km / n_days
    targets = [max(MINIMUM_STAGE_DISTANCE_KM, base * w - penalty_per_day) for w in weights]
    if cap:
        targets = [min(t, cap) for t in targets]
    return targets


def _endpoint(p: np.ndarray) -> tuple[float, float, float]:
    return float(p[0]), float(p[1]), float(p[2]) if len(p) > 2 else 0.0


def _stage(day: int, points: np.ndarray, cum_km: np.ndarray) -> StagePlan:
    gain, loss = geo.elevation_gain_loss(points[:, 2])
    return StagePlan(
        day_number=day, distance_km=float(cum_km[-1] - cum_km[0]), elevation_gain_m=gain,
        elevation_loss_m=loss, start=_endpoint(points[0]), end=_endpoint(points[-1]),
        geometry=geo.simplify(points),
    )


def _as_route(points) -> np.ndarray:
    pts = geo.as_points(points)
    if pts.shape[1] < 3:
        pts = np.column_stack((pts, np.zeros(len(pts))))
    return pts


def plan_stages(raw_points, settings: PacingSettings | None = None) -> list[StagePlan]:
    """Cut a route into daily stages with the pacing engine (domain.md §3.5–§3.6).

    Distance and ascent are measured on the full-resolution points, and each day but the last ends exactly
    on its target (a point interpolated between the two raw points around it), so even a long straight road,
    which Douglas–Peucker reduces to two points, is cut where it should be. The cut point is shared by both
    days; the last day takes what remains (with the 30 km floor and the cap, the route may end before the day count is reached). Each
    stage's geometry is simplified at 20 m. Returns [] for fewer than 2 points. Raises ValueError on a bad
    points shape or the settings errors of `day_count`.
    """
    settings = settings or PacingSettings()
    raw = _as_route(raw_points)
    if len(raw) < 2:
        return []
    cum = geo.cumulative_km(raw)
    total_km = float(cum[-1])
    ascent, _ = geo.elevation_gain_loss(raw[:, 2])
    n_days = day_count(total_km, settings)
    targets = daily_targets(n_days, total_km, ascent, settings.fatigue_factor, settings.elevation_penalty,
                            settings.max_distance_per_day)
    days, rest, offset = [], raw, 0.0  # `rest` is what is left of the route, starting `offset` km in
    rest_cum = cum
    for target in targets[:-1]:
        if rest_cum[-1] - offset <= target:
            break  # the route ends within this day
        head, rest = geo.cut_at_km(rest, target, rest_cum - offset)  # the day ends exactly on its target
        days.append(head)
        offset += target
        rest_cum = np.concatenate(([offset], rest_cum[len(rest_cum) - len(rest) + 1:]))
    days.append(rest)
    return [_stage(day, pts, geo.cumulative_km(pts)) for day, pts in enumerate(days, start=1)]


def plan_collection(tracks) -> list[StagePlan]:
    """One stage per track of a Komoot collection, in order, without pacing (domain.md §3.5).

    Distance, gain and loss are measured on each track's points; tracks with fewer than 2 points are
    skipped and day numbers stay consecutive. Raises ValueError on a bad points shape.
    """
    stages = []
    for track in tracks:
        pts = _as_route(track)
        if len(pts) < 2:
            continue
        stages.append(_stage(len(stages) + 1, pts, geo.cumulative_km(pts)))
    return stages


@dataclass(frozen=True)
class RiderTime:
    """Riding estimate for one stage (domain.md §3.7). Hours are decimal local hours."""

    distance_km: float
    departure_hour: float
    riding_hours: float
    breaks_hours: float

    @property
    def arrival_hour(self) -> float:
        return self.time_at(self.distance_km)

    def time_at(self, d_km: float) -> float:
        """Decimal hour at which the rider reaches `d_km` (clamped to the stage)."""
        fraction = min(max(d_km / self.distance_km, 0.0), 1.0) if self.distance_km > 0 else 1.0
        return self.departure_hour + fraction * (self.riding_hours + self.breaks_hours)


def rider_time(distance_km: float, elevation_gain_m: float, average_speed: float,
               departure_hour: float) -> RiderTime:
    """Naismith-like estimate: effective speed = max(5, v − 2·(D+/500)); a 10 min break per 2 full riding
    hours, plus 1 h lunch when the ride starts before noon and its riding time crosses noon."""
    effective_speed = max(5.0, average_speed - 2.0 * (elevation_gain_m / 500.0))
    riding = distance_km / effective_speed
    breaks = math.floor(riding / 2) * (10 / 60)
    if departure_hour < 12 and departure_hour + riding > 12:
        breaks += 1.0
    return RiderTime(distance_km=distance_km, departure_hour=departure_hour, riding_hours=riding,
                     breaks_hours=breaks)
