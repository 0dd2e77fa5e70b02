"""The times of the exports are the rider's local departure (docs/RULES.md "Times"): a trip in New York leaving at 8
has its FIT laps, its records and its GPX track points start at 08:00 New York time (12:00 or 13:00 UTC by the date),
a trip in Paris at 08:00 Paris time; the FIT file is read back with Garmin's own SDK."""
import io
from datetime import date, datetime, timedelta, timezone

import pytest
from lxml import etree

from jobs.tasks import run_enrichment
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.trips.route.test_fit_export import read_fit
from trips.core.db import db
from trips.models import Stage, Trip
from trips.route import clock
from trips.route.gpx_export import GPX_NS
from trips.services.trips import import_gpx

NEW_YORK, PARIS = (40.70, -74.00), (48.85, 2.35)
NS = {"g": GPX_NS}


def planned(user, where, start: date) -> Trip:
    """A three-day trip from `where`, its days' time zones looked up as the analysis does (the borders' job)."""
    gpx = gpx_from_points(make_points(2400, start=where, step_m=100.0), name="Local")
    made = import_gpx(user, io.BytesIO(gpx), {"startDate": start.isoformat(),
                                              "endDate": (start + timedelta(days=2)).isoformat()})
    run_enrichment(made.id, "border_crossing", db.session.get(Trip, made.id).generation)
    db.session.expire_all()
    return db.session.get(Trip, made.id)


def first_points(gpx: bytes) -> list[datetime]:
    doc = etree.fromstring(gpx)
    return [datetime.fromisoformat(trk.xpath("g:trkseg/g:trkpt[1]/g:time/text()", namespaces=NS)[0])
            for trk in doc.xpath("g:trk", namespaces=NS)]


@pytest.mark.parametrize("where, zone, start, utc_hour", [
    (NEW_YORK, "America/New_York", date(2031, 1, 14), 13),  # EST, UTC−5
    (NEW_YORK, "America/New_York", date(2031, 6, 2), 12),  # EDT, UTC−4
    (PARIS, "Europe/Paris", date(2031, 1, 14), 7),  # CET, UTC+1
    (PARIS, "Europe/Paris", date(2031, 6, 2), 6),  # CEST, UTC+2
])
def test_fit_and_gpx_times_start_at_the_local_departure(client, rider, where, zone, start, utc_hour):
    user, headers = rider
    trip = planned(user, where, start)
    assert [(s.enrichment or {}).get("timeZone") for s in trip.stages] == [zone] * 3
    leaving = [datetime.combine(start + timedelta(days=k), datetime.min.time(), timezone.utc)
               + timedelta(hours=utc_hour) for k in range(3)]
    fit = read_fit(client.get(f"/api/trips/{trip.id}.fit", headers=headers).data)
    assert [lap["start_time"] for lap in fit["lap_mesgs"]] == leaving
    assert fit["record_mesgs"][0]["timestamp"] == leaving[0]
    assert fit["event_mesgs"][0]["timestamp"] == leaving[0]
    gpx = client.get(f"/api/trips/{trip.id}.gpx", headers=headers)
    assert first_points(gpx.data) == leaving
    doc = etree.fromstring(gpx.data)
    stamps = [datetime.fromisoformat(t) for t in doc.xpath("//g:trkpt/g:time/text()", namespaces=NS)]
    assert len(stamps) == len(doc.xpath("//g:trkpt", namespaces=NS)) and stamps == sorted(stamps)
    # the last point of a day is reached at the trip's pace: the day's km at its average speed
    last = datetime.fromisoformat(doc.xpath("g:trk[1]/g:trkseg/g:trkpt[last()]/g:time/text()", namespaces=NS)[0])
    hours = (last - leaving[0]) / timedelta(hours=1)
    assert hours == pytest.approx(trip.stages[0].distance / trip.average_speed, abs=1 / 3600 + 0.01)
    # each day's own `.fit` leaves at its own date's local 08:00
    day = read_fit(client.get(f"/api/trips/{trip.id}/stages/{trip.stages[1].id}.fit", headers=headers).data)
    assert day["lap_mesgs"][0]["start_time"] == leaving[1]


def test_before_the_zone_is_looked_up_the_longitude_s_nautical_zone_stands_in(client, rider):
    user, headers = rider
    gpx = gpx_from_points(make_points(900, start=NEW_YORK, step_m=100.0), name="Early")
    made = import_gpx(user, io.BytesIO(gpx), {"startDate": "2031-06-02"})
    assert "timeZone" not in (db.session.get(Stage, made.stages[0].id).enrichment or {})
    fit = read_fit(client.get(f"/api/trips/{made.id}.fit", headers=headers).data)
    # UTC−5 (74° W), never UTC: the departure is at most an hour off the local clock, not five
    assert fit["lap_mesgs"][0]["start_time"] == datetime(2031, 6, 2, 13, tzinfo=timezone.utc)


def test_a_zone_the_system_does_not_know_falls_back_to_the_nautical_zone():
    assert clock.local_departure(date(2031, 6, 2), 8, "Mars/Olympus_Mons", -74.0) == \
        datetime(2031, 6, 2, 13, tzinfo=timezone.utc)
    assert clock.local_departure(date(2031, 6, 2), 8, None, 179.9) == datetime(2031, 6, 1, 20, tzinfo=timezone.utc)
    assert clock.local_departure(date(2031, 6, 2), 8.5, "Asia/Kolkata", 77.0) == \
        datetime(2031, 6, 2, 3, tzinfo=timezone.utc)


def test_days_longer_than_a_day_start_when_the_one_before_ends():
    first = datetime(2031, 6, 2, 12, tzinfo=timezone.utc)
    starts = clock.ride_starts([first + timedelta(days=k) for k in range(3)], [30 * 3600.0, 3600.0, 3600.0])
    assert starts == [first, first + timedelta(hours=30), first + timedelta(days=2)]
