"""The trip read model: what a trip, a list item and its route look like on the wire (camelCase)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from trips import computations
from trips.core import i18n
from trips.core.stored_texts import said_stored, unstored
from trips.errors import Msg, N_, Plural
from trips.guards import is_locked
from trips.models import Trip
from trips.enrich import registry
from trips.enrich.registry import NO_MAP_DATA
from trips.readmodels.budget import trip_budget
from trips.readmodels.day import elevation_reason, stage_summary
from trips.route.pacing import TooLarge, day_count
from trips.services.pipeline import pacing_settings
from trips.services.trip_reads import route_km


def _iso(value):
    return value.isoformat() if value is not None else None


def settings(trip: Trip) -> dict:
    return {
        "title": trip.title, "sourceUrl": trip.source_url, "sourceType": trip.source_type,
        "startDate": _iso(trip.start_date), "endDate": _iso(trip.end_date),
        "fatigueFactor": trip.fatigue_factor, "elevationPenalty": trip.elevation_penalty,
        "ebikeMode": trip.ebike_mode, "bikeType": trip.bike_type, "departureHour": trip.departure_hour,
        "maxDistancePerDay": trip.max_distance_per_day, "averageSpeed": trip.average_speed,
        "enabledAccommodationTypes": list(trip.enabled_accommodation_types),
    }


def partial(trip: Trip) -> bool:
    """True only while a computation is pending or running: asking again can then show something new. A trip
    whose route fetch failed is not partial (an agent would poll for ever); `next_action` says what to do."""
    return any(c.status in computations.ACTIVE for c in trip.computations)


RETRY = N_("next.retry")


def next_action(trip: Trip) -> str | None:
    """What an agent should do now, in the reader's language: wait, retry a failure (with its reason), or nothing
    (None)."""
    locale = i18n.current_locale()
    said = _next_action(trip, locale)
    return None if said is None else i18n.say(said, locale)


def _next_action(trip: Trip, locale: str) -> Msg | None:
    if partial(trip):
        return Msg("next.wait")
    failed = {c.name: unstored(c.reason) for c in trip.computations if c.status == "failed"}
    if "route" in failed:
        fixes = Msg("next.point_fixes") if trip.source_points is not None else Msg("next.route_fixes")
        return Msg("next.route_failed", reason=failed["route"] or Msg("next.no_reason"), retry=Msg(RETRY),
                   fixes=fixes)
    if "stages" in failed:
        fix = _pacing_refusal(trip)
        if fix is not None:  # the settings make no days of this route: changing them cuts the days again
            return Msg("trip.days_not_cut", reason=fix, id=trip.id)
        return Msg("next.stages_failed", reason=failed["stages"] or Msg("next.no_reason"), retry=Msg(RETRY))
    if failed:
        reasons = {reason for reason in failed.values() if reason}
        if reasons == {NO_MAP_DATA}:  # no retry helps until a region is imported
            return Msg("next.no_map_data")
        told = sorted(_sentence(i18n.say(r, locale)) for r in reasons)[:3]
        return Msg("next.analyses_failed", names=", ".join(sorted(failed)), told=i18n.join(told, locale),
                   retry=Msg(RETRY))
    return _off_map(trip, locale)


def _pacing_refusal(trip: Trip) -> Msg | None:
    """Why the trip's pacing settings make no days of its stored route, naming the setting and a value that fits
    (trips/route/pacing.py day_count, in the reader's language); None when they do, or there is no route."""
    km = route_km(trip)
    if km is None or trip.source_type == "komoot_collection":  # a collection makes a day per tour, whatever the settings
        return None
    try:
        day_count(km, pacing_settings(trip))
    except TooLarge as exc:
        return exc.message if exc.field else None
    return None


def total_distance(trip: Trip, stages) -> float:
    """The days' km; a trip without days (still to be cut, or that could not be) has its route's once it has one."""
    if stages:
        return round(sum(s.distance for s in stages), 1)
    km = route_km(trip)
    return round(km, 1) if km is not None else 0.0


MAX_OFF_MAP_DAYS = 4  # days named by the off-map next action
DAY_SEPARATOR = N_("next.day_separator")
ROUTING_AND = N_("routing.and")  # between the straight ends of a routed leg


def _coverage(stage) -> dict | None:
    """The day's stored mapCoverage, from its JSON text when the trip was read as text (trips.services.trip_reads
    read_trip: `stored_json`, its columns left unloaded) rather than loading the column, a query per day."""
    text = (getattr(stage, "stored_json", None) or {}).get("enrichment")
    if "enrichment" not in stage.__dict__ and isinstance(text, str):
        return registry.day_map_coverage(SimpleNamespace(enrichment=json.loads(text)))
    return registry.day_map_coverage(stage)


def _off_map(trip: Trip, locale: str) -> Msg | None:
    """The days partly or wholly off the imported map and their km off it (stored at dispatch,
    docs/RULES.md "Map coverage"), with the fix; None when the map covers every day."""
    off = [(s.day_number, c) for s in trip.stages if not s.is_rest_day
           and (c := _coverage(s)) is not None and c["share"] < registry.FULL_COVERAGE]
    if not off:
        return None
    days = [Msg("next.off_map_day", day=n, where=[Msg("next.km_range", start=a, end=b) for a, b in c["offMapKm"]]
                or Msg("next.in_part")) for n, c in off[:MAX_OFF_MAP_DAYS]]
    more = [Msg("next.more_days")] if len(off) > MAX_OFF_MAP_DAYS else []
    told = i18n.join(days + more, locale, DAY_SEPARATOR)
    return Plural("next.off_map", len(off), days=told)


def _sentence(reason: str) -> str:
    reason = reason.strip()
    return reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".")


def elevation_totals(stages) -> dict:
    """totalElevation and totalElevationLoss of the days, null with `elevationReason` when a riding day's
    climbing is unknown (docs/RULES.md "Elevation": unknown is never summed as 0)."""
    riding = [s for s in stages if not s.is_rest_day]
    reason = next((r for r in map(elevation_reason, riding) if r), None)
    if reason:
        return {"totalElevation": None, "totalElevationLoss": None, "elevationReason": reason}
    return {"totalElevation": round(sum(s.elevation or 0.0 for s in riding)),
            "totalElevationLoss": round(sum(s.elevation_loss or 0.0 for s in riding)), "elevationReason": None}


def routing(trip: Trip, locale: str | None = None) -> list[dict] | None:
    """How BTP drew the route of a trip planned from places, leg by leg (trips/services/planned.py): the points it
    joins (1-based), its km, and in the reader's language "routed", "routed, joined straight for the <km> from point
    <n> to its road: approximate" (a point far from any road), or "joined straight, approximate: <why>"; None for
    any other route."""
    if trip.route_legs is None:
        return None
    locale = locale or i18n.current_locale()
    return [{"from": leg["from"], "to": leg["to"], "km": round(leg["toKm"] - leg["fromKm"], 1),
             "how": _how(leg, locale)} for leg in trip.route_legs]


def _how(leg: dict, locale: str) -> str:
    if not leg["routed"]:
        return i18n.say(Msg("routing.straight", why=unstored(leg["why"]) or Msg("next.no_reason")), locale)
    ends = [Msg("routing.end_from", km=round(b - a, 1), point=leg["from"]) if a <= leg["fromKm"]
            else Msg("routing.end_to", km=round(b - a, 1), point=leg["to"]) for a, b in leg.get("straightKm") or []]
    if not ends:
        return i18n.say(Msg("routing.routed"), locale)
    return i18n.say(Msg("routing.routed_ends", ends=i18n.join(ends, locale, ROUTING_AND)), locale)


def waypoints(trip: Trip) -> list[dict] | None:
    """The points a trip planned from places was created from, else None."""
    return None if trip.source_points is None else [{"lat": lat, "lon": lon} for lat, lon in trip.source_points]


def trip_detail(trip: Trip) -> dict:
    stages, locale = list(trip.stages), i18n.current_locale()
    return {
        "id": trip.id, **settings(trip), "waypoints": waypoints(trip), "routing": routing(trip),
        "status": trip.status,
        "partial": partial(trip), "nextAction": next_action(trip),
        "version": trip.version, "isLocked": is_locked(trip), "outOfZone": trip.out_of_zone,
        "totalDistance": total_distance(trip, stages),
        **elevation_totals(stages), "budget": trip_budget(stages),
        "computations": [{"name": c.name, "status": c.status, "reason": said_stored(c.reason, locale)}
                         for c in trip.computations],
        "categoryStatus": registry.category_statuses(trip),
        "stages": [stage_summary(trip, s) for s in stages],
        "createdAt": _iso(trip.created_at) + "Z", "updatedAt": _iso(trip.updated_at) + "Z",
    }


def trip_list_item(trip: Trip) -> dict:
    # A list page (trips.services.trip_reads.list_trips) read the days' distances and the computations' statuses as
    # plain rows beside its trips: `list_summary` = (distances in day order, statuses).
    distances, statuses = getattr(trip, "list_summary", None) or (
        [s.distance for s in trip.stages], [c.status for c in trip.computations])
    return {
        "id": trip.id, "title": trip.title, "startDate": _iso(trip.start_date), "endDate": _iso(trip.end_date),
        "totalDistance": round(sum(distances), 1), "stageCount": len(distances),
        "createdAt": _iso(trip.created_at) + "Z", "updatedAt": _iso(trip.updated_at) + "Z",
        "status": computations.list_status_of(statuses, len(distances)),
    }


def trip_route(trip: Trip) -> dict:
    return {
        "id": trip.id, "version": trip.version,
        "stages": [{"stageId": s.id, "dayNumber": s.day_number,
                    "geometry": [{"lat": p[0], "lon": p[1], "ele": p[2]} for p in s.geometry]}
                   for s in trip.stages],
    }
