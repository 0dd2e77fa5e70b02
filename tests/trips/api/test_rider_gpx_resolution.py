"""The GPX export (the owner's /api/trips/{id}.gpx, a day's .gpx, the shared /s/<code>.gpx) carries the stored route's
own points between each day's ends (trips/services/gpx_days.py, trips/route/follow.py); a day edited off the route,
or a trip without a stored route, keeps its own line. Upload → export → upload gives the same days within 1 %."""
import io
import math

import numpy as np
import pytest
from lxml import etree
from pyproj import Geod

from tests.factories import auth, make_token, make_user
from trips.core.db import atomic, db
from trips.models import Stage, Trip, TripRoute
from trips.route.follow import follow
from trips.route.geo import total_distance_km
from trips.route.gpx import parse_gpx
from trips.route import gpx_export
from trips.route.gpx_export import iter_gpx
from trips.services.gpx_days import day_exports
from trips.services.stages import set_geometry
from trips.services.trips import import_gpx

_GEOD = Geod(ellps="WGS84")
NS = {"g": "http://www.topografix.com/GPX/1/1"}


def recorded_ride(n: int = 1320, seed: int = 21) -> list[tuple[float, float, float]]:
    """A route shaped like a recorded ride: uneven steps (5–250 m, dense in bends, sparse on straights), a
    heading that drifts and turns, switchbacks on a climb, and a noisy barometric elevation (about 190 km)."""
    rng = np.random.default_rng(seed)
    lat, lon, heading, ele = 45.19, 5.72, 20.0, 212.0
    points = []
    for i in range(n):
        points.append((round(lat, 7), round(lon, 7), round(ele, 1)))
        bend = rng.normal(0.0, 4.0) + (35.0 if 400 <= i < 520 and (i // 12) % 2 else 0.0) - (
            35.0 if 400 <= i < 520 and not (i // 12) % 2 else 0.0)
        heading = (heading + bend) % 360.0
        step = float(np.clip(rng.gamma(2.0, 110.0) / (1.0 + abs(bend) / 10.0), 5.0, 250.0))
        lon, lat, _ = _GEOD.fwd(lon, lat, heading, step)
        ele = max(0.0, ele + 6.0 * math.sin(i / 90.0) + (4.0 if 400 <= i < 520 else 0.0) + rng.normal(0.0, 0.8))
    return points


def gpx(points, name="Recorded ride") -> bytes:
    pts = "\n".join(f'<trkpt lat="{a}" lon="{o}"><ele>{e}</ele></trkpt>' for a, o, e in points)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="Garmin Connect" '
            f'xmlns="http://www.topografix.com/GPX/1/1"><trk><name>{name}</name><trkseg>\n{pts}\n'
            f'</trkseg></trk></gpx>').encode()


POINTS = recorded_ride()


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(gpx(POINTS)), {})


def track_points(data: bytes) -> list[int]:
    doc = etree.fromstring(data)
    return [len(t.xpath(".//g:trkpt", namespaces=NS)) for t in doc.xpath("//g:trk", namespaces=NS)]


def days(trip_id: str) -> list[Stage]:
    db.session.expire_all()
    return list(db.session.get(Trip, trip_id).stages)


def test_the_export_carries_every_uploaded_point(client, rider, trip):
    _, headers = rider
    stored = days(trip.id)
    assert len(stored) == 3 and sum(len(s.geometry) for s in stored) < 0.5 * len(POINTS)  # the simplified lines
    data = client.get(f"/api/trips/{trip.id}.gpx", headers=headers).get_data()
    counts = track_points(data)
    # every uploaded point once, plus each cut (an interpolated point shared by two days) at both days' ends
    assert sum(counts) >= len(POINTS) and sum(counts) <= len(POINTS) + 2 * len(stored)  # today: ~the lines
    parsed = parse_gpx(data, split_tracks=True)
    for track, stage in zip(parsed.tracks, stored):
        assert abs(total_distance_km(track) - stage.distance) <= 0.01 * stage.distance
        assert np.ptp(track[:, 2]) > 0  # with the elevation


def test_upload_export_upload_gives_the_same_days(client, rider, trip):
    user, headers = rider
    code = client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]
    for data in (client.get(f"/api/trips/{trip.id}.gpx", headers=headers).get_data(),
                 client.get(f"/s/{code}.gpx").get_data()):
        again = import_gpx(user, io.BytesIO(data), {})
        before, after = days(trip.id), days(again.id)
        assert len(after) == len(before)
        for a, b in zip(before, after):
            assert abs(a.distance - b.distance) <= 0.01 * a.distance, (a.day_number, a.distance, b.distance)
            assert abs(a.elevation - b.elevation) <= 0.01 * max(a.elevation, 100.0)


def test_one_day_s_export_is_at_full_resolution_too(client, rider, trip):
    _, headers = rider
    second = days(trip.id)[1]
    data = client.get(f"/api/trips/{trip.id}/stages/{second.id}.gpx", headers=headers).get_data()
    (count,) = track_points(data)
    assert count > 2 * len(second.geometry)


def test_a_day_edited_off_the_route_keeps_its_own_line_and_the_others_follow(client, rider, trip):
    _, headers = rider
    with atomic():
        first = days(trip.id)[0]
        line = np.asarray(first.geometry)
        detour = np.array([line[0], [line[0][0] + 0.05, line[0][1] - 0.05, 300.0], line[-1]])
        set_geometry(first, detour)  # rerouted through a waypoint: no longer the uploaded route
    counts = track_points(client.get(f"/api/trips/{trip.id}.gpx", headers=headers).get_data())
    stored = days(trip.id)
    assert counts[0] == 3  # its own line
    assert all(c > len(s.geometry) for c, s in zip(counts[1:], stored[1:]))  # the others: the route's points


def test_without_a_stored_route_the_days_lines_are_exported(client, rider, trip):
    _, headers = rider
    with atomic():
        db.session.get(Trip, trip.id).route = None
    assert db.session.get(TripRoute, trip.id) is None
    counts = track_points(client.get(f"/api/trips/{trip.id}.gpx", headers=headers).get_data())
    assert counts == [len(s.geometry) for s in days(trip.id)]


def test_strangers_and_revoked_links_get_nothing(client, rider, trip):
    _, headers = rider
    stranger = auth(make_token(make_user("stranger@example.org")))
    assert client.get(f"/api/trips/{trip.id}.gpx", headers=stranger).status_code == 404
    code = client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]
    client.delete(f"/api/trips/{trip.id}/share", headers=headers)
    assert client.get(f"/s/{code}.gpx").status_code == 404


def test_follow_refuses_lines_that_leave_the_route_or_go_back():
    route = np.array([[45.0 + i * 1e-3, 5.0, 100.0 + i] for i in range(50)])
    inner = np.round(route[10:20], 6)
    cut = (route[9] + route[10]) / 2
    ok, = follow(route, [np.vstack((cut, inner, route[20]))])
    assert ok is not None and len(ok) == 12
    off = np.vstack((cut, inner + [0.0, 1e-3, 0.0], route[20]))  # 80 m east of the route
    backwards = np.vstack((route[30], inner, route[40]))  # its points before its start
    assert follow(route, [off, backwards, None, np.zeros((1, 3))]) == [None, None, None, None]
    first, second = follow(route, [np.vstack((route[0], route[25])), np.vstack((route[5], route[10]))])
    assert first is not None and second is None  # a later day may not start before the day before ends


def test_the_export_is_made_in_chunks(trip, monkeypatch):
    monkeypatch.setattr(gpx_export, "CHUNK_POINTS", 100)
    chunks = list(iter_gpx("t", day_exports(db.session.get(Trip, trip.id))))
    assert len(chunks) > len(POINTS) / 100 and max(map(len, chunks)) < sum(map(len, chunks)) / 10
    with pytest.raises(ValueError):  # a bad point is refused before any chunk is made
        iter_gpx("t", [type(day_exports(db.session.get(Trip, trip.id))[0])(1, None, [[91.0, 0.0, 0.0]] * 2,
                                                                                (0.0, 0.0, 0.0))])
