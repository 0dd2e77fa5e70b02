"""Trips, their route, their days, their computations, their stored export files and creation idempotency records."""
from __future__ import annotations

from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column, relationship

from trips.core import epochs
from trips.core.db import db, new_id, utcnow

ACCOMMODATION_TYPES = (
    "camp_site", "hostel", "alpine_hut", "chalet", "guest_house", "hotel", "wilderness_hut",
)


@epochs.owned
class Trip(db.Model):
    __tablename__ = "trip"
    __table_args__ = (sa.Index("ix_trip_user_created", "user_id", "created_at"),)
    epoch_owner = "user_id"  # a write of a trip replaces its owner's trips epoch (trips/core/epochs.py)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False)
    source_url: Mapped[str | None] = mapped_column(sa.String(2048))
    source_type: Mapped[str | None] = mapped_column(sa.String(50))
    # A trip planned from places (create_trip `waypoints`): its [[lat, lon], ...] points, routed by BTP; else None.
    source_points: Mapped[list | None] = mapped_column(sa.JSON)
    # The route BTP drew through them: each leg, routed on the map or joined straight and why ({"from", "to",
    # "fromKm", "toKm", "routed", "why"}, trips/services/planned.py); None for a route fetched or uploaded as drawn.
    route_legs: Mapped[list | None] = mapped_column(sa.JSON)
    title: Mapped[str | None] = mapped_column(sa.String(255))
    start_date: Mapped[date | None] = mapped_column(sa.Date)
    end_date: Mapped[date | None] = mapped_column(sa.Date)
    fatigue_factor: Mapped[float] = mapped_column(sa.Float, nullable=False, default=0.9)
    elevation_penalty: Mapped[float] = mapped_column(sa.Float, nullable=False, default=50.0)
    ebike_mode: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    # road, touring, gravel or mountain (trips/osm/waykinds.py): the router's weights and the surface alert's limit
    bike_type: Mapped[str] = mapped_column(sa.String(16), nullable=False, default="touring",
                                           server_default="touring")
    departure_hour: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=8)
    max_distance_per_day: Mapped[float] = mapped_column(sa.Float, nullable=False, default=80.0)
    average_speed: Mapped[float] = mapped_column(sa.Float, nullable=False, default=15.0)
    enabled_accommodation_types: Mapped[list] = mapped_column(
        sa.JSON, nullable=False, default=lambda: list(ACCOMMODATION_TYPES)
    )
    status: Mapped[str] = mapped_column(sa.String(20), nullable=False, default="draft")
    locale: Mapped[str] = mapped_column(sa.String(5), nullable=False, default="en")
    # Moves only on structural rewrites (the days change shape); the ETag of the trip.
    version: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=1)
    # Moves whenever the pipeline is dispatched again; a job of an older generation writes nothing.
    generation: Mapped[int] = mapped_column(sa.Integer, nullable=False, default=1)
    # The route leaves the imported map areas (docs/RULES.md "Map coverage"); set when the analysis is dispatched.
    out_of_zone: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False, server_default=sa.false())
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow, onupdate=utcnow)

    stages: Mapped[list[Stage]] = relationship(
        back_populates="trip", order_by="Stage.position", cascade="all, delete-orphan", passive_deletes=True
    )
    computations: Mapped[list[Computation]] = relationship(
        cascade="all, delete-orphan", passive_deletes=True, order_by="Computation.name"
    )
    route: Mapped[TripRoute | None] = relationship(cascade="all, delete-orphan", passive_deletes=True)


class TripRoute(db.Model):
    """The full-resolution route, kept so that days can be cut again without fetching it again."""

    __tablename__ = "trip_route"

    trip_id: Mapped[str] = mapped_column(sa.ForeignKey("trip.id", ondelete="CASCADE"), primary_key=True)
    # float64 (lat, lon, ele) triples, zlib-compressed; `track_ends` splits them into tracks (collections).
    points: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False)
    point_count: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    track_ends: Mapped[list] = mapped_column(sa.JSON, nullable=False)
    distance_km: Mapped[float] = mapped_column(sa.Float, nullable=False)
    # None: the route carries no elevation (docs/RULES.md "Elevation"), and its points' elevations are NaN.
    elevation_gain: Mapped[float | None] = mapped_column(sa.Float)
    elevation_loss: Mapped[float | None] = mapped_column(sa.Float)


class Stage(db.Model):
    __tablename__ = "stage"
    __table_args__ = (sa.Index("ix_stage_trip_position", "trip_id", "position"),)
    epoch_trip = "trip_id"  # a write of it replaces its trip's owner's trips epoch (trips/core/epochs.py)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    trip_id: Mapped[str] = mapped_column(sa.ForeignKey("trip.id", ondelete="CASCADE"), nullable=False)
    position: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    distance: Mapped[float] = mapped_column(sa.Float, nullable=False)
    # Climbing and descent, and the ends' elevations: None when unknown, never 0 (docs/RULES.md "Elevation").
    elevation: Mapped[float | None] = mapped_column(sa.Float)
    elevation_loss: Mapped[float | None] = mapped_column(sa.Float)
    start_lat: Mapped[float] = mapped_column(sa.Float, nullable=False)
    start_lon: Mapped[float] = mapped_column(sa.Float, nullable=False)
    start_ele: Mapped[float | None] = mapped_column(sa.Float)
    end_lat: Mapped[float] = mapped_column(sa.Float, nullable=False)
    end_lon: Mapped[float] = mapped_column(sa.Float, nullable=False)
    end_ele: Mapped[float | None] = mapped_column(sa.Float)
    # Simplified geometry as [[lat, lon, ele], …] (ele null when unknown); never part of a trip or stage read model.
    geometry: Mapped[list] = mapped_column(sa.JSON, nullable=False)
    label: Mapped[str | None] = mapped_column(sa.String(255))
    start_label: Mapped[str | None] = mapped_column(sa.String(255))
    end_label: Mapped[str | None] = mapped_column(sa.String(255))
    is_rest_day: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False)
    # True when part of the day's line is joined straight where no router could draw it.
    approximate: Mapped[bool] = mapped_column(sa.Boolean, nullable=False, default=False, server_default=sa.false())
    # Accommodation candidates near the day's end ({name, type, lat, lon, …}) and the rider's choice.
    accommodations: Mapped[list] = mapped_column(sa.JSON, nullable=False, default=list, server_default="[]")
    selected_accommodation: Mapped[dict | None] = mapped_column(sa.JSON)
    # Alert facts, {group: [fact]} (docs/RULES.md "Enrichment storage"): absent = never ran, [] = ran, found nothing.
    alerts_by_group: Mapped[dict] = mapped_column(sa.JSON, nullable=False, default=dict, server_default="{}")
    # The per-day data the enrichments own, {field: value} (resupply, terrain, labels …): each enrichment
    # replaces only its own fields (trips/enrich/registry.py).
    enrichment: Mapped[dict] = mapped_column(sa.JSON, nullable=False, default=dict, server_default="{}")
    # The latest waypoint asked for this day ({lat, lon, requestId}); a reroute job writes only if still current.
    waypoint: Mapped[dict | None] = mapped_column(sa.JSON)

    trip: Mapped[Trip] = relationship(back_populates="stages")

    @property
    def day_number(self) -> int:
        return self.position + 1


class TripShare(db.Model):
    """A public link to a trip. At most one active (not revoked) link per trip, enforced by a partial index."""

    __tablename__ = "trip_share"
    __table_args__ = (
        sa.Index("uq_trip_share_active", "trip_id", unique=True,
                 postgresql_where=sa.text("revoked_at IS NULL"), sqlite_where=sa.text("revoked_at IS NULL")),
    )

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    trip_id: Mapped[str] = mapped_column(sa.ForeignKey("trip.id", ondelete="CASCADE"), nullable=False)
    short_code: Mapped[str] = mapped_column(sa.String(8), unique=True, nullable=False)
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(sa.DateTime)

    trip: Mapped[Trip] = relationship()


class Computation(db.Model):
    """One tracked computation of a trip (route, stages, each enrichment): the status contract."""

    __tablename__ = "computation"
    epoch_trip = "trip_id"  # a write of it replaces its trip's owner's trips epoch (trips/core/epochs.py)

    trip_id: Mapped[str] = mapped_column(sa.ForeignKey("trip.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(32), primary_key=True)
    status: Mapped[str] = mapped_column(sa.String(12), nullable=False, default="pending")
    generation: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    reason: Mapped[str | None] = mapped_column(sa.String(255))
    updated_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow, onupdate=utcnow)


class TripExport(db.Model):
    """A file made of a trip (its GPX, its FIT course, …), kept so that it is made once per version of the trip
    (trips/services/stored_exports.py): the database is the store every web node shares."""

    __tablename__ = "trip_export"

    trip_id: Mapped[str] = mapped_column(sa.ForeignKey("trip.id", ondelete="CASCADE"), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String(16), primary_key=True)
    options: Mapped[str] = mapped_column(sa.String(80), primary_key=True)
    language: Mapped[str] = mapped_column(sa.String(8), primary_key=True)
    # What the file was made from: a digest of the trip's stored rows and the writer's format (the key's last part).
    version: Mapped[str] = mapped_column(sa.String(64), primary_key=True)
    etag: Mapped[str] = mapped_column(sa.String(64), nullable=False)  # SHA-256 of the file, hex
    media_type: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    size: Mapped[int] = mapped_column(sa.Integer, nullable=False)
    content: Mapped[bytes] = mapped_column(sa.LargeBinary, nullable=False)  # the file, zlib-compressed
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow)


class IdempotencyRecord(db.Model):
    """A creation request already served: same key and same body answer the same trip (24 h)."""

    __tablename__ = "idempotency_record"
    __table_args__ = (sa.UniqueConstraint("user_id", "operation", "key", name="uq_idempotency_user_op_key"),)

    id: Mapped[str] = mapped_column(sa.String(36), primary_key=True, default=new_id)
    user_id: Mapped[str] = mapped_column(sa.ForeignKey("user_account.id", ondelete="CASCADE"), nullable=False)
    operation: Mapped[str] = mapped_column(sa.String(32), nullable=False)
    key: Mapped[str] = mapped_column(sa.String(255), nullable=False)
    request_digest: Mapped[str] = mapped_column(sa.String(64), nullable=False)
    trip_id: Mapped[str | None] = mapped_column(sa.ForeignKey("trip.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(sa.DateTime, nullable=False, default=utcnow, index=True)
