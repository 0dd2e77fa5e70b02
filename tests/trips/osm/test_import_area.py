"""The area an import answers for (docs/RULES.md "Map coverage"): the file's header box joined by the extent of the
roads, ferries, points and places it kept, so a waypoint on any imported road is inside it. Before, the header
alone was trusted: a file whose header box is smaller than its data kept its roads, then refused waypoints on them
as "no map data covers this point"."""
import osmium
import pytest
import sqlalchemy as sa

from tests.extracts import EXTRACTS, extract
from tests.osm_maps import MapBuilder, line_east, map_support_or_skip
from trips.core.db import db
from trips.errors import Invalid
from trips.osm import geometry as G
from trips.osm.importer import import_file
from trips.services.planned import check_covered

HEADER = (45.0, 5.0, 45.01, 5.01)


@pytest.fixture
def engine(ctx):
    map_support_or_skip(db.engine)
    return db.engine


def _vertices(table: str) -> list[tuple[float, float]]:
    with db.engine.connect() as conn:
        lines = [row[0] for row in conn.execute(sa.text(f"SELECT line FROM {table}"))]
    return [(float(lat), float(lon)) for line in lines for lat, lon in G.decode(line)]


def _inside(box, points) -> bool:
    return all(box[0] <= lat <= box[2] and box[1] <= lon <= box[3] for lat, lon in points)


def _beyond_the_header() -> MapBuilder:
    """A header box of about 1 km, a road leaving it for 3 km east and a village at its far end."""
    m = MapBuilder(bounds=HEADER)
    road = line_east(45.005, 5.005, 3.0)
    m.way(road, {"highway": "residential", "name": "Chemin du Lac"})
    m.node(45.006, road[-1][1], {"place": "village", "name": "Lac"})
    return m


def test_a_road_leaving_the_header_box_is_covered_by_the_data_extent(engine, tmp_path):
    result = import_file(engine, _beyond_the_header().write(tmp_path / "lac.osm.pbf"))
    road = _vertices("osm_way")
    assert road[-1][1] > HEADER[3] + 0.02  # the data reaches ~2.5 km past the header's east edge
    assert result["bbox_source"] == "union"
    assert _inside(result["bbox"], road + _vertices("osm_edge"))
    assert result["bbox"][:3] == pytest.approx(HEADER[:3]) and result["bbox"][3] == pytest.approx(road[-1][1])
    check_covered([list(road[0]), list(road[-1]), [45.006, road[-1][1]]])  # refused "no map data" before


def test_the_area_is_the_header_when_it_holds_the_data_and_never_grows_with_rivers_or_borders(engine, tmp_path):
    m = MapBuilder(bounds=HEADER)
    m.way(line_east(45.005, 5.002, 0.5), {"highway": "track"})
    m.way(line_east(45.004, 4.9, 30.0), {"waterway": "river", "name": "Long"})  # far beyond on both sides
    m.country([(44.0, 4.0), (44.0, 6.0), (46.0, 6.0), (46.0, 4.0)], "FR", "France")
    result = import_file(engine, m.write(tmp_path / "lac.osm.pbf"))
    assert result["counts"]["kept"]["water"] == 1 and result["counts"]["kept"]["boundaries"] == 1
    assert result["bbox"] == HEADER and result["bbox_source"] == "header"
    with pytest.raises(Invalid) as refused:  # on the river, 20 km east: no map data there
        check_covered([[45.005, 5.006], [45.004, 5.2]])
    assert list(refused.value.errors) == ["waypoints[1]"]


def test_the_cli_says_the_area_it_answers_for(app, engine, tmp_path):
    out = app.test_cli_runner().invoke(args=["osm", "import", "--quiet",
                                             str(_beyond_the_header().write(tmp_path / "lac.osm.pbf"))])
    assert out.exit_code == 0, out.output
    line = out.stdout.strip()
    assert line.startswith("imported lac: 0 points, 1 ways")
    assert "answers for 45.0000,5.0000 – 45.0100,5.0431" in line  # the header box widened to the road
    assert "(1.1 × 3.4 km)" in line and "the file's header box and the data beyond it" in line


def _rewritten_with_header(source, target, box) -> None:
    """`source` written again as `target` with the header box `box` (min_lat, min_lon, max_lat, max_lon)."""
    header = osmium.io.Header()
    header.add_box(osmium.osm.Box(box[1], box[0], box[3], box[2]))
    with osmium.SimpleWriter(str(target), header=header, overwrite=True) as writer:
        for obj in osmium.FileProcessor(str(source)):
            writer.add(obj)


def test_a_real_extract_whose_header_box_is_half_its_data_accepts_waypoints_on_every_road(engine, tmp_path):
    source = extract("wellington")
    reader = osmium.io.Reader(str(source), osmium.osm.osm_entity_bits.NOTHING)
    box = reader.header().box()
    reader.close()
    south, west, north, east = box.bottom_left.lat, box.bottom_left.lon, box.top_right.lat, box.top_right.lon
    half = (south, west, (south + north) / 2, east)
    _rewritten_with_header(source, tmp_path / "wellington.osm.pbf", half)
    result = import_file(engine, tmp_path / "wellington.osm.pbf")
    roads, edges = _vertices("osm_way"), _vertices("osm_edge")
    assert roads and max(lat for lat, _ in roads) > half[2]  # the data does reach past the header
    assert _inside(result["bbox"], roads + edges) and result["bbox_source"] == "union"
    with db.engine.connect() as conn:
        lines = [G.decode(row[0]) for row in conn.execute(sa.text("SELECT line FROM osm_way"))]
    for k in range(0, len(lines), 50):  # a waypoint on every imported road (check_covered names the first refused)
        check_covered([[float(v) for v in line[len(line) // 2]] for line in lines[k:k + 50]])


@pytest.mark.parametrize("name", sorted(EXTRACTS))
def test_every_real_extract_answers_for_all_it_kept(engine, name):
    result = import_file(engine, extract(name))
    assert _inside(result["bbox"], _vertices("osm_way") + _vertices("osm_ferry") + _vertices("osm_edge"))
    with db.engine.connect() as conn:
        points = conn.execute(sa.text("SELECT lat, lon FROM osm_point UNION ALL SELECT lat, lon FROM osm_place")).all()
    assert _inside(result["bbox"], points)
