"""A lodging entered by hand (POST …/stages/{stageId}/accommodations/manual): it becomes the day's chosen
accommodation and the day ends there with its road (cut on the route, or a detour to it); the guards are
choose_accommodation's (ownership → lock → version), bad fields are named and nothing is written."""
import io
from datetime import date, timedelta

import pytest

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core.db import atomic, db
from trips.models import Stage, Trip
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Three days")
BODY = {"name": "Chez Paulette", "point": {"lat": 0.0, "lon": 0.0}, "price": 35, "currency": "EUR",
        "phone": "+33 4 76 00 00 00",
        "website": "https://paulette.example/", "address": "3 rue du Lac, Annecy"}


def new_trip(user) -> Trip:
    return import_gpx(user, io.BytesIO(GPX), {})


def near_end(stage, north_m=300.0) -> dict:
    return {"lat": round(stage.end_lat + north_m / 111_132.0, 6), "lon": stage.end_lon}


def post(client, headers, trip, stage, body, version="1"):
    url = f"/api/trips/{trip.id}/stages/{stage.id}/accommodations/manual"
    extra = {"If-Match": f'"{version}"'} if version else {}
    return client.post(url, json=body, headers={**headers, **extra})


def stored(stage_id) -> Stage:
    db.session.rollback()
    return db.session.get(Stage, stage_id)


def test_a_manual_lodging_ends_the_day_like_a_chosen_one(client, rider):
    user, headers = rider
    trip = new_trip(user)
    first, second = trip.stages[0], trip.stages[1]
    lengths = first.distance, second.distance  # the objects follow the database once the edit is read
    point = near_end(first)
    response = post(client, headers, trip, first, {**BODY, "point": point})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.headers["ETag"] == '"2"'
    days = response.get_json()["stages"]
    assert days[0]["endPoint"]["lat"] == point["lat"] and days[1]["startPoint"]["lat"] == point["lat"]
    # 300 m off the route: a detour out to it and back the next morning, straight without a router (approximate)
    assert days[0]["approximate"] is True and days[1]["approximate"] is True
    grown = days[0]["distance"] + days[1]["distance"] - sum(lengths)  # out to it and back: twice 150–300 m
    assert days[0]["distance"] > lengths[0] and 0.25 < grown < 0.7
    chosen = days[0]["selectedAccommodation"]
    assert chosen["name"] == "Chez Paulette" and chosen["source"] == "manual" and chosen["type"] == "other"
    assert chosen["estimatedPriceMin"] == chosen["estimatedPriceMax"] == 35 and chosen["isExactPrice"] is True
    assert chosen["currency"] == "EUR"
    assert chosen["phone"] == "+33 4 76 00 00 00" and chosen["url"] == "https://paulette.example/"
    assert chosen["distanceToEndPoint"] == 0  # the day ends at it, not 300 m away
    assert stored(second.id).start_lat == point["lat"]
    # the same as a chosen candidate: it can be chosen again by its coordinates, and cleared
    again = client.patch(f"/api/trips/{trip.id}/stages/{first.id}/accommodation", json=point,
                         headers={**headers, "If-Match": '"2"'})
    assert again.status_code == 200 and again.get_json()["stages"][0]["selectedAccommodation"]["name"] == "Chez Paulette"


def test_a_manual_lodging_near_the_road_ends_the_day_at_it_not_beside_it(client, rider):
    """100 m off the road: not a cut at its foot, 100 m away, but the day's line ending at its door."""
    user, headers = rider
    trip = new_trip(user)
    first = trip.stages[0]
    point = near_end(first, north_m=100.0)
    response = post(client, headers, trip, first, {**BODY, "point": point})
    assert response.status_code == 200, response.get_data(as_text=True)
    days = response.get_json()["stages"]
    assert days[0]["selectedAccommodation"]["distanceToEndPoint"] == 0
    assert stored(first.id).geometry[-1][:2] == [point["lat"], point["lon"]]
    clear = client.patch(f"/api/trips/{trip.id}/stages/{first.id}/accommodation", json={"lat": None, "lon": None},
                         headers={**headers, "If-Match": '"2"'})
    assert [d["distance"] for d in clear.get_json()["stages"]] == [round(s.distance, 1) for s in new_trip(user).stages]


def test_stopping_early_on_the_route_shortens_the_day_and_the_next_takes_the_rest(client, rider):
    user, headers = rider
    trip = new_trip(user)
    first, second = trip.stages[0], trip.stages[1]
    total, before = first.distance + second.distance, first.distance
    line = first.geometry
    # a point of the day's own line about 10 km before its end
    lat, lon = min(((p[0], p[1]) for p in line), key=lambda p: abs(
        _km_along(line, p) - (before - 10.0)))
    response = post(client, headers, trip, first, {**BODY, "point": {"lat": lat, "lon": lon}})
    assert response.status_code == 200, response.get_data(as_text=True)
    days = response.get_json()["stages"]
    assert days[0]["distance"] == pytest.approx(before - 10.0, abs=0.3)
    assert days[0]["distance"] + days[1]["distance"] == pytest.approx(total, abs=0.1)  # the road, shared
    assert days[0]["approximate"] is False and len(days) == 3
    assert days[0]["selectedAccommodation"]["name"] == "Chez Paulette"


def _km_along(line, point) -> float:
    from trips.route.geo import haversine_m

    km = 0.0
    for a, b in zip(line, line[1:]):
        if (a[0], a[1]) == point:
            return km
        km += haversine_m(a[0], a[1], b[0], b[1]) / 1000.0
    return km


def test_no_price_is_unknown_not_free(client, rider):
    user, headers = rider
    trip = new_trip(user)
    body = {"name": "Bivouac", "point": near_end(trip.stages[0])}
    response = post(client, headers, trip, trip.stages[0], body)
    assert response.status_code == 200
    chosen = response.get_json()["stages"][0]["selectedAccommodation"]
    assert "estimatedPriceMin" not in chosen and "isExactPrice" not in chosen and "phone" not in chosen


def test_a_price_in_its_currency_the_country_s_by_default_else_required(client, rider, tmp_path):
    """No currency given: the one of the country the imported boundaries put the point in; none known there, the
    price is refused naming `currency` (never assumed to be euros)."""
    from tests.enrich_helpers import import_map
    from tests.osm_maps import MapBuilder

    user, headers = rider
    trip = new_trip(user)
    first = trip.stages[0]
    body = {"name": "Gîte", "point": near_end(first), "price": 42}
    refused = post(client, headers, trip, first, body)
    assert refused.status_code == 422 and list(refused.get_json()["errors"]) == ["currency"]
    assert stored(first.id).selected_accommodation is None
    m = MapBuilder(bounds=(44.0, 4.0, 47.0, 8.0))  # the whole trip
    m.country([(44.0, 4.0), (44.0, 8.0), (47.0, 8.0), (47.0, 4.0)], "CH", "Switzerland")  # a made-up border
    import_map(m, tmp_path)
    answer = post(client, headers, trip, first, body)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    chosen = answer.get_json()["stages"][0]["selectedAccommodation"]
    assert (chosen["estimatedPriceMin"], chosen["currency"]) == (42, "CHF")
    given = post(client, headers, trip, first, {**body, "currency": "EUR"}, version="2")
    assert given.get_json()["stages"][0]["selectedAccommodation"]["currency"] == "EUR"  # the rider's, not converted


@pytest.mark.parametrize("change, field", [
    ({"name": ""}, "name"), ({"name": "   "}, "name"), ({"name": "x" * 121}, "name"),
    ({"point": {"lat": 91, "lon": 5}}, "point.lat"), ({"point": {"lat": 45}}, "point.lon"),
    ({"price": -1}, "price"), ({"price": 10_000_001}, "price"), ({"currency": "EURO"}, "currency"),
    ({"currency": "eur"}, "currency"), ({"currency": "ABC"}, "currency"), ({"currency": None}, "currency"),
    ({"price": None}, "currency"),  # a currency without a price
    ({"currency": "EUR", "price": None, "name": "x"}, "currency"), ({"website": "javascript:alert(1)"}, "website"),
    ({"phone": "call me maybe"}, "phone"), ({"colour": "red"}, "colour"), ({"point": None}, "point"),
])
def test_bad_fields_are_named_and_nothing_is_written(client, rider, change, field):
    user, headers = rider
    trip = new_trip(user)
    first = trip.stages[0]
    body = {**BODY, "point": near_end(first), **change}
    response = post(client, headers, trip, first, body)
    assert response.status_code == 422, response.get_data(as_text=True)
    assert field in response.get_json()["errors"]
    assert "javascript" not in response.get_data(as_text=True)  # the value is not echoed
    assert stored(first.id).selected_accommodation is None
    assert db.session.get(Trip, trip.id).version == 1


def test_far_from_the_day_s_end_or_on_a_rest_day_is_refused(client, rider):
    user, headers = rider
    trip = new_trip(user)
    first = trip.stages[0]
    far_point = {"lat": first.end_lat + 0.3, "lon": first.end_lon - 0.4}  # ~40 km north-west of a north-east road
    far = post(client, headers, trip, first, {**BODY, "point": far_point})
    assert far.status_code == 422 and "from the day's route" in far.get_json()["errors"]["point"]
    rest = client.post(f"/api/trips/{trip.id}/stages/{first.id}/rest-day", headers={**headers, "If-Match": '"1"'})
    rest_day = next(s for s in rest.get_json()["stages"] if s["isRestDay"])
    response = client.post(f"/api/trips/{trip.id}/stages/{rest_day['stageId']}/accommodations/manual",
                           json={**BODY, "point": near_end(first)}, headers={**headers, "If-Match": '"2"'})
    assert response.status_code == 422 and "stageId" in response.get_json()["errors"]


def test_the_guards_in_their_order(client, rider):
    user, headers = rider
    trip = new_trip(user)
    first = trip.stages[0]
    body = {**BODY, "point": near_end(first)}
    assert post(client, headers, trip, first, body, version=None).status_code == 428
    assert post(client, headers, trip, first, body, version="7").status_code == 412
    stranger = auth(make_token(make_user()))
    assert post(client, stranger, trip, first, body, version="7").status_code == 404  # not 412: nothing to probe
    reader = auth(make_token(user, "trips:read"))
    assert post(client, reader, trip, first, body).status_code == 403
    with atomic():
        started = db.session.get(Trip, trip.id)
        started.start_date, started.end_date = date.today(), date.today() + timedelta(days=2)
    assert post(client, headers, trip, first, body, version="7").status_code == 423  # the lock before the version
    assert stored(first.id).selected_accommodation is None


def test_none_of_the_rider_app_features_is_an_mcp_tool(app, client, rider):
    """A lodging by hand, nearby places, FIT files and the e-mail change stay REST only (files, live GPS and mailbox
    flows are off the tool surface): tools/list still serves the thirteen, and calling such a name is refused."""
    from tests.mcp_helpers import mcp_token, modern

    token = mcp_token(app, rider[0])
    names = [t["name"] for t in modern(client, token, "tools/list").get_json()["result"]["tools"]]
    assert len(names) == 13 and "choose_accommodation" in names
    assert not [n for n in names if any(word in n for word in ("manual", "nearby", "fit", "email", "mail"))]
    refused = modern(client, token, "tools/call", {"name": "add_manual_accommodation", "arguments": {}}).get_json()
    assert refused["error"]["code"] == -32602


def test_with_a_router_the_detour_is_routed_before_the_trip_lock(app, client, rider, fake_valhalla, monkeypatch):
    from trips.services import day_points, stages as stage_ops

    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    user, headers = rider
    trip = new_trip(user)
    first = trip.stages[0]
    target = (first.end_lat + 0.01, first.end_lon - 0.01, 0.0)  # ~1.3 km off the road
    fake_valhalla.set_route([(first.end_lat, first.end_lon, 0.0), (target[0] - 0.005, target[1], 0.0), target],
                            length_km=1.7)
    order = []
    real_join, real_write = day_points._join, stage_ops.guarded_write
    monkeypatch.setattr(day_points, "_join", lambda a, b: order.append("route") or real_join(a, b))
    monkeypatch.setattr(stage_ops, "guarded_write", lambda ctx: order.append("lock") or real_write(ctx))
    response = post(client, headers, trip, first, {**BODY, "point": {"lat": target[0], "lon": target[1]}})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert order == ["route", "route", "lock"]  # out and back asked before the lock, not again under it
    assert len(fake_valhalla.bodies) == 2
    days = response.get_json()["stages"]
    assert days[0]["approximate"] is False and days[0]["selectedAccommodation"]["name"] == "Chez Paulette"
