"""The trip read model: what a trip, a list item and its route look like on the wire (camelCase)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from trips import computations
from trips.core import i18n
from trips.guards import is_locked
from trips.models import Trip
from trips.enrich import registry
from trips.enrich.registry import NO_MAP_DATA
from trips.readmodels.day import elevation_reason, stage_summary


def _iso(value):
    return value.isoformat() if value is not None else None


def settings(trip: Trip) -> dict:
    return {
        "title": trip.title, "sourceUrl": trip.source_url, "sourceType": trip.source_type,
        "startDate": _iso(trip.start_date), "endDate": _iso(trip.end_date),
        "fatigueFactor": trip.fatigue_factor, "elevationPenalty": trip.elevation_penalty,
        "ebikeMode": trip.ebike_mode, "departureHour": trip.departure_hour,
        "maxDistancePerDay": trip.max_distance_per_day, "averageSpeed": trip.average_speed,
        "enabledAccommodationTypes": list(trip.enabled_accommodation_types),
    }


def partial(trip: Trip) -> bool:
    """True only while a computation is pending or running: asking again can then show something new. A trip
    whose route fetch failed is not partial (an agent would poll for ever); `next_action` says what to do."""
    return any(c.status in computations.ACTIVE for c in trip.computations)


RETRY = "Call analyze_trip to try again."
ROUTE_FIXES = (" If the link is wrong, create a new trip from the corrected link with create_trip, or have the "
               "rider import the route as a GPX file (POST /api/trips/gpx-upload).")
POINT_FIXES = " If a point is wrong, create a new trip with create_trip and the corrected waypoints."


def next_action(trip: Trip) -> str | None:
    """What an agent should do now: wait, retry a failure (with its reason), or nothing (None)."""
    if partial(trip):
        return "The trip is still being worked out: ask again in a few seconds."
    failed = {c.name: c.reason for c in trip.computations if c.status == "failed"}
    if "route" in failed:
        fixes = POINT_FIXES if trip.source_points is not None else ROUTE_FIXES
        return f"The route could not be fetched: {failed['route'] or 'no reason given.'} {RETRY}{fixes}"
    if "stages" in failed:
        return f"The days could not be cut: {failed['stages'] or 'no reason given.'} {RETRY}"
    if failed:
        reasons = {reason for reason in failed.values() if reason}
        if reasons == {NO_MAP_DATA}:  # no retry helps until a region is imported
            return ("No map data covers this trip yet, so its days could not be analysed. Once the operator has "
                    "imported a region with `flask osm import`, call analyze_trip.")
        told = " ".join(_sentence(r) for r in sorted(reasons)[:3])
        return f"Some analyses failed ({', '.join(sorted(failed))}). {told} {RETRY}".replace("  ", " ")
    return _off_map(trip)


MAX_OFF_MAP_DAYS = 4  # days named by the off-map next action


def _coverage(stage) -> dict | None:
    """The day's stored mapCoverage, from its JSON text when the trip was read as text (trips.services.trip_reads
    read_trip: `stored_json`, its columns left unloaded) rather than loading the column, a query per day."""
    text = (getattr(stage, "stored_json", None) or {}).get("enrichment")
    if "enrichment" not in stage.__dict__ and isinstance(text, str):
        return registry.day_map_coverage(SimpleNamespace(enrichment=json.loads(text)))
    return registry.day_map_coverage(stage)


def _off_map(trip: Trip) -> str | None:
    """The days partly or wholly off the imported map and their km off it (stored at dispatch,
    docs/RULES.md "Map coverage"), with the fix; None when the map covers every day."""
    off = [(s.day_number, c) for s in trip.stages if not s.is_rest_day
           and (c := _coverage(s)) is not None and c["share"] < registry.FULL_COVERAGE]
    if not off:
        return None
    told = "; ".join(f"day {n}: " + (", ".join(f"km {a:g}–{b:g}" for a, b in c["offMapKm"]) or "in part")
                     for n, c in off[:MAX_OFF_MAP_DAYS]) + ("; …" if len(off) > MAX_OFF_MAP_DAYS else "")
    return (f"Parts of {len(off)} day(s) lie outside the imported map ({told}): the map checks (food, lodging, "
            "water, terrain…) did not look there. Have the operator import a region covering them with "
            "`flask osm import`, then call analyze_trip.")


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
        return i18n.t("routing.straight", locale, why=leg["why"])
    ends = []
    for a, b in leg.get("straightKm") or []:
        km = i18n.number(b - a, locale, 1)
        if a <= leg["fromKm"]:
            ends.append(i18n.t("routing.end_from", locale, km=km, point=leg["from"]))
        else:
            ends.append(i18n.t("routing.end_to", locale, km=km, point=leg["to"]))
    if not ends:
        return i18n.t("routing.routed", locale)
    return i18n.t("routing.routed_ends", locale, ends=i18n.t("routing.and", locale).join(ends))


def waypoints(trip: Trip) -> list[dict] | None:
    """The points a trip planned from places was created from, else None."""
    return None if trip.source_points is None else [{"lat": lat, "lon": lon} for lat, lon in trip.source_points]


def trip_detail(trip: Trip) -> dict:
    stages = list(trip.stages)
    return {
        "id": trip.id, **settings(trip), "waypoints": waypoints(trip), "routing": routing(trip),
        "status": trip.status,
        "partial": partial(trip), "nextAction": next_action(trip),
        "version": trip.version, "isLocked": is_locked(trip), "outOfZone": trip.out_of_zone,
        "totalDistance": round(sum(s.distance for s in stages), 1),
        **elevation_totals(stages),
        "computations": [{"name": c.name, "status": c.status, "reason": c.reason} for c in trip.computations],
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
