"""What the tools answer: compact digests built from the same records as REST, labels cleaned and bounded."""
from __future__ import annotations

from trips.core.text import label
from trips import computations
from trips.guards import is_locked
from trips.models import Stage, Trip
from trips.readmodels.day import stage_summary
from trips.readmodels.trip import next_action, partial, settings, trip_list_item

DIGEST_LABEL = 40  # one line per day: the 30-day digest must stay under 12 KB (the full text is in get_stage)


def _iso(value):
    return value.isoformat() if value is not None else None


def stage_digest(stage: Stage) -> dict:
    chosen = stage.selected_accommodation or {}
    return {
        "stageId": stage.id, "dayNumber": stage.day_number, "distance": round(stage.distance, 1),
        "elevation": round(stage.elevation), "isRestDay": stage.is_rest_day,
        "startLabel": label(stage.start_label, DIGEST_LABEL),
        "endLabel": label(stage.end_label, DIGEST_LABEL), "accommodation": label(chosen.get("name"), DIGEST_LABEL),
        "alertCount": 0, "criticalAlerts": [],  # alerts arrive with the enrichments
    }


def trip_digest(trip: Trip) -> dict:
    stages = list(trip.stages)
    values = settings(trip)
    return {
        "id": trip.id, "version": trip.version, **values, "title": label(trip.title),
        "status": trip.status,
        "partial": partial(trip), "nextAction": next_action(trip),
        "isLocked": is_locked(trip), "categoryStatus": computations.category_statuses(trip),
        "stageCount": len(stages), "totalDistance": round(sum(s.distance for s in stages if not s.is_rest_day), 1),
        "stages": [stage_digest(s) for s in stages],
    }


def stage_detail(trip: Trip, stage: Stage) -> dict:
    summary = stage_summary(trip, stage)
    for key in ("label", "startLabel", "endLabel"):
        summary[key] = label(summary[key])
    # Copies: the stored JSON values must not change under the ORM's feet.
    summary["accommodations"] = [_place(p) for p in summary["accommodations"]]
    summary["selectedAccommodation"] = _place(summary["selectedAccommodation"])
    return {**summary, "tripVersion": trip.version, "weather": None, "alerts": [], "events": [],
            "resupply": None}


def _place(place: dict | None) -> dict | None:
    if not place:
        return None
    return {**place, "name": label(place.get("name"))}


def list_item(trip: Trip) -> dict:
    item = trip_list_item(trip)
    item["title"] = label(item["title"])
    return item


def ack(result: str, version: int | None = None, next_action: str | None = None) -> dict:
    answer = {"result": result, "nextAction": next_action}
    if version is not None:
        answer["version"] = version
    return answer


def impact(trip: Trip, share_url: str | None) -> dict:
    return {"tripId": trip.id, "title": label(trip.title), "stageCount": len(trip.stages),
            "startDate": _iso(trip.start_date), "endDate": _iso(trip.end_date),
            "hasActiveShareLink": share_url is not None, "shareUrl": share_url}
