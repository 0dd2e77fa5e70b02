"""Cultural places beside each riding day (docs/RULES.md "Services near each day"): museums, monuments,
castles, churches, viewpoints, attractions… within 500 m of the line, each given to the day passing closest;
at most 3 per day (named ones first, then the closest), kept as `culturalPois` and suggested as nudges."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import CULTURAL_POI_SUGGESTION
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm.queries import MapPoint

NAME = "cultural_pois"
GROUP = "cultural_poi"

CORRIDOR_M = 500.0
MAX_PER_DAY = 3


def compute(snap: TripSnap, engine):
    result, cover = C.start(snap, engine)
    if not result.covered:
        return result
    riding = [s for s in snap.stages if not s.is_rest_day and cover[s.id] > 0]
    assigned = C.assign_along(riding, CORRIDOR_M, ["culture"], engine)
    for stage in snap.stages:
        if cover[stage.id] <= 0:
            continue
        result.ran_on(stage.id)
        ranked = sorted(C.dedup_named(assigned.get(stage.id, [])),
                        key=lambda p: (p.name is None, p.distance_m, -p.tag_count))
        chosen = sorted(ranked[:MAX_PER_DAY], key=lambda p: p.along_m)
        result.data[stage.id] = {"culturalPois": [_item(p) for p in chosen]}
        for p in chosen:
            if p.name is not None:  # the suggestion names the place; an unnamed one stays in the data only
                result.add(AlertFact(CULTURAL_POI_SUGGESTION.code, stage.id,
                                     {"name": p.name, "type": p.subkind, "distance": int(round(p.distance_m))}))
    return result


def _item(p: MapPoint) -> dict:
    return {"name": p.name, "type": p.subkind, "lat": round(p.lat, 6), "lon": round(p.lon, 6),
            "km": C.km(p.along_m), "distance": int(round(p.distance_m)),
            "openingHours": p.tags.get("opening_hours"), "fee": p.tags.get("fee") or p.tags.get("charge"),
            "image": p.tags.get("image"), "website": p.tags.get("website") or p.tags.get("contact:website")}
