"""The bike type weighs the router's choice by surface (docs/RULES.md "Bicycle routing"): a short dirt track and a
longer paved street between the same two points; a road bike takes the street, a mountain or gravel bike the track;
an edge imported without a surface class is weighed as paved."""
import pytest
import sqlalchemy as sa

from tests.osm_maps import MapBuilder, map_support_or_skip, plane_line, plane_point
from trips.core.db import db
from trips.osm import router
from trips.osm.importer import import_file
from trips.osm.waykinds import BIKE_TYPES, GRADE, route_weights

A, B = (0, -20), (1000, -20)


@pytest.fixture
def fork(ctx, tmp_path):
    """A 1 km dirt track along y = 0 and a 1.6 km paved street round by y = 300, joined at both ends."""
    map_support_or_skip(db.engine)
    m = MapBuilder()
    a, b = m.node(*plane_point(0, 0)), m.node(*plane_point(1000, 0))
    m.way([a, *plane_line((0, 0), (1000, 0))[1:-1], b], {"highway": "track", "surface": "dirt"})
    m.way([a, *plane_line((0, 0), (0, 300), (1000, 300), (1000, 0))[1:-1], b],
          {"highway": "residential", "surface": "asphalt"})
    import_file(db.engine, m.write(tmp_path / "fork.osm.pbf"))


def km(bike: str) -> float:
    return router.route(db.engine, [plane_point(*A), plane_point(*B)], bike=bike).distance_km


def test_a_road_bike_rides_round_by_the_street_a_mountain_bike_takes_the_track(fork):
    assert km("road") == pytest.approx(1.64, abs=0.05)
    assert km("mountain") == pytest.approx(1.04, abs=0.05)
    assert km("gravel") == pytest.approx(1.04, abs=0.05)


def test_the_import_writes_each_edge_s_surface_class(fork):
    with db.engine.connect() as conn:
        grades = {r.kind: r.grade for r in conn.execute(sa.text("SELECT kind, grade FROM osm_edge"))}
    assert grades == {"track": GRADE["unpaved"], "quiet": GRADE["paved"]}


def test_edges_without_a_surface_class_are_weighed_as_paved(fork):
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE osm_edge SET grade = 0"))  # imported before the class was written
    assert km("road") == pytest.approx(1.04, abs=0.05)


def test_every_bike_weighs_paved_and_unknown_as_one_and_an_unknown_bike_as_touring():
    for bike in BIKE_TYPES:
        weights = route_weights(bike)
        assert weights[GRADE["paved"]] == weights[GRADE["unknown"]] == 1.0
        assert weights[GRADE["unpaved"]] >= weights[GRADE["compacted"]] >= 1.0
    assert route_weights("unicycle") == route_weights("touring")
