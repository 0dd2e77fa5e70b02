"""Real OpenStreetMap extracts (tests/extracts.py) go through `flask osm import`: every extract a package ships is
read whole, and what it holds is kept (its roads, its hotels, its restaurants, its named places)."""
import osmium
import pytest
import sqlalchemy as sa

from tests.extracts import EXTRACTS, extract
from tests.osm_maps import map_support_or_skip
from trips.core.db import db
from trips.osm.importer import import_file


class _Census(osmium.SimpleHandler):
    """What the file holds, counted by osmium itself: the reference the import is held to."""

    def __init__(self):
        super().__init__()
        self.highways = 0
        self.hotels = 0

    def way(self, way):
        if "highway" in way.tags:
            self.highways += 1

    def node(self, node):
        if node.tags.get("tourism") == "hotel":
            self.hotels += 1


@pytest.mark.parametrize("name", sorted(EXTRACTS))
def test_a_real_extract_is_imported_whole(ctx, name):
    map_support_or_skip(db.engine)
    path = extract(name)
    census = _Census()
    census.apply_file(str(path))
    result = import_file(db.engine, path)
    assert result["counts"]["kept"]["ways"] > 0
    with db.engine.connect() as conn:
        hotels = conn.execute(sa.text("SELECT count(*) FROM osm_point WHERE subkind = 'hotel' AND osm_type = 'n'")
                              ).scalar()
    assert hotels == census.hotels
    assert census.highways >= result["counts"]["kept"]["ways"] > census.highways // 4
