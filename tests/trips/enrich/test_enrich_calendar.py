"""Calendar (docs/RULES.md "Calendar"): each day's date
against the public holidays of the countries the day's own line lies in (imported boundaries first, the offline
reverse geocoder elsewhere), else a Sunday. A holiday and a Sunday per country tested, the border case, the
years spanned, rest days, and an undated trip."""
import io
import math
from datetime import date

import pytest

from jobs.tasks import run_enrichment
from tests.enrich_helpers import bounds_around, engine, import_map, stage, trip, trip_east
from tests.osm_maps import MapBuilder, line_east
from tests.trips.enrich.test_enrich_dispatch import FUTURE, GPX, patch, pending, reload, settle
from trips.enrich import calendar
from trips.enrich.alerts.calendar import CALENDAR_PUBLIC_HOLIDAY, CALENDAR_SUNDAY
from trips.enrich.alerts.catalogue import render
from trips.enrich.countries import nearest_country
from trips.readmodels.day import group_statuses
from trips.services.trips import import_gpx

SUNDAY = date(2026, 7, 5)        # a Sunday that is no national holiday in any country below
WEEKDAY = date(2026, 7, 8)       # a Wednesday, no holiday either
# (country, a city in it, a national holiday of it that is no holiday of the others, its name in `holidays`)
COUNTRIES = [
    ("FR", (48.857, 2.352), date(2026, 7, 14), "National Day"),
    ("DE", (52.520, 13.405), date(2026, 10, 3), "German Unity Day"),
    ("CH", (46.948, 7.447), date(2026, 8, 1), "National Day"),
    ("IT", (41.903, 12.496), date(2026, 6, 2), "Republic Day"),
    ("ES", (40.417, -3.704), date(2026, 10, 12), "National Day"),
    ("BE", (50.847, 4.357), date(2026, 7, 21), "National Day"),
    ("NL", (52.373, 4.900), date(2026, 4, 27), "King's Day"),
    ("GB", (51.507, -0.128), date(2026, 5, 4), "May Day"),
]
IDS = [c[0] for c in COUNTRIES]


def one_day(where, day: date, km: float = 20.0):
    return trip([stage("s1", 0, line_east(*where, km, 500.0))], start_date=day)


def facts(result, sid="s1"):
    return [(f.code, f.params) for f in result.alerts[sid]]


@pytest.mark.parametrize("iso,where,holiday,name", COUNTRIES, ids=IDS)
def test_a_national_holiday_of_the_country_the_day_is_in(ctx, iso, where, holiday, name):
    assert nearest_country(*where) == iso  # no map imported: the offline geocoder names the country
    result = calendar.compute(one_day(where, holiday), engine())
    assert facts(result) == [(CALENDAR_PUBLIC_HOLIDAY.code,
                              {"holiday": name, "country": iso, "date": holiday.isoformat()})]


@pytest.mark.parametrize("iso,where,holiday,name", COUNTRIES, ids=IDS)
def test_a_sunday_and_a_weekday_in_each_country(ctx, iso, where, holiday, name):
    assert facts(calendar.compute(one_day(where, SUNDAY), engine())) == \
        [(CALENDAR_SUNDAY.code, {"date": SUNDAY.isoformat()})]
    assert facts(calendar.compute(one_day(where, WEEKDAY), engine())) == []  # looked at, nothing to say


@pytest.mark.parametrize("iso,where,holiday,name", COUNTRIES, ids=IDS)
def test_another_countrys_holiday_is_nothing_here(ctx, iso, where, holiday, name):
    other = next(c for c in COUNTRIES if c[2] != holiday and c[2].isoweekday() != 7)
    assert facts(calendar.compute(one_day(where, other[2]), engine())) == []


def test_a_holiday_on_a_sunday_is_said_once_as_the_holiday(ctx):
    all_saints = date(2026, 11, 1)
    assert all_saints.isoweekday() == 7
    assert [c for c, _ in facts(calendar.compute(one_day(COUNTRIES[0][1], all_saints), engine()))] == \
        [CALENDAR_PUBLIC_HOLIDAY.code]


LAT, LON = 45.0, 5.0


def lon_at(km: float) -> float:
    return LON + km * 1000 / (111_320.0 * math.cos(math.radians(LAT)))


def france_switzerland(tmp_path, snap, border_km: float, east=("CH", "Switzerland")) -> None:
    """Imported boundaries: France west of `border_km` east of (45, 5), "Switzerland" (or `east`) east of it (a
    made-up border: the geocoder would say France all along, so only the boundaries can name the other)."""
    m = MapBuilder(bounds=bounds_around(snap))
    b = lon_at(border_km)
    m.country([(44.5, 4.5), (44.5, b), (45.5, b), (45.5, 4.5)], "FR", "France")
    m.country([(44.5, b), (44.5, 6.0), (45.5, 6.0), (45.5, b)], *east)
    import_map(m, tmp_path)


def test_a_route_crossing_into_the_country_whose_holiday_it_is(ctx, tmp_path):
    national_day = date(2026, 8, 1)  # Swiss National Day, a Saturday: nothing in France
    snap = trip_east(LAT, LON, [30, 30], start_date=date(2026, 7, 31))
    france_switzerland(tmp_path, snap, border_km=45)  # day 2 crosses at its 15th km
    assert nearest_country(*snap.stages[1].end) == "FR"
    result = calendar.compute(snap, engine())
    assert facts(result, "s1") == []
    assert facts(result, "s2") == [(CALENDAR_PUBLIC_HOLIDAY.code, {"holiday": "National Day", "country": "CH",
                                                                   "date": national_day.isoformat()})]


def test_the_same_day_short_of_the_border_has_no_holiday(ctx, tmp_path):
    snap = trip_east(LAT, LON, [30, 30], start_date=date(2026, 7, 31))
    france_switzerland(tmp_path, snap, border_km=70)  # the route ends 10 km short of it
    result = calendar.compute(snap, engine())
    assert facts(result, "s1") == [] and facts(result, "s2") == []


def test_a_holiday_across_a_border_the_day_never_reaches_is_not_said(ctx, tmp_path):
    """Day 1 wholly in France on a France–Italy trip, on the Italian Republic Day (a Tuesday): nothing on day 1;
    day 2 crosses into Italy and hears of it. Both countries' holiday: the day names its own."""
    republic_day = date(2026, 6, 2)
    snap = trip_east(LAT, LON, [30, 30], start_date=republic_day)
    france_switzerland(tmp_path, snap, border_km=45, east=("IT", "Italy"))
    result = calendar.compute(snap, engine())
    assert "s1" in result.alerts and facts(result, "s1") == []
    assert facts(result, "s2") == []  # 3 June: no holiday in either
    on_day_two = calendar.compute(trip_east(LAT, LON, [30, 30], start_date=date(2026, 6, 1)), engine())
    assert facts(on_day_two, "s1") == []
    assert facts(on_day_two, "s2") == [(CALENDAR_PUBLIC_HOLIDAY.code, {"holiday": "Republic Day", "country": "IT",
                                                                       "date": republic_day.isoformat()})]
    christmas = date(2026, 12, 25)  # a holiday in both
    in_france = trip_east(LAT, LON, [30, 30], start_date=christmas)
    assert facts(calendar.compute(in_france, engine()), "s1")[0][1]["country"] == "FR"
    in_italy = trip_east(LAT, LON, [50, 10], start_date=date(2026, 12, 24))  # day 2: km 50 to 60
    assert facts(calendar.compute(in_italy, engine()), "s2")[0][1]["country"] == "IT"


def test_every_year_the_trip_spans_and_rest_days_too(ctx):
    paris = COUNTRIES[0][1]
    snap = trip([stage("s1", 0, line_east(*paris, 20, 500.0)), stage("s2", 1, [paris, paris], rest=True)],
                start_date=date(2026, 12, 31))
    result = calendar.compute(snap, engine())
    assert facts(result, "s1") == []  # a Thursday
    assert facts(result, "s2") == [(CALENDAR_PUBLIC_HOLIDAY.code, {"holiday": "New Year's Day", "country": "FR",
                                                                   "date": "2027-01-01"})]


def test_an_undated_trip_looks_at_no_day(ctx):
    result = calendar.compute(trip([stage("s1", 0, line_east(48.857, 2.352, 20, 500.0))]), engine())
    assert result.alerts == {} and result.data == {} and result.covered


def test_the_alerts_read_with_the_day_and_the_holiday(ctx):
    holiday = calendar.compute(one_day(COUNTRIES[0][1], COUNTRIES[0][2]), engine()).alerts["s1"][0]
    shown = render(holiday.as_json(), 3)
    assert shown["group"] == "calendar" and shown["severity"] == "nudge"
    assert "Stage 3" in shown["message"] and "National Day" in shown["message"]
    sunday = render(calendar.compute(one_day(COUNTRIES[0][1], SUNDAY), engine()).alerts["s1"][0].as_json(), 2)
    assert "Stage 2" in sunday["message"] and "Sunday" in sunday["message"]


# --- what re-dispatches it ----------------------------------------------------------------------------------

def _imported(rider, dated: bool):
    return settle(import_gpx(rider[0], io.BytesIO(GPX), {"startDate": FUTURE} if dated else {}).id)


@pytest.mark.parametrize("dated", [True, False], ids=["dated", "undated"])
def test_a_moved_day_shifts_the_dates_and_runs_the_calendar_again_when_dated(client, rider, dated):
    made = _imported(rider, dated)
    response = client.patch(f"/api/trips/{made.id}/stages/{made.stages[2].id}/move", json={"toIndex": 0},
                            headers={**rider[1], "If-Match": "*"})
    assert response.status_code == 200, response.get_json()
    assert ("calendar" in pending(reload(made.id))) is dated


@pytest.mark.parametrize("dated", [True, False], ids=["dated", "undated"])
def test_a_start_date_runs_it_and_a_departure_hour_does_not(client, rider, dated):
    made = _imported(rider, dated)
    assert "calendar" not in pending(patch(client, rider[1], made, {"departureHour": 6}))
    moved = patch(client, rider[1], settle(made.id), {"startDate": "2031-01-01" if dated else FUTURE})
    assert "calendar" in pending(moved)


def test_a_dated_trip_runs_both_through_the_worker_and_an_undated_one_withholds_them(app, rider):
    """The registry end to end for calendar and daylight: dispatched with a dated trip's days, their jobs store the
    calendar and daylight groups on every day, read back as done; withheld (never
    pending, never "running") on an undated trip. No map is imported: neither needs one."""
    undated = _imported(rider, False)
    assert not {"calendar", "daylight"} & {c.name for c in undated.computations}
    made = import_gpx(rider[0], io.BytesIO(GPX), {"startDate": "2026-07-04"})  # a Saturday: day 2 a Sunday
    assert {"calendar", "daylight"} <= pending(reload(made.id))
    for name in ("calendar", "daylight"):
        run_enrichment(made.id, name, reload(made.id).generation)
    trip_ = reload(made.id)
    assert {c.name: c.status for c in trip_.computations if c.name in ("calendar", "daylight")} == \
        {"calendar": "done", "daylight": "done"}
    for day in trip_.stages:
        assert {"calendar", "daylight"} <= set(day.alerts_by_group)
        assert {k: v for k, v in group_statuses(trip_, day).items() if k in ("calendar", "daylight")} == \
            {"calendar": "done", "daylight": "done"}
    assert [f["code"] for f in trip_.stages[1].alerts_by_group["calendar"]] == [CALENDAR_SUNDAY.code]
    assert trip_.stages[0].alerts_by_group["calendar"] == []


def test_the_geocoder_reads_every_city_whatever_the_chunk_boundaries(monkeypatch):
    from trips.enrich import countries

    vectors, country, codes = countries._load()
    assert len(vectors) > 30_000 and {"FR", "DE", "CH", "IT", "ES", "BE", "NL", "GB"} <= set(codes)
    monkeypatch.setattr(countries, "CHUNK", 997)  # most cities now straddle a chunk's end
    small = countries._load()
    assert small[2] == codes and (small[1] == country).all() and (small[0] == vectors).all()
