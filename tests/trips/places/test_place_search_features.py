"""Place search finds the named features of the imported map (squares, stations, attractions, streets), not only its
towns, and ranks every answer by how the name matched, then population, then class (docs/RULES.md "Place search").
Before, a square the imported map names was not found, and an imported hamlet came before the world city of its
name."""
import pytest

from tests.extracts import extract
from tests.osm_maps import MapBuilder, line_east, map_support_or_skip, offset_north
from trips.core.db import db
from trips.osm.importer import import_file
from trips.places.geocode import offline


@pytest.fixture
def imported(ctx, tmp_path):
    map_support_or_skip(db.engine)

    def run(builder: MapBuilder | None = None, real: str | None = None):
        path = extract(real) if real else builder.write(tmp_path / "region.osm.pbf")
        return import_file(db.engine, path)

    return run


def _first(query: str) -> dict:
    found = offline(query, 5, db.engine)
    assert found, query
    return found[0]


def _town() -> MapBuilder:
    """Bourgeval (a village) with a square drawn three ways, a station, a museum, a long street and a bus stop."""
    m = MapBuilder()
    m.node(45.0, 5.0, {"place": "village", "name": "Bourgeval", "population": "2400"})
    m.node(*offset_north(45.0, 5.0, 100), {"place": "square", "name": "Place du Marché"})
    m.way([(45.002, 5.002), (45.002, 5.003), (45.003, 5.003), (45.003, 5.002)],
          {"highway": "pedestrian", "place": "square", "name": "Place de l'Église", "area": "yes"}, closed=True)
    outer = m.way([(45.004, 5.004), (45.004, 5.005), (45.005, 5.005), (45.005, 5.004)], {}, closed=True)
    m.relation([("way", outer, "outer")], {"type": "multipolygon", "place": "square", "name": "Place Neuve"})
    m.node(45.006, 5.0, {"railway": "station", "name": "Bourgeval-Gare"})
    m.node(45.007, 5.0, {"tourism": "museum", "name": "Musée Dauphinois"})
    m.node(45.008, 5.0, {"highway": "bus_stop", "name": "Arrêt Mairie"})  # a stop: not a station
    m.node(45.009, 5.0, {"place": "square"})  # unnamed: nothing to find
    street = line_east(45.001, 4.99, 5.0, step_m=100)  # about 5 km: many ways, cells apart
    for k in range(0, len(street) - 1, 5):
        m.way(street[k:k + 6], {"highway": "residential", "name": "Grande Rue"})
    m.way(line_east(45.3, 5.0, 0.5), {"highway": "residential", "name": "Grande Rue"})  # another town's, 33 km
    m.way(line_east(45.01, 5.0, 0.3), {"highway": "service", "name": "Cour\ndes Arts"})  # a line break inside
    return m


def test_every_kind_of_named_feature_of_the_imported_map_is_found(imported):
    assert offline("place du marche", 5, db.engine) == []  # nothing imported yet
    result = imported(_town())
    assert result["counts"]["kept"]["places"] >= 8
    for query, name, kind in [("place du marche", "Place du Marché", "square"),
                              ("PLACE DE L'EGLISE", "Place de l'Église", "square"),
                              ("place neuve", "Place Neuve", "square"),  # a multipolygon relation
                              ("bourgeval-gare", "Bourgeval-Gare", "station"),
                              ("musee dauphinois", "Musée Dauphinois", "attraction"),
                              ("grande rue", "Grande Rue", "street"),
                              ("cour des arts", "Cour\ndes Arts", "street")]:
        first = _first(query)
        assert (first["name"], first["type"]) == (name, kind), query
    assert _first("place du marche")["displayName"] == "Place du Marché, Bourgeval"  # the village it lies in
    assert _first("bourgeval")["type"] == "village"  # before its station: "Bourgeval-Gare" only starts so
    assert offline("arret mairie", 5, db.engine) == []


def test_a_street_of_many_ways_is_one_answer_and_a_namesake_street_elsewhere_another(imported):
    imported(_town())
    streets = [p for p in offline("grande rue", 10, db.engine) if p["type"] == "street"]
    assert len(streets) == 2  # the 5 km street (10 ways over four cells) once, and the other town's
    assert sorted(round(p["lat"], 1) for p in streets) == [45.0, 45.3]


@pytest.mark.parametrize("city, country", [("Paris", "France"), ("London", "United Kingdom"),
                                           ("Helsinki", "Finland")])
def test_a_world_city_comes_first_for_its_own_name_above_imported_namesakes(imported, city, country):
    m = MapBuilder()
    m.node(44.0, 4.0, {"place": "hamlet", "name": city})
    m.node(44.1, 4.0, {"place": "village", "name": city, "population": "800"})
    m.node(44.2, 4.0, {"railway": "station", "name": city})
    m.way(line_east(44.3, 4.0, 0.5), {"highway": "residential", "name": city})
    imported(m)
    found = offline(city, 10, db.engine)
    assert found[0]["displayName"] == f"{city}, {country}" and found[0]["type"] == "city"
    # then the namesakes by population (London, Canada: 422 000; the village: 800), then class; a longer name
    # ("Paris 15 Vaugirard", "Londonderry County Borough") only after every exact one
    ours = [i for i, p in enumerate(found) if p["type"] != "city"]
    assert [found[i]["type"] for i in ours] == ["village", "hamlet", "station", "street"]
    longer = [i for i, p in enumerate(found) if p["name"].lower().startswith(city.lower()) and p["name"] != city]
    assert all(i > ours[-1] for i in longer)


def test_how_the_name_matched_ranks_before_population(imported):
    m = MapBuilder()
    m.node(44.0, 4.0, {"place": "city", "name": "Parisville", "population": "9000000"})
    imported(m)
    found = [p["displayName"] for p in offline("paris", 10, db.engine)]
    assert found[0] == "Paris, France"  # the exact names by population: 2.1 million … Paris, Texas: 25 000
    assert found.index("Parisville") > found.index("Paris, Texas, United States")
    assert _first("parisv")["name"] == "Parisville"


def test_helsinki_s_squares_stations_attractions_and_streets_are_found(imported):
    imported(real="helsinki")
    # (Kauppatori and Hakaniemen tori are multipolygons the extract cut: osmium cannot close their rings.)
    expected = [("Senaatintori", "Senaatintori", "square"), ("kasarmitori", "Kasarmitori", "square"),
                ("RAUTATIENTORI", "Rautatientori", "square"),
                ("tuomiokirkon krypta", "Tuomiokirkon krypta", "attraction"),
                ("helsingin yliopisto", "Helsingin yliopisto", "station"),  # a metro station
                ("mannerheimintie", "Mannerheimintie", "street"),
                ("etelaesplanadi", "Eteläesplanadi", "street")]  # the accent folded
    for query, name, kind in expected:
        first = _first(query)
        assert (first["name"], first["type"]) == (name, kind), (query, first)
    assert _first("senaatintori")["displayName"] == "Senaatintori, Helsinki"
    helsinki = offline("Helsinki", 5, db.engine)
    assert (helsinki[0]["type"], helsinki[0]["displayName"]) == ("city", "Helsinki, Finland")  # once: map and
    assert sum(p["type"] == "city" and p["name"] == "Helsinki" for p in helsinki) == 1  # gazetteer are one place
    assert ("Helsinki", "station") in [(p["name"], p["type"]) for p in helsinki]  # the railway station
