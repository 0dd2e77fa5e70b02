"""Accommodation discovery (docs/RULES.md "Accommodations") on generated map data: the types a trip enables and never a
shelter, nearest-end assignment with exact ties, dedup within 200 m, ranking with the per-family cap,
heuristic pricing, seasonality on dated days and its alert, the wider scan, and a chosen lodging's day left
alone."""
import json
import math
from dataclasses import replace
from datetime import date

import pytest

from tests.enrich_helpers import engine, import_map, stage, trip, trip_east
from tests.osm_maps import MapBuilder, offset_north
from trips.enrich import accommodations as A
from trips.enrich.alerts.catalogue import CATALOGUE, render

LAT, LON = 45.0, 5.0
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))


def east(km: float) -> float:
    return LON + km * 1000 / PER_DEG_LON


def near(km_east: float, metres_north: float = 0.0):
    return offset_north(LAT, east(km_east), metres_north)


def region() -> MapBuilder:
    """A map whose declared bounds hold every route of these tests (the covered area is the header box)."""
    return MapBuilder(bounds=(LAT - 0.2, LON - 0.2, LAT + 0.3, east(60)))


def lodging(m: MapBuilder, km_east: float, tags: dict, metres_north: float = 300.0) -> int:
    return m.node(*near(km_east, metres_north), tags)


def names(result, sid: str) -> list:
    return [c.get("name") for c in result.data[sid]["accommodations"]]


@pytest.fixture
def mapped(ctx, tmp_path):
    def run(builder: MapBuilder):
        import_map(builder, tmp_path)
        return engine()

    return run


# --- discovery ------------------------------------------------------------------------------------------

def test_only_enabled_types_are_offered(mapped):
    m = region()
    lodging(m, 20, {"tourism": "hotel", "name": "Grand"})
    lodging(m, 20.5, {"tourism": "camp_site", "name": "Les Pins"})
    eng = mapped(m)
    everything = A.compute(trip_east(LAT, LON, [20]), eng)
    assert sorted(names(everything, "s1")) == ["Grand", "Les Pins"]
    hotels = A.compute(trip_east(LAT, LON, [20], types=("hotel",)), eng)
    assert names(hotels, "s1") == ["Grand"]


def test_a_shelter_is_never_lodging(mapped):
    m = region()
    lodging(m, 20, {"tourism": "shelter", "name": "Abri"})
    lodging(m, 20.2, {"amenity": "shelter", "name": "Abri bis"})
    lodging(m, 20.4, {"tourism": "wilderness_hut", "name": "Cabane"})
    eng = mapped(m)
    found = A.compute(trip_east(LAT, LON, [20], types=(*A.PRICE_BRACKETS, "shelter")), eng)
    assert names(found, "s1") == ["Cabane"]
    assert A.lodging("shelter", {"shelter", "hotel"}) is False
    assert A.lodging("hotel", {"shelter", "hotel"}) is True


def test_each_lodging_goes_to_the_nearest_end_only(mapped):
    m = region()
    lodging(m, 8, {"tourism": "hostel", "name": "Nearer day one"})   # 2 km from end 1, 4 km from end 2
    lodging(m, 10.5, {"tourism": "hostel", "name": "Nearer day two"})  # 4.5 km / 1.5 km
    eng = mapped(m)
    found = A.compute(trip_east(LAT, LON, [6, 6]), eng)
    assert names(found, "s1") == ["Nearer day one"]
    assert names(found, "s2") == ["Nearer day two"]
    (one,) = found.data["s1"]["accommodations"]
    assert one["distanceToEndPoint"] == pytest.approx(math.hypot(2.0, 0.3), abs=0.02)


def test_an_exact_tie_goes_to_every_tied_day(mapped):
    m = region()
    lodging(m, 6.5, {"tourism": "hotel", "name": "Shared"})
    eng = mapped(m)
    found = A.compute(trip_east(LAT, LON, [6, 0, 6], rest={1}), eng)  # the rest day ends where day one does
    assert names(found, "s1") == names(found, "s2") == ["Shared"]
    assert names(found, "s3") == []


def test_a_lodging_as_far_from_two_different_ends_goes_to_both(mapped):
    # Mirrored across the equator, the two geodesics are exactly equal (GeographicLib's symmetry).
    m = MapBuilder(bounds=(-0.1, 9.9, 0.1, 10.1))
    m.node(0.0, 10.01, {"tourism": "hotel", "name": "Equidistant"})
    m.node(0.005, 10.01, {"tourism": "hotel", "name": "North"})
    eng = mapped(m)
    days = [stage("s1", 0, [(-0.05, 10.0), (-0.01, 10.0)]), stage("s2", 1, [(-0.01, 10.0), (0.01, 10.0)])]
    found = A.compute(trip(days), eng)
    assert names(found, "s1") == ["Equidistant"]
    assert names(found, "s2") == ["North", "Equidistant"]


def test_the_same_name_within_200_m_is_one_place(mapped):
    m = region()
    lodging(m, 20, {"tourism": "hotel", "name": "Hôtel du Lac"}, metres_north=100)
    lodging(m, 20, {"tourism": "hotel", "name": "  hôtel du lac "}, metres_north=250)     # 150 m away
    lodging(m, 20, {"tourism": "hotel", "name": "Hôtel du Lac"}, metres_north=-200)       # 300 m away
    lodging(m, 20, {"tourism": "hotel", "name": "Hôtel du Port"}, metres_north=120)       # other name, 20 m
    lodging(m, 20.1, {"tourism": "hotel"}, metres_north=100)                               # nameless
    lodging(m, 20.1, {"tourism": "hotel"}, metres_north=110)
    eng = mapped(m)
    found = names(A.compute(trip_east(LAT, LON, [20]), eng), "s1")
    assert sorted(n or "" for n in found) == ["", "", "Hôtel du Lac", "Hôtel du Lac", "Hôtel du Port"]
    assert "  hôtel du lac " not in found  # the nearer copy stays


def test_dedup_keeps_the_first_copy():
    a = {"name": "Gîte", "lat": LAT, "lon": LON, "n": 1}
    b = {"name": "gîte ", "lat": offset_north(LAT, LON, 199)[0], "lon": LON, "n": 2}
    c = {"name": "Gîte", "lat": offset_north(LAT, LON, 201)[0], "lon": LON, "n": 3}
    assert [x["n"] for x in A.dedup([a, b])] == [1]
    assert [x["n"] for x in A.dedup([a, c])] == [1, 3]


def test_the_default_radius_is_5_km_and_a_scan_widens_one_day(mapped):
    m = region()
    lodging(m, 20, {"tourism": "guest_house", "name": "Close"}, metres_north=4900)
    lodging(m, 20, {"tourism": "guest_house", "name": "Far"}, metres_north=8000)
    lodging(m, 40, {"tourism": "guest_house", "name": "Day two"}, metres_north=1000)
    eng = mapped(m)
    snap = trip_east(LAT, LON, [20, 20])
    default = A.compute(snap, eng)
    assert names(default, "s1") == ["Close"] and names(default, "s2") == ["Day two"]
    wide = A.compute(snap, eng, radius_km=10, stage_ids=["s1", "deleted-day"])
    assert set(wide.data) == set(wide.alerts) == {"s1"}
    assert sorted(names(wide, "s1")) == ["Close", "Far"]
    for bad in (0.5, 15.5, float("nan"), True, "5"):
        with pytest.raises(ValueError, match="radius_km"):
            A.compute(snap, eng, radius_km=bad)


def test_a_day_with_a_chosen_lodging_is_not_scanned(mapped):
    m = region()
    lodging(m, 20, {"tourism": "hotel", "name": "Day one"})
    lodging(m, 40, {"tourism": "hotel", "name": "Day two"})
    eng = mapped(m)
    snap = trip_east(LAT, LON, [20, 20])
    chosen = {"name": "Chosen", "type": "hotel", "lat": near(20, 300)[0], "lon": east(20)}
    snap = replace(snap, stages=(replace(snap.stages[0], selected_accommodation=chosen), snap.stages[1]))
    found = A.compute(snap, eng)
    assert "s1" not in found.alerts and "s1" not in found.data  # no ran_on: the stored group stays
    assert names(found, "s2") == ["Day two"]
    only_chosen = A.compute(snap, eng, stage_ids=["s1"])
    assert only_chosen.alerts == only_chosen.data == {} and only_chosen.covered is True


def test_a_trip_the_map_does_not_reach_is_not_covered(mapped):
    m = region()
    lodging(m, 20, {"tourism": "hotel", "name": "Here"})
    eng = mapped(m)
    away = A.compute(trip_east(LAT + 2, LON, [20]), eng)
    assert away.covered is False and away.alerts == {} and away.data == {}
    assert A.compute(trip_east(LAT, LON, [20]), eng).covered is True
    # a day that ends beyond the map's edge is not looked at: "never ran", not "nothing found"
    edge = A.compute(trip_east(LAT, LON, [20, 60]), eng)
    assert edge.covered is True and set(edge.alerts) == set(edge.data) == {"s1"}


def test_the_stored_shape(mapped):
    m = region()
    node = lodging(m, 20, {"tourism": "hotel", "name": "Hôtel de la Gare", "website": "https://gare.example",
                           "stars": "3", "opening_hours": "Apr-Oct", "wikipedia": "fr:Hôtel de la Gare",
                           "addr:housenumber": "2", "addr:street": "Rue du Port", "addr:city": "Valence",
                           "phone": "+33 4 00 00 00 00"})
    eng = mapped(m)
    (acc,) = A.compute(trip_east(LAT, LON, [20], start_date=date(2026, 7, 1)), eng).data["s1"]["accommodations"]
    assert acc == {
        "name": "Hôtel de la Gare", "type": "hotel", "lat": pytest.approx(near(20, 300)[0], abs=1e-6),
        "lon": pytest.approx(east(20), abs=1e-6), "estimatedPriceMin": 70.0, "estimatedPriceMax": 140.0,  # 3 stars
        "isExactPrice": False, "currency": "EUR", "country": "FR", "url": "https://gare.example",
        "possibleClosed": False,
        "distanceToEndPoint": pytest.approx(0.3, abs=0.005), "source": "osm", "openingHours": "Apr-Oct",
        "wikipediaUrl": "https://fr.wikipedia.org/wiki/Hôtel_de_la_Gare", "phone": "+33 4 00 00 00 00",
        "address": "2 Rue du Port, Valence", "osmType": "node", "osmId": node}
    json.dumps(acc)  # JSON-ready


def test_two_luxury_hotels_in_a_us_city_have_no_made_up_price(mapped):
    """Lodgings at a day's end in Manhattan (the offline geocoder says US): BTP has no table for the United States,
    so a 5-star hotel gets no estimate, with the reason; one whose map tag gives a price keeps it, in dollars."""
    lat, lon = 40.758, -73.9855
    m = MapBuilder(bounds=(lat - 0.2, lon - 0.3, lat + 0.2, lon + 0.3))
    m.node(*offset_north(lat, lon + 0.27, 200), {"tourism": "hotel", "name": "The Palace", "stars": "5"})
    m.node(*offset_north(lat, lon + 0.27, -200), {"tourism": "hotel", "name": "The Plaza", "charge": "995"})
    eng = mapped(m)
    found = A.compute(trip_east(lat, lon, [22.5]), eng).data["s1"]["accommodations"]
    by_name = {c["name"]: c for c in found}
    palace = by_name["The Palace"]
    assert "estimatedPriceMin" not in palace and "currency" not in palace
    assert palace["priceReason"] == "no_basis" and palace["country"] == "US"
    plaza = by_name["The Plaza"]
    assert (plaza["estimatedPriceMin"], plaza["currency"], plaza["isExactPrice"]) == (995.0, "USD", True)


# --- ranking --------------------------------------------------------------------------------------------

def cand(kind: str, n: int, score_tags: int = 0, **tags) -> dict:
    """A candidate whose completeness is 2·score_tags from opening_hours/wikidata pairs, tag_count 0."""
    base = {"opening_hours": "24/7", "wikidata": "Q1"}
    chosen = dict(list(base.items())[:score_tags])
    return {"type": kind, "n": n, "tags": {**chosen, **tags}, "tag_count": 0, "name": f"c{n}", "country": "FR"}


def test_completeness_counts_what_the_map_says():
    full = {"type": "hotel", "tag_count": 12, "tags": {
        "url": "x", "description": "d", "opening_hours": "24/7", "wikidata": "Q1", "stars": "3", "capacity": "9"}}
    assert A.completeness(full) == 3 + 3 + 2 + 2 + 2 + 1 + 2
    assert A.completeness({"type": "hotel", "tag_count": 5, "tags": {"stars": "many"}}) == 1
    assert A.completeness({"type": "hotel", "tag_count": 2, "tags": {}}) == 0


def test_ranking_by_completeness_then_price():
    ranked = A.rank([cand("hotel", 1, 1), cand("hostel", 2, 1), cand("guest_house", 3, 2), cand("chalet", 4)])
    assert [c["n"] for c in ranked] == [3, 2, 1, 4]  # 4 points; 2 points at 20 € before 50 €; 0 points


def test_one_family_takes_at_most_four_while_the_other_has_candidates():
    indoor = [cand("hotel", i, 2) for i in range(6)]
    outdoor = [cand("camp_site", 10, 0), cand("wilderness_hut", 11, 0)]
    ranked = A.rank(indoor + outdoor)
    assert [c["n"] for c in ranked] == [0, 1, 2, 3, 11]  # the hut (0 €) before the camp site (8 €)
    assert A.FAMILY_CAP == 4


def test_capped_candidates_backfill_free_slots():
    assert [c["n"] for c in A.rank([cand("hotel", i, 2) for i in range(6)])] == [0, 1, 2, 3, 4]
    assert [c["n"] for c in A.rank([cand("camp_site", i) for i in range(7)])] == [0, 1, 2, 3, 4]
    few = A.rank([cand("camp_site", 1, 1), cand("hotel", 2)])
    assert [c["n"] for c in few] == [1, 2]


# --- pricing --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, tags, expected", [
    ("hotel", {"charge": "12,50 EUR"}, (12.5, 12.5, True)),
    ("camp_site", {"charge": "per night: 9"}, (9.0, 9.0, True)),
    ("camp_site", {"fee": "7.5"}, (7.5, 7.5, True)),
    ("hotel", {"charge": "ask", "fee": "30 €"}, (30.0, 30.0, True)),
    ("wilderness_hut", {"fee": "no"}, (0.0, 0.0, True)),
    ("alpine_hut", {"fee": "False "}, (0.0, 0.0, True)),
    ("alpine_hut", {"fee": "yes"}, (25.0, 45.0, False)),
    ("camp_site", {}, (8.0, 25.0, False)),
    ("camp_site", {"backpack": "yes"}, (8.0, 15.0, False)),
    ("camp_site", {"tents": "yes"}, (8.0, 15.0, False)),
    ("hostel", {"tents": "yes"}, (20.0, 35.0, False)),  # only a camp site tops out at 15
    ("chalet", {}, (30.0, 70.0, False)),
    ("guest_house", {}, (40.0, 80.0, False)),
    ("apartment", {}, (50.0, 120.0, False)),  # unknown type: the hotel row
    ("hotel", {"stars": "1"}, (35.0, 70.0, False)),  # a hotel's stars give its bracket
    ("hotel", {"stars": "2"}, (50.0, 100.0, False)),
    ("hotel", {"stars": "3"}, (70.0, 140.0, False)),
    ("hotel", {"stars": "4S"}, (110.0, 220.0, False)),
    ("hotel", {"stars": "5"}, (180.0, 450.0, False)),  # a 5-star palace is no 102.5–120 € room
    ("hotel", {"stars": "7"}, (180.0, 450.0, False)),  # more than 5: as 5
    ("hotel", {"stars": "3.5"}, (70.0, 140.0, False)),
    ("hotel", {"stars": "0"}, (50.0, 120.0, False)),  # no star: the type's bracket
    ("apartment", {"stars": "4"}, (110.0, 220.0, False)),  # an unknown type is priced as a hotel
    ("hostel", {"stars": "5"}, (180.0, 450.0, False)),  # a starred indoor place never keeps a hostel bracket
    ("guest_house", {"stars": "1"}, (40.0, 80.0, False)),  # stars only raise a guest house's bracket
    ("camp_site", {"stars": "4"}, (16.5, 25.0, False)),  # a camp site: its floor lifted by 0.5
    ("camp_site", {"stars": "7"}, (20.75, 25.0, False)),  # lift capped at 0.75
    ("alpine_hut", {"stars": "3"}, (25.0, 45.0, False)),  # a hut: stars say nothing of its price
    ("hotel", {"stars": "5", "charge": "60"}, (60.0, 60.0, True)),  # an exact price is not lifted
])
def test_pricing(kind, tags, expected):
    """In France: the eurozone table, in euros."""
    found = A.price({"type": kind, "tags": tags, "country": "FR"})
    assert (found.low, found.high, found.exact) == expected and found.reason is None
    assert found.currency == "EUR"


@pytest.mark.parametrize("country, kind, tags, expected", [
    ("US", "hotel", {"stars": "5"}, (None, None, False, None, "no_basis")),  # no table for it: no made-up price
    ("US", "hotel", {}, (None, None, False, None, "no_basis")),
    (None, "camp_site", {}, (None, None, False, None, "no_basis")),  # a country unknown: no table either
    ("US", "hotel", {"charge": "189"}, (189.0, 189.0, True, "USD", None)),  # the map's own, the country's money
    ("FR", "hotel", {"charge": "90 CHF"}, (90.0, 90.0, True, "CHF", None)),  # the currency it names, not converted
    ("JP", "hostel", {"fee": "£ 20"}, (20.0, 20.0, True, "GBP", None)),
    (None, "hotel", {"charge": "80"}, (None, None, True, None, "no_currency")),  # a number in no known money
    ("CH", "hotel", {}, (100.0, 220.0, False, "CHF", None)),  # Switzerland's table, in francs
    ("CH", "camp_site", {"tents": "yes"}, (15.0, 24.0, False, "CHF", None)),
    ("GB", "hotel", {"stars": "4"}, (110.0, 230.0, False, "GBP", None)),
])
def test_prices_carry_their_currency_and_an_estimate_only_where_btp_has_a_basis(country, kind, tags, expected):
    found = A.price({"type": kind, "tags": tags, "country": country})
    assert (found.low, found.high, found.exact, found.currency, found.reason) == expected


# --- seasonality ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("tags, day, expected", [
    ({"opening_hours": "Apr-Oct"}, date(2026, 7, 1), True),
    ({"opening_hours": "Apr-Oct"}, date(2026, 12, 1), False),
    ({"opening_hours": "Apr-Oct"}, date(2026, 10, 31), True),
    ({"opening_hours": "Oct-Mar"}, date(2026, 1, 15), True),    # wrap-around
    ({"opening_hours": "Oct-Mar"}, date(2026, 7, 15), False),
    ({"opening_hours": "May-Sep 08:00-20:00; PH off"}, date(2026, 11, 2), False),
    ({"opening_hours": "may-sep: 08:00-20:00"}, date(2026, 6, 2), True),
    ({"opening_hours": "Mo-Fr 08:00-18:00"}, date(2026, 12, 1), None),
    ({"opening_hours": "Foo-Bar"}, date(2026, 12, 1), None),
    ({"seasonal": "yes"}, date(2026, 12, 1), False),
    ({"seasonal": "yes"}, date(2026, 3, 31), False),
    ({"seasonal": "yes"}, date(2026, 4, 1), True),
    ({"seasonal": "yes", "opening_hours": "Oct-Mar"}, date(2026, 12, 1), True),  # the month range first
    ({"seasonal": "no"}, date(2026, 12, 1), None),
    ({"seasonal": "yes", "opening_hours": "Apr-Oct"}, None, None),  # undated: never evaluated
])
def test_seasonality(tags, day, expected):
    assert A.likely_open(tags, day) is expected


def test_alert_when_every_candidate_may_be_closed(mapped):
    m = region()
    lodging(m, 20, {"tourism": "camp_site", "name": "Summer camp", "seasonal": "yes"})
    lodging(m, 20.3, {"tourism": "camp_site", "name": "Season camp", "opening_hours": "Apr-Oct"})
    lodging(m, 40, {"tourism": "camp_site", "name": "Winter camp", "seasonal": "yes"})
    lodging(m, 40.3, {"tourism": "hotel", "name": "Always open"})
    eng = mapped(m)
    winter = A.compute(trip_east(LAT, LON, [20, 20], start_date=date(2026, 12, 10)), eng)
    (fact,) = winter.alerts["s1"]
    assert fact.code == "accommodation_seasonal_closure" and fact.params == {"count": 2}
    assert all(c["possibleClosed"] for c in winter.data["s1"]["accommodations"])
    assert winter.alerts["s2"] == []  # one candidate is open: just under the rule
    assert [c["possibleClosed"] for c in winter.data["s2"]["accommodations"]] == [True, False]
    summer = A.compute(trip_east(LAT, LON, [20, 20], start_date=date(2026, 7, 10)), eng)
    assert summer.alerts == {"s1": [], "s2": []}
    undated = A.compute(trip_east(LAT, LON, [20, 20]), eng)
    assert undated.alerts == {"s1": [], "s2": []}
    assert not any(c["possibleClosed"] for c in undated.data["s1"]["accommodations"])
    text = render(fact.as_json(), 1)
    assert text == {"code": fact.code, "severity": "warning", "group": "accommodations",
                    "message": "All detected accommodations on stage 1 may be closed during this period."}
    assert CATALOGUE[fact.code].group == A.GROUP


def test_no_alert_on_a_day_with_no_candidates(mapped):
    m = region()
    lodging(m, 40, {"tourism": "hotel", "name": "Far away"})
    eng = mapped(m)
    found = A.compute(trip_east(LAT, LON, [20], start_date=date(2026, 12, 10)), eng)
    assert found.alerts == {"s1": []} and found.data == {"s1": {"accommodations": []}}


# --- expand scans ---------------------------------------------------------------------------------------

def test_merge_keeps_the_existing_and_adds_new_unique_places():
    old = [{"name": "A", "lat": LAT, "lon": LON, "osmType": "node", "osmId": 1},
           {"name": "Manual", "lat": 45.1, "lon": 5.1, "source": "manual"}]
    found = [{"name": "A (renamed)", "lat": LAT, "lon": LON + 0.0005, "osmType": "node", "osmId": 1},  # same id
             {"name": "Other", "lat": 45.1, "lon": 5.1000001, "osmType": "node", "osmId": 9},         # same spot
             {"name": " a ", "lat": offset_north(LAT, LON, 150)[0], "lon": LON, "osmType": "way", "osmId": 2},
             {"name": "B", "lat": 45.2, "lon": 5.2, "osmType": "node", "osmId": 3},
             {"name": "C", "lat": 45.3, "lon": 5.3, "osmType": "node", "osmId": 4},
             {"name": "D", "lat": 45.4, "lon": 5.4, "osmType": "node", "osmId": 5},
             {"name": "E", "lat": 45.5, "lon": 5.5, "osmType": "node", "osmId": 6}]
    merged = A.merge(old, found)
    assert [c["name"] for c in merged] == ["A", "Manual", "B", "C", "D"]
    assert merged[0] is not old[0] and old == A.merge(old, [])
    assert [c["name"] for c in A.merge([], found[:2])] == ["A (renamed)", "Other"]
