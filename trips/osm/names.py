"""The imported map's named places and features (osm_place: cities down to hamlets, parts of towns, squares,
stations, attractions, streets): the nearest to a point, and those a name matches (docs/RULES.md "Place search").
trips/osm/queries.py re-exports them: callers ask `queries.nearest_place_each`, `queries.places_matching` …"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa

from trips.core.text import normalise
from trips.osm import geometry as G
from trips.osm import index
from trips.osm.tables import PLACE_RANKS, osm_place

MAX_MATCHES = 50
# Two features of one name this close are one (a street cut into cells, a pedestrian square that is also a road):
# streets are kept one per name and 0.02° cell (trips/osm/streets.py), about 2 km across.
SAME_FEATURE_M = 3000.0


@dataclass(frozen=True)
class Place:
    osm_type: str
    osm_id: int
    name: str
    place: str  # its class: city, town, village, hamlet, or a feature's (trips/osm/tables.py NAMED_RANKS)
    rank: int  # 1 = city … 4 = hamlet, then the features
    population: int | None
    lat: float
    lon: float
    distance_m: float | None = None


def _place(row, distance=None) -> Place:
    return Place(row["osm_type"], row["osm_id"], row["name"], row["place"], row["rank"], row["population"],
                 row["lat"], row["lon"], None if distance is None else float(distance))


def nearest_place(lat: float, lon: float, max_m: float, places=tuple(PLACE_RANKS), engine=None) -> Place | None:
    """The nearest place (city, town, village, hamlet, or those in `places`) within max_m, or None."""
    return nearest_place_each([(lat, lon)], max_m, places, engine)[0]


def nearest_place_each(points, max_m: float, places=tuple(PLACE_RANKS), engine=None) -> list[Place | None]:
    """`nearest_place` of every (lat, lon) of `points`, in one statement; each answer exactly nearest_place's."""
    points = [(float(p[0]), float(p[1])) for p in points]
    if not points:
        return []
    with index.engine_of(engine).connect() as conn:
        per_point = index.select_boxes(conn, osm_place, [G.box_around(lat, lon, max_m) for lat, lon in points],
                                       "AND t.place IN :kinds", {"kinds": list(places)})
    out: list[Place | None] = []
    for (lat, lon), rows in zip(points, per_point):
        if not rows:
            out.append(None)
            continue
        dist = G.GEOD.inv(np.full(len(rows), lon), np.full(len(rows), lat), [r["lon"] for r in rows],
                          [r["lat"] for r in rows])[2]
        i = min(range(len(rows)), key=lambda k: (dist[k], rows[k]["rank"]))
        out.append(_place(rows[i], dist[i]) if dist[i] <= max_m else None)
    return out


def places_matching(text: str, limit: int = 10, engine=None, places=tuple(PLACE_RANKS)) -> list[Place]:
    """Imported places of the classes `places` whose name equals or starts with `text` (accents, case, punctuation
    ignored, as the gazetteer does): exact names first, then by population (unknown: 0), class and name. Rows of
    one name within SAME_FEATURE_M of each other, link by link (of one class, or one of them a street), are one
    feature, listed once where its best row ranks."""
    key = normalise(str(text)[:200])[:255]
    limit = max(1, min(int(limit), MAX_MATCHES))
    if not key:
        return []
    with index.engine_of(engine).connect() as conn:
        if conn.dialect.name == "sqlite":
            match, params = "t.name_key >= :k AND t.name_key < :top", {"k": key, "top": key + "\U0010ffff"}
        else:
            escaped = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            match, params = "t.name_key LIKE :pat", {"k": key, "pat": escaped + "%"}
        cols = ", ".join(f"t.{c.name}" for c in osm_place.columns)
        rows = conn.execute(sa.text(
            f"SELECT {cols} FROM osm_place t JOIN osm_area r ON r.id = t.area_id AND r.status = 'ready' "
            f"WHERE {match} AND t.place IN :kinds ORDER BY CASE WHEN t.name_key = :k THEN 0 ELSE 1 END, "
            f"COALESCE(t.population, 0) DESC, t.rank, t.name, t.id LIMIT {limit * 6}").bindparams(
                sa.bindparam("kinds", expanding=True)), {**params, "kinds": list(places)}).mappings().all()
    groups: list[list[Place]] = []  # best first; each group's first row answers for it
    for row in rows:
        place = _place(row)
        touched = [g for g in groups if any(_same(place, other) for other in g)]
        if not touched:
            groups.append([place])
            continue
        for other in touched[1:]:  # this row links two groups: one feature
            touched[0].extend(other)
            groups.remove(other)
        touched[0].append(place)
    return [g[0] for g in groups[:limit]]


def _same(a: Place, b: Place) -> bool:
    if (a.osm_type, a.osm_id) == (b.osm_type, b.osm_id):
        return True  # one object in two overlapping imports
    if a.rank <= PLACE_RANKS["hamlet"] or b.rank <= PLACE_RANKS["hamlet"] or normalise(a.name) != normalise(b.name):
        return False
    if a.place != b.place and "street" not in (a.place, b.place):
        return False
    return G.GEOD.inv(a.lon, a.lat, b.lon, b.lat)[2] <= SAME_FEATURE_M
