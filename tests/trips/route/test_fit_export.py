"""FIT course files (the trip's, a day's, the shared link's; days as laps or one course per day), written by BTP's
encoder (trips/route/fit_export.py, fit_writer.py) and read back here by another library, Garmin's own FIT SDK
decoder, which checks the header, the CRC and every message against the FIT profile."""
import io
import zipfile
from datetime import datetime, timezone

import numpy as np
import pytest
from garmin_fit_sdk import Decoder, Stream

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import atomic, db
from trips.models import Stage
from trips.route import fit_export
from trips.route.gpx_export import DayExport
from trips.services import sharing
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Alpine loop")  # 239.9 km: three days
START = datetime(2031, 6, 1, 8, tzinfo=timezone.utc)


def read_fit(data: bytes) -> dict:
    decoder = Decoder(Stream.from_byte_array(bytearray(data)))
    assert decoder.is_fit() and decoder.check_integrity()  # header and CRC as Garmin's SDK checks them
    messages, errors = Decoder(Stream.from_byte_array(bytearray(data))).read()
    assert errors == []
    return messages


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(GPX), {"startDate": "2031-06-01", "endDate": "2031-06-03"})


def test_the_trip_is_one_course_its_days_laps(client, rider, trip):
    _, headers = rider
    with atomic():  # a chosen lodging names the first day's end
        db.session.get(Stage, trip.stages[0].id).selected_accommodation = {"name": "Gîte du lac", "lat": 45.1,
                                                                            "lon": 5.1}
    response = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    assert response.status_code == 200 and response.mimetype == "application/vnd.ant.fit"
    assert response.headers["Content-Disposition"] == 'attachment; filename="Alpine-loop.fit"'
    fit = read_fit(response.data)
    assert fit["file_id_mesgs"][0]["type"] == "course"
    assert fit["course_mesgs"] == [{"sport": "cycling", "name": "Alpine loop"}]
    laps, records = fit["lap_mesgs"], fit["record_mesgs"]
    assert len(laps) == 3
    assert [round(lap["total_distance"] / 1000, 1) for lap in laps] == [round(s.distance, 1) for s in trip.stages]
    assert records[0]["distance"] == 0 and records[-1]["distance"] == pytest.approx(239_900, rel=0.002)
    assert records[0]["timestamp"] == START  # the first day's departure, 8 h
    assert laps[1]["start_time"] == datetime(2031, 6, 2, 8, tzinfo=timezone.utc)  # day 2 leaves on its own date
    stamps = [r["timestamp"] for r in records]
    assert stamps == sorted(stamps)
    assert all("altitude" in r for r in records)  # the route carries its elevation
    points = fit["course_point_mesgs"]
    assert [p["name"] for p in points][0] == "Gîte du lac" and len(points) == 3
    assert [e["event_type"] for e in fit["event_mesgs"]] == ["start", "stop_all"]


def test_one_course_per_day_in_a_zip_and_a_day_alone(client, rider, trip):
    _, headers = rider
    response = client.get(f"/api/trips/{trip.id}.fit?days=courses", headers=headers)
    assert response.status_code == 200 and response.mimetype == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(response.data))
    assert archive.namelist() == ["day-01.fit", "day-02.fit", "day-03.fit"]
    second = read_fit(archive.read("day-02.fit"))
    assert second["course_mesgs"][0]["name"] == "Day 2: Alpine loop" and len(second["lap_mesgs"]) == 1
    day = client.get(f"/api/trips/{trip.id}/stages/{trip.stages[2].id}.fit", headers=headers)
    assert day.status_code == 200 and day.headers["Content-Disposition"].endswith('-day-3.fit"')
    assert read_fit(day.data)["lap_mesgs"][0]["total_distance"] == pytest.approx(trip.stages[2].distance * 1000,
                                                                                 rel=0.01)
    bad = client.get(f"/api/trips/{trip.id}.fit?days=weeks", headers=headers)
    assert bad.status_code == 400 and "days" in bad.get_json()["errors"]


def test_the_shared_link_serves_fit_while_it_lives(client, rider, trip):
    share, _ = sharing.share_trip(rider[0], trip.id)
    whole = client.get(f"/s/{share.short_code}.fit")
    assert whole.status_code == 200 and len(read_fit(whole.data)["lap_mesgs"]) == 3
    day = client.get(f"/s/{share.short_code}/stages/{trip.stages[0].id}.fit")
    assert day.status_code == 200 and len(read_fit(day.data)["lap_mesgs"]) == 1
    assert client.get(f"/s/{share.short_code}/stages/0192f000-0000-7000-8000-000000000000.fit").status_code == 404
    sharing.unshare_trip(rider[0], trip.id)
    assert client.get(f"/s/{share.short_code}.fit").status_code == 404


def test_someone_else_s_trip_is_not_found(client, rider, trip):
    stranger = auth(make_token(make_user()))
    assert client.get(f"/api/trips/{trip.id}.fit", headers=stranger).status_code == 404
    assert client.get(f"/api/trips/{trip.id}/stages/{trip.stages[0].id}.fit", headers=stranger).status_code == 404
    assert client.get(f"/api/trips/{trip.id}.fit").status_code == 401


def test_unknown_elevation_is_left_out_not_zero_and_rest_days_are_skipped():
    known = np.array([[45.0 + i * 1e-3, 5.0, 300.0 + i] for i in range(50)])
    unknown = np.array([[45.05 + i * 1e-3, 5.0, np.nan] for i in range(50)])
    days = [DayExport(1, "Up", known, tuple(known[-1])),
            DayExport(2, None, [], tuple(known[-1]), is_rest_day=True),
            DayExport(3, "Flat", unknown, tuple(unknown[-1]), end_label="Annecy <centre>\x00")]
    fit = read_fit(fit_export.course("Two days", days, START, 15.0))
    records = fit["record_mesgs"]
    assert len(records) == 100 and len(fit["lap_mesgs"]) == 2
    assert all("altitude" in r for r in records[:50]) and not any("altitude" in r for r in records[50:])
    assert fit["course_point_mesgs"][1]["name"] == "Annecy <centre>"  # control characters dropped
    assert fit["lap_mesgs"][1]["start_time"] == datetime(2031, 6, 3, 8, tzinfo=timezone.utc)  # day 3's own date


def test_a_day_longer_than_a_day_never_turns_the_clock_back():
    line = np.array([[45.0 + i * 1e-2, 5.0, 0.0] for i in range(200)])  # about 220 km at 5 km/h: 44 h
    days = [DayExport(1, None, line, tuple(line[-1])), DayExport(2, None, line[::-1], tuple(line[0]))]
    stamps = [r["timestamp"] for r in read_fit(fit_export.course("Slow", days, START, 1.0))["record_mesgs"]]
    assert stamps == sorted(stamps)


def test_nothing_to_ride_is_refused():
    with pytest.raises(ValueError):
        fit_export.course("Empty", [DayExport(1, None, [], (45.0, 5.0, None), is_rest_day=True)], START, 15.0)
    with pytest.raises(ValueError):
        fit_export.course_per_day("Empty", [], START, 15.0)


def test_names_are_cut_at_a_character_not_a_byte():
    long = "É" * 60  # two bytes each: 40 bytes hold 18 of them and the ellipsis
    line = np.array([[45.0, 5.0, 0.0], [45.01, 5.0, 0.0]])
    fit = read_fit(fit_export.course(long, [DayExport(1, None, line, tuple(line[-1]))], START, 15.0))
    assert fit["course_mesgs"][0]["name"] == "É" * 18 + "…"


def test_names_are_cut_at_a_word():
    line = np.array([[45.0, 5.0, 0.0], [45.01, 5.0, 0.0]])
    hotel = {"name": "Hôtel-Restaurant du Lac International Résidence", "lat": 45.01, "lon": 5.0}
    fit = read_fit(fit_export.course("Traversée des Alpes par les cols du Grand Tour", [
        DayExport(1, None, line, tuple(line[-1]), accommodation=hotel)], START, 15.0))
    assert fit["course_mesgs"][0]["name"] == "Traversée des Alpes par les cols du…"
    assert fit["course_point_mesgs"][0]["name"] == "Hôtel-Restaurant du Lac…"  # "International" would be 41 bytes
    assert all(len(n.encode()) <= fit_export.NAME_BYTES for n in (fit["course_mesgs"][0]["name"],
                                                                  fit["course_point_mesgs"][0]["name"]))


def test_the_reader_would_see_a_damaged_file():
    """The read-back is a real check: one byte changed in a record and Garmin's decoder refuses the CRC."""
    line = np.array([[45.0, 5.0, 0.0], [45.01, 5.0, 0.0]])
    data = bytearray(fit_export.course("Check", [DayExport(1, None, line, tuple(line[-1]))], START, 15.0))
    data[len(data) // 2] ^= 0xFF
    assert not Decoder(Stream.from_byte_array(data)).check_integrity()


def test_a_huge_route_is_thinned_and_its_laps_keep_the_days_lengths():
    """300 000 points (a 30 MB GPX's worth) make a course of at most MAX_COURSE_POINTS records; each lap is as long
    as its day measured on every point."""
    from trips.route.geo import total_distance_km

    points = np.array(make_points(60_001, step_m=10.0))
    days = [DayExport(d + 1, None, points[d * 20_000:(d + 1) * 20_000 + 1], tuple(points[(d + 1) * 20_000]))
            for d in range(3)]
    fit = read_fit(fit_export.course("Long", days, START, 15.0))
    assert 3 * fit_export.MIN_DAY_POINTS <= len(fit["record_mesgs"]) <= fit_export.MAX_COURSE_POINTS
    for lap, day in zip(fit["lap_mesgs"], days):
        assert lap["total_distance"] == pytest.approx(total_distance_km(day.geometry) * 1000, abs=0.5)
    distances = [r["distance"] for r in fit["record_mesgs"]]
    assert distances == sorted(distances) and distances[-1] == pytest.approx(600_000, abs=2)


def test_a_trip_without_days_yet_has_nothing_to_ride(client, rider):
    from tests.factories import idem

    _, headers = rider
    created = client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/123456"},
                          headers={**headers, **idem()})
    assert created.status_code == 202 and created.get_json()["stages"] == []  # its route is still being fetched
    response = client.get(f"/api/trips/{created.get_json()['id']}.fit", headers=headers)
    assert response.status_code == 409 and "no day" in response.get_json()["detail"]
