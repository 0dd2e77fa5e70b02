"""The matcher and cues on a real extract (tests/extracts.py: Helsinki's centre): a day routed across it rides
mapped ways end to end, its surfaces and way types add up to its distance in tenths, and its cues name real streets
of the extract."""
import pytest
import sqlalchemy as sa

from tests.extracts import extract
from tests.osm_maps import map_support_or_skip
from trips.core.db import db
from trips.enrich.surfaces import day_cues, day_tables
from trips.osm import matcher, router
from trips.osm.importer import import_file


@pytest.fixture
def helsinki(ctx):
    map_support_or_skip(db.engine)
    import_file(db.engine, extract("helsinki"))
    with db.engine.connect() as conn:
        names = set(conn.execute(sa.text("SELECT DISTINCT name FROM osm_way WHERE name IS NOT NULL")).scalars())
        ends = conn.execute(sa.text("SELECT min_lat, min_lon FROM osm_edge WHERE kind IN ('quiet', 'tertiary', "
                                    "'secondary', 'primary') ORDER BY min_lat + min_lon")).all()
    return names, [(float(a), float(b)) for a, b in ends]


def routed_day(ends):
    """The first routed day from a street at one corner of the extract to one at the other."""
    for a, b in zip(ends[:20:4], ends[::-1][:20:4]):
        day = router.route(db.engine, [a, b])
        if not day.approximate:
            return day
    raise AssertionError("no two streets of the extract are joined")


def test_a_day_across_helsinki_rides_real_streets_and_its_km_add_up(helsinki):
    names, ends = helsinki
    day = routed_day(ends)
    assert day.distance_km > 0.5
    found = matcher.match(day.line)
    ridden = sum(s.to_m - s.from_m for s in found if s.way is not None)
    assert ridden >= 0.8 * found[-1].to_m  # the router's line lies on the ways it was drawn on
    km = round(day.distance_km, 1)
    surfaces, kinds = day_tables(found, km)
    assert round(sum(surfaces.values()) * 10) == round(sum(kinds.values()) * 10) == round(km * 10)
    cues = day_cues(day.line, found, km)
    assert cues and all(c["street"] is None or c["street"] in names for c in cues)
    assert any(c["street"] in names for c in cues)
    assert [c["km"] for c in cues] == sorted(c["km"] for c in cues) and all(0 <= c["km"] <= km for c in cues)
