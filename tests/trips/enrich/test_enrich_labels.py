"""Day labels (docs/RULES.md "Day labels"): a day's start and end are named after the nearest imported place within
10 km, else after the nearest named feature within 500 m (a square, a station, an attraction, a street measured to
its line), else nothing. Before, a map without a place node labelled nothing, though it named streets and a
square."""
import osmium
import pytest
import sqlalchemy as sa

from tests.enrich_helpers import import_map, stage, trip
from tests.extracts import extract
from tests.osm_maps import MapBuilder, line_east, map_support_or_skip, offset_north
from trips.core.db import db
from trips.enrich import labels
from trips.osm.importer import import_file
from trips.osm.tables import PLACE_RANKS

LAT, LON = 45.0, 5.0
STREET = line_east(LAT, LON, 3.0)  # Rue Longue, one way: its search point is its middle vertex, 1.5 km along
SQUARE = offset_north(LAT + 0.02, LON, 0)  # Place Ronde, 2.2 km north of the street


def _labels(days, engine) -> dict:
    snap = trip([stage(f"s{i + 1}", i, line) for i, line in enumerate(days)])
    result = labels.compute(snap, engine)
    return {sid: data["labels"] for sid, data in result.data.items()}


def _no_place_map(with_hamlet: bool = False) -> MapBuilder:
    m = MapBuilder(bounds=(LAT - 0.05, LON - 0.05, LAT + 0.1, LON + 0.1))
    m.way(STREET, {"highway": "residential", "name": "Rue Longue"})
    m.way(line_east(LAT - 0.01, LON, 1.0), {"highway": "track"})  # no name: names nothing
    m.node(*SQUARE, {"place": "square", "name": "Place Ronde"})
    if with_hamlet:
        m.node(LAT + 0.06, LON, {"place": "hamlet", "name": "Les Granges"})  # 6.7 km north
    return m


def test_without_a_place_node_the_nearest_named_feature_within_500_m_names_the_day(ctx, tmp_path):
    import_map(_no_place_map(), tmp_path)
    on_street = STREET[5]  # 1 km along Rue Longue: on its line, 500 m from its search point
    near_square = offset_north(*SQUARE, -300)
    far = offset_north(*SQUARE, 700)  # 700 m from the square, 2.9 km from the street
    on_track = (LAT - 0.01, LON + 0.005)  # an unnamed track, 1.1 km from the street
    got = _labels([[on_street, near_square], [near_square, far], [far, on_track]], db.engine)
    assert got == {"s1": {"start": "Rue Longue", "end": "Place Ronde"},
                   "s2": {"start": "Place Ronde", "end": None},
                   "s3": {"start": None, "end": None}}


def test_a_place_within_10_km_still_names_the_day_before_any_feature(ctx, tmp_path):
    import_map(_no_place_map(with_hamlet=True), tmp_path)
    got = _labels([[STREET[5], SQUARE]], db.engine)
    assert got == {"s1": {"start": "Les Granges", "end": "Les Granges"}}


def test_between_a_square_and_a_street_the_nearer_names_the_day(ctx, tmp_path):
    m = _no_place_map()
    m.node(*offset_north(*STREET[10], 120), {"railway": "station", "name": "Gare de Longue"})
    import_map(m, tmp_path)
    got = _labels([[offset_north(*STREET[10], 100), offset_north(*STREET[10], 40)]], db.engine)
    assert got == {"s1": {"start": "Gare de Longue", "end": "Rue Longue"}}  # 20 m vs 100 m; 80 m vs 40 m


def _without_places(source, target) -> None:
    """`source` written again as `target` without its place nodes of cities, towns, villages and hamlets."""
    with osmium.SimpleWriter(str(target), overwrite=True) as writer:
        for obj in osmium.FileProcessor(str(source)):
            if not (obj.is_node() and obj.tags.get("place") in PLACE_RANKS):
                writer.add(obj)


def _centre(name: str) -> tuple[float, float]:
    with db.engine.connect() as conn:
        return tuple(conn.execute(sa.text("SELECT lat, lon FROM osm_place WHERE name = :n AND place = 'square'"),
                                  {"n": name}).one())


@pytest.mark.parametrize("without_places", [False, True])
def test_helsinki_s_days_are_named_by_the_city_else_by_its_squares(ctx, tmp_path, without_places):
    map_support_or_skip(db.engine)
    path = extract("helsinki")
    if without_places:
        _without_places(path, tmp_path / "helsinki.osm.pbf")
        path = tmp_path / "helsinki.osm.pbf"
    import_file(db.engine, path)
    senate, barracks = _centre("Senaatintori"), _centre("Kasarmitori")
    got = _labels([[senate, barracks]], db.engine)["s1"]
    assert got == ({"start": "Senaatintori", "end": "Kasarmitori"} if without_places else
                   {"start": "Helsinki", "end": "Helsinki"})


def test_wellington_s_island_names_its_track_and_ruins_and_nothing_out_at_sea(ctx, tmp_path):
    map_support_or_skip(db.engine)
    import_file(db.engine, extract("wellington"))  # no place node of a town: an island, a track, ruins
    with db.engine.connect() as conn:
        track = conn.execute(sa.text("SELECT line FROM osm_way WHERE name = 'Matiu Circuit Track'")).scalar_one()
    from trips.osm.geometry import decode

    on_track = tuple(float(v) for v in decode(track)[0])
    ruins = (-41.2598925, 174.8663312)  # a "gun emplacement" (historic=ruins)
    at_sea = (-41.2485, 174.8592)  # the extract's north-west corner: 0.9 km from anything named
    got = _labels([[on_track, ruins], [ruins, at_sea]], db.engine)
    assert got == {"s1": {"start": "Matiu Circuit Track", "end": "gun emplacement"},
                   "s2": {"start": "gun emplacement", "end": None}}
