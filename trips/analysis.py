"""Analyzing a trip: the enrichment computations are reset to pending and dispatched, one job each.

`ENRICHMENTS` is the one registry of enrichment functions (name → function(trip) that fills the days);
the enrichments themselves arrive with their own issue. A job of an older generation writes nothing.
"""
from __future__ import annotations

from collections.abc import Callable

from jobs import enqueue
from oauth.models import User
from trips import computations
from trips.core.db import after_commit
from trips.errors import Conflict, Invalid
from trips.guards import WriteContext, guarded_write
from trips.models import Trip

ENRICHMENTS: dict[str, Callable[[Trip], None]] = {}


def _structural_retry(trip: Trip) -> tuple[str, ...] | None:
    """The structural computations to run again when the days never came (a failed fetch or cut), else None."""
    route, stages = computations.status_of(trip, "route"), computations.status_of(trip, "stages")
    if route == "failed" and trip.source_url:
        return computations.STRUCTURAL
    if stages == "failed" and route == "done":
        return ("stages",)
    return None


def analyze_trip(actor: User, trip_id: str) -> Trip:
    """Reset and dispatch every enrichment; on a trip whose route fetch or cutting failed, retry that instead.
    Guards: ownership → lock (no version: nothing the rider set moves).

    Raises NotFound, Locked, Invalid (no days yet), Conflict (something is running, or the trip lock).
    """

    def validate(trip):
        if not trip.stages:
            if any(computations.status_of(trip, n) in computations.ACTIVE for n in computations.STRUCTURAL):
                raise Conflict("The days are still being worked out; ask again in a few seconds.")
            if _structural_retry(trip) is None:
                raise Invalid({"stages": "the trip has no days to analyze yet"})
            return
        running = [c.name for c in trip.computations if c.name in ENRICHMENTS and c.status == "running"]
        if running:
            raise Conflict(f"An analysis is running ({', '.join(sorted(running))}); try again once it is done.")

    ctx = WriteContext(actor.id, trip_id, precondition=None, validate=validate)
    with guarded_write(ctx) as trip:
        retry = None if trip.stages else _structural_retry(trip)
        if retry:
            _retry_structural(trip, retry)
            return trip
        names = tuple(ENRICHMENTS)
        computations.initialize(trip, names, trip.generation)
        from jobs.tasks import run_enrichment

        for name in names:
            after_commit(enqueue, run_enrichment, trip.id, name, trip.generation)
    return trip


def _retry_structural(trip: Trip, names: tuple[str, ...]) -> None:
    """A new generation (late jobs of the failed one write nothing), the names pending, their first job queued."""
    from jobs.tasks import fetch_route, generate_stages

    trip.generation += 1
    computations.initialize(trip, names, trip.generation)
    job = fetch_route if "route" in names else generate_stages
    after_commit(enqueue, job, trip.id, trip.generation)
