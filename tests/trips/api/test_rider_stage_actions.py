"""get_stage gives what a rider acts on, as REST does, from a generated map through the real enrichments: lodgings with
phone, website, address and a price said to be an estimate unless it is their own, groceries before cafés, water
points with their km, the supply timeline; within get_stage's size budget."""
import io
import json
import math

import jsonschema
import pytest

from mcp.answers import MAX_CUES
from mcp.tools import get_stage as get_stage_tool
from oauth.kernel.models import User
from tests.enrich_helpers import engine, import_map
from tests.factories import auth, make_token, make_user
from tests.mcp_helpers import call, mcp_token, payload
from tests.osm_maps import MapBuilder, offset_north
from tests.mcp.test_mcp_tools import undeclared
from tests.trips.readmodels.test_readmodels_enriched import LONG, enrichment, facts
from trips.core.db import atomic, db
from trips.enrich import registry
from trips.models import Trip
from trips.services.trips import import_gpx

LAT, LON, KM = 45.0, 5.0, 50
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))
STAGE_BUDGET = 12 * 1024  # get_stage of a fully enriched day (docs/RULES.md "MCP answers")


def at(km: float, north_m: float = 0.0) -> tuple[float, float]:
    return offset_north(LAT, LON + km * 1000 / PER_DEG_LON, north_m)


def route() -> bytes:
    """50 km east, a gentle zigzag (40 m every km) so the simplified line keeps a vertex every km."""
    pts = [(*at(i / 5, 40.0 if (i // 5) % 2 else 0.0), 200.0 + i / 10) for i in range(KM * 5 + 1)]
    body = "".join(f'<trkpt lat="{a:.7f}" lon="{o:.7f}"><ele>{e:.1f}</ele></trkpt>' for a, o, e in pts)
    return (f'<?xml version="1.0"?><gpx version="1.1" creator="t" xmlns="http://www.topografix.com/GPX/1/1">'
            f'<trk><name>East</name><trkseg>{body}</trkseg></trk></gpx>').encode()


def the_map() -> MapBuilder:
    m = MapBuilder(bounds=(LAT - 0.3, LON - 0.3, LAT + 0.3, LON + 1.0))
    end = KM
    m.node(*at(end, 400), {"tourism": "hotel", "name": "Palace du Lac", "stars": "5", "phone": "+33 4 11 22 33 44",
                           "website": "https://palace.example", "addr:housenumber": "1", "addr:street": "Quai",
                           "addr:postcode": "38000", "addr:city": "Grenoble"})
    m.node(*at(end, 900), {"tourism": "camp_site", "name": "Camping Municipal", "charge": "12 EUR"})
    m.node(*at(end, 1500), {"tourism": "hostel", "name": "Auberge"})
    for km in (10, 20, 30, 40):  # a café right on the road and a supermarket further off, in each town
        m.node(*at(km, 30), {"amenity": "cafe", "name": f"Café {km}"})
        m.node(*at(km + 0.2, 600), {"shop": "supermarket", "name": f"Super {km}"})
    m.node(*at(25, 20), {"shop": "bakery", "name": "Boulangerie"})
    m.node(*at(15, 10), {"amenity": "cafe", "shop": "clothes", "name": "Fashion Boutique"})  # not food
    m.node(*at(35, 15), {"shop": "shoes", "name": "Chaussures"})  # not food, not imported as food
    m.node(*at(5, 50), {"amenity": "drinking_water"})
    m.node(*at(22, 80), {"amenity": "fountain", "drinking_water": "yes", "name": "Fontaine de la Place"})
    m.node(*at(33, 80), {"amenity": "fountain"})  # ornamental: no drinking water
    m.node(*at(44, 60), {"man_made": "water_tap", "drinking_water": "yes"})
    return m


@pytest.fixture
def day(app, ctx, tmp_path):
    """A one-day trip whose accommodations, resupply and water points the real enrichments wrote."""
    user = make_user("owner@example.org")
    trip = import_gpx(user, io.BytesIO(route()), {})
    import_map(the_map(), tmp_path)
    with atomic():
        trip = db.session.get(Trip, trip.id)
        for c in trip.computations:
            c.status = "running" if c.name in ("accommodations", "pois", "water_points") else "done"
        snap = registry.snapshot(trip)
        for name in ("accommodations", "pois", "water_points"):
            assert registry.apply(trip, name, trip.generation, registry.run_compute(name, snap, engine()))
        for c in trip.computations:
            c.status = "done"
    return user, trip.id, trip.stages[0].id, mcp_token(app, user)


def get_stage(client, token, trip_id, stage_id):
    answer = payload(call(client, token, "get_stage", {"tripId": trip_id, "stageId": stage_id}))
    jsonschema.Draft202012Validator(get_stage_tool.OUTPUT).validate(answer)
    assert undeclared(answer, get_stage_tool.OUTPUT) == []  # every key named by the schema's words
    return answer


def test_a_place_to_sleep_carries_what_a_rider_acts_on(client, day):
    user, trip_id, stage_id, token = day
    answer = get_stage(client, token, trip_id, stage_id)
    places = {p["name"]: p for p in answer["accommodations"]}
    palace = places["Palace du Lac"]
    assert palace["phone"] == "+33 4 11 22 33 44" and palace["website"] == "https://palace.example"  # today: none
    assert palace["address"] == "1 Quai, 38000 Grenoble"
    assert palace["price"] == {"min": 180.0, "max": 450.0, "currency": "EUR", "estimate": True}  # 5 stars: not 102.5–120
    assert places["Camping Municipal"]["price"] == {"min": 12.0, "max": 12.0, "currency": "EUR", "estimate": False}  # its own
    assert places["Auberge"]["price"]["estimate"] is True and "phone" not in places["Auberge"]  # none mapped
    rest = client.get(f"/api/trips/{trip_id}/stages/{stage_id}", headers=auth(make_token(user))).get_json()
    same = next(p for p in rest["accommodations"] if p["name"] == "Palace du Lac")
    assert (same["phone"], same["url"], same["address"]) == (palace["phone"], palace["website"], palace["address"])


def test_food_is_led_by_groceries_and_a_boutique_is_not_food(client, day):
    _, trip_id, stage_id, token = day
    answer = get_stage(client, token, trip_id, stage_id)
    food = answer["resupply"]
    assert [p["category"] for p in food[:4]] == ["supermarket"] * 4  # today: the cafés nearer the road
    assert food[4]["category"] == "bakery" and food[5]["category"] == "cafe"
    assert [p["km"] for p in food[:4]] == sorted(p["km"] for p in food[:4])
    names = json.dumps(answer)
    assert "Fashion Boutique" not in names and "Chaussures" not in names
    assert answer["supplyTimeline"][0] == "10 km: café, supermarket"  # compact


def test_the_day_s_water_points_with_their_km(client, day):
    user, trip_id, stage_id, token = day
    water = get_stage(client, token, trip_id, stage_id)["waterPoints"]
    assert [(round(w["km"]), w["kind"]) for w in water] == [(5, "drinking_water"), (22, "fountain"), (44, "water_tap")]
    assert water[1]["name"] == "Fontaine de la Place"
    rest = client.get(f"/api/trips/{trip_id}/stages/{stage_id}", headers=auth(make_token(user))).get_json()
    assert [w["kind"] for w in rest["waterPoints"]] == ["drinking_water", "fountain", "water_tap"]


def test_a_day_never_analysed_claims_no_water_and_hand_entered_places_have_no_price(client, day):
    _, trip_id, stage_id, token = day
    with atomic():
        stage = db.session.get(Trip, trip_id).stages[0]
        stage.enrichment = {}
        stage.selected_accommodation = {"name": "Chez Paul", "type": "other", "lat": 45.0, "lon": 5.6,
                                        "phone": 12345, "url": "x" * 5000}
    answer = get_stage(client, token, trip_id, stage_id)
    assert answer["waterPoints"] is None and answer["supplyTimeline"] is None and answer["resupply"] is None
    chosen = answer["selectedAccommodation"]
    assert chosen["price"] is None and "phone" not in chosen  # a number is no phone text: left out
    assert "website" not in chosen  # too long to be whole: left out, never cut
    with atomic():
        db.session.get(Trip, trip_id).stages[0].enrichment = {"supplyTimeline": [
            {"km": None, "categories": ["bakery"]}, "junk", {"km": 2.5, "categories": ["bakery"]}]}
    assert get_stage(client, token, trip_id, stage_id)["supplyTimeline"] == ["2.5 km: bakery"]  # odd entries out


def test_a_fully_enriched_day_stays_within_get_stage_s_budget(client, day):
    _, trip_id, stage_id, token = day
    long_place = {"phone": "+33 4 76 00 00 00 / +33 6 00 00 00 00", "url": "https://example.org/" + "x" * 180,
                  "address": LONG + ", 38000 Grenoble", "isExactPrice": False}
    with atomic():
        stage = db.session.get(Trip, trip_id).stages[0]
        stage.alerts_by_group = facts(2)
        stage.enrichment = {**enrichment(), "waterPoints": [
            {"km": 4.0 * i, "kind": "fountain", "name": LONG, "lat": 45.0, "lon": 5.0} for i in range(12)]}
        stage.accommodations = [{**p, **long_place} for p in stage.accommodations] * 2
    answer = get_stage(client, token, trip_id, stage_id)
    assert len(answer["accommodations"]) == 5 and len(answer["waterPoints"]) == 12
    assert len(answer["supplyTimeline"]) == 24
    assert 1 < len(answer["ways"]["cues"]) <= MAX_CUES + 1 and answer["ways"]["cues"][-1].startswith("+")
    size = len(json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode())
    assert size < STAGE_BUDGET, size
    with atomic():  # the same day read by a French-speaking account: its texts are longer
        user = db.session.get(Trip, trip_id).user_id
        db.session.get(User, user).locale = "fr"
    french = get_stage(client, token, trip_id, stage_id)
    assert french["ways"]["cues"][-1].endswith("la feuille de route de la page partagée")
    size = len(json.dumps(french, ensure_ascii=False, separators=(",", ":")).encode())
    assert size < STAGE_BUDGET, size
