"""The map asked once for all the days of a trip (trips/osm/queries.py `*_each`): on a generated map around a
meandering several-day route, every batched query answers for each day exactly what it answers for that day
asked alone (and what the per-chunk form answered), and the enrichments' map statements do not grow with the
number of days (a return to one query per day would)."""
import random
from datetime import date

import pytest
import sqlalchemy as sa

from tests.enrich_helpers import bounds_around, engine, import_map, trip_east
from tests.osm_maps import MapBuilder, per_box_select, scatter
from trips.enrich import (accommodations, bike_shops, border_crossing, calendar, cultural_pois, ferries, fords,
                          health_services, labels, pois, railway_stations, terrain, water_points)
from trips.osm import index
from trips.osm import queries as Q

LAT, LON = 45.0, 5.0
KINDS = [{"amenity": "drinking_water"}, {"shop": "bakery"}, {"tourism": "hotel", "name": "H"},
         {"shop": "bicycle"}, {"amenity": "pharmacy"}, {"railway": "station", "name": "S"},
         {"tourism": "museum", "name": "M"}, {"tourism": "camp_site", "name": "C"}, {"ford": "yes"}]


def _days(rnd: random.Random, count: int, vertices: int = 60) -> list[list[tuple[float, float]]]:
    """`count` consecutive meandering days (~12 km each, a vertex every ~200 m), each starting where the
    previous one ended."""
    days, here = [], (LAT, LON)
    for _ in range(count):
        line = [here]
        for _ in range(vertices):
            lat, lon = line[-1]
            line.append((lat + rnd.uniform(-0.0015, 0.0025), lon + rnd.uniform(0.0, 0.003)))
        days.append(line)
        here = line[-1]
    return days


def _map(rnd: random.Random, days) -> MapBuilder:
    every = [p for line in days for p in line]
    m = MapBuilder(bounds=(min(p[0] for p in every) - 0.3, min(p[1] for p in every) - 0.3,
                           max(p[0] for p in every) + 0.3, max(p[1] for p in every) + 0.3))
    scatter(m, rnd, every, KINDS, nodes=900, ways=250, ferries=40, spread=0.03)
    for i in range(0, len(every), 25):
        lat, lon = every[i]
        m.node(lat + rnd.uniform(-0.02, 0.02), lon + rnd.uniform(-0.02, 0.02),
               {"place": rnd.choice(["village", "hamlet", "town"]), "name": f"P{i}"})
    # Two countries, the border crossed half way, 200 m off any vertex: a vertex lying on the border itself is
    # in the country whose ring holds it (rings are stored to 1e-6°), which a per-line query may not read when
    # the ring's stored box (to 1e-7°) stops just short of the line's box; the per-trip read has every ring.
    mid = every[len(every) // 2][1] + 0.0025
    m.country([(LAT - 1, LON - 1), (LAT - 1, mid), (LAT + 2, mid), (LAT + 2, LON - 1)], "FR", "France")
    m.country([(LAT - 1, mid), (LAT - 1, LON + 3), (LAT + 2, LON + 3), (LAT + 2, mid)], "IT", "Italy")
    return m


def _lines(answer):
    return [[(w.osm_id, w.name, w.length_m, w.points.tolist(), w.distance_m, w.near_m, w.tags) for w in r]
            for r in answer]


def test_each_query_answers_per_day_what_the_day_asked_alone_does(ctx, tmp_path, monkeypatch):
    """Every `*_each` query over 6 days against the same query one day at a time, and against one statement
    per chunk: equal to the last bit (points, distances, positions along, lines and their measures, places,
    countries). Each day has answers, so a mix-up between days (a chunk given to the wrong day) shows."""
    rnd = random.Random(22)
    days = _days(rnd, 6)
    import_map(_map(rnd, days), tmp_path)
    ends = [line[-1] for line in days]

    def batched():
        return (Q.points_along_each(days, 800), Q.points_along_each(days, 1500, kinds=["water", "resupply"]),
                Q.points_near_each(ends, 3000, kinds=["station", "accommodation"]), Q.points_near_each(ends, 2500),
                _lines(Q.ways_along_each(days, 40)), _lines(Q.ferries_along_each(days, 1500)),
                Q.nearest_place_each(ends, 5000), [Q.countries_along(line, countries=Q.countries_in(
                    index.box_of(index.as_line([p for d in days for p in d])))) for line in days])

    def one_day_at_a_time():
        return ([Q.points_along(line, 800) for line in days],
                [Q.points_along(line, 1500, kinds=["water", "resupply"]) for line in days],
                [Q.points_near(*end, 3000, kinds=["station", "accommodation"]) for end in ends],
                [Q.points_near(*end, 2500) for end in ends],
                _lines([Q.ways_along(line, 40) for line in days]), _lines([Q.ferries_along(line, 1500) for line in days]),
                [Q.nearest_place(*end, 5000) for end in ends], [Q.countries_along(line) for line in days])

    together = batched()
    alone = one_day_at_a_time()
    monkeypatch.setattr(index, "select_boxes", per_box_select)
    monkeypatch.setattr(index, "select_chunks", per_box_select)
    per_chunk = one_day_at_a_time()
    for answer in together[:7]:
        assert len(answer) == len(days) and all(answer), "every day has something for every query"
    assert {run.iso for runs in together[7] for run in runs} == {"FR", "IT"}
    assert together[0] != together[0][::-1]  # the days' answers differ: a shuffle would be seen
    for got, one, chunked in zip(together, alone, per_chunk):
        assert got == one == chunked


def _statements(run) -> dict:
    """{module name: statements on the map tables} of each enrichment's compute on a trip."""
    counts = {}
    current = [None]

    def record(_conn, _cursor, statement, *_):
        if "osm_" in statement:
            counts[current[0]] = counts.get(current[0], 0) + 1

    sa.event.listen(engine(), "before_cursor_execute", record)
    try:
        run(current)
    finally:
        sa.event.remove(engine(), "before_cursor_execute", record)
    return counts


ALONG = [k for k in KINDS if "railway" not in k and k.get("shop") != "bicycle"]
MODULES = (terrain, water_points, pois, cultural_pois, fords, ferries, bike_shops, health_services,
           railway_stations, labels, border_crossing, calendar, accommodations)
# Map statements per enrichment for a trip of any length (day_coverage's read of the areas counts: it is on
# osm_area): one per kind of map query, whatever the number of days. bike_shops and railway_stations ask a
# second time for the days lacking one (the nearest one further away), water_points for a day without water, labels
# twice more for the points no place is near (the named features and the named roads close by). Those that say an
# absence read the areas once more for what their own search area covers (water, food, bike shops, health services,
# stations), and accommodations the countries the days end in (their prices' currency).
PINNED = {"terrain": 2, "water_points": 3, "pois": 3, "cultural_pois": 2, "fords": 2, "ferries": 2,
          "bike_shops": 4, "health_services": 3, "railway_stations": 4, "labels": 5, "border_crossing": 2,
          "calendar": 1, "accommodations": 4}


@pytest.mark.parametrize("days", [6, 12])
def test_map_statements_per_enrichment_do_not_grow_with_the_days(ctx, tmp_path, days):
    """Each enrichment asks the map the same number of statements for a 6-day and a 12-day trip (PINNED):
    one per kind for all the days, not one per day. The map has water, a pharmacy, lodgings, museums, fords
    and ferries along, no bike shop and no station (so the "further away" queries run too), and two
    countries (the border crossing's bisection reads no boundary again)."""
    rnd = random.Random(days)
    snap = trip_east(LAT, LON, [20] * days, start_date=date(2026, 7, 1))
    every = [p for s in snap.stages for p in s.line]
    m = MapBuilder(bounds=bounds_around(snap))
    for lat, lon in every[::10]:
        m.node(lat + 0.002, lon, dict(rnd.choice(ALONG)))
        m.way([(lat - 0.0001, lon), (lat + 0.0001, lon + 0.001)], {"highway": "track", "surface": "gravel"})
    m.way([(LAT - 0.01, every[5][1]), (LAT + 0.01, every[5][1])], {"route": "ferry", "name": "F"})
    m.node(LAT + 0.01, LON + 0.01, {"place": "village", "name": "V"})
    mid = every[len(every) // 2][1]
    m.country([(LAT - 1, LON - 1), (LAT - 1, mid), (LAT + 1, mid), (LAT + 1, LON - 1)], "FR", "France")
    m.country([(LAT - 1, mid), (LAT - 1, every[-1][1] + 1), (LAT + 1, every[-1][1] + 1), (LAT + 1, mid)], "IT",
              "Italy")
    import_map(m, tmp_path)

    def run(current):
        for module in MODULES:
            current[0] = module.NAME
            module.compute(snap, engine())

    counts = _statements(run)
    assert counts == PINNED


def _measure_per_chunk(chunk, entries) -> None:
    """trips/osm/queries.py `_measure` as it was before the pairs were measured all at once: one chunk of the
    query line against its candidates (the reference _measure_pairs answers as, to the last bit)."""
    import numpy as np

    from trips.osm import geometry as G

    plane = G.LocalPlane(float(chunk[:, 0].mean()), float(chunk[:, 1].mean()))
    cx, cy = plane.xy(chunk[:, 0], chunk[:, 1])
    if len(chunk) == 1:
        cx, cy = np.repeat(cx, 2), np.repeat(cy, 2)
    lengths = np.array([len(e[1]) for e in entries])
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    verts = np.vstack([e[1] for e in entries])
    wx, wy = plane.xy(verts[:, 0], verts[:, 1])
    vertex = G.segment_distances(wx, wy, cx[:-1], cy[:-1], cx[1:], cy[1:]).min(axis=1)
    closest = np.minimum.reduceat(vertex, starts)
    has_seg = np.ones(len(verts), dtype=bool)
    has_seg[starts + lengths - 1] = False
    if has_seg.any():
        a, b = np.flatnonzero(has_seg), np.flatnonzero(has_seg) + 1
        back = G.segment_distances(cx, cy, wx[a], wy[a], wx[b], wy[b]).min(axis=0)
        cross = G.segments_cross(wx[a], wy[a], wx[b], wy[b], cx[:-1], cy[:-1], cx[1:], cy[1:]).any(axis=1)
        per_seg = np.where(cross, 0.0, back)
        owner = np.repeat(np.arange(len(entries)), lengths)[a]
        seg_min = np.full(len(entries), np.inf)
        np.minimum.at(seg_min, owner, per_seg)
        closest = np.minimum(closest, seg_min)
    for entry, s, n, c in zip(entries, starts, lengths, closest):
        entry[2] = np.minimum(entry[2], vertex[s:s + n])
        entry[3] = min(entry[3], float(c))


def _pairs_chunk_by_chunk(chunks, pairs) -> None:
    by_chunk: dict[int, list] = {}
    for k, entry in pairs:
        by_chunk.setdefault(k, []).append(entry)
    for k, entries in by_chunk.items():
        _measure_per_chunk(chunks[k], entries)


@pytest.mark.parametrize("seed", [3, 4])
def test_lines_measured_all_pairs_at_once_as_chunk_by_chunk(ctx, tmp_path, monkeypatch, seed):
    """ways_along and ferries_along measure every (chunk, candidate) pair at once: the same closest
    approaches, vertex distances and lengths near the line, to the last bit, as chunk by chunk (short and
    one-vertex days, ways crossing the line, ways of two vertices and of many)."""
    rnd = random.Random(seed)
    days = _days(rnd, 4) + [[(LAT + 0.05, LON + 0.05)], [(LAT + 0.05, LON + 0.05), (LAT + 0.0501, LON + 0.0502)]]
    import_map(_map(rnd, days), tmp_path)
    at_once = (_lines(Q.ways_along_each(days, 40)), _lines(Q.ways_along_each(days, 300)),
               _lines(Q.ferries_along_each(days, 1500)))
    monkeypatch.setattr(Q, "_measure_pairs", _pairs_chunk_by_chunk)
    chunked = (_lines(Q.ways_along_each(days, 40)), _lines(Q.ways_along_each(days, 300)),
               _lines(Q.ferries_along_each(days, 1500)))
    assert sum(len(r) for r in at_once[1]) > 100
    assert at_once == chunked
