"""Sharing (owner API, public page, GPX, route), GPX exports and duplication."""
import io
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pytest
from lxml import etree

from tests.factories import auth, idem, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import atomic, db
from trips.route.geo import total_distance_km
from trips.route.gpx import parse_gpx
from trips.models import Stage, Trip
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Shared <ride> & co")
SCHEMA = etree.XMLSchema(etree.parse(str(Path(__file__).resolve().parents[2] / "data" / "gpx11.xsd")))


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(GPX), {"startDate": "2031-06-01", "endDate": "2031-06-03"})


def test_share_lifecycle(app, client, rider, trip):
    _, headers = rider
    created = client.post(f"/api/trips/{trip.id}/share", headers=headers)
    assert created.status_code == 201
    body = created.get_json()
    code = body["shortCode"]
    assert len(code) == 8 and body["url"] == f"{app.config['BTP_BASE_URL']}/s/{code}"
    again = client.post(f"/api/trips/{trip.id}/share", headers=headers)
    assert again.status_code == 200 and again.get_json()["shortCode"] == code  # one active link per trip
    assert client.get(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"] == code

    page = client.get(f"/s/{code}")
    assert page.status_code == 200 and page.mimetype == "text/html"
    html = page.get_data(as_text=True)
    assert "Shared &lt;ride&gt; &amp; co" in html and "Day 3" in html and "<script" not in html
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    route = client.get(f"/api/s/{code}/route")
    etag = route.headers["ETag"]
    assert route.status_code == 200 and len(route.get_json()["stages"]) == 3
    assert client.get(f"/api/s/{code}/route", headers={"If-None-Match": etag}).status_code == 304
    gpx = client.get(f"/s/{code}.gpx")
    assert gpx.status_code == 200 and gpx.mimetype == "application/gpx+xml"

    assert client.delete(f"/api/trips/{trip.id}/share", headers=headers).status_code == 204
    assert client.get(f"/s/{code}").status_code == 404
    assert client.get(f"/s/{code}.gpx").status_code == 404
    assert client.get(f"/api/s/{code}/route", headers={"If-None-Match": etag}).status_code == 404
    assert client.get(f"/api/trips/{trip.id}/share", headers=headers).status_code == 404
    assert client.delete(f"/api/trips/{trip.id}/share", headers=headers).status_code == 404
    renewed = client.post(f"/api/trips/{trip.id}/share", headers=headers).get_json()["shortCode"]
    assert renewed != code


def test_sharing_works_on_a_started_trip(client, rider, trip):
    _, headers = rider
    with atomic():
        db.session.get(Trip, trip.id).start_date = date.today() - timedelta(days=1)
    assert client.post(f"/api/trips/{trip.id}/share", headers=headers).status_code == 201
    assert client.delete(f"/api/trips/{trip.id}/share", headers=headers).status_code == 204


def test_a_stranger_cannot_share_or_revoke(client, trip):
    stranger = auth(make_token(make_user()))
    for method in ("post", "get", "delete"):
        assert getattr(client, method)(f"/api/trips/{trip.id}/share", headers=stranger).status_code == 404


@pytest.mark.parametrize("code", ["short", "waytoolongcode", "abc$efgh", "AAAAAAAA"])
def test_unknown_or_malformed_codes_are_404(client, code):
    assert client.get(f"/s/{code}").status_code == 404
    assert client.get(f"/api/s/{code}/route").status_code == 404


def test_trip_gpx_is_valid_gpx_11_and_round_trips(client, rider, trip):
    _, headers = rider
    with atomic():
        first = db.session.get(Stage, trip.stages[0].id)
        first.accommodations = [{"name": "Gîte <du> lac", "type": "guest_house", "lat": 45.6, "lon": 5.8}]
        first.selected_accommodation = first.accommodations[0]
    response = client.get(f"/api/trips/{trip.id}.gpx", headers=headers)
    assert response.status_code == 200 and "attachment" in response.headers["Content-Disposition"]
    document = etree.fromstring(response.get_data())
    SCHEMA.assertValid(document)
    ns = {"g": "http://www.topografix.com/GPX/1/1"}
    assert "Gîte <du> lac" in document.xpath("//g:wpt/g:name/text()", namespaces=ns)
    parsed = parse_gpx(response.get_data(), split_tracks=True)
    assert parsed.title == "Shared <ride> & co" and len(parsed.tracks) == 3
    db.session.rollback()
    stored = db.session.get(Trip, trip.id)
    for track, stage in zip(parsed.tracks, stored.stages):
        line = np.asarray(stage.geometry)
        assert len(track) > len(line)  # the route's own points between the day's ends, not its simplified line
        assert abs(track[0] - line[0]).max() <= 0.05 and abs(track[-1] - line[-1]).max() <= 0.05
        assert abs(total_distance_km(track) - stage.distance) <= 0.01 * stage.distance


def test_stage_gpx_and_strangers(client, rider, trip):
    _, headers = rider
    stage = trip.stages[1]
    response = client.get(f"/api/trips/{trip.id}/stages/{stage.id}.gpx", headers=headers)
    assert response.status_code == 200 and "day-2.gpx" in response.headers["Content-Disposition"]
    SCHEMA.assertValid(etree.fromstring(response.get_data()))
    assert len(parse_gpx(response.get_data(), split_tracks=True).tracks) == 1
    stranger = auth(make_token(make_user()))
    assert client.get(f"/api/trips/{trip.id}.gpx", headers=stranger).status_code == 404


def test_duplicate_copies_days_with_new_ids_and_is_idempotent(client, rider, trip):
    _, headers = rider
    key = idem()
    response = client.post(f"/api/trips/{trip.id}/duplicate", headers={**headers, **key})
    assert response.status_code == 201
    copy = response.get_json()
    assert copy["id"] != trip.id and copy["title"] == "Shared <ride> & co (copy)"
    assert len(copy["stages"]) == 3 and copy["startDate"] == "2031-06-01"
    # The original's analysis (dispatched by its upload) has not run: the copy runs it too, so it is partial.
    assert copy["partial"] is True and {c["name"] for c in copy["computations"] if c["status"] == "pending"} \
        == {c.name for c in trip.computations if c.status == "pending"}
    assert not {s["stageId"] for s in copy["stages"]} & {s.id for s in trip.stages}
    again = client.post(f"/api/trips/{trip.id}/duplicate", headers={**headers, **key})
    assert again.status_code == 200 and again.get_json()["id"] == copy["id"]
    other = import_gpx(rider[0], io.BytesIO(GPX), {})
    reused = client.post(f"/api/trips/{other.id}/duplicate", headers={**headers, **key})
    assert reused.status_code == 409
    assert client.post(f"/api/trips/{trip.id}/duplicate", headers=headers).status_code == 400
    route = client.get(f"/api/trips/{copy['id']}/route", headers=headers).get_json()
    assert len(route["stages"]) == 3


def test_trip_creation_is_rate_limited(client, rider):
    _, headers = rider
    for _ in range(10):
        assert client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                           headers={**headers, **idem()}).status_code == 202
    refused = client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                          headers={**headers, **idem()})
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    other = auth(make_token(make_user()))
    assert client.post("/api/trips", json={"sourceUrl": "https://www.komoot.com/tour/1"},
                       headers={**other, **idem()}).status_code == 202
