"""Editing days over REST: the five operations, the accommodation choice, the guards and their order."""
import io
from datetime import date, timedelta

import pytest

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import atomic, db
from trips.guards import FAIL_FAST_CHAIN, WRITE_CHAIN
from trips.models import Trip
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Four days")  # 239.9 km → 3 days of ≤ 80 km


def new_trip(user, **form) -> Trip:
    return import_gpx(user, io.BytesIO(GPX), form)


def trip_json(client, headers, trip_id):
    return client.get(f"/api/trips/{trip_id}", headers=headers).get_json()


def edit(client, method, url, headers, version, body=None):
    kwargs = {"headers": {**headers, "If-Match": f'"{version}"'}}
    if body is not None:
        kwargs["json"] = body
    return getattr(client, method)(url, **kwargs)


def test_the_write_chain_order_is_pinned():
    assert [g.__name__ for g in WRITE_CHAIN] == ["ownership", "lock", "precondition", "validation", "confirmation"]
    assert [g.__name__ for g in FAIL_FAST_CHAIN] == ["ownership", "lock", "precondition"]


def test_add_a_day_with_dates_moves_the_end_date(client, rider):
    user, headers = rider
    trip = new_trip(user, startDate="2031-06-01", endDate="2031-06-03")
    body = {"startPoint": {"lat": 46.0, "lon": 6.0}, "endPoint": {"lat": 46.1, "lon": 6.1, "ele": 900},
            "position": 1, "label": "Detour"}
    response = edit(client, "post", f"/api/trips/{trip.id}/stages", headers, 1, body)
    assert response.status_code == 200 and response.headers["ETag"] == '"2"'
    data = response.get_json()
    assert [s["dayNumber"] for s in data["stages"]] == [1, 2, 3, 4]
    assert data["stages"][1]["label"] == "Detour" and 13 < data["stages"][1]["distance"] < 14
    assert data["endDate"] == "2031-06-04" and data["version"] == 2


def test_ids_survive_edits_and_days_are_renumbered(client, rider):
    user, headers = rider
    trip = new_trip(user)
    ids = [s["stageId"] for s in trip_json(client, headers, trip.id)["stages"]]
    moved = edit(client, "patch", f"/api/trips/{trip.id}/stages/{ids[2]}/move", headers, 1, {"toIndex": 0})
    assert moved.status_code == 200
    assert [s["stageId"] for s in moved.get_json()["stages"]] == [ids[2], ids[0], ids[1]]
    assert [s["dayNumber"] for s in moved.get_json()["stages"]] == [1, 2, 3]


@pytest.mark.parametrize("body,field", [({}, "toIndex"), ({"toIndex": 3}, "toIndex"), ({"toIndex": 1}, "toIndex"),
                                        ({"toIndex": "0"}, "toIndex")])
def test_move_refusals_name_the_field(client, rider, body, field):
    user, headers = rider
    trip = new_trip(user)
    second = trip_json(client, headers, trip.id)["stages"][1]["stageId"]
    response = edit(client, "patch", f"/api/trips/{trip.id}/stages/{second}/move", headers, 1, body)
    assert response.status_code == 422 and field in response.get_json()["errors"]
    assert trip_json(client, headers, trip.id)["version"] == 1


def test_cut_a_day_at_a_distance_gives_the_rest_to_the_next_day(client, rider):
    user, headers = rider
    trip = new_trip(user)
    before = trip_json(client, headers, trip.id)["stages"]
    response = edit(client, "patch", f"/api/trips/{trip.id}/stages/{before[0]['stageId']}", headers, 1,
                    {"distance": 60})
    after = response.get_json()["stages"]
    assert response.status_code == 200 and len(after) == 3
    assert after[0]["distance"] == 60.0
    assert after[1]["distance"] == pytest.approx(before[0]["distance"] + before[1]["distance"] - 60, abs=0.2)
    assert after[1]["endPoint"] == before[1]["endPoint"]
    assert after[1]["startPoint"] == after[0]["endPoint"]


def test_cut_the_last_day_makes_a_new_day(client, rider):
    user, headers = rider
    trip = new_trip(user)
    last = trip_json(client, headers, trip.id)["stages"][-1]
    response = edit(client, "patch", f"/api/trips/{trip.id}/stages/{last['stageId']}", headers, 1, {"distance": 20})
    stages = response.get_json()["stages"]
    assert len(stages) == 4 and stages[2]["distance"] == 20.0
    assert stages[3]["distance"] == pytest.approx(last["distance"] - 20, abs=0.2)
    assert stages[3]["endPoint"] == last["endPoint"]
    too_far = edit(client, "patch", f"/api/trips/{trip.id}/stages/{stages[3]['stageId']}", headers, 2,
                   {"distance": 500})
    assert too_far.status_code == 422 and "distance" in too_far.get_json()["errors"]


def test_a_new_point_off_the_route_is_joined_straight_and_labels_change_alone(client, rider):
    user, headers = rider
    trip = new_trip(user)
    first = trip_json(client, headers, trip.id)["stages"][0]
    url = f"/api/trips/{trip.id}/stages/{first['stageId']}"
    labelled = edit(client, "patch", url, headers, 1, {"label": "  Lakes  "}).get_json()["stages"][0]
    assert labelled["label"] == "Lakes" and labelled["distance"] == first["distance"]
    days = edit(client, "patch", url, headers, 2, {"endPoint": {"lat": 45.05, "lon": 5.0}}).get_json()["stages"]
    moved = days[0]  # ~3.3 km along the road, then straight out to the point (no router): approximate
    assert moved["endPoint"]["lat"] == 45.05 and moved["distance"] == pytest.approx(8.8, abs=0.1)
    assert moved["approximate"] and days[1]["startPoint"]["lat"] == 45.05
    both = edit(client, "patch", url, headers, 3, {"distance": 3, "endPoint": {"lat": 45, "lon": 5}})
    assert both.status_code == 422 and "distance" in both.get_json()["errors"]


def test_delete_merges_into_the_next_day_and_keeps_one_riding_day(client, rider):
    user, headers = rider
    trip = new_trip(user)
    stages = trip_json(client, headers, trip.id)["stages"]
    response = edit(client, "delete", f"/api/trips/{trip.id}/stages/{stages[0]['stageId']}", headers, 1)
    merged = response.get_json()["stages"]
    assert response.status_code == 200 and len(merged) == 2
    assert merged[0]["stageId"] == stages[1]["stageId"]
    assert merged[0]["startPoint"] == stages[0]["startPoint"]
    assert merged[0]["distance"] == pytest.approx(stages[0]["distance"] + stages[1]["distance"], abs=0.1)
    one = edit(client, "delete", f"/api/trips/{trip.id}/stages/{merged[0]['stageId']}", headers, 2)
    assert one.status_code == 200 and len(one.get_json()["stages"]) == 1  # a one-day trip is a trip
    assert one.get_json()["status"] == "ready"
    last = one.get_json()["stages"][0]["stageId"]
    refused = edit(client, "delete", f"/api/trips/{trip.id}/stages/{last}", headers, 3)
    assert refused.status_code == 422
    assert refused.get_json()["errors"]["stageId"] == "a trip keeps at least 1 riding day; delete the trip instead"


def test_deleting_the_last_day_merges_into_the_previous_one(client, rider):
    user, headers = rider
    trip = new_trip(user)
    stages = trip_json(client, headers, trip.id)["stages"]
    merged = edit(client, "delete", f"/api/trips/{trip.id}/stages/{stages[2]['stageId']}", headers, 1)
    after = merged.get_json()["stages"]
    assert after[1]["stageId"] == stages[1]["stageId"] and after[1]["endPoint"] == stages[2]["endPoint"]


def test_rest_days(client, rider):
    user, headers = rider
    trip = new_trip(user, startDate="2031-06-01", endDate="2031-06-03")
    stages = trip_json(client, headers, trip.id)["stages"]
    response = edit(client, "post", f"/api/trips/{trip.id}/stages/{stages[0]['stageId']}/rest-day", headers, 1)
    after = response.get_json()
    rest = after["stages"][1]
    assert rest["isRestDay"] and rest["distance"] == 0 and rest["startPoint"] == stages[0]["endPoint"]
    assert after["endDate"] == "2031-06-04" and after["version"] == 2
    twice = edit(client, "post", f"/api/trips/{trip.id}/stages/{stages[0]['stageId']}/rest-day", headers, 2)
    assert twice.status_code == 422
    removed = edit(client, "delete", f"/api/trips/{trip.id}/stages/{rest['stageId']}", headers, 2)
    assert [s["stageId"] for s in removed.get_json()["stages"]] == [s["stageId"] for s in stages]


def test_choose_and_clear_an_accommodation(client, rider):
    user, headers = rider
    trip = new_trip(user)
    first, second = trip.stages[0], trip.stages[1]
    lengths, end = (first.distance, second.distance), (first.end_lat, first.end_lon)
    camp = {"name": "Camping du lac", "type": "camp_site", "lat": round(end[0] + 0.0027, 6), "lon": end[1]}  # 300 m
    candidates = [camp, {"name": "Hôtel", "type": "hotel", "lat": end[0] + 0.01, "lon": end[1] + 0.01}]
    with atomic():
        db.session.get(type(first), first.id).accommodations = candidates
    url = f"/api/trips/{trip.id}/stages/{first.id}/accommodation"
    response = edit(client, "patch", url, headers, 1, {"lat": camp["lat"], "lon": camp["lon"]})
    assert response.status_code == 200 and response.headers["ETag"] == '"2"'
    days = response.get_json()["stages"]
    assert days[0]["endPoint"]["lat"] == camp["lat"] and days[1]["startPoint"]["lat"] == camp["lat"]
    # the road moves: out to the camp site and back the next morning, straight without a map (approximate)
    grown = days[0]["distance"] + days[1]["distance"] - sum(lengths)  # twice the camp's 150–300 m off the road
    assert 0.25 < grown < 0.7
    assert days[0]["approximate"] and days[0]["selectedAccommodation"]["distanceToEndPoint"] == 0
    assert "road" not in days[0]["selectedAccommodation"]  # the road it keeps to be cleared is not shown
    missing = edit(client, "patch", url, headers, 2, {"lat": 10.0, "lon": 10.0})
    assert missing.status_code == 409
    cleared = edit(client, "patch", url, headers, 2, {"lat": None, "lon": None})
    assert cleared.status_code == 200 and cleared.headers["ETag"] == '"3"'
    days = cleared.get_json()["stages"]  # the road before the choice, to the metre
    assert days[0]["selectedAccommodation"] is None and not days[0]["approximate"] and not days[1]["approximate"]
    assert (days[0]["distance"], days[1]["distance"]) == (round(lengths[0], 1), round(lengths[1], 1))
    assert (days[0]["endPoint"]["lat"], days[0]["endPoint"]["lon"]) == pytest.approx(end, abs=1e-6)
    half = edit(client, "patch", url, headers, 3, {"lat": camp["lat"], "lon": None})
    assert half.status_code == 422
    db.session.rollback()
    assert db.session.get(type(second), second.id).start_lat == pytest.approx(end[0], abs=1e-6)


def test_stale_missing_and_malformed_versions(client, rider):
    user, headers = rider
    trip = new_trip(user)
    stage_id = trip.stages[0].id
    url = f"/api/trips/{trip.id}/stages/{stage_id}"
    assert client.delete(url, headers=headers).status_code == 428
    assert client.delete(url, headers={**headers, "If-Match": "seven"}).status_code == 400
    stale = edit(client, "delete", url, headers, 7)
    assert stale.status_code == 412
    assert len(trip_json(client, headers, trip.id)["stages"]) == 3


def test_a_started_trip_is_locked_before_its_version_is_judged(client, rider):
    user, headers = rider
    trip = new_trip(user)
    with atomic():
        stored = db.session.get(Trip, trip.id)
        stored.start_date, stored.end_date = date.today(), date.today() + timedelta(days=2)
    stage_id = trip.stages[0].id
    for version in (1, 99, None):
        extra = {"If-Match": f'"{version}"'} if version else {}
        response = client.post(f"/api/trips/{trip.id}/stages/{stage_id}/rest-day", headers={**headers, **extra})
        assert response.status_code == 423, version
    waypoint = client.post(f"/api/trips/{trip.id}/stages/{stage_id}/poi-waypoint", headers=headers,
                           json={"lat": 45.1, "lon": 5.1})
    assert waypoint.status_code == 423
    assert client.post(f"/api/trips/{trip.id}/analyze", headers=headers).status_code == 423


def test_a_stranger_gets_404_whatever_the_version(client, rider):
    user, _ = rider
    trip = new_trip(user)
    stranger = auth(make_token(make_user()))
    url = f"/api/trips/{trip.id}/stages/{trip.stages[0].id}"
    answers = set()
    for if_match in (None, "*", '"1"', '"100"', "garbage"):
        extra = {"If-Match": if_match} if if_match else {}
        response = client.delete(url, headers={**stranger, **extra})
        assert response.status_code == 404
        answers.add(response.get_data())
    assert len(answers) == 1


def test_an_unknown_stage_is_a_404(client, rider):
    user, headers = rider
    trip = new_trip(user)
    response = edit(client, "delete", f"/api/trips/{trip.id}/stages/0192f000-0000-7000-8000-000000000000",
                    headers, 1)
    assert response.status_code == 404


def test_edits_wait_for_the_days_being_computed(client, rider):
    from trips import computations

    user, headers = rider
    trip = new_trip(user)
    with atomic():
        computations.initialize(db.session.get(Trip, trip.id), ("stages",), 1)
    response = edit(client, "delete", f"/api/trips/{trip.id}/stages/{trip.stages[0].id}", headers, 1)
    assert response.status_code == 409
