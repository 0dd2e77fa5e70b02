"""The enrichment contract: an immutable snapshot of a trip in, a `Result` out.

`compute(snapshot, engine)` runs in a worker with no ORM session and no trip lock: it reads the snapshot, the map
(trips.osm.queries, on `engine`) and, for weather, its provider. The registry's `apply` writes its `Result`
afterwards, under the trip's lock, after a generation check (docs/RULES.md "Enrichment storage").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

Point = tuple[float, float]            # (lat, lon)
Vertex = tuple[float, float, float]    # (lat, lon, ele metres)


@dataclass(frozen=True)
class StageSnap:
    """One day as the enrichments see it. `index` is 0-based in trip order; `date` is startDate + index
    (None on an undated trip). `geometry` is the stored (decimated) line of the day."""

    id: str
    index: int
    day_number: int
    is_rest_day: bool
    distance_km: float
    elevation_gain_m: float | None  # None: unknown (docs/RULES.md "Elevation")
    elevation_loss_m: float | None
    start: Point
    end: Point
    geometry: tuple[Vertex, ...]
    date: date | None = None
    selected_accommodation: dict | None = None
    weather: dict | None = None  # the day's stored forecast (trips/enrich/weather.py), for its dependents

    @property
    def line(self) -> list[Point]:
        return [(p[0], p[1]) for p in self.geometry] or [self.start, self.end]

    @property
    def midpoint(self) -> Point:
        """The geometry midpoint `geometry[len // 2]` (docs/RULES.md "Alert catalogue")."""
        return (self.geometry[len(self.geometry) // 2][0], self.geometry[len(self.geometry) // 2][1]) \
            if self.geometry else self.start


@dataclass(frozen=True)
class TripSnap:
    id: str
    generation: int
    start_date: date | None
    ebike_mode: bool
    departure_hour: int
    average_speed: float
    enabled_accommodation_types: tuple[str, ...]
    stages: tuple[StageSnap, ...]
    bike_type: str = "touring"  # trips/osm/waykinds.py BIKE_TYPES


@dataclass(frozen=True)
class AlertFact:
    """An alert as stored: its code (severity, group and message key come from the catalogue), the day it is
    on, and the raw parameters the message is rendered with at read time (numbers stay numbers)."""

    code: str
    stage_id: str
    params: dict[str, Any] = field(default_factory=dict)
    action: dict[str, Any] | None = None   # {"kind": "navigate", "lat", "lon"} | {"kind": "auto_fix", ...}

    def as_json(self) -> dict:
        out = {"code": self.code, "params": dict(self.params)}
        if self.action is not None:
            out["action"] = dict(self.action)
        return out


@dataclass
class Result:
    """What one run of an enrichment found, per day.

    `alerts[stage_id]` is the day's list of facts for the enrichment's alert group: every day the enrichment
    looked at must have an entry (an empty list = ran, found nothing). `data[stage_id]` holds the other
    per-day fields the enrichment owns (e.g. "resupply", "supplyTimeline", "accommodations"), JSON-ready.
    `covered` is False when no imported map area touches the trip (the registry then fails the computation
    with the "no map data" reason instead of storing an empty result); `failure` is a provider's reason for
    having no answer (the weather service down): the computation fails with it, writing nothing.
    """

    alerts: dict[str, list[AlertFact]] = field(default_factory=dict)
    data: dict[str, dict[str, Any]] = field(default_factory=dict)
    covered: bool = True
    failure: str | None = None  # a provider could not answer: the computation fails with this reason

    def add(self, fact: AlertFact) -> None:
        self.alerts.setdefault(fact.stage_id, []).append(fact)

    def ran_on(self, stage_id: str) -> None:
        """The enrichment looked at this day (so its group exists, perhaps empty)."""
        self.alerts.setdefault(stage_id, [])
