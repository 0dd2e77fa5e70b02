"""Where a day ends: choosing one of its accommodation candidates (or none), and looking for more."""
from __future__ import annotations

from oauth.kernel.models import User
from trips import computations
from trips.enrich import registry
from trips.services import analysis
from trips.errors import Conflict, Invalid, Msg
from trips.guards import Precondition, WriteContext, guarded_write
from trips.models import Trip
from trips.services.inputs import AccommodationChoice, AccommodationScan
from trips.core.validation import load
from trips.services import lodging_road
from trips.services.stages import find_stage, geometry_changed, write_days

ACCOMMODATION_MATCH_DEG = 1e-6


def choose_accommodation(actor: User, trip_id: str, stage_id: str, precondition: Precondition, data) -> Trip:
    """Choose one of the day's candidates (by coordinates): the day ends there along the roads and the next day
    starts there (trips/services/lodging_road.py). Both coordinates null clears the choice and gives the days back
    their road. The choice is the rider's: a later scan keeps it. Raises Conflict when the coordinates match no
    candidate (the list changed), Invalid for a rest day or a day the lodging would leave under 50 m."""

    def validate(trip):
        choice = load(AccommodationChoice(), data)
        stage = find_stage(trip, stage_id)
        if stage.is_rest_day:
            raise Invalid({"stageId": Msg("field.rest_day_no_lodging")})
        return _candidate(stage, choice)

    notes: list[str] = []
    routes = lodging_road.route_before_the_lock(actor, trip_id, stage_id,
                                                lambda stage: _candidate(stage, load(AccommodationChoice(), data)))
    moved: list[bool] = []

    def apply(trip, chosen):
        stage = find_stage(trip, stage_id)
        if chosen is None:
            moved.append(lodging_road.leave(trip, stage, notes, routes) is not None)
        else:
            lodging_road.reach(trip, stage, chosen, notes, routes)
            moved.append(True)

    def invalidate(trip, _):
        if moved[0]:  # the days' lines changed: the GEOMETRY enrichments (a day whose lodging is chosen is not scanned)
            geometry_changed(trip)
        else:  # a choice cleared where no road moved: that day's candidates are looked for again
            analysis.redispatch(trip, names=("accommodations",), stage_ids=[stage_id])

    return write_days(actor, trip_id, precondition, validate, apply, invalidate, notes=notes, forget_facts=True)


def _candidate(stage, choice: dict) -> dict | None:
    """The day's candidate (or current choice) at the chosen coordinates; None for a clearing. Raises Conflict when
    none is there."""
    if choice["lat"] is None:
        return None
    for candidate in [*stage.accommodations, stage.selected_accommodation]:
        if candidate and abs(candidate["lat"] - choice["lat"]) <= ACCOMMODATION_MATCH_DEG \
                and abs(candidate["lon"] - choice["lon"]) <= ACCOMMODATION_MATCH_DEG:
            return candidate
    raise Conflict("refusal.no_lodging_there")


def scan_accommodations(actor: User, trip_id: str, data) -> Trip:
    """Look for places to sleep again within `radiusKm` (1–15 km, default 5) of every day's end, or of
    `stageId`'s: an "expand" scan that keeps each day's candidates and adds new places after them, up to
    five; a day whose accommodation the rider chose is left as it is. Guards: ownership → lock (no version:
    the days keep their shape).

    Raises NotFound (the trip, or a stageId that is not one of its days: one answer), Locked, Invalid
    (radiusKm, stageId of a day with a chosen accommodation, a trip without days) and Conflict (a computation
    still to finish, or the trip lock).
    """

    def validate(trip):
        fields = load(AccommodationScan(), data)
        if "stage_id" in fields:
            stage = find_stage(trip, fields["stage_id"])
            if stage.selected_accommodation is not None:
                raise Invalid({"stageId": Msg("field.lodging_chosen")})
            fields["stage_id"] = stage.id
        elif not trip.stages:
            raise Invalid({"stages": Msg("field.no_days_to_scan")})
        # Anything still to finish would be superseded by this dispatch, and the candidates it expands are
        # those the analysis is still looking for: refused, as analyze_trip refuses while one runs.
        active = sorted(c.name for c in trip.computations if c.status in computations.ACTIVE)
        if active:
            raise Conflict("refusal.scan_while_running", running=", ".join(active))
        return fields

    ctx = WriteContext(actor.id, trip_id, precondition=None, validate=validate)
    with guarded_write(ctx) as trip:
        stage_id = ctx.prepared.get("stage_id")
        registry.dispatch(trip, names=["accommodations"], stage_ids=None if stage_id is None else [stage_id],
                          radius_km=ctx.prepared["radius_km"])
    return trip
