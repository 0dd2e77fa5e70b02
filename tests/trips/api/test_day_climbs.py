"""The day's elevation profile and climbs over REST and MCP (docs/RULES.md "Climbs"): a compact profile, the
categorised climbs, null with the reason where the route carries no elevation, empty on a rest day."""
import io

import pytest

from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.trips.api.test_openapi import Conformance
from tests.trips.enrich.test_unknown_elevation import bare_gpx
from trips.route import profile
from trips.services.trips import import_gpx


def hilly(n: int = 900) -> list[tuple[float, float, float]]:
    """90 km, a point every 100 m: a 6 km climb at 7 % (420 m: category 2) from km 10, down, and a 3 km one
    at 5 % (150 m: category 4) from km 60; flat elsewhere."""
    heights, h = [], 200.0
    for i in range(n):
        km = i / 10
        if 10 < km <= 16:
            h += 7.0
        elif 16 < km <= 24:
            h -= 420.0 / 80
        elif 60 < km <= 63:
            h += 5.0
        heights.append(round(h, 1))
    return [(lat, lon, heights[i]) for i, (lat, lon, _) in enumerate(make_points(n, step_m=100.0))]


@pytest.fixture
def trip(rider):
    return import_gpx(rider[0], io.BytesIO(gpx_from_points(hilly(), name="Cols")), {"maxDistancePerDay": 100})


@pytest.fixture
def doc(client):
    return client.get("/api/openapi.json").get_json()


def test_the_day_carries_its_profile_and_its_climbs(app, client, rider, trip, doc):
    _, headers = rider
    [day] = [s for s in trip.stages if not s.is_rest_day][:1]
    url = f"/api/trips/{trip.id}/stages/{day.id}"
    body = Conformance(app, doc).check(client.get(url, headers=headers), "get", url).get_json()
    assert 2 <= len(body["profile"]) <= profile.PROFILE_SAMPLES
    # km along the stored (simplified) line: within a few hundred metres of the day's distance
    assert body["profile"][0][0] == 0.0 and body["profile"][-1][0] == pytest.approx(body["distance"], rel=0.01)
    # the stored line's summit is kept (the line keeps its points at the plan's resolution: near the real 620 m)
    assert max(m for _, m in body["profile"]) == round(max(p[2] for p in day.geometry))
    assert max(m for _, m in body["profile"]) == pytest.approx(620.0, abs=40)
    climbs = [c for c in body["climbs"] if c["startKm"] < body["distance"]]
    first = climbs[0]
    assert first["startKm"] == pytest.approx(10.0, abs=0.5) and first["lengthKm"] == pytest.approx(6.0, abs=0.5)
    assert first["gain"] == pytest.approx(420, abs=40) and first["meanPct"] == pytest.approx(7.0, abs=0.7)
    assert first["steepestPct"] >= first["meanPct"] and first["category"] == "2"
    assert body["elevationReason"] is None


def test_a_route_without_elevation_has_a_null_profile_with_its_reason(app, client, rider, doc):
    user, headers = rider
    flat = import_gpx(user, io.BytesIO(bare_gpx(make_points(900))), {})
    day = flat.stages[0]
    url = f"/api/trips/{flat.id}/stages/{day.id}"
    body = Conformance(app, doc).check(client.get(url, headers=headers), "get", url).get_json()
    assert body["profile"] is None and body["climbs"] is None
    assert body["elevationReason"] == "this route carries no elevation"
    french = client.get(url, headers={**headers, "Accept-Language": "fr"}).get_json()
    assert french["profile"] is None and french["elevationReason"] != body["elevationReason"]


def test_a_rest_day_has_an_empty_profile(app, client, rider, trip, doc):
    _, headers = rider
    first = trip.stages[0]
    inserted = client.post(f"/api/trips/{trip.id}/stages/{first.id}/rest-day",
                           headers={**headers, "If-Match": "*"}).get_json()
    rest = next(s for s in inserted["stages"] if s["isRestDay"])
    url = f"/api/trips/{trip.id}/stages/{rest['stageId']}"
    body = Conformance(app, doc).check(client.get(url, headers=headers), "get", url).get_json()
    assert body["profile"] == [] and body["climbs"] == []


def test_a_stranger_reads_no_profile(client, trip):
    stranger = auth(make_token(make_user()))
    assert client.get(f"/api/trips/{trip.id}/stages/{trip.stages[0].id}", headers=stranger).status_code == 404


def test_get_stage_carries_the_samples_and_the_climbs_under_one_key(app, client, rider, trip):
    user, _ = rider
    token = mcp_token(app, user)
    day = trip.stages[0]
    answer = payload(call(client, token, "get_stage", {"tripId": trip.id, "stageId": day.id}))
    rest = client.get(f"/api/trips/{trip.id}/stages/{day.id}", headers=rider[1]).get_json()
    assert answer["profile"] == {"samples": rest["profile"], "climbs": rest["climbs"]}
    assert answer["profile"]["climbs"][0]["category"] == "2"


def test_get_stage_says_null_and_why_without_elevation(app, client, rider):
    user, _ = rider
    flat = import_gpx(user, io.BytesIO(bare_gpx(make_points(900))), {})
    answer = payload(call(client, mcp_token(app, user), "get_stage", {"tripId": flat.id,
                                                                      "stageId": flat.stages[0].id}))
    assert answer["profile"] is None and answer["elevationReason"] == "this route carries no elevation"
