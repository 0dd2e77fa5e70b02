"""Bike shops along each riding day, and a repair-capable one near it (docs/RULES.md "Services near each day"): every
riding day on the map keeps the shops and repair stations within 2 km of its line as `bikeShops`; on trips of more
than five days, a day with none repair-capable within 2 km (haversine) of its geometry midpoint is flagged."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import BIKE_SHOP_NONE_NEARBY
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "bike_shops"
GROUP = "bike_shop"

RADIUS_M = 2000.0
LONG_TRIP_OVER_STAGES = 5  # the rule applies only to trips with more than 5 stages
REPAIR_CAPABLE = frozenset({"repair"})  # trips/osm/tags.py: a bicycle shop not tagged service:bicycle:repair=no


MAX_LISTED = 6  # kept per day in `bikeShops`, evenly spread along it (get_stage stays small)


def compute(snap: TripSnap, engine):
    result, cover, days = C.on_map(snap, engine)
    riding = [s for s in days if not s.is_rest_day]
    # One query for every riding day's corridor: the shops within 2 km of the midpoint (a point of the line) are
    # among those within 2 km of the line, so the rule reads them from the same answer.
    along = dict(zip([s.id for s in riding],
                     Q.points_along_each([s.line for s in riding], RADIUS_M, kinds=["bike_shop"], engine=engine)))
    for stage in days:
        result.data[stage.id] = {"bikeShops": _listed(stage, along.get(stage.id, []))}
    long_trip = len(snap.stages) > LONG_TRIP_OVER_STAGES
    days = [s for s in riding if long_trip and C.whole(cover, s)]
    lacking = [s for s in days if not any(
        C.haversine_m(*s.midpoint, p.lat, p.lon) <= RADIUS_M and p.subkind in REPAIR_CAPABLE for p in along[s.id])]
    far = Q.points_near_each([s.midpoint for s in lacking], C.NAVIGATE_SEARCH_M, kinds=["bike_shop"], engine=engine)
    for stage, nearest in zip(lacking, far):
        result.add(AlertFact(BIKE_SHOP_NONE_NEARBY.code, stage.id,
                             action=C.navigate(nearest[0].lat, nearest[0].lon) if nearest else None))
    return result


def _listed(stage, shops) -> list[dict]:
    """The day's shops in the order the line passes them, repeats of a named one dropped: {km, kind (repair, shop,
    repair_station), name, lat, lon, phone, website}; a rest day keeps none."""
    if stage.is_rest_day or not shops:
        return []
    cum = C.cumulative_km(stage)
    placed = sorted(((C.nearest_vertex_km(stage, cum, p.lat, p.lon), p) for p in C.dedup_named(shops)),
                    key=lambda kp: kp[0])
    return [{"km": round(k, 1), "kind": p.subkind, "name": p.name, "lat": round(p.lat, 6), "lon": round(p.lon, 6),
             "phone": p.tags.get("phone") or p.tags.get("contact:phone"),
             "website": p.tags.get("website") or p.tags.get("contact:website")}
            for k, p in C.spread(placed, MAX_LISTED)]
