"""The use cases of a trip as a whole: create (link or GPX), duplicate, list, read, settings, delete.

Every function takes the acting user explicitly, checks ownership itself and raises domain errors only.
"""
from __future__ import annotations

import json
from functools import lru_cache

import sqlalchemy as sa
from marshmallow import ValidationError
from sqlalchemy.orm import defer, joinedload, load_only
from sqlalchemy.orm.attributes import set_committed_value

from jobs import enqueue, get_redis
from oauth.models import User
from trips import analysis, computations
from trips.route import pipeline
from trips.core.db import after_commit, atomic, db, new_id
from trips.errors import Conflict, Invalid, InvalidQuery, NotFound
from trips.route.gpx import GpxError, parse_gpx
from trips.core.ratelimit import limit
from trips.guards import NOT_FOUND, Precondition, WriteContext, guarded_write, load_owned_trip, trip_key, trip_lock
from trips.models import Computation, Stage, Trip
from trips.route.pacing import TooLarge
from trips.services.idempotency import digest, idempotent
from trips.schemas import (
    PACING, WRITABLE, GpxUploadSettings, TripCreate, TripListQuery, TripUpdate, check_dates, load,
)

def create_trip(actor: User, data, idempotency_key: str | None, operation: str = "create_trip") -> tuple[Trip, bool]:
    """Create a trip from a route link and dispatch the route fetch. Returns (trip, created).

    The same key with the same body answers the trip created first (created=False) and dispatches nothing.
    Raises BadRequest (key missing or malformed), Invalid (body), Conflict (key reused with another body,
    or for a trip since deleted), RateLimited (10 new trips a minute).
    """
    fields = load(TripCreate(), data)

    def build() -> Trip:
        trip = new_trip(actor, fields)
        computations.initialize(trip, computations.STRUCTURAL, trip.generation)
        after_commit(_dispatch_fetch, trip.id)
        return trip

    return idempotent(actor, operation, idempotency_key, digest(data), build)


def duplicate_trip(actor: User, trip_id: str, idempotency_key: str | None) -> tuple[Trip, bool]:
    """Copy a trip: settings, route and days (new ids), its days already computed. Allowed on a started
    trip. Returns (copy, created). Raises NotFound, BadRequest, Conflict, RateLimited as create_trip."""
    source = load_owned_trip(actor.id, trip_id)

    def build() -> Trip:
        original = load_owned_trip(actor.id, source.id)
        if computations.status_of(original, "stages") != "done":
            raise Conflict("The trip's days are not ready yet; duplicate it once they are.")
        trip = new_trip(actor, {attr: getattr(original, attr) for attr in WRITABLE.values()}
                        | {"title": _copy_title(original.title)})
        pipeline.copy_days(original, trip)
        return trip

    # The key names the request, path included: the same key for another trip is another body (409).
    return idempotent(actor, "duplicate_trip", idempotency_key, digest({"tripId": source.id}), build)


def _copy_title(title: str | None) -> str | None:
    return None if title is None else (title[:248] + " (copy)")


def new_trip(actor: User, fields: dict) -> Trip:
    trip = Trip(id=new_id(), user_id=actor.id, locale=actor.locale or "en", version=1, generation=1, **fields)
    db.session.add(trip)
    db.session.flush()  # column defaults now set on the object: pacing reads them
    return trip


def _dispatch_fetch(trip_id: str) -> None:
    from jobs.tasks import fetch_route

    enqueue(fetch_route, trip_id, 1)


def import_gpx(actor: User, stream, form: dict) -> Trip:
    """Create a trip from an uploaded GPX file, synchronously: parsed, stored and cut into days.

    Raises Invalid naming `gpxFile` (missing, not a GPX, hostile, too large, no points) or a setting.
    """
    fields = load(GpxUploadSettings(), {k: v for k, v in form.items() if v != ""})
    if stream is None:
        raise Invalid({"gpxFile": "a GPX file is required"})
    limit(get_redis(), "trip_create", actor.id)
    try:
        parsed = parse_gpx(stream)
    except GpxError as exc:
        raise Invalid({"gpxFile": str(exc)}) from None
    try:
        with atomic():
            trip = new_trip(actor, fields)
            pipeline.build_from_gpx(trip, parsed)
    except TooLarge as exc:  # more days or a longer route than BTP plans: nothing was kept
        raise Invalid({exc.field or "gpxFile": exc.message}) from None
    return trip


_LIST_QUERY = TripListQuery()  # marshmallow schemas keep no state between loads: made once


def list_trips(actor: User, query) -> dict:
    """The caller's trips, newest first, paged. Raises InvalidQuery naming a bad query parameter."""
    try:
        q = load(_LIST_QUERY, dict(query))
    except Invalid as exc:
        raise InvalidQuery(exc.errors) from None
    values = {"user_id": actor.id}
    if q.get("title"):
        escaped = q["title"].lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        values["title"] = f"%{escaped}%"
    if q.get("start_date"):
        values["start_date"] = q["start_date"]
    if q.get("end_date"):
        values["end_date"] = q["end_date"]
    size = q["items_per_page"]
    filters = tuple(sorted(values))
    page_statement, count_statement = _list_statements(filters)
    bounds = {"offset": (q["page"] - 1) * size, "limit": size}
    if db.session.get_bind().dialect.name == "postgresql":
        # the page, how many trips match in all, and each trip's days' distances and statuses: one statement, of
        # plain columns (Core, on the session's connection: no ORM entity to load)
        rows = db.session.connection().execute(_pg_list_statement(filters), {**values, **bounds}).all()
        trips = [ListedTrip(*row[:6], (row.distances or [], row.statuses or [])) for row in rows]
    else:  # the page with the total beside each row, then its days and statuses (_summarize)
        rows = db.session.execute(page_statement, {**values, **bounds}).all()
        trips = [row[0] for row in rows]
        _summarize(trips)
    if rows:
        total = rows[0].total
    elif q["page"] == 1:
        total = 0
    else:  # a page past the end: counted on its own
        total = db.session.scalar(count_statement, values)
    return {"trips": trips, "total": total, "page": q["page"], "items_per_page": size}


def _list_where(filters: tuple[str, ...]) -> list:
    where = [Trip.user_id == sa.bindparam("user_id")]
    if "title" in filters:
        where.append(sa.func.lower(Trip.title).like(sa.bindparam("title"), escape="\\"))
    if "start_date" in filters:
        where.append(Trip.start_date >= sa.bindparam("start_date", type_=sa.Date))
    if "end_date" in filters:
        where.append(Trip.end_date <= sa.bindparam("end_date", type_=sa.Date))
    return where


def _paged(statement):
    return (statement.order_by(Trip.created_at.desc(), Trip.id.desc())
            .offset(sa.bindparam("offset")).limit(sa.bindparam("limit")))


@lru_cache(maxsize=8)
def _list_statements(filters: tuple[str, ...]) -> tuple:
    """(the page with the total beside each row, the count alone) for one combination of filters, built once:
    the values are bound parameters, so neither statement nor its cache key is rebuilt per call."""
    where = _list_where(filters)
    page = _paged(sa.select(Trip, sa.func.count().over().label("total")).where(*where)
                  .options(load_only(*LIST_COLUMNS)))
    return page, sa.select(sa.func.count()).select_from(Trip).where(*where)


class ListedTrip:
    """A trip as a list page shows it (trips.readmodels.trip.trip_list_item), read as a plain row."""

    __slots__ = ("id", "title", "start_date", "end_date", "created_at", "updated_at", "list_summary")

    def __init__(self, id, title, start_date, end_date, created_at, updated_at, list_summary):  # noqa: A002
        self.id, self.title, self.start_date, self.end_date = id, title, start_date, end_date
        self.created_at, self.updated_at, self.list_summary = created_at, updated_at, list_summary


@lru_cache(maxsize=8)
def _pg_list_statement(filters: tuple[str, ...]):
    """PostgreSQL: `_list_statements`' page as plain rows, each with the total, its days' distances in day order
    and its computations' distinct statuses (arrays, aggregated by the server)."""
    from sqlalchemy.dialects.postgresql import aggregate_order_by, array_agg

    # psycopg returns the arrays as lists already: typed NullType, SQLAlchemy leaves them as they come instead of
    # converting every element again (ARRAY's result processor)
    distances = sa.type_coerce(sa.select(array_agg(aggregate_order_by(Stage.distance, Stage.position)))
                               .where(Stage.trip_id == Trip.id).scalar_subquery(), sa.types.NullType())
    statuses = sa.type_coerce(sa.select(array_agg(sa.distinct(Computation.status)))
                              .where(Computation.trip_id == Trip.id).scalar_subquery(), sa.types.NullType())
    distances, statuses = distances.label("distances"), statuses.label("statuses")
    return _paged(sa.select(Trip.id, Trip.title, Trip.start_date, Trip.end_date, Trip.created_at, Trip.updated_at,
                            sa.func.count().over().label("total"), distances, statuses).where(*_list_where(filters)))


# What a list item shows of a trip (trips.readmodels.trip.trip_list_item), on SQLite; its days and computations are
# read as plain rows (two statements for the page, no ORM object per day or computation).
LIST_COLUMNS = (Trip.id, Trip.user_id, Trip.title, Trip.start_date, Trip.end_date, Trip.created_at, Trip.updated_at)


def _summarize(trips: list[Trip]) -> None:
    """Set `trip.list_summary` = (its days' distances in day order, its computations' distinct statuses) on each."""
    if not trips:
        return
    ids = [t.id for t in trips]
    distances: dict[str, list[float]] = {i: [] for i in ids}
    statuses: dict[str, list[str]] = {i: [] for i in ids}
    days, states = _summary_statements()
    for trip_id, distance in db.session.execute(days, {"ids": ids}):
        distances[trip_id].append(distance)
    for trip_id, status in db.session.execute(states, {"ids": ids}):  # each status once: which there are
        statuses[trip_id].append(status)
    for trip in trips:
        trip.list_summary = (distances[trip.id], statuses[trip.id])


@lru_cache(maxsize=1)
def _summary_statements() -> tuple:
    """A page's days and statuses (where the page is not one PostgreSQL statement: `_pg_list_statement`), built
    once."""
    ids = sa.bindparam("ids", expanding=True)
    days = sa.select(Stage.trip_id, Stage.distance).where(Stage.trip_id.in_(ids)).order_by(Stage.trip_id, Stage.position)
    states = sa.select(Computation.trip_id, Computation.status).distinct().where(Computation.trip_id.in_(ids))
    return days, states


def get_trip(actor: User, trip_id: str) -> Trip:
    """Raises NotFound alike for an unknown trip and someone else's."""
    return load_owned_trip(actor.id, trip_id)


# The JSON columns of a day a digest reads: a trip's digest reads them as their stored text, and the read model
# decodes a day's only when that text changed since it last rendered the day (mcp/answers.py). The largest
# columns (a day's geometry and pending waypoint) are never read: no read model of a trip shows them.
DAY_JSON = ("alerts_by_group", "accommodations", "selected_accommodation", "enrichment")


def read_trip(actor: User, trip_id: str) -> Trip:
    """The trip for its digest, in two statements: the trip with its computations, then its days with the text
    of their DAY_JSON columns (`stage.stored_json`, {column: text}; the columns themselves are left unloaded:
    `load_day_json` decodes them). Nothing is loaded lazily on the way out. Raises NotFound as get_trip."""
    trip = load_owned_trip(actor.id, trip_id, _read_options())
    rows = db.session.execute(_days_statement(), {"trip_id": trip.id}).all()
    for stage, *stored in rows:
        stage.stored_json = dict(zip(DAY_JSON, stored))
    set_committed_value(trip, "stages", [row[0] for row in rows])
    return trip


def trip_fingerprint(actor: User, trip_id: str) -> tuple[str, int]:
    """(the trip's id, a hash of every stored value a digest of it is made of): the trip's columns, its
    computations', its days' (all but their geometry and pending waypoint, which no read model of a trip shows).
    On PostgreSQL one statement reading the rows' versions (`xmin`); elsewhere two, as plain rows with JSON
    columns as their text. Any write to any of them, through BTP or behind it, gives another hash. Raises
    NotFound as get_trip."""
    trip_id = trip_key(trip_id)
    connection = db.session.connection()
    if connection.dialect.name == "postgresql":  # one statement, one row: the rows' versions
        found = connection.execute(_pg_fingerprint_statement(), {"trip_id": trip_id}).first()
        if found is None or found[0] != actor.id:
            raise NotFound(NOT_FOUND)
        return trip_id, hash(tuple(found))
    trip, days = _fingerprint_statements()
    rows = connection.execute(trip, {"trip_id": trip_id}).all()
    if not rows or rows[0][0] != actor.id:
        raise NotFound(NOT_FOUND)
    stored = connection.execute(days, {"trip_id": trip_id}).all()
    return trip_id, hash((tuple(rows), tuple(stored)))


@lru_cache(maxsize=1)
def _pg_fingerprint_statement():
    """PostgreSQL: the owner and the row versions of the trip, of its computations and of its days, in one row.
    `xmin` is the id of the transaction that wrote a row's current version: every committed INSERT or UPDATE of
    a row, by BTP or behind it, gives it a new one (the optimistic-concurrency token many ORMs use), and a row
    deleted or added changes the lists. Nothing of the rows' contents is read or hashed."""
    return sa.text(
        "SELECT t.user_id, t.xmin::text, "
        "(SELECT string_agg(c.name || ':' || c.xmin::text, ',' ORDER BY c.name) FROM computation c "
        "WHERE c.trip_id = t.id), "
        "(SELECT string_agg(s.id || ':' || s.xmin::text, ',' ORDER BY s.position) FROM stage s "
        "WHERE s.trip_id = t.id) "
        "FROM trip t WHERE t.id = :trip_id")


@lru_cache(maxsize=1)
def _fingerprint_statements() -> tuple:
    def columns(table, leave_out=()):
        return [sa.cast(c, sa.Text) if isinstance(c.type, sa.JSON) else c for c in table.c if c.name not in leave_out]

    trip, computation, stage = Trip.__table__, Computation.__table__, Stage.__table__
    trip_rows = (sa.select(trip.c.user_id, *columns(trip), *columns(computation))
                 .outerjoin(computation, computation.c.trip_id == trip.c.id)
                 .where(trip.c.id == sa.bindparam("trip_id")).order_by(computation.c.name))
    day_rows = (sa.select(*columns(stage, ("geometry", "waypoint")))
                .where(stage.c.trip_id == sa.bindparam("trip_id")).order_by(stage.c.position))
    return trip_rows, day_rows


@lru_cache(maxsize=1)
def _read_options() -> tuple:
    return (joinedload(Trip.computations),)


@lru_cache(maxsize=1)
def _days_statement():
    """read_trip's days, built once (the statement and its cache key are not rebuilt on every read)."""
    texts = [sa.cast(getattr(Stage, name), sa.Text) for name in DAY_JSON]
    return (sa.select(Stage, *texts).where(Stage.trip_id == sa.bindparam("trip_id")).order_by(Stage.position)
            .options(defer(Stage.geometry), defer(Stage.waypoint), *(defer(getattr(Stage, n)) for n in DAY_JSON)))


def load_day_json(stage: Stage) -> None:
    """Decode the DAY_JSON columns of a day `read_trip` read as text (as the ORM would have, without a query)."""
    for name, text in stage.stored_json.items():
        if name not in stage.__dict__:  # not loaded already in this session
            set_committed_value(stage, name, None if text is None else json.loads(text))


# docs/RULES.md "What an edit invalidates": what a changed setting invalidates, dispatched again as one
# (the union). The pacing fields cut the days again instead, and the title invalidates nothing. Weather is named
# for departureHour/averageSpeed (its riding window moves), and wind and fords follow it.
INVALIDATES = {
    "start_date": {"triggers": ("DATES",)},
    "ebike_mode": {"names": ("terrain",)},
    "departure_hour": {"names": ("terrain", "weather", "daylight")},  # daylight: the arrival time moves
    "average_speed": {"names": ("terrain", "weather", "daylight")},
    "enabled_accommodation_types": {"names": ("accommodations",)},
}


def update_trip_settings(actor: User, trip_id: str, precondition: Precondition, data, confirm=None) -> Trip:
    """Change settings. A pacing change moves the version and cuts the days again; a title alone does not;
    any other change dispatches again the enrichments it invalidates (INVALIDATES).

    Guards: ownership → lock → version → validation of the merged record → confirmation (MCP).
    Raises NotFound, Locked, PreconditionRequired, BadRequest, PreconditionFailed, Invalid, Conflict.
    """
    ctx = WriteContext(actor.id, trip_id, precondition, validate=lambda trip: _merged_settings(trip, data),
                       confirm=confirm)
    with guarded_write(ctx) as trip:
        before = _pacing_inputs(trip)
        changed = {name for name, value in ctx.prepared.items() if getattr(trip, name) != value}
        for name, value in ctx.prepared.items():
            setattr(trip, name, value)
        if _pacing_inputs(trip) != before:
            _repace(trip)  # new days: the whole analysis follows them
        else:
            rows = [INVALIDATES[f] for f in changed if f in INVALIDATES]
            analysis.redispatch(trip, triggers=[t for r in rows for t in r.get("triggers", ())],
                                names=[n for r in rows for n in r.get("names", ())])
    return trip


def _merged_settings(trip: Trip, data) -> dict:
    """The fields to write, validated on the merged record (the stored trip with the changes applied)."""
    fields = load(TripUpdate(), data, partial=True)
    merged = {name: fields.get(name, getattr(trip, name)) for name in ("start_date", "end_date")}
    try:
        check_dates(merged["start_date"], merged["end_date"])
    except ValidationError as exc:
        raise Invalid({"endDate": " ".join(exc.messages)}) from None
    if fields.keys() & set(PACING):
        try:
            pipeline.check_day_count(trip, fields)  # refused now, not as a failed cutting later
        except TooLarge as exc:
            raise Invalid({exc.field or "maxDistancePerDay": exc.message}) from None
    return fields


def _pacing_inputs(trip: Trip) -> tuple:
    span = (trip.end_date - trip.start_date).days + 1 if trip.start_date and trip.end_date else None
    return tuple(getattr(trip, f) for f in PACING if not f.endswith("_date")) + (span,)


def _repace(trip: Trip) -> None:
    """The days will be cut again: a new version and generation; jobs of older generations write nothing."""
    trip.version += 1
    trip.generation += 1
    computations.supersede_unsettled(trip, keep=computations.STRUCTURAL)
    route_status = computations.status_of(trip, "route")
    if route_status == "failed":
        return
    computations.initialize(trip, ("stages",), trip.generation)
    if route_status == "done":
        from jobs.tasks import generate_stages

        after_commit(enqueue, generate_stages, trip.id, trip.generation)


def delete_trip(actor: User, trip_id: str, confirm=None) -> None:
    """Delete a trip and everything it owns (allowed on a started trip).

    Guards: ownership → confirmation (MCP). Raises NotFound.
    """
    trip = load_owned_trip(actor.id, trip_id)
    if confirm is not None:
        confirm(trip)
    with atomic(lock=trip_lock(trip.id)):
        trip = load_owned_trip(actor.id, trip_id)
        db.session.delete(trip)
