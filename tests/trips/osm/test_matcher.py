"""The matcher (trips/osm/matcher.py) on a generated town whose streets, surfaces and turns are known
(tests/osm_maps.py surfaced_town): the ridden ways in order, crossing streets never ridden, a line off the map said
unmatched, and the stretches covering the line end to end."""
import pytest

from tests.osm_maps import TOWN_STRETCHES, MapBuilder, map_support_or_skip, plane_line, surfaced_town
from trips.core.db import db
from trips.osm import matcher
from trips.osm.importer import import_file


@pytest.fixture
def town(ctx, tmp_path):
    map_support_or_skip(db.engine)
    m = MapBuilder()
    ride = surfaced_town(m)
    import_file(db.engine, m.write(tmp_path / "town.osm.pbf"))
    return ride


def test_the_ride_follows_its_four_streets_in_order_and_never_a_crossing_one(town):
    found = matcher.match(town)
    named = [s for s in found if s.way is not None]
    assert [s.way.name for s in named] == [name for *_, name, _s, _w in TOWN_STRETCHES]
    for s, (a, b, _n, surface, kind) in zip(named, TOWN_STRETCHES):
        assert s.way.surface == surface and s.way.kind == kind
        assert s.from_km == pytest.approx(a, abs=0.05) and s.to_km == pytest.approx(b, abs=0.05)
    assert all(s.way is not None for s in found)


def test_the_stretches_cover_the_line_end_to_end(town):
    found = matcher.match(town)
    assert found[0].from_m == 0.0
    assert all(a.to_m == b.from_m for a, b in zip(found, found[1:]))
    assert found[-1].to_km == pytest.approx(3.4, abs=0.01)


def test_a_line_beside_the_roads_rides_none_of_them(town):
    off = matcher.match(plane_line((0, 200), (900, 200)))  # 200 m north of Rue Alpha, between streets
    assert len(off) == 1 and off[0].way is None and off[0].to_km == pytest.approx(0.9, abs=0.01)


def test_a_line_away_from_every_map_is_one_unmatched_stretch(town):
    far = matcher.match([(10.0, 10.0), (10.01, 10.0)])
    assert [s.way for s in far] == [None]


def test_a_line_of_one_point_rides_nothing(town):
    assert matcher.match([(45.0, 5.0)]) == []
    with pytest.raises(ValueError):
        matcher.match([])
