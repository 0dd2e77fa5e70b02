"""`flask osm import`: the three file formats, what is kept, the recorded area, replacement of a region, and
refusals (truncated, not OSM, nothing usable, no PostGIS) that leave the previous import intact."""
import os

import pytest
import sqlalchemy as sa

from tests.osm_maps import MapBuilder, line_east, map_support_or_skip, offset_north
from trips.core.db import db
from trips.osm import store
from trips.osm.importer import import_file
from trips.osm.queries import points_near
from trips.osm.store import MapImportError, install_spatial

BOUNDS = (44.9, 4.9, 45.2, 5.6)


@pytest.fixture
def engine(ctx):
    map_support_or_skip(db.engine)
    return db.engine


def _region(hotel="Hôtel du Lac", bounds=BOUNDS) -> MapBuilder:
    m = MapBuilder(bounds=bounds)
    m.way(line_east(45.0, 5.0, 10), {"highway": "secondary", "maxspeed": "70", "surface": "asphalt",
                                     "cycleway:left": "lane", "fixme": "check"})
    m.way(line_east(45.05, 5.0, 2), {"highway": "proposed"})
    m.way([(45.1, 5.1), (45.1, 5.101), (45.101, 5.101)], {"building": "yes"}, closed=True)
    m.node(45.03, 5.03)  # untagged: never kept
    m.node(*offset_north(45.0, 5.01, 300), {"amenity": "drinking_water"})
    m.node(45.001, 5.1, {"tourism": "hotel", "amenity": "restaurant", "name": hotel, "stars": "3",
                         "website": "https://example.org", "note": "not kept"})
    m.way([(45.003, 5.05), (45.004, 5.05), (45.004, 5.051), (45.003, 5.051)],
          {"tourism": "camp_site", "name": "Camping"}, closed=True)
    m.way([(45.0, 5.3), (44.99, 5.3)], {"route": "ferry", "name": "Bac"})
    m.node(45.002, 5.2, {"place": "village", "name": "Saint-Étienne", "population": "1 200"})
    m.country([(44.5, 4.5), (44.5, 6.0), (45.5, 6.0), (45.5, 4.5)], "FR", "France")
    return m


def _rows(sql: str, **params):
    with db.engine.connect() as conn:
        return conn.execute(sa.text(sql), params).all()


@pytest.mark.parametrize("ext", ["osm", "osm.pbf", "osm.bz2"])
def test_each_format_keeps_what_the_enrichments_read(engine, tmp_path, ext):
    path = _region().write(tmp_path / f"drome.{ext}")
    result = import_file(engine, path)
    assert result["name"] == "drome" and result["bbox"] == BOUNDS and result["bbox_source"] == "header"
    assert result["counts"]["kept"] == {"points": 4, "ways": 1, "ferries": 1, "places": 1, "boundaries": 1, "water": 0}
    points = {(k, s, n) for k, s, n in _rows("SELECT kind, subkind, name FROM osm_point")}
    assert points == {("water", "drinking_water", None), ("accommodation", "hotel", "Hôtel du Lac"),
                      ("resupply", "restaurant", "Hôtel du Lac"), ("accommodation", "camp_site", "Camping")}
    hotel = points_near(45.001, 5.1, 10, kinds=["accommodation"])[0]
    assert hotel.tags == {"name": "Hôtel du Lac", "stars": "3", "website": "https://example.org"}
    assert hotel.tag_count == 6
    camp = points_near(45.0035, 5.0505, 10, kinds=["accommodation"])[0]
    assert camp.osm_type == "w" and camp.name == "Camping"  # a closed way becomes its centre
    way = _rows("SELECT highway, surface, maxspeed, cycleway_left, length_m FROM osm_way")
    assert [w[:4] for w in way] == [("secondary", "asphalt", "70", "lane")]
    assert way[0][4] == pytest.approx(10_000, rel=0.02)
    assert _rows("SELECT name, place, rank, population FROM osm_place") == [("Saint-Étienne", "village", 3, 1200)]
    assert _rows("SELECT iso, name FROM osm_boundary") == [("FR", "France")]
    assert _rows("SELECT name FROM osm_ferry") == [("Bac",)]
    if engine.dialect.name == "sqlite":  # the R*Tree holds one box per row
        assert _rows("SELECT count(*) FROM osm_point_rtree") == [(4,)]


def test_without_a_header_box_the_area_is_the_data_extent(engine, tmp_path):
    m = MapBuilder()
    m.node(45.0, 5.0, {"amenity": "pharmacy"})
    m.node(45.5, 5.25, {"shop": "bakery"})
    result = import_file(engine, m.write(tmp_path / "small.osm.pbf"))
    assert result["bbox_source"] == "data"
    assert result["bbox"] == pytest.approx((45.0, 5.0, 45.5, 5.25))


def test_a_new_import_of_a_region_replaces_it_and_other_regions_stay(engine, tmp_path):
    import_file(engine, _region("Old Hotel").write(tmp_path / "drome.osm.pbf"))
    other = MapBuilder()
    other.node(46.0, 6.0, {"amenity": "drinking_water"})
    import_file(engine, other.write(tmp_path / "savoie.osm"))
    (tmp_path / "v2").mkdir()
    result = import_file(engine, _region("New Hotel").write(tmp_path / "v2" / "drome.osm.pbf"))
    assert len(result["replaced"]) == 1
    names = [p.name for p in points_near(45.001, 5.1, 10, kinds=["accommodation"])]
    assert names == ["New Hotel"]
    assert sorted(_rows("SELECT name, status FROM osm_area")) == [("drome", "ready"), ("savoie", "ready")]
    assert _rows("SELECT count(*) FROM osm_point WHERE name = 'Old Hotel'") == [(0,)]  # purged, not hidden
    assert points_near(46.0, 6.0, 10)  # the other region is untouched
    if engine.dialect.name == "sqlite":  # the purge took the replaced rows' boxes with them
        for table in ("osm_point", "osm_way", "osm_place", "osm_boundary", "osm_ferry"):
            assert _rows(f"SELECT count(*) FROM {table}_rtree") == _rows(f"SELECT count(*) FROM {table}")


def _assert_previous_intact():
    assert [p.name for p in points_near(45.001, 5.1, 10, kinds=["accommodation"])] == ["Old Hotel"]
    assert _rows("SELECT name, status FROM osm_area") == [("drome", "ready")]
    assert _rows("SELECT count(*) FROM osm_point") == [(4,)]  # nothing of the refused file stayed


@pytest.mark.parametrize("ext", ["osm", "osm.pbf", "osm.bz2"])
def test_a_truncated_file_is_refused_and_the_previous_import_stays(engine, tmp_path, ext):
    import_file(engine, _region("Old Hotel").write(tmp_path / "drome.osm.pbf"))
    big = _region("New Hotel")
    for i in range(3000):  # enough blocks that the cut falls inside the data
        big.node(45.0 + i * 1e-5, 5.0, {"amenity": "bench" if i % 2 else "drinking_water"})
    (tmp_path / "v2").mkdir()
    path = big.write(tmp_path / "v2" / f"drome.{ext}")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(MapImportError, match="not a complete OpenStreetMap file"):
        import_file(engine, path)
    _assert_previous_intact()


@pytest.mark.parametrize("name, content", [
    ("drome.osm", b"<?xml version='1.0'?><gpx version='1.1'><trk><trkseg/></trk></gpx>"),
    ("drome.osm.pbf", os.urandom(4096)),
    ("drome.osm.bz2", b"BZh91AY&SY not really bzip2"),
])
def test_a_file_that_is_not_osm_is_refused_and_the_previous_import_stays(engine, tmp_path, name, content):
    import_file(engine, _region("Old Hotel").write(tmp_path / "drome.osm.pbf"))
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / name).write_bytes(content)
    with pytest.raises(MapImportError, match="not a complete OpenStreetMap file"):
        import_file(engine, tmp_path / "v2" / name)
    _assert_previous_intact()


def test_other_extensions_empty_files_and_useless_files_are_refused(engine, tmp_path):
    (tmp_path / "route.gpx").write_text("<gpx/>")
    with pytest.raises(MapImportError, match=r"FILE: expected .*\.osm\.pbf, \.osm or \.osm\.bz2"):
        import_file(engine, tmp_path / "route.gpx")
    (tmp_path / "empty.osm.pbf").write_bytes(b"")
    with pytest.raises(MapImportError, match="empty"):
        import_file(engine, tmp_path / "empty.osm.pbf")
    bare = MapBuilder()
    bare.way([(45.0, 5.0), (45.1, 5.0)], {"building": "yes"})
    with pytest.raises(MapImportError, match="holds no roads, places or points of interest"):
        import_file(engine, bare.write(tmp_path / "bare.osm"))
    with pytest.raises(MapImportError, match="--name"):
        import_file(engine, _region().write(tmp_path / "ok.osm"), name="../etc")
    assert _rows("SELECT count(*) FROM osm_area") == [(0,)]


def test_the_cli_imports_with_progress_on_stderr_and_refuses_with_a_sentence(app, engine, tmp_path):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["osm", "import", str(_region().write(tmp_path / "drome.osm.pbf"))])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("imported drome: 4 points, 1 ways, 1 ferries, 1 places, 1 boundaries")
    assert result.stderr.count("rows/s") == 1  # one line for a small file: throttled, and the final counts
    assert "read 3 tagged nodes, 4 ways, 1 boundaries; kept 4 points, 1 ways" in result.stderr
    assert "drome" in runner.invoke(args=["osm", "list"]).stdout
    (tmp_path / "bad.osm.pbf").write_bytes(b"garbage" * 100)
    refused = runner.invoke(args=["osm", "import", str(tmp_path / "bad.osm.pbf")])
    assert refused.exit_code == 1 and "bad.osm.pbf is not a complete OpenStreetMap file" in refused.stderr


class _NoPostgis:
    """A PostgreSQL connection whose server offers no PostGIS extension (the catalogue answers nothing)."""

    class dialect:
        name = "postgresql"

    def __init__(self):
        self.statements = []

    def exec_driver_sql(self, sql):
        self.statements.append(sql)
        return type("R", (), {"scalar": staticmethod(lambda: None)})()


def test_postgresql_without_postgis_migrates_and_the_import_says_what_to_install():
    conn = _NoPostgis()
    assert install_spatial(conn, required=False) is False  # the migration goes on without a spatial index
    assert not any("ALTER" in s or "CREATE" in s for s in conn.statements)
    with pytest.raises(MapImportError) as refused:
        install_spatial(_NoPostgis(), required=True)
    assert "apt-get install postgresql-15-postgis-3" in refused.value.message
    assert "CREATE EXTENSION postgis" in refused.value.message
    assert store.NO_POSTGIS == refused.value.message


def test_an_unfinished_import_left_by_a_killed_process_is_cleaned_by_the_next(engine, tmp_path):
    area_id, _ = store.begin_area(engine, "drome", "drome.osm.pbf")  # a loading area nobody will finish
    loader = store.Loader(engine)
    loader.write({"osm_point": (("area_id", "osm_type", "osm_id", "kind", "subkind", "lat", "lon", "tags",
                                 "tag_count") + (("geom",) if engine.dialect.name == "postgresql" else ()),
                                [(area_id, "n", 1, "water", "drinking_water", 45.0, 5.0, "{}", 1)
                                 + (("SRID=4326;POINT(5 45)",) if engine.dialect.name == "postgresql" else ())])})
    loader.close()
    assert points_near(45.0, 5.0, 10) == []  # loading rows are invisible
    result = import_file(engine, _region().write(tmp_path / "drome.osm.pbf"))
    assert result["notes"] and result["notes"][0].startswith("removed an unfinished import of drome")
    assert points_near(45.0, 5.0, 10) == []  # the leftover row is gone, not made visible
    assert _rows("SELECT count(*) FROM osm_point") == [(4,)]


@pytest.mark.parametrize("tags, kinds", [
    ({"railway": "station"}, [("station", "station")]),
    ({"railway": "halt"}, [("station", "halt")]),
    ({"railway": "station", "station": "subway"}, []),  # no bicycles on the metro
    ({"shop": "bicycle"}, [("bike_shop", "repair")]),
    ({"shop": "bicycle", "service:bicycle:repair": "no"}, [("bike_shop", "shop")]),
    ({"amenity": "bicycle_repair_station"}, [("bike_shop", "repair_station")]),
    ({"healthcare": "pharmacy"}, [("health", "pharmacy")]),
    ({"amenity": "dentist"}, []),
    ({"man_made": "water_tap", "drinking_water": "yes"}, [("water", "water_tap")]),
    ({"man_made": "water_tap"}, []),  # not known to be drinkable
    ({"amenity": "fountain", "drinking_water": "yes"}, [("water", "fountain")]),
    ({"amenity": "fountain"}, []),  # an ornamental fountain
    ({"amenity": "cafe", "shop": "clothes"}, []),  # a boutique's café corner is no place to buy food
    ({"amenity": "cafe", "shop": "bakery"}, [("resupply", "cafe"), ("resupply", "bakery")]),
    ({"tourism": "shelter"}, []),  # not lodging (docs/RULES.md "Accommodations")
    ({"tourism": "wilderness_hut"}, [("accommodation", "wilderness_hut")]),
    ({"shop": "farm"}, [("resupply", "farm")]),
    ({"shop": "clothes"}, []),
    ({"amenity": "place_of_worship", "religion": "christian"}, [("culture", "church")]),
    ({"historic": "memorial"}, []),
    ({"ford": "yes", "highway": "track"}, [("ford", "ford")]),
    ({"amenity": "charging_station"}, [("charging", "charging_station")]),
])
def test_what_each_kind_of_point_is(tags, kinds):
    from trips.osm.tags import point_kinds

    assert point_kinds(tags) == kinds


def test_node_locations_can_live_in_a_file_that_is_removed_afterwards(engine, tmp_path):
    cache = tmp_path / "nodes.cache"
    result = import_file(engine, _region().write(tmp_path / "drome.osm.pbf"), node_cache=cache)
    assert result["counts"]["kept"]["ways"] == 1 and not cache.exists()
    cache.write_bytes(b"")
    with pytest.raises(MapImportError, match="--node-cache: the file exists already"):
        import_file(engine, _region().write(tmp_path / "drome.osm.pbf"), node_cache=cache)


def test_a_value_over_the_osm_limits_is_refused_in_one_line(app, engine, tmp_path):
    """libosmium refuses a tag value over 256 characters (1 024 bytes) with a ValueError, not the RuntimeError
    of other bad files: it is the same one-line refusal, and the previous import stays."""
    import_file(engine, _region("Old Hotel").write(tmp_path / "drome.osm.pbf"))
    (tmp_path / "v2").mkdir()
    path = tmp_path / "v2" / "drome.osm"
    path.write_text("<?xml version='1.0' encoding='UTF-8'?>\n<osm version='0.6' generator='t'>\n"
                    "<node id='1' lat='45.0' lon='5.0' version='1'><tag k='amenity' v='drinking_water'/>"
                    f"<tag k='name' v='{'x' * 1100}'/></node>\n</osm>\n")
    with pytest.raises(MapImportError, match=r"breaks OpenStreetMap's limits \(OSM tag value is too long\)"):
        import_file(engine, path)
    _assert_previous_intact()
    refused = app.test_cli_runner().invoke(args=["osm", "import", str(path)])
    assert refused.exit_code == 1 and "Traceback" not in refused.output and refused.exception.__class__ is SystemExit
    assert refused.stderr.startswith("Error: FILE: drome.osm breaks OpenStreetMap's limits") and "x" * 50 not in refused.stderr


def test_a_value_error_of_our_own_is_not_taken_for_a_bad_file(engine, tmp_path, monkeypatch):
    from trips.osm import importer

    def broken(self, obj):
        raise ValueError("a bug of ours")

    monkeypatch.setattr(importer._Collector, "node", broken)
    with pytest.raises(ValueError, match="a bug of ours"):
        import_file(engine, _region().write(tmp_path / "drome.osm.pbf"))
    assert _rows("SELECT count(*) FROM osm_area") == [(0,)]
