"""A trip whose route fetch failed says so on every transport: not partial, the reason, and what to do next;
analyze_trip retries it. Against the local fake Komoot and a burst RQ worker."""
import pytest

from tests.mcp_helpers import call, mcp_token, payload
from tests.enrich_helpers import import_map
from tests.osm_maps import MapBuilder
from tests.trips.services.test_pipeline import LONG, post, reload, run_jobs, structural


@pytest.fixture
def failed_trip(app, client, rider, fake_thirdparty):
    """A trip from a Komoot link the service answers 404 for, after its jobs ran."""
    user, headers = rider
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/404404"})
    run_jobs(app)
    reload(trip_id)  # the test's session sees the worker's commits
    return user, headers, trip_id


def test_rest_detail_says_failed_with_reason_and_next_action(client, failed_trip):
    _, headers, trip_id = failed_trip
    body = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()
    assert body["partial"] is False, body["computations"]
    route = next(c for c in body["categoryStatus"] if c["category"] == "route")
    assert route["status"] == "failed" and "404" in route["reason"]
    assert "analyze_trip" in body["nextAction"] and "GPX" in body["nextAction"] and "404" in body["nextAction"]
    listed = client.get("/api/trips", headers=headers).get_json()
    assert [t["status"] for t in listed["member"]] == ["failed"]


def test_mcp_digest_is_not_partial_and_says_why(app, client, failed_trip):
    user, _, trip_id = failed_trip
    digest = payload(call(client, mcp_token(app, user), "get_trip", {"id": trip_id}))
    assert digest["partial"] is False and digest["stages"] == []
    assert digest["categoryStatus"] == [{"category": "route", "status": "failed",
                                         "reason": digest["categoryStatus"][0]["reason"]}]
    assert "404" in digest["categoryStatus"][0]["reason"]
    assert digest["nextAction"].startswith("The route could not be fetched") and "create_trip" in digest["nextAction"]


def test_a_running_trip_is_partial_and_says_to_wait(app, client, rider):
    user, headers = rider
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/5"})  # no worker has run
    digest = payload(call(client, mcp_token(app, user), "get_trip", {"id": trip_id}))
    assert digest["partial"] is True and "ask again" in digest["nextAction"]


def test_a_trip_with_its_days_needs_nothing(app, client, rider, fake_thirdparty, tmp_path):
    user, headers = rider
    lats, lons = [p[0] for p in LONG], [p[1] for p in LONG]
    region = MapBuilder(bounds=(min(lats) - 0.1, min(lons) - 0.1, max(lats) + 0.1, max(lons) + 0.1))
    region.node(lats[0], lons[0], {"place": "village", "name": "Start"})
    with app.app_context():  # a map around the route: the analysis the cutting starts settles done
        import_map(region, tmp_path)
    fake_thirdparty.add_komoot_tour("31", "Fine", LONG)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/31"})
    run_jobs(app)
    reload(trip_id)
    digest = payload(call(client, mcp_token(app, user), "get_trip", {"id": trip_id}))
    assert digest["partial"] is False and digest["nextAction"] is None and digest["stageCount"] == 3


def test_analyze_trip_retries_a_failed_fetch(app, client, failed_trip, fake_thirdparty):
    user, headers, trip_id = failed_trip
    before = reload(trip_id).generation
    fake_thirdparty.add_komoot_tour("404404", "Back online", LONG)  # the service has the tour now
    answer = call(client, mcp_token(app, user), "analyze_trip", {"id": trip_id})
    assert not answer["isError"], payload(answer)
    trip = reload(trip_id)
    assert trip.generation == before + 1
    assert {c.name: c.status for c in trip.computations} == {"route": "pending", "stages": "pending"}
    run_jobs(app)
    trip = reload(trip_id)
    assert len(trip.stages) == 3 and structural(trip) == {"route": ("done", None), "stages": ("done", None)}


def test_analyze_trip_on_a_trip_still_fetching_is_a_conflict(app, client, rider):
    user, headers = rider
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/6"})
    refused = call(client, mcp_token(app, user), "analyze_trip", {"id": trip_id})
    assert refused["isError"] and payload(refused)["error"]["code"] == "conflict"
    response = client.post(f"/api/trips/{trip_id}/analyze", headers=headers)
    assert response.status_code == 409
