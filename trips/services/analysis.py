"""Analyzing a trip: the enrichment computations are reset to pending and dispatched, one job each.

The enrichments are those of the one registry (trips/enrich/registry.py); a job of an older generation
writes nothing.
"""
from __future__ import annotations

from trips.core.queue import enqueue
from oauth.kernel.models import User
from trips import computations
from trips.core.db import after_commit
from trips.enrich import registry
from trips.errors import Conflict, Invalid, Msg
from trips.guards import WriteContext, guarded_write
from trips.models import Trip
from trips.services import work_budget


def _structural_retry(trip: Trip) -> tuple[str, ...] | None:
    """The structural computations to run again when the days never came (a failed fetch or cut), else None."""
    route, stages = computations.status_of(trip, "route"), computations.status_of(trip, "stages")
    if route == "failed" and (trip.source_url or trip.source_points):  # a link to fetch, or points to route
        return computations.STRUCTURAL
    if stages == "failed" and route == "done":
        return ("stages",)
    return None


def analyze_trip(actor: User, trip_id: str) -> Trip:
    """Reset and dispatch every enrichment; on a trip whose route fetch or cutting failed, retry that instead.
    Guards: ownership → lock (no version: nothing the rider set moves).

    Raises NotFound, Locked, Invalid (no days yet), Conflict (something is running, or the trip lock),
    RateLimited or Invalid (work past the account's budgets: trips/services/work_budget.py).
    """

    def validate(trip):
        if not trip.stages:
            if any(computations.status_of(trip, n) in computations.ACTIVE for n in computations.STRUCTURAL):
                raise Conflict("refusal.days_being_cut")
            if _structural_retry(trip) is None:
                raise Invalid({"stages": Msg("field.no_days_to_analyze")})
            return
        running = [c.name for c in trip.computations if c.name in registry.ENRICHMENTS and c.status == "running"]
        if running:
            raise Conflict("refusal.analysis_running", running=", ".join(sorted(running)))
        work_budget.check_analysis(actor.id, trip.id)

    ctx = WriteContext(actor.id, trip_id, precondition=None, validate=validate)
    with guarded_write(ctx) as trip:
        retry = None if trip.stages else _structural_retry(trip)
        if retry and "route" in retry and trip.source_points:  # a route to draw again: the work it causes
            work_budget.charge_route(actor.id, trip.source_points, exclude=trip.id)
        if retry:
            _retry_structural(trip, retry)
            return trip
        registry.dispatch(trip)
    return trip


def _retry_structural(trip: Trip, names: tuple[str, ...]) -> None:
    """A new generation (late jobs of the failed one write nothing), the names pending, their first job queued."""
    trip.generation += 1
    computations.initialize(trip, names, trip.generation)
    job = "jobs.tasks.fetch_route" if "route" in names else "jobs.tasks.generate_stages"
    after_commit(enqueue, job, trip.id, trip.generation)


def redispatch(trip: Trip, *, triggers=(), names=(), exclude=(), stage_ids=None, radius_km=None) -> list[str]:
    """Dispatch what an edit invalidates (docs/RULES.md "What an edit invalidates"): those `triggers` select and those
    `names` names (a name not registered is skipped), less `exclude`. Call in the edit's unit of work, under the trip
    lock. Returns the names dispatched (none: nothing is touched).

    What the previous dispatch had not finished is dispatched again with it rather than superseded, and a scope
    (`stage_ids`, `radius_km`) is then dropped, as a scoped dispatch runs one enrichment only. Nothing while the days
    are missing or being cut again: the analysis follows the new days.
    """
    if not trip.stages or computations.status_of(trip, "stages") in computations.ACTIVE:
        return []
    wanted = set(registry.select(trip, triggers=triggers)) if triggers else set()
    wanted = (wanted | {n for n in names if n in registry.ENRICHMENTS}) - set(exclude)
    if not wanted:
        return []
    computations.read_again(trip)  # the jobs' transitions are bulk UPDATEs: read the statuses they left
    unsettled = {c.name for c in trip.computations if c.name in registry.ENRICHMENTS and c.status in computations.ACTIVE}
    if unsettled - wanted:
        wanted |= unsettled
        stage_ids = radius_km = None
    return registry.dispatch(trip, names=[n for n in registry.ENRICHMENTS if n in wanted], stage_ids=stage_ids,
                             radius_km=radius_km)
