"""Pacing (docs/RULES.md "Pacing"): the day count, each day's distance target, the cut of a route into days and the
rider's time. A trip has a bounded size whatever its input: a plan past docs/RULES.md "Trip limits" is refused with
TooLarge, a sentence naming what to change, and every day's line is simplified within those limits. Distances are
kept at full precision; rounding for display is the caller's.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import numpy as np

from trips.errors import Msg, Plural
from trips.route import clock, geo

__all__ = [
    "MAX_DAY_KM", "MAX_LEG_KM", "MAX_ROUTE_KM", "MAX_STAGE_POINTS", "MAX_STEP_KM", "MAX_TRIP_DAYS", "MAX_TRIP_POINTS",
    "MINIMUM_STAGE_DISTANCE_KM", "PacingSettings", "RiderTime", "StagePlan", "TooLarge", "check_length",
    "check_route", "daily_targets", "day_count", "fit_points", "plan_collection", "plan_stages", "rider_time",
    "too_many_dated_days",
]

MINIMUM_STAGE_DISTANCE_KM = 30.0
MIN_DATED_DAY_KM = 1.0  # dates that leave a day less than this on average are refused (docs/RULES.md "Pacing")
MAX_TRIP_DAYS = 90
MAX_DAY_KM = 300.0  # the highest maxDistancePerDay (docs/RULES.md "Trip settings")
MAX_STEP_KM = MAX_DAY_KM
MAX_ROUTE_KM = MAX_TRIP_DAYS * MAX_DAY_KM
MAX_LEG_KM = 1000.0  # the longest leg between two places the map router searches (trips/osm/router.py)
MAX_TRIP_POINTS = 100_000  # 90 days of 80 km at about 10 kept points per km fit
MAX_STAGE_POINTS = 5_000  # above what a 300 km day of mountain roads keeps at 20 m
_MAX_TOLERANCE_M = 20_000.0


class TooLarge(ValueError):
    """The route or the settings would make a trip bigger than BTP plans. `message` (a Msg) says why and what to
    change, without quoting the input; `field` names the setting to change (None: the route itself)."""

    def __init__(self, message: Msg, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return str(self.message)  # English: logs


def _whole(km) -> int | str:
    """A length in whole km for a message (written the reader's way); a length that is not a number as it is."""
    return round(float(km)) if math.isfinite(float(km)) else str(km)


def check_length(total_km: float) -> None:
    """Raises TooLarge when a route is longer than MAX_ROUTE_KM."""
    if not total_km <= MAX_ROUTE_KM:  # NaN too
        raise TooLarge(Msg("pacing.route_too_long", km=_whole(total_km), most=_whole(MAX_ROUTE_KM),
                           days=MAX_TRIP_DAYS, day_km=_whole(MAX_DAY_KM)))


def _check_steps(step_km: np.ndarray, first_point: int = 1) -> None:
    if len(step_km) and not step_km.max() <= MAX_STEP_KM:
        i = int(np.flatnonzero(~(step_km <= MAX_STEP_KM))[0])  # the first jump (NaN counts as one)
        raise TooLarge(Msg("pacing.jump", first=str(first_point + i), second=str(first_point + i + 1),
                           km=_whole(step_km[i]), most=_whole(MAX_STEP_KM)))


def check_route(tracks, joined: bool = True) -> None:
    """Raises TooLarge for a step longer than MAX_STEP_KM or a length over MAX_ROUTE_KM.

    `joined`: the tracks are ridden one after the other (a GPX upload, a tour), so the step from one track
    to the next counts; otherwise (a Komoot collection, a day per tour) each track is checked alone and the
    length is their sum, and there are at most MAX_TRIP_DAYS of them. Raises ValueError on a bad shape."""
    if not joined and len(tracks) > MAX_TRIP_DAYS:
        raise TooLarge(Msg("pacing.too_many_tours", tours=len(tracks), most=MAX_TRIP_DAYS))
    lines = [np.concatenate([_as_route(t) for t in tracks])] if joined and len(tracks) > 1 else tracks
    total, first = 0.0, 1
    for line in lines:
        step_km = geo.segment_lengths_m(line) / 1000.0
        _check_steps(step_km, first)
        total += float(step_km.sum())
        first += len(line)
    check_length(total)


@dataclass
class PacingSettings:
    fatigue_factor: float = 0.9
    elevation_penalty: float = 50.0
    max_distance_per_day: float = 80.0
    start_date: date | None = None
    end_date: date | None = None


@dataclass
class StagePlan:
    """One day. `start`/`end` are (lat, lon, ele); `geometry` is the simplified (n, 3) stage polyline. The
    climbing is None when the day's elevation is unknown (docs/RULES.md "Elevation")."""

    day_number: int
    distance_km: float
    elevation_gain_m: float | None
    elevation_loss_m: float | None
    start: tuple[float, float, float]
    end: tuple[float, float, float]
    geometry: np.ndarray = field(repr=False)


def too_many_dated_days(start: date, days: int) -> Msg:
    """Why dates spanning `days` (more than MAX_TRIP_DAYS) from `start` are refused, naming the last end date that
    fits."""
    latest = (start + timedelta(days=MAX_TRIP_DAYS - 1)).isoformat()
    return Plural("pacing.too_many_dated_days", days, most=MAX_TRIP_DAYS, end=latest)


def day_count(total_km: float, settings: PacingSettings) -> int:
    """(end - start).days + 1 when both dates are set, else max(1, ceil(total_km / max_distance_per_day)).

    Raises TooLarge when that is more than MAX_TRIP_DAYS (naming maxDistancePerDay, or endDate, and the
    value that fits) or when dates leave days under MIN_DATED_DAY_KM on average (naming the end date that fits:
    a route shorter than that makes one day), ValueError when the end date is before the start date, or when
    the count depends on a max_distance_per_day that is not > 0.
    """
    if settings.start_date is not None and settings.end_date is not None:
        days = (settings.end_date - settings.start_date).days + 1
        if days < 1:
            raise ValueError("end_date is before start_date")
        if days > MAX_TRIP_DAYS:
            raise TooLarge(too_many_dated_days(settings.start_date, days), "endDate")
        if days > 1 and total_km / days < MIN_DATED_DAY_KM:
            fits = max(1, math.floor(total_km / MIN_DATED_DAY_KM))
            raise TooLarge(Plural("pacing.dated_days_too_short", days, km=_whole(total_km),
                                  least=_whole(MIN_DATED_DAY_KM),
                                  end=(settings.start_date + timedelta(days=fits - 1)).isoformat()), "endDate")
        return days
    if not settings.max_distance_per_day or not settings.max_distance_per_day > 0:
        raise ValueError("max_distance_per_day must be > 0")
    check_length(total_km)
    days = max(1, math.ceil(total_km / settings.max_distance_per_day))
    if days > MAX_TRIP_DAYS:
        fits = math.ceil(total_km / MAX_TRIP_DAYS)
        raise TooLarge(Msg("pacing.too_many_days", days=days, most=MAX_TRIP_DAYS, fits=fits), "maxDistancePerDay")
    return days


def daily_targets(n_days: int, total_km: float, ascent_m: float | None, fatigue_factor: float,
                  elevation_penalty: float, cap: float | None) -> list[float]:
    """Target distance (km) of each day (docs/RULES.md "Pacing").

    base = (D + E/p) / Σ f^i and target[n] = max(30, base·f^n − E/p/N), then min(target, cap) when a cap is
    given (the cap is applied after the 30 km floor). A penalty p <= 0 means no elevation penalty, and so
    does an unknown ascent (None: none is invented, docs/RULES.md "Elevation"). When the targets then add up to
    more than the route (more days than it needs: the floor cannot hold for all), they are fitted to it (`_fit`),
    so every day gets a share and none is cut at 0 km.
    Raises ValueError when n_days < 1.
    """
    if n_days < 1:
        raise ValueError("n_days must be >= 1")
    ascent_m = ascent_m or 0.0
    weights = [fatigue_factor ** i for i in range(n_days)]
    sum_f = sum(weights)
    penalty_per_day = (ascent_m / elevation_penalty) / n_days if elevation_penalty > 0 else 0.0
    adjusted_total = total_km + penalty_per_day * n_days
    base = adjusted_total / sum_f if sum_f > 0 else total_km / n_days
    targets = [max(MINIMUM_STAGE_DISTANCE_KM, base * w - penalty_per_day) for w in weights]
    if cap:
        targets = [min(t, cap) for t in targets]
    return _fit(targets, total_km)


def _fit(targets: list[float], total_km: float) -> list[float]:
    """Targets adding up to more than `total_km`, brought down to it: what lies above the 30 km floor shrinks
    when the floor fits N times in the route, else every target shrinks in proportion (docs/RULES.md "Pacing")."""
    over = sum(targets)
    if over <= total_km + 1e-9 or over <= 0:
        return targets
    floor = MINIMUM_STAGE_DISTANCE_KM
    above = sum(max(t - floor, 0.0) for t in targets)
    if floor * len(targets) <= total_km and above > 0 and all(t >= floor for t in targets):
        k = (total_km - floor * len(targets)) / above
        return [floor + (t - floor) * k for t in targets]
    return [t * total_km / over for t in targets]


def _endpoint(p: np.ndarray) -> tuple[float, float, float]:
    return float(p[0]), float(p[1]), float(p[2]) if len(p) > 2 else 0.0


def fit_points(points, max_points: int = MAX_STAGE_POINTS, tolerance_m: float = geo.TOLERANCE_M) -> np.ndarray:
    """`points` simplified at `tolerance_m`, then at twice that and so on (each pass on the last result, so
    a dropped point is within twice the final tolerance of the line) until at most `max_points` remain; past
    20 km of tolerance, evenly spaced points with both ends. Returns at most max(max_points, 2) points.
    Raises ValueError on a bad shape."""
    pts = geo.simplify(points, tolerance_m)
    while len(pts) > max_points and tolerance_m < _MAX_TOLERANCE_M:
        tolerance_m *= 2
        pts = geo.simplify(pts, tolerance_m)
    if len(pts) > max(max_points, 2):
        pts = pts[np.unique(np.linspace(0, len(pts) - 1, max(max_points, 2)).round().astype(int))]
    return pts


def fit_points_each(lines: list[np.ndarray], max_points: int,
                    tolerance_m: float = geo.TOLERANCE_M) -> list[np.ndarray]:
    """`fit_points` of each line of `lines` (the same points), each pass made over all the lines still too long
    at once: Douglas–Peucker is breadth-first over every open segment, so many short lines cost about one."""
    out = [geo.as_points(line) for line in lines]
    busy = [i for i, line in enumerate(out) if len(line) > 2]
    while busy:
        ends = np.cumsum([len(out[i]) for i in busy]) - 1
        starts = np.concatenate(([0], ends[:-1] + 1))
        joined = np.concatenate([out[i] for i in busy])
        keep = geo.dp_keep_mask(joined, tolerance_m, starts, ends)
        for i, s, e in zip(busy, starts.tolist(), ends.tolist()):
            out[i] = joined[s:e + 1][keep[s:e + 1]]
        busy = [i for i in busy if len(out[i]) > max_points]
        if tolerance_m >= _MAX_TOLERANCE_M:
            break
        tolerance_m *= 2
    for i, pts in enumerate(out):
        if len(pts) > max(max_points, 2):
            out[i] = pts[np.unique(np.linspace(0, len(pts) - 1, max(max_points, 2)).round().astype(int))]
    return out


def _stages(lines) -> list[StagePlan]:
    """The days of `lines` (an iterable: each day's full-resolution line is measured, simplified at 20 m and
    let go before the next is made), then each pass coarser for all days alike until the trip keeps at most
    MAX_TRIP_POINTS points (one tolerance for the whole trip: the same fidelity everywhere)."""
    stages = []
    for day, points in enumerate(lines, start=1):
        gain, loss = geo.elevation_gain_loss(points[:, 2])
        stages.append(StagePlan(
            day_number=day, distance_km=geo.total_distance_km(points), elevation_gain_m=gain,
            elevation_loss_m=loss, start=_endpoint(points[0]), end=_endpoint(points[-1]),
            geometry=fit_points(points, MAX_STAGE_POINTS, geo.TOLERANCE_M),
        ))
        del points  # before the next day's line is made
    tolerance = geo.TOLERANCE_M
    while sum(len(s.geometry) for s in stages) > MAX_TRIP_POINTS and tolerance < _MAX_TOLERANCE_M:
        tolerance *= 2
        for stage in stages:
            stage.geometry = fit_points(stage.geometry, MAX_STAGE_POINTS, tolerance)
    return stages


def _as_route(points) -> np.ndarray:
    pts = geo.as_points(points)
    if pts.shape[1] < 3:
        pts = np.column_stack((pts, np.zeros(len(pts))))
    return pts


def plan_stages(raw_points, settings: PacingSettings | None = None) -> list[StagePlan]:
    """Cut a route into daily stages with the pacing engine (docs/RULES.md "Pacing").

    Distance and ascent are measured on the full-resolution points, and each day but the last ends exactly
    on its target (a point interpolated between the two raw points around it), so even a long straight road,
    which Douglas–Peucker reduces to two points, is cut where it should be. The cut point is shared by both
    days; the last day takes what remains (with the 30 km floor and the cap, the route may end before the day
    count is reached). Each stage's geometry is simplified at 20 m. Returns [] for fewer than 2 points. Raises
    ValueError on a bad points shape or the settings errors of `day_count`; raises TooLarge (before any cutting) for a step over
    MAX_STEP_KM, a length over MAX_ROUTE_KM or more than MAX_TRIP_DAYS days.
    """
    settings = settings or PacingSettings()
    raw = _as_route(raw_points)
    if len(raw) < 2:
        return []
    cum = geo.cumulative_km(raw)
    _check_steps(np.diff(cum))
    total_km = float(cum[-1])
    check_length(total_km)
    ascent, _ = geo.elevation_gain_loss(raw[:, 2])
    n_days = day_count(total_km, settings)
    targets = daily_targets(n_days, total_km, ascent, settings.fatigue_factor, settings.elevation_penalty,
                            settings.max_distance_per_day)
    cuts = _cuts(raw, cum, targets)
    del cum  # the days are measured and simplified without it: its memory is not held beside theirs
    return _stages(_day_lines(raw, cuts))


def _cuts(raw: np.ndarray, cum: np.ndarray, targets: list[float]) -> list[tuple[np.ndarray, int, int]]:
    """Where each day but the last ends, exactly on its target: (the cut, a point interpolated between the two raw
    points around it, which starts the next day; how many raw points the day has after its first; where the next
    day's raw points start). What is left of the route is never copied: it is the last cut (or the route's start),
    then raw[s:], beginning `offset` km in."""
    cuts: list[tuple[np.ndarray, int, int]] = []
    s, offset = 1, 0.0
    for target in targets[:-1]:
        rest_km = np.empty(len(raw) - s + 1)  # km from the day's first point at each point of what is left
        rest_km[0] = 0.0
        np.subtract(cum[s:], offset, out=rest_km[1:])
        if rest_km[-1] <= target:
            break  # the route ends within this day
        j = int(np.searchsorted(rest_km, target, side="left"))  # rest_km[j - 1] < target <= rest_km[j]
        before = (cuts[-1][0] if cuts else raw[0]) if j == 1 else raw[s + j - 2]
        f = (target - rest_km[j - 1]) / (rest_km[j] - rest_km[j - 1])
        cuts.append((before + f * (raw[s + j - 1] - before), j - 1, s + j if f >= 1.0 else s + j - 1))
        s = cuts[-1][2]
        offset += target
    return cuts


def _day_lines(raw: np.ndarray, cuts: list[tuple[np.ndarray, int, int]]):
    """Yield each day's line (`_cuts`), one at a time: a day's copy of its points is let go before the next is made."""
    first, s = raw[0], 1
    for cut, inner, after in cuts:
        yield np.vstack((first, raw[s:s + inner], cut))
        first, s = cut, after
    yield np.vstack((first, raw[s:]))


def plan_collection(tracks) -> list[StagePlan]:
    """One stage per track of a Komoot collection, in order, without pacing (docs/RULES.md "Pacing").

    Distance, gain and loss are measured on each track's points; tracks with fewer than 2 points are
    skipped and day numbers stay consecutive. Raises ValueError on a bad points shape, TooLarge for more
    than MAX_TRIP_DAYS tours, a step over MAX_STEP_KM in a tour or a total over MAX_ROUTE_KM.
    """
    lines = [pts for pts in map(_as_route, tracks) if len(pts) >= 2]
    check_route(lines, joined=False)
    return _stages(lines)


@dataclass(frozen=True)
class RiderTime:
    """Riding estimate for one stage (docs/RULES.md "Rider time"). Hours are decimal local hours."""

    distance_km: float
    departure_hour: float
    riding_hours: float
    breaks_hours: float

    @property
    def arrival_hour(self) -> float:
        return self.time_at(self.distance_km)

    def time_at(self, d_km: float) -> float:
        """Decimal hour at which the rider reaches `d_km` (clamped to the stage), on the departure's clock face:
        for display and hour buckets only; comparisons use `passage` (docs/RULES.md "Times")."""
        return self.departure_hour + self.elapsed_at(d_km)

    def elapsed_at(self, d_km: float) -> float:
        """Hours from the departure to `d_km` (clamped to the stage)."""
        fraction = min(max(d_km / self.distance_km, 0.0), 1.0) if self.distance_km > 0 else 1.0
        return fraction * (self.riding_hours + self.breaks_hours)

    def passage(self, day: date, start: clock.Point, d_km: float | None = None,
                where: clock.Point | None = None) -> datetime:
        """The aware instant the rider reaches `d_km` (default: the arrival) of a day ridden on `day` from
        `start`, in the local zone of `where` (default: the start) (trips/route/clock.py)."""
        elapsed = self.elapsed_at(self.distance_km if d_km is None else d_km)
        return clock.instant(day, self.departure_hour, elapsed, start, where)


def rider_time(distance_km: float, elevation_gain_m: float | None, average_speed: float,
               departure_hour: float) -> RiderTime:
    """Naismith-like estimate: effective speed = max(5, v − 2·(D+/500)); a 10 min break per 2 full riding
    hours, plus 1 h lunch when the ride starts before noon and its riding time crosses noon. An unknown climbing
    (None) slows nothing: no penalty is invented (docs/RULES.md "Elevation")."""
    effective_speed = max(5.0, average_speed - 2.0 * ((elevation_gain_m or 0.0) / 500.0))
    riding = distance_km / effective_speed
    breaks = math.floor(riding / 2) * (10 / 60)
    if departure_hour < 12 and departure_hour + riding > 12:
        breaks += 1.0
    return RiderTime(distance_km=distance_km, departure_hour=departure_hour, riding_hours=riding,
                     breaks_hours=breaks)
