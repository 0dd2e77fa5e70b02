"""A day's rename as one conditional write (edit_stages `update` with nothing but a label: mcp/tools/edit_stages.py
`rename`). docs/RULES.md "Write guards": the statement's WHERE is the guard chain, judged by the database on the row as
it writes it; a rename it does not settle writes nothing and goes the whole way (trips/services/stages.py
update_stage)."""
from __future__ import annotations

import re
from datetime import datetime, timezone

import sqlalchemy as sa

from trips import computations
from trips.core import epochs
from trips.core.db import atomic, db, utcnow
from trips.errors import DomainError
from trips.guards import Precondition, trip_key
from trips.services.inputs import StageUpdate
from trips.core.validation import load

# A rename as one conditional write (`rename_stage`): the trip's version moves only where every guard holds on the
# row itself — the caller's trip, not started, at the version the caller edits, the day one of its days, its days
# not being computed — and the day's label is written in the same transaction. PostgreSQL runs it as one statement
# (the trip's UPDATE in a CTE); SQLite, which has no UPDATE in a CTE, as two inside its BEGIN IMMEDIATE.
_BUMP = ("UPDATE trip SET version = version + 1, updated_at = :now "
         "WHERE id = :trip AND user_id = :user AND version = :version AND (start_date IS NULL OR start_date > :today) "
         "AND EXISTS (SELECT 1 FROM stage WHERE stage.id = :stage AND stage.trip_id = :trip) "
         "AND NOT EXISTS (SELECT 1 FROM computation WHERE computation.trip_id = :trip AND computation.name = 'stages' "
         f"AND computation.status IN ({', '.join(repr(s) for s in computations.ACTIVE)})) RETURNING id, version")
_LABEL = "UPDATE stage SET label = :label WHERE stage.id = :stage AND stage.trip_id = :trip"
_TYPES = (sa.bindparam("now", type_=sa.DateTime), sa.bindparam("today", type_=sa.Date))
_SQLITE = (sa.text(_BUMP).bindparams(*_TYPES), sa.text(_LABEL + " RETURNING stage.id"))
# PostgreSQL's one statement, in psycopg's placeholders: run on the pooled DBAPI connection itself
# (`_rename_postgresql`), which costs a third of the CPU of the same statement through a Session and atomic()
# (measured in process: 1.0–1.4 against 2.7–3.1 ms a rename).
_POSTGRESQL = re.sub(r":(\w+)", r"%(\1)s", f"WITH bumped AS ({_BUMP}) {_LABEL.replace('WHERE', 'FROM bumped WHERE', 1)} "
                     "AND bumped.id = stage.trip_id RETURNING bumped.version")
# The rules of a day's update, made once (a marshmallow Schema's making costs twice its load; its load keeps no state
# of its own between calls).
_LABEL_RULES = StageUpdate()
NO_DAY_MOVED = {"changed": [], "how": [], "endDate": None}  # what a rename moves (`_summary` of an unchanged trip)


class _NotRenamed(Exception):
    """The conditional write matched no row: the guard chain says why (`update_stage`)."""


def rename_stage(actor_id: str, trip_id: str, stage_id: str, precondition: Precondition, label) -> int | None:
    """A day's new label as one conditional write, nothing read before: the new version, or
    None when anything is not as a rename that lands needs it (a label the schema refuses, an id of the wrong
    form, someone else's or a started trip, a stale version, an unknown day, its days being computed, a database
    other than PostgreSQL or SQLite). None changes nothing: the caller runs `update_stage`, whose guard chain
    refuses in its order (docs/RULES.md "Write guards") or, when the trip changed between the two, renames.
    Moves the version by one and writes the label exactly as `update_stage` would; a rename moves no day."""
    if precondition.state != "version":
        return None
    try:
        fields = load(_LABEL_RULES, {"label": label})
        trip, stage = trip_key(trip_id), trip_key(stage_id)
    except DomainError:
        return None
    dialect = db.engine.dialect.name
    if dialect not in ("postgresql", "sqlite"):
        return None
    values = {"trip": trip, "stage": stage, "user": actor_id, "version": precondition.version, "now": utcnow(),
              "today": datetime.now(timezone.utc).date(),
              "label": fields["label"].strip() if fields["label"] else None}
    # No Redis lock: the statement's WHERE is the guard chain, judged by the database on the row as it writes it. A
    # write that holds the trip's lock read the row FOR UPDATE (trips/guards.py ownership), so this waits for its
    # commit and then finds the version it moved; SQLite's BEGIN IMMEDIATE serialises every writer.
    try:
        return _rename_postgresql(values) if dialect == "postgresql" else _rename_sqlite(values)
    except _NotRenamed:
        return None


def _rename_postgresql(values: dict) -> int:
    """One statement on a pooled connection (checked out and in as any: trips/core/db.py), in autocommit as a pooled
    connection idles: a single statement is its own transaction in PostgreSQL, one round trip where BEGIN … COMMIT
    cost three. It writes both rows or neither: its trip UPDATE waits for any writer holding the trip's row (every
    write that removes a day moves the version under FOR UPDATE: trips/guards.py ownership) and then finds the
    version moved, so the day it labels cannot go between the two. The owner's epoch is replaced once the
    connection is back."""
    raw = db.engine.raw_connection()
    try:
        driver = raw.driver_connection
        if not driver.autocommit:  # idle connections are (trips/core/db.py _pg_on_checkin); never one mid-transaction
            driver.autocommit = True
        row = driver.execute(_POSTGRESQL, values).fetchone()
        if row is None:
            raise _NotRenamed  # nothing was written
        epochs.written_by_hand(raw.info, values["user"])
        return int(row[0])
    except _NotRenamed:
        raise
    except BaseException:
        raw.invalidate()  # a connection that failed mid-statement is not given to the next request
        raise
    finally:
        raw.close()


def _rename_sqlite(values: dict) -> int:
    """The trip's UPDATE, then the day's, in one BEGIN IMMEDIATE."""
    with atomic():
        session = db.session()
        with epochs.writing_owned(session, values["user"]):
            connection = session.connection()
            version = None
            for statement in _SQLITE:
                row = connection.execute(statement, values).first()
                if row is None:
                    raise _NotRenamed
                version = row[-1] if version is None else version
    return int(version)
