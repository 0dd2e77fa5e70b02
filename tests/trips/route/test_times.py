"""Times are instants (docs/RULES.md "Times", "Daylight"): the arrival, the twilight's end and a place's opening hours
at the passage are compared as timezone-aware datetimes in the day's local zones, never as clock faces (near Helsinki in
June the twilight ends after midnight)."""
import io
from datetime import date, datetime, timedelta

import pytest

from tests.enrich_helpers import stage, trip
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.trips.enrich.test_enrich_daylight import distance_for
from trips.core.db import atomic, db
from trips.enrich import daylight, pois
from trips.enrich.alerts.calendar import SUNSET_ARRIVAL_AFTER_TWILIGHT
from trips.osm.queries import MapPoint
from trips.route import clock
from trips.models import Stage, Trip
from trips.route.pacing import rider_time
from trips.services.trips import import_gpx

HELSINKI = (60.17, 24.94)
MIDSUMMER = date(2026, 6, 20)
SVALBARD = (78.22, 15.65)
VALENCA, TUI = (41.90, -8.62), (42.05, -8.64)  # Portugal (UTC+1 in summer) and Spain (UTC+2), 17 km apart


def day(start, end, km, when):
    return trip([stage("s1", 0, [start, end], distance_km=km)], start_date=when, departure_hour=8,
                average_speed=15.0)


def test_helsinki_in_june_a_morning_arrival_is_not_after_dark():
    for when in (MIDSUMMER, date(2026, 6, 10), date(2026, 7, 1)):
        snap = day((60.10, 24.94), HELSINKI, distance_for(9 + 53 / 60, 8), when)
        assert daylight.compute(snap, None).alerts == {"s1": []}, when


def test_helsinki_twilight_ends_after_midnight_the_next_day():
    down, end = daylight.sky(*HELSINKI, MIDSUMMER)
    assert end.date() == MIDSUMMER + timedelta(days=1) and end.hour == 0 and end.minute > 30
    assert down.date() == MIDSUMMER and down.hour == 22
    assert end.utcoffset() == timedelta(hours=3)


def test_helsinki_an_arrival_past_the_midnight_twilight_is_after_dark():
    snap = day((60.10, 24.94), HELSINKI, distance_for(25 + 10 / 60, 8), MIDSUMMER)  # 01:10 the next night
    [fact] = daylight.compute(snap, None).alerts["s1"]
    assert fact.code == SUNSET_ARRIVAL_AFTER_TWILIGHT.code
    assert fact.params["arrival"] == "01:10" and fact.params["twilight"].startswith("00:")
    # 00:4x − 17 h 10 min of riding: leave by 07:xx
    assert fact.action == {"kind": "auto_fix", "departureHour": 7}


@pytest.mark.parametrize("when", [date(2026, 6, 20), date(2026, 12, 20)], ids=["polar summer", "polar night"])
def test_no_after_dark_alert_without_a_dusk_or_a_sunset(when):
    assert daylight.sky(*SVALBARD, when) is None
    snap = day((78.10, 15.65), SVALBARD, distance_for(23.5, 8), when)
    assert daylight.compute(snap, None).alerts == {"s1": []}


def test_the_helper_turns_departure_and_hours_ridden_into_an_aware_instant():
    at = clock.instant(MIDSUMMER, 8, 2.5, VALENCA)
    assert at == datetime(2026, 6, 20, 10, 30, tzinfo=clock.zone_at(*VALENCA))
    there = clock.instant(MIDSUMMER, 8, 2.5, VALENCA, TUI)
    assert there == at and (there.hour, there.minute) == (11, 30)  # the same instant on Spain's clock
    # a clock change during the ride: 10 h from 20:00 on the last Saturday of March in Paris is 07:00, not 06:00
    paris = (48.857, 2.352)
    assert clock.instant(date(2026, 3, 28), 20, 10, paris).hour == 7


def test_a_day_crossing_a_time_zone_arrives_on_the_end_points_clock():
    """22:00 on Portugal's clock is 23:00 in Spain, after Tui's twilight end (about 22:38): a clock-face reading
    (22:00 against 22:38) said nothing."""
    km = distance_for(22.0, 8)
    portugal = rider_time(km, 0.0, 15.0, 8).arrival_hour
    assert 21.8 < portugal < 22.0  # before Tui's twilight on a clock face
    [fact] = daylight.compute(day(VALENCA, TUI, km, MIDSUMMER), None).alerts["s1"]
    assert fact.params["arrival"] == clock.clock(datetime(2026, 6, 20, tzinfo=clock.zone_at(*TUI))
                                                 + timedelta(hours=portugal + 1))
    assert fact.params["arrival"] > fact.params["twilight"] and fact.params["twilight"].startswith("22:")
    assert fact.action["departureHour"] < 8


def test_an_opening_hours_check_reads_the_passage_on_the_places_clock():
    """The rider leaves Valença at 08:00 (Portugal); a shop across the river in Spain opens 09:00–10:00 Spanish
    time: the rider passes at 09:00 there, so it is open (a naive 08:00 read it closed)."""
    snap = day(VALENCA, TUI, 0.5, MIDSUMMER)
    shop = MapPoint("node", 1, "food", "supermarket", "Mercado", TUI[0], TUI[1], {"opening_hours": "Mo-Su 09:00-10:00"},
                    1, 0.0, 0.0)
    assert pois.Passage(snap, snap.stages[0], [shop])[0] is True
    late = MapPoint("node", 2, "food", "supermarket", "Tienda", TUI[0], TUI[1], {"opening_hours": "Mo-Su 08:00-08:59"},
                    1, 0.0, 0.0)
    assert pois.Passage(snap, snap.stages[0], [late])[0] is False


def test_an_undated_day_has_no_passage_to_check():
    snap = trip([stage("s1", 0, [VALENCA, TUI], distance_km=0.5)], departure_hour=8)
    shop = MapPoint("node", 1, "food", "supermarket", "M", TUI[0], TUI[1], {"opening_hours": "24/7"}, 1, 0.0, 0.0)
    assert pois.Passage(snap, snap.stages[0], [shop])[0] is None


def test_the_passage_and_the_arrival_are_the_same_formula():
    timing = rider_time(60.0, 300.0, 15.0, 8)
    arrival = timing.passage(MIDSUMMER, HELSINKI)
    assert clock.hours_since_midnight(arrival, MIDSUMMER) == pytest.approx(timing.arrival_hour)
    assert timing.passage(MIDSUMMER, HELSINKI, 0.0) == clock.departure(MIDSUMMER, 8, HELSINKI)


def test_a_day_crossing_a_time_zone_stores_its_clock_shift_and_shows_the_end_points_arrival(client, rider):
    crossing = day(VALENCA, TUI, 17.0, MIDSUMMER)
    assert daylight.compute(crossing, None).data == {"s1": {"clockShift": 60}}
    assert daylight.compute(day((60.10, 24.94), HELSINKI, 17.0, MIDSUMMER), None).data == {}  # one zone: nothing
    user, headers = rider
    made = import_gpx(user, io.BytesIO(gpx_from_points(make_points(900))), {"startDate": "2031-06-01"})
    base = client.get(f"/api/trips/{made.id}", headers=headers).get_json()["stages"][0]["estimatedArrival"]
    with atomic():
        first = db.session.query(Stage).filter_by(trip_id=made.id, position=0).one()
        first.enrichment = {**(first.enrichment or {}), "clockShift": 60}
    shown = client.get(f"/api/trips/{made.id}", headers=headers).get_json()["stages"][0]["estimatedArrival"]
    assert shown == f"{(int(base[:2]) + 1) % 24:02d}{base[2:]}"
    with atomic():  # undated: whatever a dated analysis left, the start point's clock
        db.session.get(Trip, made.id).start_date = None
        db.session.get(Trip, made.id).end_date = None
    assert client.get(f"/api/trips/{made.id}", headers=headers).get_json()["stages"][0]["estimatedArrival"] == base
