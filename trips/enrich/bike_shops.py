"""Bike shops along each riding day, and a repair-capable one among them (docs/RULES.md "Services near each day"):
every riding day on the map keeps the shops and repair stations within 2 km of its line as `bikeShops`; on trips of
more than five days, a day none of whose shops within 2 km of its line repairs is flagged, from the same search as
the list (so the alert never contradicts it), said of what the map covers of that corridor (docs/RULES.md "Map
coverage")."""
from __future__ import annotations

from trips.enrich import corridor as C
from trips.enrich.alerts.nearby import BIKE_SHOP_NONE_IN_COVERED, BIKE_SHOP_NONE_NEARBY
from trips.enrich.contract import AlertFact, TripSnap
from trips.osm import queries as Q

NAME = "bike_shops"
GROUP = "bike_shop"

RADIUS_M = 2000.0
LONG_TRIP_OVER_STAGES = 5  # the rule applies only to trips with more than 5 stages
REPAIR_CAPABLE = frozenset({"repair"})  # trips/osm/tags.py: a bicycle shop not tagged service:bicycle:repair=no


MAX_LISTED = 6  # kept per day in `bikeShops`, evenly spread along it (get_stage stays small)


def compute(snap: TripSnap, engine):
    result, _cover, days = C.on_map(snap, engine)
    riding = [s for s in days if not s.is_rest_day]
    along = dict(zip([s.id for s in riding],  # one query for every riding day's corridor, the list's and the rule's
                     Q.points_along_each([s.line for s in riding], RADIUS_M, kinds=["bike_shop"], engine=engine)))
    for stage in days:
        result.data[stage.id] = {"bikeShops": _listed(stage, along.get(stage.id, []))}
    if len(snap.stages) <= LONG_TRIP_OVER_STAGES:
        return result
    lacking = [s for s in riding if not any(p.subkind in REPAIR_CAPABLE for p in along[s.id])]
    far = Q.points_near_each([s.midpoint for s in lacking], C.NAVIGATE_SEARCH_M, kinds=["bike_shop"], engine=engine)
    areas = Q.ready_areas(engine)
    for stage, nearest in zip(lacking, far):
        action = C.navigate(nearest[0].lat, nearest[0].lon) if nearest else None
        whole, parts = C.corridor_km(stage, RADIUS_M, areas)
        held = C.held_km(sum(b - a for a, b in parts) * 1000)
        if whole:
            result.add(AlertFact(BIKE_SHOP_NONE_NEARBY.code, stage.id, {"threshold": RADIUS_M / 1000}, action))
        elif held > 0:  # else the map holds none of the corridor across: the group reads partial, nothing is said
            result.add(AlertFact(BIKE_SHOP_NONE_IN_COVERED.code, stage.id,
                                 {"threshold": RADIUS_M / 1000, "covered": held}, action))
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
