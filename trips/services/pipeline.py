"""From a parsed route to stored days: storing the route, cutting it into days, replacing the stages."""
from __future__ import annotations

import zlib

import numpy as np

from trips.computations import ACTIVE, initialize
from trips.core.db import db
from trips.enrich import registry
from trips.route import elevation
from trips.route.geo import elevation_gain_loss, total_distance_km
from trips.route.gpx import ParsedRoute
from trips.models import Computation, Stage, Trip, TripRoute
from trips.route.pacing import PacingSettings, StagePlan, day_count, plan_collection, plan_stages
from trips.services.stages import set_geometry

MIN_STAGES = 1  # a one-day trip is a trip (docs/RULES.md "Trip limits")


_PACK_PIECE = 1 << 20  # bytes of points compressed at a time


def pack_tracks(tracks: list[np.ndarray]) -> tuple[bytearray, list[int]]:
    """The tracks' points as one zlib stream (level 1: the bytes of zlib.compress(points, 1)) and where each
    track ends. The stream grows in one buffer, a piece of points at a time, so zlib.compress's own output blocks
    and their final copy are never held beside the points; a bytearray, which the database drivers and
    zlib.decompress take as they take bytes."""
    joined = tracks[0] if len(tracks) == 1 else np.concatenate(tracks)
    joined = np.ascontiguousarray(joined, dtype="<f8")  # no copy when it already is (a parsed route)
    ends = np.cumsum([len(t) for t in tracks]).tolist()
    data, packer, blob = memoryview(joined).cast("B"), zlib.compressobj(1), bytearray()
    for start in range(0, len(data), _PACK_PIECE):
        blob += packer.compress(data[start:start + _PACK_PIECE])
    blob += packer.flush()
    return blob, ends


def unpack_tracks(route: TripRoute) -> list[np.ndarray]:
    points = np.frombuffer(zlib.decompress(route.points), dtype="<f8").reshape(-1, 3)
    return np.split(points, route.track_ends[:-1])


def settle(parsed: ParsedRoute) -> ParsedRoute:
    """Each track's elevation known everywhere or nowhere (docs/RULES.md "Elevation"), in place."""
    parsed.tracks = [elevation.settle(t) for t in parsed.tracks]
    return parsed


def store_route(trip: Trip, parsed: ParsedRoute) -> TripRoute:
    """Attach the parsed route to the trip (replacing any previous one) with its totals (the climbing None
    when a track's elevation is unknown)."""
    settle(parsed)
    distance = sum(total_distance_km(t) for t in parsed.tracks)
    gain = loss = 0.0
    for track in parsed.tracks:
        g, lo = elevation_gain_loss(track[:, 2])
        gain, loss = elevation.add(gain, g), elevation.add(loss, lo)
    blob, ends = pack_tracks(parsed.tracks)  # after the totals: their temporaries and the blob never meet
    route = TripRoute(points=blob, point_count=ends[-1], track_ends=ends, distance_km=float(distance),
                      elevation_gain=gain, elevation_loss=loss)
    trip.route = route
    return route


def pacing_settings(trip: Trip, changes: dict | None = None) -> PacingSettings:
    """The trip's pacing settings, with `changes` (attribute name → value) applied."""
    value = {**{name: getattr(trip, name) for name in ("fatigue_factor", "elevation_penalty",
                                                        "max_distance_per_day", "start_date", "end_date")},
             **{k: v for k, v in (changes or {}).items() if k in PacingSettings.__dataclass_fields__}}
    return PacingSettings(**value)


def _is_collection(trip: Trip, track_count: int) -> bool:
    return trip.source_type == "komoot_collection" and track_count > 1


def check_day_count(trip: Trip, changes: dict) -> None:
    """Raises TooLarge (naming the setting to change) when the stored route, paced with the trip's settings
    and `changes`, would make more days than BTP plans. Without a stored route (still being fetched) or for
    a collection (a day per tour, whatever the settings) there is nothing to check yet; the cutting checks
    again (trips/route/pacing.py)."""
    route = trip.route
    if route is None or _is_collection(trip, len(route.track_ends)):
        return
    day_count(route.distance_km, pacing_settings(trip, changes))


def plan_days(trip: Trip, tracks: list[np.ndarray] | None = None) -> list[StagePlan]:
    """The days of the stored route (or of `tracks`, the route just stored, not unpacked again): one per
    tour for a Komoot collection, else the pacing engine's cut. Raises TooLarge when they would be more, or
    longer, than BTP plans (trips/route/pacing.py)."""
    tracks = unpack_tracks(trip.route) if tracks is None else tracks
    if _is_collection(trip, len(tracks)):
        return plan_collection(tracks)
    points = tracks[0] if len(tracks) == 1 else np.concatenate(tracks)
    return plan_stages(points, pacing_settings(trip))


def straight_km(legs: list[dict] | None) -> list[tuple[float, float]]:
    """The [from, to] km of a drawn route (a trip planned from places, its `route_legs`) joined straight: each leg's
    `straightKm` (trips/services/planned.py), else, in an account written before it, the legs not routed."""
    out = []
    for leg in legs or []:
        stretches = leg.get("straightKm")
        if stretches is None:
            stretches = [] if leg["routed"] else [(leg["fromKm"], leg["toKm"])]
        out.extend((float(a), float(b)) for a, b in stretches)
    return out


def replace_stages(trip: Trip, plans: list[StagePlan]) -> None:
    """Regenerate the days: new rows with new ids (ids survive edits, not regenerations)."""
    trip.stages.clear()
    db.session.flush()
    straight, at = straight_km(trip.route_legs), 0.0
    for position, plan in enumerate(plans):
        stage = Stage(position=position, accommodations=[])
        # a day over a stretch BTP's router joined straight (trips/services/planned.py) is approximate
        stage.approximate = any(a < at + plan.distance_km - 0.01 and b > at + 0.01 for a, b in straight)
        at += float(plan.distance_km)
        set_geometry(stage, plan.geometry)
        # Distance and climbing were measured on the full-resolution points, not the simplified line.
        stage.distance = float(plan.distance_km)
        stage.elevation = elevation.value(plan.elevation_gain_m)
        stage.elevation_loss = elevation.value(plan.elevation_loss_m)
        trip.stages.append(stage)
    trip.status = "ready" if len(plans) >= MIN_STAGES else "draft"


def build_from_gpx(trip: Trip, parsed: ParsedRoute) -> None:
    """The synchronous path of a GPX upload: route stored, days cut, both computations done. `parsed`'s points
    are let go once packed (its tracks emptied): the rows are written without them. Raises TooLarge (the
    caller's transaction is then rolled back: nothing is kept)."""
    trip.source_type = "gpx_upload"
    plans = plan_days(trip, settle(parsed).tracks)  # before the route is packed: pacing's peak and the blob never meet
    store_route(trip, parsed)
    parsed.tracks = []  # the blob holds them now: the flush below copies the blob, never beside the points too
    if not trip.title and parsed.title:
        trip.title = parsed.title
    initialize(trip, ("route", "stages"), trip.generation)
    replace_stages(trip, plans)
    for c in trip.computations:
        c.status = "done"
    start_analysis(trip)


def start_analysis(trip: Trip) -> None:
    """The days are first cut: the analysis starts by itself (docs/RULES.md "Enrichments"), every enrichment dispatched
    after the commit (trips/enrich/registry.py; it also records whether the route leaves the imported maps)."""
    registry.dispatch(trip)


def copy_days(original: Trip, trip: Trip) -> None:
    """Give `trip` the route and days of `original` (new stage ids), both computations done, and the analysis
    as far as it went: the days' stored results (facts hold no stage id) with the statuses of the settled
    enrichments; those still pending or running on the original are dispatched on the copy."""
    if original.route is not None:
        r = original.route
        trip.route = TripRoute(points=r.points, point_count=r.point_count, track_ends=list(r.track_ends),
                               distance_km=r.distance_km, elevation_gain=r.elevation_gain,
                               elevation_loss=r.elevation_loss)
    trip.source_type, trip.route_legs = original.source_type, original.route_legs
    for stage in original.stages:
        copy = Stage(**{c.key: getattr(stage, c.key) for c in Stage.__table__.columns
                        if c.key not in ("id", "trip_id", "waypoint")})
        trip.stages.append(copy)
    initialize(trip, ("route", "stages"), trip.generation)
    for c in trip.computations:
        c.status = "done"
    trip.status = original.status
    _copy_analysis(original, trip)


def _copy_analysis(original: Trip, trip: Trip) -> None:
    trip.out_of_zone = original.out_of_zone
    rows = [c for c in original.computations if c.name in registry.ENRICHMENTS]
    for c in rows:
        if c.status in ("done", "failed"):
            trip.computations.append(Computation(name=c.name, status=c.status, reason=c.reason,
                                                 generation=trip.generation))
    unfinished = [c.name for c in rows if c.status in ACTIVE]
    if unfinished:
        registry.dispatch(trip, names=unfinished)
