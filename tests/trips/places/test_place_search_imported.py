"""search_places without Nominatim: the places of the imported map areas join the offline gazetteer, ranked with
its cities by how the name matched, then population, and a gazetteer city that is one of them is listed once
(trips/places/geocode.py)."""
import pytest

from tests.factories import auth, make_token, make_user
from tests.osm_maps import MapBuilder, map_support_or_skip
from trips.core.db import db
from trips.osm.importer import import_file
from trips.places.geocode import SAME_PLACE_KM, offline

GRENOBLE = (45.17869, 5.71479)  # the gazetteer's point (geonames)


@pytest.fixture
def imported(ctx, tmp_path):
    map_support_or_skip(db.engine)

    def run(builder: MapBuilder):
        return import_file(db.engine, builder.write(tmp_path / "isere.osm.pbf"))

    return run


def isere() -> MapBuilder:
    m = MapBuilder()
    m.node(45.0717, 5.5531, {"place": "village", "name": "Villard-de-Lans", "population": "4000"})
    m.node(45.1885, 5.7245, {"place": "city", "name": "Grenoble", "population": "158000"})  # 1.4 km off
    m.node(45.05, 5.6, {"place": "hamlet", "name": "Grenoble Sud"})
    m.country([(44.5, 5.0), (44.5, 6.5), (45.8, 6.5), (45.8, 5.0)], "FR", "France")
    return m


def test_an_imported_village_the_gazetteer_lacks_is_found_with_its_country(imported):
    assert offline("villard de lans", 5, db.engine) == []  # nothing imported yet, and geonames has no village
    imported(isere())
    assert offline("villard de lans", 5, db.engine) == [
        {"name": "Villard-de-Lans", "lat": 45.0717, "lon": 5.5531, "displayName": "Villard-de-Lans, France",
         "type": "village"}]


def test_a_gazetteer_city_that_is_an_imported_place_comes_once_imported_first(imported):
    imported(isere())
    found = offline("grenoble", 5, db.engine)
    assert [(p["name"], p["type"]) for p in found] == [("Grenoble", "city"), ("Grenoble Sud", "hamlet")]
    assert found[0]["lat"] == 45.1885 and found[0]["displayName"] == "Grenoble, France"
    assert offline("grenoble", 1, db.engine) == found[:1]


def test_a_namesake_farther_than_the_same_place_distance_is_another_place_after_the_city(imported):
    m = MapBuilder()
    m.node(GRENOBLE[0] + (SAME_PLACE_KM + 2) / 111.2, GRENOBLE[1], {"place": "hamlet", "name": "Grenoble"})
    imported(m)
    found = offline("grenoble", 5, db.engine)
    assert [(p["type"], p["displayName"]) for p in found] == [("city", "Grenoble, France"), ("hamlet", "Grenoble")]


def test_without_map_data_the_gazetteer_answers_alone(imported):
    imported(isere())
    assert [(p["name"], p["type"]) for p in offline("grenoble", 5, None)] == [("Grenoble", "city")]


def test_the_rest_search_reads_the_imported_places(client, imported):
    imported(isere())
    headers = auth(make_token(make_user("rider@example.org")))
    body = client.get("/api/geocode/search?q=Villard", headers=headers).get_json()
    assert body["member"][0]["name"] == "Villard-de-Lans" and body["totalItems"] >= 1
