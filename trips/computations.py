"""Computation statuses per trip, stored in the `computation` table, and what they add up to (per category:
trips/enrich/registry.py `category_statuses`).

A job carries the generation it was dispatched for; every transition is a conditional UPDATE on that
generation, so a job the trip has moved past writes nothing.
"""
from __future__ import annotations

import sqlalchemy as sa

from trips.core.db import db, utcnow
from trips.core.epochs import writing_trip
from trips.core.stored_texts import stored
from trips.errors import N_, Msg
from trips.models import Computation, Trip

STRUCTURAL = ("route", "stages")
ACTIVE = ("pending", "running")
SETTLED = ("done", "failed", "superseded")
JOB_LOST = N_("reason.job_lost")  # the reconciler's: no job was left to settle it (jobs/reconcile.py)


def initialize(trip: Trip, names, generation: int) -> None:
    """Set `names` to pending for `generation` (creating the rows that do not exist yet)."""
    existing = {c.name: c for c in trip.computations}
    for name in names:
        row = existing.get(name)
        if row is None:
            trip.computations.append(Computation(name=name, status="pending", generation=generation))
        else:
            row.status, row.generation, row.reason = "pending", generation, None
    db.session.flush()


def read_again(trip: Trip) -> None:
    """Flush, then read the trip's computation rows again in one statement: the jobs' transitions are bulk UPDATEs
    the session does not see, and a dispatch must decide on the statuses they left (one SELECT, not one a row)."""
    db.session.flush()
    db.session.execute(sa.select(Computation).where(Computation.trip_id == trip.id)
                       .execution_options(populate_existing=True)).scalars().all()


def transition(trip_id: str, name: str, generation: int, status: str, reason: Msg | str | None = None) -> bool:
    """Move an unsettled computation of that generation to `status`, with `reason` (a Msg or a key, kept in no
    language: trips/core/stored_texts.py). False when the trip moved past it."""
    assert status in ("running", *SETTLED)
    with writing_trip(db.session, trip_id):  # this trip's epoch, not every trip's (trips/core/epochs.py)
        result = db.session.execute(
            sa.update(Computation)
            .where(Computation.trip_id == trip_id, Computation.name == name,
                   Computation.generation == generation, Computation.status.in_(ACTIVE))
            .values(status=status, reason=stored(reason), updated_at=utcnow())
            .execution_options(synchronize_session=False)
        )
    return result.rowcount == 1


def supersede_unsettled(trip: Trip, keep=()) -> list[str]:
    """Mark every pending/running computation outside `keep` as superseded; returns their names."""
    names = [c.name for c in trip.computations if c.status in ACTIVE and c.name not in keep]
    for c in trip.computations:
        if c.name in names:
            c.status, c.reason = "superseded", None
    return names


def status_of(trip: Trip, name: str) -> str | None:
    return next((c.status for c in trip.computations if c.name == name), None)


def block_status(statuses: list[str]) -> str | None:
    """A category's status: running while any runs, failed as soon as one failed (weather failed and wind done
    is not a done weather category: docs/RULES.md "Enrichments"), else done (None when untracked)."""
    if not statuses:
        return None
    if any(s in ACTIVE for s in statuses):
        return "running"
    if "failed" in statuses:
        return "failed"
    return "done"


def list_status(trip: Trip, stage_count: int) -> str:
    """The trip list's status: draft | analyzing | analyzed | failed."""
    return list_status_of([c.status for c in trip.computations], stage_count)


def list_status_of(statuses: list[str], stage_count: int) -> str:
    """`list_status` from the computations' statuses alone (a list page reads them without the ORM)."""
    if not statuses:
        return "analyzed" if stage_count else "draft"
    if any(s in ACTIVE for s in statuses):
        return "analyzing"
    if "done" not in statuses:
        return "failed" if "failed" in statuses else "draft"
    return "analyzed" if stage_count else "draft"
