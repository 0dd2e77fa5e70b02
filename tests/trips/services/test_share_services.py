"""Each day of the share page lists its night, food, water and bike shops by name or kind at their km, groceries first;
what is not known is said in words, never an empty list (trips/readmodels/amenities.py, trips/api/share.py)."""
import io
import re

import pytest
from lxml import etree

from oauth.kernel.models import User
from tests.factories import auth, make_token
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import atomic, db
from trips.models import Computation, Stage
from trips.readmodels.amenities import day_services
from trips.services.sharing import share_trip
from trips.services.trips import import_gpx

FOOD = [{"name": "Le Bistrot", "category": "cafe", "km": 3.0}, {"name": "Carrefour", "category": "supermarket", "km": 10.2},
        {"name": None, "category": "convenience", "km": 25.0}, {"name": "Chez Paul", "category": "bakery", "km": 12.0},
        {"name": "Le Zinc", "category": "bar", "km": 1.0}, {"name": "Auberge", "category": "restaurant", "km": 30.0}]


def services_of(html: str) -> dict:
    """{day number: {class: visible text}} of the page's service lines."""
    tree, out = etree.HTML(html), {}
    for n, li in enumerate(tree.xpath("//ol[@class='days']/li"), start=1):
        out[n] = {p.get("class"): re.sub(r"[ \t\r\n]+", " ", "".join(p.itertext())).strip()
                  for p in li.xpath(".//p[contains(@class, 'services') or contains(@class, 'stay')]")}
    return out


def imported(tmp_path, bounds, name="region"):
    from tests.enrich_helpers import import_map
    from tests.osm_maps import MapBuilder

    m = MapBuilder(bounds=bounds)
    m.node(bounds[0] + 1e-4, bounds[1] + 1e-4, {"tourism": "hotel"})  # the map is never empty
    import_map(m, tmp_path, name)


@pytest.fixture
def shared(rider, tmp_path):
    user, _ = rider
    imported(tmp_path, (44.0, 4.0, 47.0, 8.0))  # a map holding the whole trip and the land around it
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(2400, step_m=100.0), name="Services")), {})
    with atomic():
        days = db.session.query(Stage).filter_by(trip_id=trip.id).order_by(Stage.position).all()
        assert len(days) >= 2
        for later in days[1:]:  # on a map, not looked up yet (the fixture has no map: say the days are on one)
            later.enrichment = {**(later.enrichment or {}), "mapCoverage": {"share": 1.0, "offMapKm": []}}
        first = days[0]
        first.enrichment = {**(first.enrichment or {}), "resupply": FOOD, "waterPoints": [],
                            "mapCoverage": {"share": 1.0, "offMapKm": []},
                            "bikeShops": [{"name": None, "kind": "repair_station", "km": 4.5}]}
        first.alerts_by_group = {"pois": [], "water_point": [], "bike_shop": [], "accommodations": []}
        for done in db.session.query(Computation).filter_by(trip_id=trip.id):  # the analysis ran
            done.status = "done"
        running = db.session.query(Computation).filter_by(trip_id=trip.id, name="bike_shops").one_or_none()
        if running is None:
            running = Computation(trip_id=trip.id, name="bike_shops", generation=0)
            db.session.add(running)
        running.status = "running"
    return user, trip.id, share_trip(user, trip.id)[0].short_code


def test_a_day_lists_what_it_offers_and_says_what_is_not_known(client, shared):
    _, trip_id, code = shared
    days = services_of(client.get(f"/s/{code}").get_data(as_text=True))
    first, second = days[1], days[2]
    # groceries first (supermarket, convenience store, bakery), then a café: the four listed in route order
    assert first["services food"] == ("Food: Le Bistrot (km 3), Carrefour (km 10.2), Chez Paul (km 12), "
                                      "convenience store (km 25) and 2 more")
    assert first["services water"] == "Water: nothing found along the day"
    # the bike shops' computation runs again: being looked up, whatever it found before
    assert first["services bikeShops"] == "Bike shops: being looked up"
    assert first["stay unknown"] == "Night: nowhere to sleep found near the day's end"
    assert second["services food"] == "Food: not looked up yet"
    assert second["stay unknown"] == "Night: not looked up yet"


def test_a_night_is_said_of_the_part_of_its_search_the_map_covers(client, shared, tmp_path):
    """The map ends about 1 km past day 1's end: "nowhere to sleep found" is said of the km around it the map
    covers, never of the whole 5 km search."""
    from trips.core.db import db as database
    from trips.models import Trip

    user, trip_id, code = shared
    end = database.session.get(Trip, trip_id).stages[0]
    # the same region imported again, smaller: it replaces the first
    imported(tmp_path, (end.end_lat - 0.05, end.end_lon - 0.05, end.end_lat + 0.05, end.end_lon + 0.0127))
    said = services_of(client.get(f"/s/{code}").get_data(as_text=True))[1]["stay unknown"]
    assert said.startswith("Night: nowhere to sleep found within the ")
    km = float(said.split("within the ")[1].split(" km")[0])
    assert 0.5 <= km <= 1.0 and said.endswith("that the imported map covers; beyond it unknown")


def test_nothing_found_is_said_partial_where_the_map_holds_the_line_but_not_around_it(client, shared, tmp_path):
    """A map hugging the whole trip within 300 m: the day's line is on it, but not the 2 km the searches look at
    around it, so "nothing found" says it covered only part."""
    from trips.models import Trip

    _, trip_id, code = shared
    points = [p for s in db.session.get(Trip, trip_id).stages for p in s.geometry]
    lats, lons = [p[0] for p in points], [p[1] for p in points]
    imported(tmp_path, (min(lats) - 0.003, min(lons) - 0.004, max(lats) + 0.003, max(lons) + 0.004))
    first = services_of(client.get(f"/s/{code}").get_data(as_text=True))[1]
    assert first["services water"] == "Water: nothing found along the day (the map covers only part of the day)"


def test_the_same_in_french(client, shared):
    user, _, code = shared
    with atomic():
        db.session.get(User, user.id).locale = "fr"
    first = services_of(client.get(f"/s/{code}").get_data(as_text=True))[1]
    assert first["services food"] == ("Ravitaillement\u00a0: Le Bistrot (km\u00a03), Carrefour (km\u00a010,2), "
                                      "Chez Paul (km\u00a012), supérette (km\u00a025) et 2 autres")
    assert first["services water"] == "Eau\u00a0: rien trouvé le long de l'étape"
    assert first["stay unknown"] == "Nuit\u00a0: aucun hébergement trouvé près de l'arrivée"


def test_what_a_day_offers_by_state():
    day = {"isRestDay": False, "groups": {"pois": "partial", "water_point": "failed", "bike_shop": "done"},
           "resupply": [], "waterPoints": None, "bikeShops": [{"name": "Cycles", "kind": "repair", "km": 2.0}]}
    found = day_services(day)
    assert found["food"] == {"state": "none", "partial": True, "items": [], "more": 0}  # none on the part looked at
    assert found["water"]["state"] == "failed"
    assert found["bikeShops"]["items"] == [{"name": "Cycles", "kind": "repair", "km": 2.0}]
    assert day_services({**day, "groups": {}})["bikeShops"]["state"] == "unknown"  # data without a status: unknown
    assert day_services({**day, "isRestDay": True}) == {}
    off = day_services({**day, "mapCoverage": {"share": 0, "offMapKm": [[0, 20]]}})
    assert {k: v["state"] for k, v in off.items()} == {"food": "off_map", "water": "off_map", "bikeShops": "off_map"}


def test_the_page_links_the_gpx_and_the_fit_course(client, shared):
    _, _, code = shared
    html = client.get(f"/s/{code}").get_data(as_text=True)
    links = etree.HTML(html).xpath("//a[@class='button']/@href")
    assert f"/s/{code}.gpx" in links and f"/s/{code}.fit" in links
    fit = client.get(f"/s/{code}.fit")
    assert fit.status_code == 200 and fit.data[8:12] == b".FIT"  # the FIT header's signature


def test_a_day_off_every_imported_map_says_so(client, shared):
    """No imported map touches the day (its stored coverage 0): the lookups failed for that reason, and the page says
    what to do rather than "could not be looked up"."""
    _, trip_id, code = shared
    with atomic():
        second = db.session.query(Stage).filter_by(trip_id=trip_id, position=1).one()
        second.enrichment = {**(second.enrichment or {}), "mapCoverage": {"share": 0, "offMapKm": [[0.0, 80.0]]}}
        for c in db.session.query(Computation).filter_by(trip_id=trip_id):
            c.status = "failed"
    day = services_of(client.get(f"/s/{code}").get_data(as_text=True))[2]
    assert day["services food"] == "Food: no map data here: import this region to look"
    assert day["stay unknown"] == "Night: no map data here: import this region to look"
    first = services_of(client.get(f"/s/{code}").get_data(as_text=True))[1]
    assert "no map data" not in " ".join(first.values())  # the first day is on the map


def test_a_finished_day_off_the_map_says_so_never_not_looked_up_yet(client, shared):
    """The analysis finished. Day 2 lies on the map for its first 30 km only: its food and water were looked up on that
    part, but its places to sleep (searched around its end) were not, as its end is off the map: the page says so,
    and so does REST's group status; day 3, wholly off the map, says so in every map group."""
    user, trip_id, code = shared
    with atomic():
        days = db.session.query(Stage).filter_by(trip_id=trip_id).order_by(Stage.position).all()
        second = days[1]
        second.enrichment = {**(second.enrichment or {}), "resupply": [], "waterPoints": [], "bikeShops": [],
                             "mapCoverage": {"share": 0.37, "offMapKm": [[30.0, round(second.distance, 1)]]}}
        second.alerts_by_group = {"pois": [], "water_point": [], "bike_shop": [], "terrain": []}
        if len(days) > 2:
            days[2].enrichment = {**(days[2].enrichment or {}),
                                  "mapCoverage": {"share": 0.0, "offMapKm": [[0.0, round(days[2].distance, 1)]]}}
        for c in db.session.query(Computation).filter_by(trip_id=trip_id):
            c.status = "done"
    page = services_of(client.get(f"/s/{code}").get_data(as_text=True))
    assert page[2]["stay unknown"] == "Night: the day's end is off the imported map: import this region to look"
    assert page[2]["services food"] == "Food: nothing found along the day (the map covers only part of the day)"
    assert not any("not looked up yet" in words for day in page.values() for words in day.values()), page
    headers = auth(make_token(user))
    stages = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()["stages"]
    assert stages[1]["groups"]["accommodations"] == "off map" and stages[1]["groups"]["pois"] == "partial"
    assert stages[0]["groups"]["accommodations"] == "done"  # on the map: looked up, nothing near
    if len(stages) > 2:
        assert stages[2]["groups"]["pois"] == "off map" and stages[2]["groups"]["daylight"] == "not computed"
        assert page[3]["stay unknown"] == "Night: no map data here: import this region to look"
    with atomic():
        db.session.get(User, user.id).locale = "fr"
    second = services_of(client.get(f"/s/{code}").get_data(as_text=True))[2]
    assert second["stay unknown"] == ("Nuit\u00a0: l'arrivée de l'étape est hors de la carte importée\u00a0: importez "
                                      "cette région pour chercher")
