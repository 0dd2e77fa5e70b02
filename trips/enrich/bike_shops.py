"""A repair-capable bike shop near each riding day (docs/RULES.md "Services near each day"): only on trips of
more than five days, none within 2 km (haversine) of the day's geometry midpoint."""
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


def compute(snap: TripSnap, engine):
    result, cover, days = C.on_map(snap, engine)
    long_trip = len(snap.stages) > LONG_TRIP_OVER_STAGES
    days = [s for s in days if long_trip and not s.is_rest_day and C.whole(cover, s)]
    # the query's box is a little wider than the haversine circle; the radius is then haversine exactly
    near = Q.points_near_each([s.midpoint for s in days], RADIUS_M * 1.01, kinds=["bike_shop"], engine=engine)
    lacking = [s for s, shops in zip(days, near) if not any(
        C.haversine_m(*s.midpoint, p.lat, p.lon) <= RADIUS_M and p.subkind in REPAIR_CAPABLE for p in shops)]
    far = Q.points_near_each([s.midpoint for s in lacking], C.NAVIGATE_SEARCH_M, kinds=["bike_shop"], engine=engine)
    for stage, nearest in zip(lacking, far):
        result.add(AlertFact(BIKE_SHOP_NONE_NEARBY.code, stage.id,
                             action=C.navigate(nearest[0].lat, nearest[0].lon) if nearest else None))
    return result
