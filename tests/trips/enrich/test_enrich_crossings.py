"""Crossings (docs/RULES.md "Crossings"): a border where a day's line crosses it (imported boundaries; the offline
lookup is tests/trips/enrich/test_borders_offline.py), a ferry the day rides (one alert per crossing), a ford within 25
m (dry until the forecast says otherwise). Raised, and not just under the threshold, on generated map data."""
import math

import pytest

from tests.enrich_helpers import bounds_around, engine, import_map, trip_east
from tests.osm_maps import MapBuilder, offset_north
from trips.enrich import border_crossing, ferries, fords
from trips.enrich.alerts.catalogue import render
from trips.places.countries import country_name

LAT, LON = 45.0, 5.0
PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT))


def lon_at(km: float) -> float:
    return LON + km * 1000 / PER_DEG_LON


def at(km: float, north_m: float = 0.0) -> tuple[float, float]:
    return offset_north(LAT, lon_at(km), north_m)


def run(module, tmp_path, snap, build, **kw):
    m = MapBuilder(bounds=bounds_around(snap))
    m.node(*at(0, 30_000), {"tourism": "hotel"})
    build(m)
    import_map(m, tmp_path)
    return module.compute(snap, engine(), **kw)


def codes(result, sid):
    return [f.code for f in result.alerts[sid]]


def two_countries(border_km: float):
    def build(m):
        m.country([(44.5, 4.5), (44.5, lon_at(border_km)), (45.5, lon_at(border_km)), (45.5, 4.5)], "FR", "France")
        m.country([(44.5, lon_at(border_km)), (44.5, 6.0), (45.5, 6.0), (45.5, lon_at(border_km))], "CH",
                  "Schweiz/Suisse/Svizzera/Svizra")
    return build


@pytest.mark.parametrize("border_km, crossing_day", [(19.5, "s2"), (20.5, "s3"), (30.5, None)])
def test_border_on_the_day_that_crosses_it(ctx, tmp_path, border_km, crossing_day):
    """Days of 10 km: a border at km 19.5 is crossed on day 2, at 20.5 on day 3; at 30.5 (past the last end)
    never. The alert names both countries and points at the crossing (bisected to 25 m)."""
    snap = trip_east(LAT, LON, [10, 10, 10])
    result = run(border_crossing, tmp_path, snap, two_countries(border_km))
    raised = {sid for sid, facts in result.alerts.items() if facts}
    assert raised == ({crossing_day} if crossing_day else set())
    assert set(result.alerts) == {"s1", "s2", "s3"}
    if crossing_day:
        fact = result.alerts[crossing_day][0]
        assert fact.code == "border_crossed" and fact.params == {"fromCountry": "FR", "country": "CH"}
        assert fact.action["lon"] == pytest.approx(lon_at(border_km), abs=30 / PER_DEG_LON)
        assert fact.action["lon"] >= lon_at(border_km)  # in the new country
        assert render(fact.as_json(), 2)["message"] == (
            "Stage 2 leaves France for Switzerland. Check phone coverage, payment methods, and local regulations.")
        assert render(fact.as_json(), 2, "fr")["message"].startswith(
            "L'étape 2 passe la frontière\u00a0: France → Suisse.")
        assert country_name(fact.params["country"]) == "Switzerland"  # the reader's language: tests/trips/core/test_i18n.py


def test_a_day_out_and_back_across_a_border_is_told_both_ways(ctx, tmp_path):
    """Both ends of the day in France, Switzerland between km 4 and 6: before, comparing the checkpoints (the
    day's ends) said nothing."""
    snap = trip_east(LAT, LON, [10])
    m = MapBuilder(bounds=bounds_around(snap))
    m.country([(44.5, 4.5), (44.5, lon_at(4)), (45.5, lon_at(4)), (45.5, 4.5)], "FR", "France")
    m.country([(44.5, lon_at(4)), (44.5, lon_at(6)), (45.5, lon_at(6)), (45.5, lon_at(4))], "CH", "Suisse")
    m.country([(44.5, lon_at(6)), (44.5, 6.0), (45.5, 6.0), (45.5, lon_at(6))], "FR", "France")
    import_map(m, tmp_path)
    facts = border_crossing.compute(snap, engine()).alerts["s1"]
    assert [(f.params["fromCountry"], f.params["country"]) for f in facts] == [("FR", "CH"), ("CH", "FR")]


def test_no_border_data_and_a_return_home(ctx, tmp_path):
    snap = trip_east(LAT, LON, [10, 10])
    assert run(border_crossing, tmp_path, snap, lambda m: None).alerts == {"s1": [], "s2": []}
    # out into Switzerland on day 1 and back to France on day 2 (the trip goes west again)
    back = trip_east(LAT, LON, [10, 10])
    west = back.stages[1].__class__(**{**back.stages[1].__dict__, "end": at(5), "geometry": tuple(
        (lat, lon, 0.0) for lat, lon in [at(10), at(5)])})
    back = back.__class__(**{**back.__dict__, "stages": (back.stages[0], west)})
    result = run(border_crossing, tmp_path, back, two_countries(8))
    assert [(f.params["fromCountry"], f.params["country"]) for f in result.alerts["s1"]] == [("FR", "CH")]
    assert [(f.params["fromCountry"], f.params["country"]) for f in result.alerts["s2"]] == [("CH", "FR")]
    assert country_name("XX") == "XX" and country_name(None) is None


def ferry(m, north_m: float, name: str | None = "Bac de Loire", km: float = 5.0, to_km: float | None = None):
    """A ferry from km `km` (north_m off the route) east to `to_km` along the route, or, without `to_km`,
    2 km due north (a shuttle leaving a harbour beside the route)."""
    end = at(to_km, north_m) if to_km is not None else at(km, north_m + 2000)
    m.way([at(km, north_m), end], {"route": "ferry", **({"name": name} if name else {})})


@pytest.mark.parametrize("north_m, raised", [(45, True), (55, False)])
def test_a_ferry_the_day_rides_is_taken(ctx, tmp_path, north_m, raised):
    """The day's line follows the ferry line (drawn 45 m beside it: a router's simplified line) from km 3
    to 7: taken. 55 m off, it does not follow it."""
    result = run(ferries, tmp_path, trip_east(LAT, LON, [10]), lambda m: ferry(m, north_m, km=3, to_km=7))
    assert codes(result, "s1") == (["ferry_crossing"] if raised else [])
    if raised:
        fact = result.alerts["s1"][0]
        assert fact.params == {"name": "Bac de Loire"}
        assert (fact.action["lat"], fact.action["lon"]) == pytest.approx(at(3, north_m), abs=1e-6)  # boarding
        assert render(fact.as_json(), 1)["message"].startswith("Stage 1 takes a ferry crossing.")


def test_the_alert_points_where_the_day_boards_whichever_way_the_ferry_is_drawn(ctx, tmp_path):
    result = run(ferries, tmp_path, trip_east(LAT, LON, [10]), lambda m: ferry(m, 20, km=7, to_km=3))
    (fact,) = result.alerts["s1"]
    assert (fact.action["lat"], fact.action["lon"]) == pytest.approx(at(3, 20), abs=1e-6)  # km 3, not km 7


@pytest.mark.parametrize("build", [
    pytest.param(lambda m: ferry(m, 10), id="a shuttle leaving a harbour 10 m from the route"),
    pytest.param(lambda m: ferry(m, -1000), id="a ferry line the route crosses"),
    pytest.param(lambda m: ferry(m, 20, km=5, to_km=15), id="half the ferry along the day's last 5 km"),
])
def test_passing_a_harbour_or_crossing_a_ferry_line_is_not_taking_it(ctx, tmp_path, build):
    """Before, any ferry within 100 m of the line raised "Stage 1 takes a ferry crossing"."""
    result = run(ferries, tmp_path, trip_east(LAT, LON, [10]), build)
    assert codes(result, "s1") == []
    assert set(result.alerts) == {"s1"}  # looked at, found nothing


def test_one_alert_per_crossing_and_none_on_rest_days(ctx, tmp_path):
    def build(m):
        ferry(m, 10, km=1, to_km=3)
        ferry(m, 20, km=1, to_km=3)  # the same crossing drawn again, by name
        ferry(m, 30, name=None, km=6, to_km=7.5)
        m.way([at(7.5, 30), at(6, 30)], {"route": "ferry"})  # the same, unnamed, drawn the other way
        ferry(m, 10, name="Bac de Mindin", km=8, to_km=9.5)  # another crossing
        ferry(m, 5, name="Navette du port", km=4)  # a harbour shuttle beside the route: not taken
    result = run(ferries, tmp_path, trip_east(LAT, LON, [10, 0], rest=(1,)), build)
    assert [f.params["name"] for f in result.alerts["s1"]] == ["Bac de Loire", "Bac de Mindin", None]
    assert result.alerts["s2"] == []  # the rest day at km 10 is beside none, and no riding rule runs


@pytest.mark.parametrize("north_m, raised", [(20, True), (30, False)])
def test_ford_within_25_m(ctx, tmp_path, north_m, raised):
    result = run(fords, tmp_path, trip_east(LAT, LON, [10]), lambda m: m.node(*at(4, north_m), {"ford": "yes"}))
    assert codes(result, "s1") == (["ford_crossing_dry"] if raised else [])
    if raised:
        fact = result.alerts["s1"][0]
        assert fact.params == {"count": 1}
        assert render(fact.as_json(), 1)["message"].startswith("Stage 1 crosses a ford.")


@pytest.mark.parametrize("probability, dry", [(None, True), (49.0, True), (50.0, False)])
def test_a_ford_is_dry_without_a_forecast_or_under_50_percent(ctx, tmp_path, probability, dry):
    snap = trip_east(LAT, LON, [10, 10, 0], rest=(2,))

    def build(m):
        m.node(*at(4, 5), {"ford": "yes"})
        m.way([at(10, -100), at(10, 0), at(10, 100)], {"highway": "track", "ford": "yes"})  # ends day 1: its
        m.node(*at(20, 0), {"ford": "yes"})  # at day 2's end, beside the rest day too: day 2's
    result = run(fords, tmp_path, snap, build, forecast={"s1": probability, "s2": probability})
    assert codes(result, "s1") == (["ford_crossing_dry"] if dry else ["ford_crossing_wet"])
    assert codes(result, "s2") == (["ford_crossing_dry"] if dry else ["ford_crossing_wet"])
    assert result.alerts["s3"] == []
    if dry:
        assert result.alerts["s1"][0].params == {"count": 2} and result.alerts["s2"][0].params == {"count": 1}
