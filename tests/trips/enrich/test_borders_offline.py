"""Borders without imported boundaries (docs/RULES.md "Crossings"): the offline lookup (trips/enrich/countries.py
country_at: timezonefinder's zone polygons, zone.tab) along each day's line, on real coordinates. Before, a border
came only from imported admin_level=2 boundaries at the days' ends: none here, so no alert (and, off the map, the
computation failed with "no map data")."""

from tests.enrich_helpers import engine, import_map, stage, trip, trip_east
from tests.osm_maps import MapBuilder
from trips.enrich import border_crossing
from trips.enrich.alerts.catalogue import render
from trips.enrich.countries import country_at

SAINT_LOUIS, BASEL, WEIL = (47.5896, 7.5602), (47.5596, 7.5886), (47.5937, 7.6206)  # FR, CH, DE

def pairs(result, sid):
    return [(f.params["fromCountry"], f.params["country"]) for f in result.alerts[sid]]

def test_the_zone_lookup_names_countries_near_their_borders():
    assert [country_at(*p) for p in (SAINT_LOUIS, BASEL, WEIL)] == ["FR", "CH", "DE"]
    assert country_at(47.6967, 8.6886) == "DE"  # Büsingen, a German enclave in Swiss time zone rules
    assert country_at(47.141, 9.5215) == "LI" and country_at(43.7384, 7.4246) == "MC"
    assert country_at(45.0, -30.0) is None  # the open sea: Etc/GMT+2
    assert country_at(95.0, 0.0) is None  # not a point on Earth: no answer, no failure

def test_a_ride_crossing_two_borders_in_an_extract_without_boundaries(ctx, tmp_path):
    m = MapBuilder(bounds=(47.5, 7.5, 47.65, 7.7))
    m.node(47.57, 7.59, {"tourism": "hotel"})  # a map, but no country boundary in it
    import_map(m, tmp_path)
    snap = trip([stage("s1", 0, [SAINT_LOUIS, BASEL, WEIL])])
    result = border_crossing.compute(snap, engine())
    assert pairs(result, "s1") == [("FR", "CH"), ("CH", "DE")]
    for fact in result.alerts["s1"]:  # each points at the new country, within the bisection's 25 m
        assert country_at(fact.action["lat"], fact.action["lon"]) == fact.params["country"]
    assert render(result.alerts["s1"][1].as_json(), 1)["message"].startswith("Stage 1 leaves Switzerland for Germany.")

def test_off_the_map_the_border_check_still_runs(ctx):
    """No imported area at all: the check needs no map (it is not failed for "no map data")."""
    snap = trip([stage("s1", 0, [SAINT_LOUIS, BASEL]), stage("s2", 1, [BASEL, WEIL]),
                 stage("s3", 2, [WEIL, WEIL], rest=True)])
    result = border_crossing.compute(snap, engine())
    assert result.covered is True
    assert pairs(result, "s1") == [("FR", "CH")] and pairs(result, "s2") == [("CH", "DE")]
    assert result.alerts["s3"] == []  # a rest day is looked at and moves nowhere

def test_a_day_in_one_country_and_a_day_at_sea_raise_nothing(ctx):
    snap = trip([stage("s1", 0, [(48.57, 7.75), (48.7, 7.3)]), stage("s2", 1, [(45.0, -30.0), (45.2, -29.0)])])
    result = border_crossing.compute(snap, engine())
    assert result.alerts == {"s1": [], "s2": []}

def test_a_3000_km_trip_is_checked_with_about_one_lookup_per_km(ctx, monkeypatch):
    """Thirty days of 100 km east along 45° N from the Rhône valley, a vertex every 200 m: the lookups are one
    per km and a few per crossing, not one per vertex."""
    calls = []

    def counted(lat, lon):
        calls.append((lat, lon))
        return country_at(lat, lon)

    monkeypatch.setattr(border_crossing, "country_at", counted)
    snap = trip_east(45.0, 5.0, [100] * 30)
    result = border_crossing.compute(snap, engine())
    found = [(sid, pair) for sid in result.alerts for pair in pairs(result, sid)]
    assert found[0][1] == ("FR", "IT")
    assert len(found) >= 5  # Italy, the Balkans, Romania… each crossing seen
    assert len(calls) <= 3000 + 2 * 30 + 6 * len(found)  # a km, two ends a day, six halvings a crossing
