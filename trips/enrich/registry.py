"""The one registry of enrichments: what each computes, when it runs, where it writes (docs/RULES.md "Enrichments").

Its triggers are the single source of truth for what an edit re-dispatches. `dispatch` queues runs under the trip
lock; a run computes on a `snapshot` with no session and no lock; `apply` writes only for the trip's current
generation (docs/RULES.md "Enrichment storage").
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.orm.attributes import set_committed_value

from trips import computations
from trips.core import i18n
from trips.core.db import after_commit, db
from trips.core.stored_texts import said_stored
from trips.core.queue import QUEUE_NAME, enqueue, enqueue_many
from trips.enrich import (accommodations, bike_shops, border_crossing, calendar, cultural_pois, daylight, ferries, fords,
                          health_services, labels, pois, railway_stations, surfaces, terrain, water_points, weather, wind)
from trips.enrich.alerts.catalogue import GROUPS
from trips.enrich.contract import Result, StageSnap, TripSnap
from trips.enrich.corridor import FULL_COVERAGE, map_coverage
from trips.errors import N_
from trips.models import Computation, Stage
from trips.osm.queries import ready_areas
from trips.osm.waykinds import DEFAULT_BIKE
from trips.route import clock, elevation

GEOMETRY, DATES = "GEOMETRY", "DATES"
TRIGGERS = frozenset({GEOMETRY, DATES})
QUEUE = QUEUE_NAME  # one queue; the field lets a slow provider-bound family have its own
RUN_JOB = "jobs.tasks.run_enrichment"  # the job that runs one enrichment (trip id, name, generation[, scope])
# In display order; "route" also holds the structural computations.
CATEGORY_ORDER = ("route", "points_of_interest", "accommodations", "terrain_security", "weather", "context")
STRUCTURAL = {"route": ("route", "stages", "route_segment")}
SCOPED = frozenset({"accommodations"})  # the one enrichment a dispatch may scope to some days (a scan)
NO_MAP_DATA = N_("reason.no_map_data")
COVERAGE_FIELD = "mapCoverage"  # stage.enrichment: the day's coverage, stored at every dispatch (out_of_zone)
# The computations that read no map: their groups are never partial on a day the map covers partly.
MAP_FREE = frozenset({"weather", "wind", "calendar", "daylight", "border_crossing"})


@dataclass(frozen=True)
class Enrichment:
    name: str
    category: str
    group: str | None
    triggers: frozenset[str]
    needs: tuple[str, ...]
    queue: str
    compute: Callable[..., Result]
    fields: tuple[str, ...] = ()
    requires_start_date: bool = False


ENRICHMENTS: dict[str, Enrichment] = {}


def register(enrichment: Enrichment) -> Enrichment:
    """Add an enrichment. Raises ValueError on a duplicate or structural name, an unknown category, group,
    trigger or queue, or a need that is not registered before it (so the cascade has no cycle): a dependent
    waits for its needs to settle when they are dispatched with it (`cascade`)."""
    e = enrichment
    if e.name in ENRICHMENTS or e.name in STRUCTURAL["route"]:
        raise ValueError(f"enrichment {e.name!r} is registered twice")
    if e.category not in CATEGORY_ORDER or (e.group is not None and e.group not in GROUPS) \
            or not e.triggers <= TRIGGERS or e.queue != QUEUE:
        raise ValueError(f"enrichment {e.name!r}: unknown category, group, trigger or queue")
    if any(n not in ENRICHMENTS for n in e.needs):
        raise ValueError(f"enrichment {e.name!r} needs one not registered before it: {list(e.needs)}")
    ENRICHMENTS[e.name] = e
    return e


def _add(module, category: str, triggers, fields=(), needs=(), dated: bool = False) -> None:
    register(Enrichment(module.NAME, category, module.GROUP, frozenset(triggers), tuple(needs), QUEUE,
                        module.compute, tuple(fields), requires_start_date=dated))


# Triggers, needs and start dates: docs/RULES.md "Enrichments". Fords need weather for their wet/dry part, so the
# dates make them stale too.
_add(weather, "weather", (GEOMETRY, DATES), ("weather",), dated=True)
_add(wind, "weather", (GEOMETRY, DATES), needs=("weather",), dated=True)
_add(pois, "points_of_interest", (GEOMETRY, DATES), ("resupply", "supplyTimeline"))
_add(accommodations, "accommodations", (GEOMETRY, DATES), ("accommodations",))
_add(terrain, "terrain_security", (GEOMETRY, DATES), ("terrain",))
_add(surfaces, "terrain_security", (GEOMETRY,), surfaces.FIELDS)
_add(bike_shops, "terrain_security", (GEOMETRY,), ("bikeShops",))
_add(water_points, "terrain_security", (GEOMETRY,), ("waterPoints",))
_add(health_services, "terrain_security", (GEOMETRY,))
_add(railway_stations, "terrain_security", (GEOMETRY,))
_add(cultural_pois, "context", (GEOMETRY,), ("culturalPois",))
_add(border_crossing, "terrain_security", (GEOMETRY,), ("timeZone",))
_add(ferries, "terrain_security", (GEOMETRY,))
_add(fords, "terrain_security", (GEOMETRY, DATES), needs=("weather",))
# Day names from the map are context: without map data they fail, and the route itself is not what failed.
_add(labels, "context", (GEOMETRY,), ("labels",))
# The calendar reads only the dates; daylight reads the day's end point and its date.
_add(calendar, "context", (DATES,), dated=True)
_add(daylight, "terrain_security", (GEOMETRY, DATES), ("clockShift",), dated=True)


def categories() -> dict[str, tuple[str, ...]]:
    """{category: computation names} in display order: the structural ones, then the registered ones."""
    return {c: STRUCTURAL.get(c, ()) + tuple(n for n, e in ENRICHMENTS.items() if e.category == c)
            for c in CATEGORY_ORDER}


CATEGORY_OF: dict[str, str] = {}  # computation name -> its category, filled once every enrichment is registered


def category_statuses(trip) -> list[dict]:
    """[{category, status}] in the fixed category order (computations.block_status of each: failed as soon as
    one of its computations failed, docs/RULES.md "Enrichments"), with the first failure's `reason` on a failed
    category; categories with nothing tracked are left out."""
    if not CATEGORY_OF:
        CATEGORY_OF.update({name: c for c, names in categories().items() for name in names})
    out = []
    for category in CATEGORY_ORDER:
        rows = [c for c in trip.computations if CATEGORY_OF.get(c.name) == category]
        status = computations.block_status([c.status for c in rows])
        if status:
            entry = {"category": category, "status": status}
            if status == "failed":
                kept = next((c.reason for c in rows if c.status == "failed" and c.reason), None)
                entry["reason"] = said_stored(kept, i18n.current_locale())
            out.append(entry)
    return out


def select(trip, *, triggers=None, names=None) -> list[str]:
    """The enrichments a dispatch runs, in registry order: those named (unknown names refused), else those
    with one of `triggers`, else all, and those that need one of them; an enrichment requiring a start date is
    withheld on an undated trip.
    Raises ValueError on an unknown name or trigger."""
    if names is not None:
        unknown = set(names) - set(ENRICHMENTS)
        if unknown:
            raise ValueError(f"unknown enrichments: {sorted(unknown)}")
    if triggers is not None and not set(triggers) <= TRIGGERS:
        raise ValueError(f"unknown triggers: {sorted(set(triggers) - TRIGGERS)}")
    eligible = [n for n in ENRICHMENTS if trip.start_date is not None or not ENRICHMENTS[n].requires_start_date]
    chosen = {n for n in eligible if (names is None or n in names)
              and (triggers is None or ENRICHMENTS[n].triggers & set(triggers))}
    for n in eligible:  # registry order: needs come first, so a dependent's dependents follow it here
        if set(ENRICHMENTS[n].needs) & chosen:
            chosen.add(n)  # what reads a re-run computation's result is stale with it (weather → wind, fords)
    return [n for n in eligible if n in chosen]


def dispatch(trip, *, triggers=None, names=None, stage_ids=None, radius_km=None) -> list[str]:
    """Run enrichments again (None, None: all of them). Call inside a write unit of work under the trip lock.

    Bumps the generation (a job of an older one writes nothing), supersedes every unsettled computation not
    re-dispatched, sets the chosen ones pending, records whether the route leaves the imported map areas
    (`trip.out_of_zone`), and queues one job each after the commit. `stage_ids` scopes an accommodations
    scan to some days; with `radius_km` it is the rider's wider search, merged into the days' candidates
    ("expand"). Nothing selected: nothing is touched. Returns the names dispatched. Raises ValueError on an unknown
    name or trigger, or a scope on an enrichment that has none.
    """
    chosen = select(trip, triggers=triggers, names=names)
    if not chosen:
        return []
    scoped = stage_ids is not None or radius_km is not None
    if scoped and not set(chosen) <= SCOPED:
        raise ValueError(f"only {sorted(SCOPED)} can be scoped to days or a radius")
    computations.read_again(trip)  # transitions are bulk UPDATEs: read the statuses they left, not stale ones
    trip.generation += 1
    # What this dispatch re-runs replaces itself; the structural work (the route, the days, a waypoint's
    # reroute) is no enrichment and is never cancelled by one.
    computations.supersede_unsettled(trip, keep=(*chosen, *computations.STRUCTURAL, "route_segment"))
    computations.initialize(trip, chosen, trip.generation)
    trip.out_of_zone = out_of_zone(trip)
    extra = (list(stage_ids) if stage_ids is not None else None, radius_km) if scoped else ()
    # one round trip for all of them; one whose needs were dispatched with it is queued when they settle (cascade)
    after_commit(enqueue_many, RUN_JOB, [(trip.id, name, trip.generation, *extra) for name in chosen
                                         if not any(n in chosen for n in ENRICHMENTS[name].needs)])
    return chosen


def dependents(name: str) -> tuple[str, ...]:
    """The enrichments that need `name` (registry order)."""
    return tuple(n for n, e in ENRICHMENTS.items() if name in e.needs)


def cascade(trip_id: str, name: str, generation: int) -> list[str]:
    """`name` settled (done or failed) for `generation`: queue, after the commit, each dependent of that
    generation still pending whose needs have all settled. Call in the unit of work that settled it. A dependent
    then reads whatever its need stored (nothing after a failure: fords are dry, wind looks at no day).
    Returns the names queued."""
    waiting = dependents(name)
    if not waiting:
        return []
    rows = db.session.execute(sa.select(Computation.name, Computation.status, Computation.generation)
                              .where(Computation.trip_id == trip_id)).all()
    status = {r.name: (r.status, r.generation) for r in rows}
    queued = []
    for dependent in waiting:
        if status.get(dependent) != ("pending", generation):
            continue
        needs = ENRICHMENTS[dependent].needs
        if any(status.get(n, ("done", 0))[0] in computations.ACTIVE and status[n][1] == generation for n in needs):
            continue
        after_commit(enqueue, RUN_JOB, trip_id, dependent, generation)
        queued.append(dependent)
    return queued


def out_of_zone(trip) -> bool:
    """Whether the trip's days leave the imported map areas, by length (trips/osm/queries.py coverage; no day:
    False). Stores each day's `mapCoverage` (trips/enrich/corridor.py map_coverage) in its enrichment JSON,
    where the read models find which groups are partial and which km are off the map."""
    areas = ready_areas(db.engine)
    out = False
    _load_enrichments(trip.stages)
    for stage in trip.stages:
        line = [tuple(p[:2]) for p in (stage.geometry or [])] or [(stage.start_lat, stage.start_lon)]
        cover = map_coverage(line, areas)
        out |= cover["share"] < FULL_COVERAGE
        if (stage.enrichment or {}).get(COVERAGE_FIELD) != cover:
            stage.enrichment = {**(stage.enrichment or {}), COVERAGE_FIELD: cover}
    return out


def _load_enrichments(stages) -> None:
    """The stored `enrichment` JSON of every day that has not loaded it (a deferred column: an edit reads the days
    without it), in one SELECT instead of one per day."""
    unloaded = {s.id: s for s in stages if "enrichment" not in s.__dict__ and sa.inspect(s).persistent}
    if not unloaded:
        return
    found = dict(db.session.execute(sa.select(Stage.id, Stage.enrichment).where(Stage.id.in_(list(unloaded)))).all())
    for stage_id, stage in unloaded.items():
        set_committed_value(stage, "enrichment", found.get(stage_id))


def day_map_coverage(stage) -> dict | None:
    """The day's stored `mapCoverage` ({share, offMapKm}), None when no dispatch measured it."""
    cover = (stage.enrichment or {}).get(COVERAGE_FIELD)
    return cover if isinstance(cover, dict) and isinstance(cover.get("share"), (int, float)) else None


def warm() -> None:
    """Load once, in a worker before it forks its work horses, what each horse would otherwise load for itself: the
    time-zone finder (its data is memory-mapped read-only, so the horses share it safely) and the HTTP client every
    provider call uses (a web worker loads it lazily)."""
    clock.zone_name(0.0, 0.0)
    import requests  # noqa: F401  (lazy for the web worker, tests/jobs/test_worker_imports.py; here once for every horse)


def snapshot(trip) -> TripSnap:
    """The immutable view of `trip` the enrichments compute on (trips/enrich/contract.py)."""
    days = []
    weather_failed = computations.status_of(trip, "weather") == "failed"
    for s in trip.stages:
        day = trip.start_date + timedelta(days=s.position) if trip.start_date else None
        geometry = tuple((float(p[0]), float(p[1]), _ele(p)) for p in s.geometry or ())
        days.append(StageSnap(
            id=s.id, index=s.position, day_number=s.day_number, is_rest_day=bool(s.is_rest_day),
            distance_km=float(s.distance), elevation_gain_m=elevation.value(s.elevation),
            elevation_loss_m=elevation.value(s.elevation_loss), start=(s.start_lat, s.start_lon),
            end=(s.end_lat, s.end_lon), geometry=geometry,
            date=day,
            selected_accommodation=dict(s.selected_accommodation) if s.selected_accommodation else None,
            weather=_forecast(s, day, weather_failed)))
    return TripSnap(id=trip.id, generation=trip.generation, start_date=trip.start_date,
                    ebike_mode=bool(trip.ebike_mode), departure_hour=int(trip.departure_hour),
                    average_speed=float(trip.average_speed),
                    enabled_accommodation_types=tuple(trip.enabled_accommodation_types or ()), stages=tuple(days),
                    bike_type=trip.bike_type or DEFAULT_BIKE)


def _ele(p) -> float:
    """A stored vertex's elevation, NaN when unknown (null, or a 2-value vertex)."""
    return float(p[2]) if len(p) > 2 and p[2] is not None else math.nan


def _forecast(stage, day, weather_failed: bool) -> dict | None:
    """The day's stored forecast, only when it is for the day's current date and the last weather run did not
    fail (docs/RULES.md "Weather"): wind and fords never read a forecast for another date, nor the one a failed
    run left behind (an undated trip has none, whatever an earlier dated analysis left on the day)."""
    stored = (stage.enrichment or {}).get("weather")
    if weather_failed or day is None or not isinstance(stored, dict) or stored.get("date") != day.isoformat():
        return None
    return dict(stored)


def run_compute(name: str, snap: TripSnap, engine, stage_ids=None, radius_km=None) -> Result:
    """The enrichment's compute on `snap`, with the scan's scope for the one that takes it."""
    enrichment = ENRICHMENTS[name]
    if name in SCOPED and (stage_ids is not None or radius_km is not None):
        kwargs = {"stage_ids": stage_ids}
        if radius_km is not None:
            kwargs["radius_km"] = radius_km
        return enrichment.compute(snap, engine, **kwargs)
    return enrichment.compute(snap, engine)


def apply(trip, name: str, generation: int, result: Result, *, expand: bool = False, scoped: bool = False) -> bool:
    """Write `result` on the trip's days (under the trip lock, in the job's unit of work), as
    docs/RULES.md "Enrichment storage" says; `expand` merges accommodations into the day's. False, writing nothing,
    when the trip moved past `generation` or the computation is no longer that generation's."""
    enrichment = ENRICHMENTS[name]
    row = next((c for c in trip.computations if c.name == name), None)
    if trip.generation != generation or row is None or row.generation != generation \
            or row.status not in computations.ACTIVE:
        return False
    looked = set(result.alerts) | set(result.data)
    for stage in trip.stages:
        if stage.id in looked:
            _write_day(stage, enrichment, result, expand)
        elif name not in SCOPED or not scoped:
            _clear_day(stage, enrichment)
    return True


def _write_day(stage, enrichment: Enrichment, result: Result, expand: bool) -> None:
    data = result.data.get(stage.id, {})
    if enrichment.name == "accommodations":
        if stage.selected_accommodation is not None:
            return  # chosen since the snapshot: never overwritten (docs/RULES.md "Choosing an accommodation")
        found = list(data.get("accommodations", []))
        stage.accommodations = accommodations.merge(stage.accommodations or [], found) if expand else found
    else:
        fields = {k: v for k, v in (stage.enrichment or {}).items() if k not in enrichment.fields}
        fields.update({k: data[k] for k in enrichment.fields if k in data})
        stage.enrichment = fields
    if enrichment.group is not None:
        facts = [f.as_json() for f in result.alerts.get(stage.id, [])]
        stage.alerts_by_group = {**(stage.alerts_by_group or {}), enrichment.group: facts}


def _clear_day(stage, enrichment: Enrichment) -> None:
    if enrichment.name == "accommodations":
        if stage.selected_accommodation is not None:
            return  # the rider's choice stands, with the candidates it was made from
        if stage.accommodations:
            stage.accommodations = []
    if enrichment.group is not None and enrichment.group in (stage.alerts_by_group or {}):
        stage.alerts_by_group = {k: v for k, v in stage.alerts_by_group.items() if k != enrichment.group}
    if any(k in (stage.enrichment or {}) for k in enrichment.fields):
        stage.enrichment = {k: v for k, v in stage.enrichment.items() if k not in enrichment.fields}
