"""Reading trips: the caller's list, paged, and one trip as its digest reads it (in as few statements as the engine
allows), with the fingerprint that tells whether a digest given before still stands (mcp/kept.py)."""
from __future__ import annotations

import json
from functools import lru_cache

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import aggregate_order_by, array_agg
from sqlalchemy.orm import defer, joinedload, load_only
from sqlalchemy.orm.attributes import set_committed_value

from oauth.kernel.models import User
from trips.core.db import db
from trips.errors import Invalid, InvalidQuery, NotFound
from trips.guards import NOT_FOUND, load_owned_trip, trip_key
from trips.models import Computation, Stage, Trip, TripRoute
from trips.services.inputs import TripListQuery
from trips.core.validation import load


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


def route_km(trip: Trip) -> float | None:
    """The km of the trip's stored route (the legs BTP drew, else the route's own figure, read without its
    points), None while it has none."""
    if trip.route_legs:
        return float(trip.route_legs[-1]["toKm"])
    return db.session.scalar(sa.select(TripRoute.distance_km).where(TripRoute.trip_id == trip.id))


# The JSON columns of a day a digest reads: a trip's digest reads them as their stored text, and the read model
# decodes a day's only when that text changed since it last rendered the day (mcp/kept.py LINES). The largest
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


def load_day_json(stage: Stage, names: tuple[str, ...] = DAY_JSON) -> None:
    """Decode the DAY_JSON columns (or those of `names`) of a day `read_trip` read as text (as the ORM would have,
    without a query)."""
    for name, text in stage.stored_json.items():
        if name in names and name not in stage.__dict__:  # not loaded already in this session
            set_committed_value(stage, name, None if text is None else json.loads(text))
