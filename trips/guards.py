"""The write guards, as data: ownership → lock → precondition → validation → confirmation, one chain both
transports go through (`guarded_write`), its order pinned by a test (docs/RULES.md "Write guards").

A fail-fast pass answers strangers, started trips and stale versions without waiting for the lock; the whole chain
then runs under the trip's write lock on one consistent view, so two edits of the same version cannot both land.
"""
from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

import sqlalchemy as sa

from trips.core.db import atomic, db
from trips.core.i18n import N_
from trips.errors import BadRequest, Locked, NotFound, PreconditionFailed, PreconditionRequired
from trips.models import Trip

NOT_FOUND = N_("refusal.trip_not_found")
LOCKED = N_("refusal.trip_locked")


@dataclass(frozen=True)
class Precondition:
    """The version a writer says it edits: absent, malformed, any (`*`) or a number."""

    state: str  # "absent" | "malformed" | "any" | "version"
    version: int | None = None

    @classmethod
    def from_if_match(cls, header: str | None) -> Precondition:
        """RFC 9110 §13.1.1: `"7"`, a list whose first strong integer tag counts, or `*`."""
        if header is None or not header.strip():
            return cls("absent")
        if header.strip() == "*":
            return cls("any")
        for tag in header.split(","):
            match = re.fullmatch(r'\s*"(\d{1,9})"\s*', tag)
            if match:
                return cls("version", int(match.group(1)))
        return cls("malformed")

    @classmethod
    def exact(cls, version: int) -> Precondition:
        return cls("version", version)


ANY = Precondition("any")


@dataclass
class WriteContext:
    actor_id: str
    trip_id: str
    precondition: Precondition | None = None  # None: the operation does not move the version
    refuses_locked: bool = True
    validate: Callable[[Trip], object] | None = None  # checks the input against the stored record
    confirm: Callable[[Trip], None] | None = None  # raises when the caller has not confirmed (MCP)
    trip: Trip | None = None
    prepared: object = None  # what `validate` returned
    load_options: tuple = ()  # how the chain under the lock loads the trip (eager loads for the operation)
    locked: bool = False  # set by guarded_write once the trip's lock is held


def is_locked(trip: Trip) -> bool:
    return trip.start_date is not None and trip.start_date <= datetime.now(timezone.utc).date()


def trip_key(trip_id) -> str:
    """A trip id as stored (lower case). Raises NotFound for a malformed one, as for an unknown id."""
    try:
        uuid.UUID(str(trip_id))
    except ValueError:
        raise NotFound(NOT_FOUND) from None
    return str(trip_id).lower()


def load_owned_trip(actor_id: str, trip_id: str, options: tuple = (), for_update: bool = False) -> Trip:
    """The caller's trip (loaded with the ORM `options` given: eager loads for a read model). Raises NotFound
    alike for a malformed id, an unknown id and someone else's id. `for_update`: the trip's row is locked in the
    database until the transaction ends (PostgreSQL's FOR UPDATE; SQLite's BEGIN IMMEDIATE already holds the whole
    database), so no write of it lands between this read and the commit (`guarded_write`)."""
    trip_id = trip_key(trip_id)
    if options or for_update:  # a read with its eager loads (Session.get would leave them out for a trip it holds
        # expired), or locking the row
        trip = db.session.scalar(_trip_statement(options, for_update), {"trip_id": trip_id})
    else:
        # By primary key: a trip this unit of work read already (the admission, the fail-fast pass) is not read
        # again; atomic() commits before its block, which expires everything, so the chain under the lock reads
        # it anew.
        trip = db.session.get(Trip, trip_id)
    if trip is None or trip.user_id != actor_id:
        raise NotFound(NOT_FOUND)
    return trip


@lru_cache(maxsize=32)
def _trip_statement(options: tuple, for_update: bool = False):
    """The trip by id with `options` (a module's constant tuple), built once per tuple."""
    statement = sa.select(Trip).where(Trip.id == sa.bindparam("trip_id")).options(*options)
    return statement.with_for_update(of=Trip) if for_update else statement


def ownership(ctx: WriteContext) -> None:
    # Under the lock, the row is locked too: a write that takes no Redis lock waits for this one's commit, then
    # finds the version it moved.
    ctx.trip = load_owned_trip(ctx.actor_id, ctx.trip_id, ctx.load_options if ctx.locked else (), ctx.locked)


def lock(ctx: WriteContext) -> None:
    if ctx.refuses_locked and is_locked(ctx.trip):
        raise Locked(LOCKED)


def precondition(ctx: WriteContext) -> None:
    check_version(ctx.trip, ctx.precondition)


def check_version(trip: Trip, pre: Precondition | None) -> None:
    """Raises PreconditionRequired (absent), BadRequest (malformed) or PreconditionFailed (stale)."""
    if pre is None or pre.state == "any":
        return
    if pre.state == "absent":
        raise PreconditionRequired("refusal.version_required")
    if pre.state == "malformed":
        raise BadRequest("refusal.version_malformed")
    if pre.version != trip.version:
        raise PreconditionFailed("refusal.version_stale", edited=str(pre.version), current=str(trip.version))


def validation(ctx: WriteContext) -> None:
    if ctx.validate is not None:
        ctx.prepared = ctx.validate(ctx.trip)


def confirmation(ctx: WriteContext) -> None:
    if ctx.confirm is not None:
        ctx.confirm(ctx.trip)


# Validation comes before confirmation: a confirmation is only ever asked for a call that would succeed.
WRITE_CHAIN = (ownership, lock, precondition, validation, confirmation)
FAIL_FAST_CHAIN = (ownership, lock, precondition)
# What can be judged before a caller's arguments are even read (MCP: a started trip answers "locked" whatever
# version or argument came with it, docs/RULES.md "Write guards"), on the raw trip id.
ADMISSION_CHAIN = (ownership, lock)


def admit(actor_id: str, trip_id: str) -> Trip:
    """The caller's trip, unlocked. Raises NotFound (unknown, malformed or someone else's id: one answer) or
    Locked. Reads only; the write chain judges it all again under the lock."""
    return run_chain(WriteContext(actor_id, trip_id), ADMISSION_CHAIN)


def run_chain(ctx: WriteContext, chain=WRITE_CHAIN) -> Trip:
    for guard in chain:
        guard(ctx)
    return ctx.trip


def trip_lock(trip_id: str) -> str:
    return f"trip:{trip_id}"


@contextmanager
def guarded_write(ctx: WriteContext):
    """The fail-fast guards, then the trip's write lock, the whole chain, and one unit of work.

    Yields the trip as read under the lock. Raises what the guards raise, and Conflict when the lock cannot
    be had.
    """
    run_chain(ctx, FAIL_FAST_CHAIN)
    with atomic(lock=trip_lock(ctx.trip.id)):
        ctx.locked = True
        yield run_chain(ctx, WRITE_CHAIN)
