"""Analyzing a trip: the enrichment computations are reset to pending and dispatched, one job each.

`ENRICHMENTS` is the one registry of enrichment functions (name → function(trip) that fills the days);
the enrichments themselves arrive with their own issue. A job of an older generation writes nothing.
"""
from __future__ import annotations

from collections.abc import Callable

from jobs import enqueue
from oauth.models import User
from trips import computations
from trips.db import after_commit
from trips.errors import Conflict, Invalid
from trips.guards import WriteContext, guarded_write
from trips.models import Trip

ENRICHMENTS: dict[str, Callable[[Trip], None]] = {}


def analyze_trip(actor: User, trip_id: str) -> Trip:
    """Reset and dispatch every enrichment. Guards: ownership → lock (no version: nothing structural moves).

    Raises NotFound, Locked, Invalid (no days yet), Conflict (an enrichment is running, or the trip lock).
    """

    def validate(trip):
        if not trip.stages:
            raise Invalid({"stages": "the trip has no days to analyze yet"})
        running = [c.name for c in trip.computations if c.name in ENRICHMENTS and c.status == "running"]
        if running:
            raise Conflict(f"An analysis is running ({', '.join(sorted(running))}); try again once it is done.")

    ctx = WriteContext(actor.id, trip_id, precondition=None, validate=validate)
    with guarded_write(ctx) as trip:
        names = tuple(ENRICHMENTS)
        computations.initialize(trip, names, trip.generation)
        from jobs.tasks import run_enrichment

        for name in names:
            after_commit(enqueue, run_enrichment, trip.id, name, trip.generation)
    return trip
