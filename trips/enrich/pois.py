"""Resupply along each day (docs/RULES.md "Resupply"): the places to eat kept per day as `resupply`, a supply
timeline, and two alerts: nothing to eat on a long day, or every place closed when the rider passes it.
"""
from __future__ import annotations

from datetime import datetime

from trips.enrich import corridor as C
from trips.enrich.alerts.pois import RESUPPLY_CLOSED_AT_PASSAGE, RESUPPLY_NONE_IN_COVERED, RESUPPLY_NONE_ON_STAGE
from trips.enrich.contract import AlertFact, StageSnap, TripSnap
from trips.osm import queries as Q
from trips.osm.queries import MapPoint
from trips.route.pacing import rider_time

NAME = "pois"
GROUP = "pois"

CORRIDOR_M = 2000.0
# The places that sell food, an allowlist (a shop of clothes, shoes, electronics… never counts), best first:
# groceries, then bakeries, then cafés and restaurants, then bars and fuel stations (a snack at best).
FOOD_RANKS = (
    frozenset({"supermarket", "convenience", "general", "greengrocer", "butcher", "deli", "farm", "marketplace"}),
    frozenset({"bakery", "pastry"}),
    frozenset({"cafe", "restaurant", "fast_food"}),
    frozenset({"bar", "fuel"}),
)
RANK = {category: i for i, kinds in enumerate(FOOD_RANKS) for category in kinds}
# resupply_none_on_stage: the categories that count as a place to eat or buy food.
RESUPPLY_CATEGORIES = frozenset(RANK)
MAX_RESUPPLY_PER_DAY = 6  # `resupply` keeps ≤ 6 per day, not every POI
CLUSTER_M = 500.0
MAX_TIMELINE_CLUSTERS = 24  # keeps a long day through towns small in get_stage (evenly spread beyond that)
NONE_MIN_DISTANCE_KM = 40.0  # resupply_none_on_stage: distance ≥ 40 km


def compute(snap: TripSnap, engine):
    """Resupply per riding day. Rest days are looked at (empty lists), never alerted (riding rule)."""
    result, cover = C.start(snap, engine)
    if not result.covered:
        return result
    riding = [s for s in snap.stages if not s.is_rest_day and cover[s.id] > 0]
    areas = Q.ready_areas(engine)
    assigned = C.assign_along(riding, CORRIDOR_M, ["resupply"], engine)
    for stage in snap.stages:
        if cover[stage.id] <= 0:
            continue  # not on the map: never looked at
        result.ran_on(stage.id)
        pois = C.dedup_named([p for p in assigned.get(stage.id, []) if p.subkind in RESUPPLY_CATEGORIES])
        passage = Passage(snap, stage, pois)
        result.data[stage.id] = {"resupply": [_item(p, passage[i]) for i, p in _kept(pois)],
                                 "supplyTimeline": timeline(pois)}
        if stage.is_rest_day or (pois and not all(passage[i] is False for i in range(len(pois)))):
            continue  # a rest day, or a place that may be open: nothing to say
        # what is missing is said of the corridor the map holds (docs/RULES.md "Map coverage")
        whole, parts = C.corridor_km(stage, CORRIDOR_M, areas)
        held = C.held_km(sum(b - a for a, b in parts) * 1000)
        if not pois and whole and stage.distance_km >= NONE_MIN_DISTANCE_KM:
            result.add(AlertFact(RESUPPLY_NONE_ON_STAGE.code, stage.id))
        elif not pois and not whole and held >= NONE_MIN_DISTANCE_KM:
            result.add(AlertFact(RESUPPLY_NONE_IN_COVERED.code, stage.id, {"covered": held}))
        elif pois and whole:  # every place known closed: said only when no place off the map could be open
            result.add(AlertFact(RESUPPLY_CLOSED_AT_PASSAGE.code, stage.id, {"count": len(pois)}))
    return result


def rank(category: str | None) -> int:
    """0 for a grocery, 1 a bakery, 2 a café or restaurant, 3 a bar or fuel station, 4 anything else."""
    return RANK.get(category, len(FOOD_RANKS))


def _kept(pois: list[MapPoint]) -> list[tuple[int, MapPoint]]:
    """(index, POI) of at most MAX_RESUPPLY_PER_DAY, groceries first (docs/RULES.md "Resupply"): in each 500 m
    cluster the best kind of place, the nearest the route among them, stands for it; the clusters' groceries
    are taken first, spread along the day when there are more than six, then their bakeries, then cafés and
    restaurants, then bars and fuel; any slot still free goes to the next best places. Ordered best kind first,
    then along the day."""
    indexed = list(enumerate(pois))
    groups = _clusters(indexed, key=lambda ip: ip[1].along_m)
    firsts = [min(g, key=lambda ip: (rank(ip[1].subkind), ip[1].distance_m)) for g in groups]
    chosen: list[tuple[int, MapPoint]] = []
    for tier in range(len(FOOD_RANKS)):
        kind = [ip for ip in firsts if rank(ip[1].subkind) == tier]
        chosen += C.spread(kind, MAX_RESUPPLY_PER_DAY - len(chosen))
    taken = {i for i, _ in chosen}
    rest = sorted((ip for ip in indexed if ip[0] not in taken),
                  key=lambda ip: (rank(ip[1].subkind), ip[1].distance_m))
    chosen += rest[:MAX_RESUPPLY_PER_DAY - len(chosen)]
    return sorted(chosen, key=lambda ip: (rank(ip[1].subkind), ip[0]))


def _clusters(items: list, key) -> list[list]:
    """Consecutive items (in route order) within CLUSTER_M of their cluster's first one."""
    groups: list[list] = []
    for item in items:
        if groups and key(item) - key(groups[-1][0]) <= CLUSTER_M:
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def timeline(pois: list[MapPoint]) -> list[dict]:
    """The supply timeline: one entry per 500 m cluster, {km from the day's start, sorted categories}."""
    groups = C.spread(_clusters(pois, key=lambda p: p.along_m), MAX_TIMELINE_CLUSTERS)
    return [{"km": C.km(g[0].along_m), "categories": sorted({p.subkind for p in g})} for g in groups]


def _item(p: MapPoint, open_at_passage: bool | None) -> dict:
    return {"name": p.name, "category": p.subkind, "lat": round(p.lat, 6), "lon": round(p.lon, 6),
            "km": C.km(p.along_m), "openingHours": p.tags.get("opening_hours"), "openAtPassage": open_at_passage}


def time_at(stage: StageSnap, departure_hour: float, average_speed: float, d_km: float) -> float:
    """Decimal local hour at which the rider reaches d_km of the day (docs/RULES.md "Rider time")."""
    return rider_time(stage.distance_km, stage.elevation_gain_m, average_speed, departure_hour).time_at(d_km)


class Passage:
    """Per POI (by index): open (True), closed (False) or unknown (None) when the rider passes it; unknown on
    an undated trip, without opening_hours, when they do not parse or say `unknown`. Evaluated on demand (each
    looks the time zone and holidays up), so the closed-at-passage check stops at the first place not known closed."""

    def __init__(self, snap: TripSnap, stage: StageSnap, pois: list[MapPoint]):
        self.pois, self.known = pois, {}
        self.day, self.start = stage.date, stage.start
        self.estimate = rider_time(stage.distance_km, stage.elevation_gain_m, snap.average_speed,
                                   snap.departure_hour)

    def __getitem__(self, i: int) -> bool | None:
        if i not in self.known:
            p = self.pois[i]
            hours = p.tags.get("opening_hours")
            if self.day is None or not hours:
                self.known[i] = None
            else:
                # the passage as an instant, read on the place's own clock (docs/RULES.md "Times")
                when = self.estimate.passage(self.day, self.start, p.along_m / 1000, (p.lat, p.lon))
                self.known[i] = open_at(hours, p.lat, p.lon, when.replace(tzinfo=None))
        return self.known[i]


def open_at(hours: str, lat: float, lon: float, when: datetime) -> bool | None:
    """Whether an OSM opening_hours value says open at the local time `when` at (lat, lon): True, False, or
    None when unparseable or unknown. The place's coordinates give its timezone, public holidays (`PH`) and
    sun times (`sunrise-sunset`)."""
    import opening_hours  # loaded by the job that needs it, not by every web worker

    try:
        state, _comment = opening_hours.OpeningHours(hours, coords=(lat, lon)).state(when)
    except (opening_hours.ParserError, SyntaxError, ValueError, opening_hours.InvalidCoordinatesError,
            opening_hours.UnknownCountryError):
        return None
    if state == opening_hours.State.OPEN:
        return True
    if state == opening_hours.State.CLOSED:
        return False
    return None
