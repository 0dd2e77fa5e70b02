"""The trip's calendar (docs/RULES.md "Trip calendar"): RFC 5545 read back with icalendar, one event per day at the
local departure and arrival, rest days all day, in the reader's (or the share page's owner's) words; refused
to a stranger, for a bad share code and for a trip without dates."""
import io
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from icalendar import Calendar

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.trips.api.test_openapi import Conformance
from trips.core.db import atomic, db
from trips.models import Stage, Trip
from trips.route.pacing import rider_time
from trips.services.trips import import_gpx

START = date(2031, 6, 1)
PARIS = ZoneInfo("Europe/Paris")


@pytest.fixture
def trip(rider):
    gpx = gpx_from_points(make_points(2400, step_m=100.0), name="Vercors")
    made = import_gpx(rider[0], io.BytesIO(gpx), {"startDate": START.isoformat(), "endDate": "2031-06-03"})
    with atomic():
        days = db.session.query(Stage).filter_by(trip_id=made.id).order_by(Stage.position).all()
        for day in days:
            day.enrichment = {**(day.enrichment or {}), "timeZone": "Europe/Paris"}
        days[0].end_label = "Die"
        days[0].selected_accommodation = {"name": "Gîte du Col", "type": "guest_house", "lat": days[0].end_lat,
                                          "lon": days[0].end_lon}
        days[1].enrichment = {**days[1].enrichment, "labels": {"start": "Die", "end": "Crest"}}
    return db.session.get(Trip, made.id)


@pytest.fixture
def doc(client):
    return client.get("/api/openapi.json").get_json()


def events(body: bytes) -> list:
    calendar = Calendar.from_ical(body)
    assert calendar["VERSION"] == "2.0" and calendar["PRODID"]
    return sorted(calendar.walk("VEVENT"), key=lambda e: str(e["SUMMARY"]))


def test_one_event_per_riding_day_from_local_departure_to_arrival(app, client, rider, trip, doc):
    url = f"/api/trips/{trip.id}.ics"
    response = Conformance(app, doc).check(client.get(url, headers=rider[1]), "get", url)
    assert response.mimetype == "text/calendar" and "attachment" in response.headers["Content-Disposition"]
    found = events(response.data)
    assert [str(e["SUMMARY"]) for e in found] == ["Day 1 → Die", "Day 2 → Crest", "Day 3"]
    calendar = Calendar.from_ical(response.data)
    assert [tz["TZID"] for tz in calendar.walk("VTIMEZONE")] == ["Europe/Paris"]  # the zone the times name
    for i, (event, stage) in enumerate(zip(found, trip.stages)):
        start, end = event.decoded("DTSTART"), event.decoded("DTEND")
        assert start == datetime(2031, 6, 1 + i, 8, tzinfo=PARIS) and start.tzinfo.key == "Europe/Paris"
        hours = rider_time(stage.distance, stage.elevation, trip.average_speed, 8).elapsed_at(stage.distance)
        assert abs((end - start).total_seconds() - hours * 3600) < 1
        assert event["UID"].endswith(stage.id + "@" + app.config["BTP_BASE_URL"].split("//")[1].split(":")[0])
        assert f"{stage.distance:.1f}".rstrip("0").rstrip(".") in str(event["DESCRIPTION"])
        assert f"{round(stage.elevation):,}" in str(event["DESCRIPTION"]) and "m of climbing" in event["DESCRIPTION"]
    assert str(found[0]["LOCATION"]) == "Die" and str(found[1]["LOCATION"]) == "Crest" and "LOCATION" not in found[2]
    assert "Night: Gîte du Col" in found[0]["DESCRIPTION"]
    assert "Night: no place to sleep chosen yet" in found[1]["DESCRIPTION"]
    assert found[0].decoded("GEO") is not None


def test_a_rest_day_is_an_all_day_event(client, rider, trip):
    _, headers = rider
    first = trip.stages[0]
    answer = client.post(f"/api/trips/{trip.id}/stages/{first.id}/rest-day", headers={**headers, "If-Match": "*"})
    assert answer.status_code == 200
    found = events(client.get(f"/api/trips/{trip.id}.ics", headers=headers).data)
    [rest] = [e for e in found if "rest day" in str(e["SUMMARY"])]
    assert str(rest["SUMMARY"]) == "Day 2: rest day"
    assert rest.decoded("DTSTART") == START + timedelta(days=1) and not isinstance(rest.decoded("DTSTART"), datetime)
    assert rest.decoded("DTEND") == START + timedelta(days=2)
    assert len(found) == 4


def test_the_calendar_speaks_the_reader_s_language(client, rider, trip):
    body = client.get(f"/api/trips/{trip.id}.ics", headers={**rider[1], "Accept-Language": "fr"}).data
    found = events(body)
    assert [str(e["SUMMARY"]) for e in found] == ["Jour 1 → Die", "Jour 2 → Crest", "Jour 3"]
    assert "Nuit\u00a0: Gîte du Col" in found[0]["DESCRIPTION"] and "dénivelé positif" in found[0]["DESCRIPTION"]


def test_without_a_known_zone_the_times_are_written_in_utc(client, rider, trip):
    with atomic():
        for day in db.session.query(Stage).filter_by(trip_id=trip.id):
            day.enrichment = {k: v for k, v in (day.enrichment or {}).items() if k != "timeZone"}
    body = client.get(f"/api/trips/{trip.id}.ics", headers=rider[1]).data
    assert b"VTIMEZONE" not in body
    first = events(body)[0].decoded("DTSTART")
    # lon 5°: the nautical zone is UTC+0 (trips/route/clock.py local_departure), so 08:00 there is 08:00Z
    assert first == datetime(2031, 6, 1, 8, tzinfo=ZoneInfo("UTC")) and first.utcoffset() == timedelta(0)


def test_a_trip_without_climbing_says_so(client, rider, trip):
    with atomic():
        db.session.query(Stage).filter_by(trip_id=trip.id).update({"elevation": None, "elevation_loss": None})
    found = events(client.get(f"/api/trips/{trip.id}.ics", headers=rider[1]).data)
    assert all("climbing unknown" in e["DESCRIPTION"] for e in found)


def test_an_undated_trip_has_no_calendar(app, client, rider, doc):
    undated = import_gpx(rider[0], io.BytesIO(gpx_from_points(make_points(900))), {})
    url = f"/api/trips/{undated.id}.ics"
    response = Conformance(app, doc).check(client.get(url, headers=rider[1]), "get", url)
    assert response.status_code == 409 and response.mimetype == "application/problem+json"
    assert response.get_json()["detail"] == "This trip has no dates: give it a start date to have its calendar."
    french = client.get(url, headers={**rider[1], "Accept-Language": "fr"}).get_json()["detail"]
    assert french.startswith("Ce voyage n'a pas de dates\u00a0:")


def test_a_stranger_gets_no_calendar(client, trip):
    stranger = auth(make_token(make_user()))
    assert client.get(f"/api/trips/{trip.id}.ics", headers=stranger).status_code == 404
    assert client.get(f"/api/trips/{trip.id}.ics").status_code == 401


def test_the_share_link_serves_the_calendar_in_the_owner_s_language(client, rider, trip):
    _, headers = rider
    assert client.patch("/api/users/me", json={"locale": "fr"}, headers=headers).status_code == 200
    code = client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]
    page = client.get(f"/s/{code}").get_data(as_text=True)
    assert f"/s/{code}.ics" in page  # the page links it
    response = client.get(f"/s/{code}.ics", headers={"Accept-Language": "en"})
    assert response.status_code == 200 and response.mimetype == "text/calendar"
    assert [str(e["SUMMARY"]) for e in events(response.data)][0] == "Jour 1 → Die"
    assert client.delete(f"/api/trips/{trip.id}/share", headers=headers).status_code == 204
    assert client.get(f"/s/{code}.ics").status_code == 404


@pytest.mark.parametrize("code", ["short", "AAAAAAAA", "abc$efgh"])
def test_a_bad_share_code_has_no_calendar(client, code):
    assert client.get(f"/s/{code}.ics").status_code == 404


def test_an_undated_shared_trip_links_no_calendar(client, rider):
    user, headers = rider
    undated = import_gpx(user, io.BytesIO(gpx_from_points(make_points(900))), {})
    code = client.post(f"/api/trips/{undated.id}/share", headers=headers).get_json()["shortCode"]
    assert ".ics" not in client.get(f"/s/{code}").get_data(as_text=True)
    assert client.get(f"/s/{code}.ics").status_code == 409
