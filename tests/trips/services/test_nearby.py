"""Places near a GPS fix (GET /api/trips/{id}/nearby-pois), from the imported map only: by category and radius,
nearest first, with how much of the circle the map covers; no map there says so (pois null), never an empty list."""
import io
import math

import pytest

from tests.enrich_helpers import import_map
from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.osm_maps import MapBuilder, offset_north
from trips.services.nearby import map_coverage
from trips.services.trips import import_gpx

LAT, LON = 45.0, 5.0
BOUNDS = (44.9, 4.9, 45.1, 5.1)  # the imported area: about 22 × 16 km around the fix
GPX = gpx_from_points(make_points(300), name="Nearby")


def east(lat, lon, metres):
    return lat, lon + metres / (111_320.0 * math.cos(math.radians(lat)))


@pytest.fixture
def mapped(ctx, tmp_path):
    m = MapBuilder(bounds=BOUNDS)
    m.node(*offset_north(LAT, LON, 300), {"amenity": "drinking_water", "name": "Fontaine du centre"})
    m.node(*east(LAT, LON, 1500), {"man_made": "water_tap", "drinking_water": "yes"})
    m.node(*offset_north(LAT, LON, 2600), {"amenity": "drinking_water"})  # beyond 2 km
    m.node(*offset_north(LAT, LON, -800), {"shop": "bicycle", "name": "Cycles Martin", "opening_hours": "Tu-Sa 09:00-18:00",
                                           "phone": "+33 4 00 00 00 00", "website": "https://martin.example"})
    m.node(*east(LAT, LON, 200), {"amenity": "fountain"})  # not marked drinkable: not water
    import_map(m, tmp_path)


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(GPX), {})


def ask(client, headers, trip, **params):
    return client.get(f"/api/trips/{trip.id}/nearby-pois", query_string=params, headers=headers)


def test_water_within_the_radius_nearest_first(client, rider, mapped, trip):
    response = ask(client, rider[1], trip, category="water", lat=LAT, lon=LON)
    assert response.status_code == 200, response.get_data(as_text=True)
    body = response.get_json()
    assert body["mapCoverage"] == "full" and body["radius"] == 2000 and body["more"] is False
    assert [(p["name"], p["kind"]) for p in body["pois"]] == [("Fontaine du centre", "drinking_water"),
                                                               (None, "water_tap")]
    assert [p["distanceMeters"] for p in body["pois"]] == [pytest.approx(300, abs=5), pytest.approx(1500, abs=10)]
    wider = ask(client, rider[1], trip, category="water", lat=LAT, lon=LON, radius=3000, limit=1).get_json()
    assert len(wider["pois"]) == 1 and wider["more"] is True


def test_a_bike_shop_with_what_the_map_knows(client, rider, mapped, trip):
    body = ask(client, rider[1], trip, category="bike_shop", lat=LAT, lon=LON, radius=1000).get_json()
    shop = body["pois"][0]
    assert shop["name"] == "Cycles Martin" and shop["category"] == "bike_shop" and shop["kind"] == "repair"
    assert shop["openingHours"] == "Tu-Sa 09:00-18:00" and shop["phone"] == "+33 4 00 00 00 00"
    assert shop["website"] == "https://martin.example" and shop["osmType"] == "node"


def test_none_there_on_the_map_is_an_empty_list(client, rider, mapped, trip):
    body = ask(client, rider[1], trip, category="station", lat=LAT, lon=LON).get_json()
    assert body["mapCoverage"] == "full" and body["pois"] == []


def test_off_the_map_is_said_not_an_empty_list(client, rider, mapped, trip):
    body = ask(client, rider[1], trip, category="water", lat=48.0, lon=2.0).get_json()
    assert body["mapCoverage"] == "none" and body["pois"] is None and "import the region" in body["reason"]
    edge = ask(client, rider[1], trip, category="water", lat=45.095, lon=LON, radius=2000).get_json()
    assert edge["mapCoverage"] == "partial" and isinstance(edge["pois"], list)


def test_without_any_map_nothing_is_claimed(client, rider, trip):
    body = ask(client, rider[1], trip, category="water", lat=LAT, lon=LON).get_json()
    assert body["mapCoverage"] == "none" and body["pois"] is None


@pytest.mark.parametrize("params, field", [
    ({"category": "pizza"}, "category"), ({"lat": 91}, "lat"), ({"lon": "east"}, "lon"), ({"radius": 10}, "radius"),
    ({"radius": 20_001}, "radius"), ({"limit": 0}, "limit"), ({"limit": 51}, "limit"), ({"zoom": 3}, "zoom"),
])
def test_bad_parameters_are_named(client, rider, trip, params, field):
    response = ask(client, rider[1], trip, **{"category": "water", "lat": LAT, "lon": LON, **params})
    assert response.status_code == 400 and field in response.get_json()["errors"]
    assert "pizza" not in response.get_data(as_text=True)


def test_only_the_owner_and_with_a_token(client, rider, trip):
    stranger = auth(make_token(make_user()))
    assert ask(client, stranger, trip, category="water", lat=LAT, lon=LON).status_code == 404
    assert ask(client, {}, trip, category="water", lat=LAT, lon=LON).status_code == 401


def test_map_coverage_of_a_box():
    areas = [(44.0, 4.0, 46.0, 6.0)]
    assert map_coverage((44.5, 4.5, 45.5, 5.5), areas) == "full"
    assert map_coverage((45.5, 5.5, 46.5, 6.5), areas) == "partial"
    assert map_coverage((47.0, 7.0, 48.0, 8.0), areas) == "none"
    assert map_coverage((44.5, 4.5, 45.5, 5.5), []) == "none"
