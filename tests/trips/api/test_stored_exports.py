"""Export files made once per version of the trip and served from the store (trips/services/stored_exports.py):
the strong ETag and 304, a new version made again and the old one dropped, the owner's file served to the share
link, concurrent first downloads made once, and nothing kept of a refusal or shown to someone else."""
import hashlib
import io
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.trips.route.test_fit_export import read_fit
from trips.core.db import atomic, db
from trips.models import Stage, Trip, TripExport
from trips.route import fit_export
from trips.services import sharing, stored_exports
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Kept loop")


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(GPX), {"startDate": "2031-06-01", "endDate": "2031-06-03"})


@pytest.fixture
def builds(monkeypatch):
    """How many FIT courses were written."""
    made = []
    course = fit_export.course

    def counted(*args, **kwargs):
        made.append(args[0])
        return course(*args, **kwargs)

    monkeypatch.setattr(fit_export, "course", counted)
    return made


def kept(trip_id):
    """(kind, options, version) of each file kept of the trip; the kind without its writer's format."""
    db.session.commit()  # a read transaction of this thread's would not see the requests' rows
    rows = db.session.execute(sa.select(TripExport.kind, TripExport.options, TripExport.version)
                              .where(TripExport.trip_id == trip_id)).all()
    return [(kind.split(".")[0], options, version) for kind, options, version in rows]


def test_the_second_download_is_served_from_the_store_and_a_named_one_is_not_modified(client, rider, trip, builds):
    _, headers = rider
    first = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    assert first.status_code == 200 and len(read_fit(first.data)["lap_mesgs"]) == 3
    etag = first.headers["ETag"]
    assert etag == f'"{hashlib.sha256(first.data).hexdigest()}"'  # strong, from the content
    assert first.headers["Content-Length"] == str(len(first.data))
    again = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    assert again.status_code == 200 and again.data == first.data and again.headers["ETag"] == etag
    named = client.get(f"/api/trips/{trip.id}.fit", headers={**headers, "If-None-Match": f'"x", {etag}'})
    assert named.status_code == 304 and named.data == b"" and named.headers["ETag"] == etag
    weak = client.get(f"/api/trips/{trip.id}.fit", headers={**headers, "If-None-Match": f"W/{etag}"})
    assert weak.status_code == 304  # If-None-Match compares weakly
    other = client.get(f"/api/trips/{trip.id}.fit", headers={**headers, "If-None-Match": '"not-it"'})
    assert other.status_code == 200 and other.data == first.data
    assert len(builds) == 1


def test_each_option_is_its_own_file(client, rider, trip, builds):
    _, headers = rider
    whole = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    courses = client.get(f"/api/trips/{trip.id}.fit?days=courses", headers=headers)
    laps = client.get(f"/api/trips/{trip.id}.fit?days=laps", headers=headers)  # the default, said
    day = client.get(f"/api/trips/{trip.id}/stages/{trip.stages[1].id}.fit", headers=headers)
    assert courses.mimetype == "application/zip" and laps.headers["ETag"] == whole.headers["ETag"]
    assert len({whole.headers["ETag"], courses.headers["ETag"], day.headers["ETag"]}) == 3
    assert len(builds) == 1 + 3 + 1
    assert {(k, o) for k, o, _ in kept(trip.id)} == {("fit", ""), ("fit", "courses"),
                                                     ("fit", f"days={trip.stages[1].id}")}


def test_a_change_to_the_trip_makes_the_file_again_and_drops_the_older_ones(client, rider, trip, builds):
    _, headers = rider
    first = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    gpx = client.get(f"/api/trips/{trip.id}.gpx", headers=headers)
    with atomic():  # a lodging chosen: the trip's version number does not move, the file does
        db.session.get(Stage, trip.stages[0].id).selected_accommodation = {"name": "Refuge du col", "lat": 45.1,
                                                                            "lon": 5.1}
    changed = client.get(f"/api/trips/{trip.id}.fit", headers={**headers, "If-None-Match": first.headers["ETag"]})
    assert changed.status_code == 200 and changed.headers["ETag"] != first.headers["ETag"]
    assert read_fit(changed.data)["course_point_mesgs"][0]["name"] == "Refuge du col"
    assert len(builds) == 2
    assert [(k, o) for k, o, _ in kept(trip.id)] == [("fit", "")]  # the GPX of the older version went too
    with atomic():
        db.session.get(Trip, trip.id).title = "Renamed loop"
    again = client.get(f"/api/trips/{trip.id}.gpx", headers={**headers, "If-None-Match": gpx.headers["ETag"]})
    assert again.status_code == 200 and b"Renamed loop" in again.data


def test_someone_else_gets_nothing_even_naming_the_file(client, rider, trip):
    _, headers = rider
    etag = client.get(f"/api/trips/{trip.id}.fit", headers=headers).headers["ETag"]
    stranger = auth(make_token(make_user()))
    for path in (f"/api/trips/{trip.id}.fit", f"/api/trips/{trip.id}.gpx"):
        refused = client.get(path, headers={**stranger, "If-None-Match": etag})
        assert refused.status_code == 404 and "ETag" not in refused.headers
    assert client.get(f"/api/trips/{trip.id}.fit", headers={"If-None-Match": etag}).status_code == 401


def test_the_share_link_is_served_the_owner_s_kept_file(client, rider, trip, builds):
    _, headers = rider
    owner = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    share, _ = sharing.share_trip(rider[0], trip.id)
    shared = client.get(f"/s/{share.short_code}.fit")
    assert shared.status_code == 200 and shared.data == owner.data and len(builds) == 1
    assert client.get(f"/s/{share.short_code}.fit", headers={"If-None-Match": owner.headers["ETag"]}).status_code \
        == 304
    public_gpx = client.get(f"/s/{share.short_code}.gpx")
    own_gpx = client.get(f"/api/trips/{trip.id}.gpx", headers=headers)
    assert public_gpx.status_code == 200 and own_gpx.status_code == 200
    # the public file (its words floored) is kept apart from the owner's
    assert {(k, o) for k, o, _ in kept(trip.id)} == {("fit", ""), ("gpx", "public"), ("gpx", "")}
    assert client.get(f"/s/{share.short_code}.gpx",
                      headers={"If-None-Match": public_gpx.headers["ETag"]}).status_code == 304
    sharing.unshare_trip(rider[0], trip.id)
    gone = client.get(f"/s/{share.short_code}.fit", headers={"If-None-Match": owner.headers["ETag"]})
    assert gone.status_code == 404


def test_two_first_downloads_at_once_make_the_file_once(app, rider, trip, builds, monkeypatch):
    code = sharing.share_trip(rider[0], trip.id)[0].short_code
    writing, waiting = threading.Event(), threading.Event()
    course, wait = fit_export.course, stored_exports._wait

    def slow_course(*args, **kwargs):  # the first maker holds on until the other request waits for its file
        writing.set()
        waiting.wait(10)
        return course(*args, **kwargs)

    def noted_wait(*args, **kwargs):
        waiting.set()
        return wait(*args, **kwargs)

    monkeypatch.setattr(fit_export, "course", slow_course)
    monkeypatch.setattr(stored_exports, "_wait", noted_wait)

    def download(delay):
        if delay:
            writing.wait(10)
        return app.test_client().get(f"/s/{code}.fit")

    with ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(download, (False, True)))
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].data == answers[1].data and waiting.is_set()
    assert len(builds) == 1 and len(kept(trip.id)) == 1


def test_a_request_that_looked_just_before_the_file_was_stored_does_not_make_it_again(client, rider, trip, builds,
                                                                                      monkeypatch):
    _, headers = rider
    first = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    look, looks = stored_exports._look, []

    def late_look(*args, **kwargs):  # the first look ran before the maker committed; the lock is free after
        looks.append(1)
        return None if len(looks) == 1 else look(*args, **kwargs)

    monkeypatch.setattr(stored_exports, "_look", late_look)
    again = client.get(f"/api/trips/{trip.id}.fit", headers=headers)
    assert again.status_code == 200 and again.headers["ETag"] == first.headers["ETag"] and len(builds) == 1


def test_a_refusal_keeps_nothing(client, rider):
    _, headers = rider
    created = client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/123456"},
                          headers={**headers, **idem()})
    trip_id = created.get_json()["id"]
    assert client.get(f"/api/trips/{trip_id}.fit", headers=headers).status_code == 409
    assert client.get(f"/api/trips/{trip_id}.fit?days=weeks", headers=headers).status_code == 400
    assert kept(trip_id) == []


def test_an_undated_trip_s_files_are_made_again_the_next_day(rider, trip, monkeypatch):
    from datetime import datetime, timezone

    undated = import_gpx(rider[0], io.BytesIO(GPX), {})
    today = stored_exports.export_version(undated), stored_exports.export_version(trip)

    class Tomorrow(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2099, 1, 2, tzinfo=timezone.utc)

    monkeypatch.setattr(stored_exports, "datetime", Tomorrow)
    assert stored_exports.export_version(undated) != today[0]  # its days are dated from today
    assert stored_exports.export_version(trip) == today[1]
