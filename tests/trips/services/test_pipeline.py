"""The full path: POST a route link → RQ worker (burst) → days, against local fake Komoot/Strava/RideWithGPS."""
import pytest
from rq import SimpleWorker

from trips.core.queue import get_queue
from trips.core.redis_client import get_redis
from jobs.tasks import INTERNAL_FAILURE, bind_app, generate_stages, on_job_failure
from tests.factories import idem
from tests.fakes.thirdparty import gpx_from_points, make_points
from trips.core import i18n
from trips.core.db import db
from trips.core.stored_texts import said_stored
from trips.route.source_formats import NO_POINTS
from trips.enrich.registry import ENRICHMENTS, NO_MAP_DATA
from trips.models import Trip

# ~240 km north-east with a climb: 2 400 points 100 m apart.
LONG = make_points(2400, step_m=100.0, climb_m=600.0)


def run_jobs(app) -> None:
    bind_app(app)
    with app.app_context():
        SimpleWorker([get_queue()], connection=get_redis()).work(burst=True, with_scheduler=True)


def statuses(trip: Trip) -> dict:
    return {c.name: (c.status, c.reason) for c in trip.computations}


def structural(trip: Trip) -> dict:
    """The statuses of the route fetch and the cutting into days (the analysis they start aside)."""
    return {name: value for name, value in statuses(trip).items() if name in ("route", "stages")}


def analysis(trip: Trip) -> dict:
    """The statuses of the registry's enrichments."""
    from trips.enrich import registry

    return {name: value for name, value in statuses(trip).items() if name in registry.ENRICHMENTS}


def post(client, headers, body):
    response = client.post("/api/trips", json=body, headers={**headers, **idem()})
    assert response.status_code == 202, response.get_json()
    return response.get_json()["id"]


def reload(trip_id) -> Trip:
    db.session.rollback()  # end the test's read transaction: a new snapshot sees the jobs' commits
    return db.session.get(Trip, trip_id)


def test_komoot_tour_becomes_days(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("777", "Vercors loop", LONG)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/fr-fr/tour/777?ref=share"})
    run_jobs(app)
    trip = reload(trip_id)
    assert structural(trip) == {"route": ("done", None), "stages": ("done", None)}
    # The analysis started by itself once the days were cut (docs/RULES.md "Enrichments"); no map is imported here.
    # undated: what needs a start date (weather, wind, calendar, daylight) is withheld, not pending
    # (borders need no map: docs/RULES.md "Crossings")
    assert analysis(trip) == {name: ("done", None) if name == "border_crossing" else ("failed", NO_MAP_DATA)
                              for name, e in ENRICHMENTS.items() if not e.requires_start_date}
    assert trip.source_type == "komoot_tour" and trip.title == "Vercors loop"
    assert trip.status == "ready" and len(trip.stages) == 3  # ceil(239.9 / 80)
    assert trip.version == 1
    assert abs(trip.route.distance_km - 239.9) < 0.1
    assert abs(sum(s.distance for s in trip.stages) - trip.route.distance_km) < 0.5
    assert [s.day_number for s in trip.stages] == [1, 2, 3]
    assert fake_thirdparty.requests_to("/tour/777") == 1
    body = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()
    assert body["partial"] is False and len(body["stages"]) == 3
    # the route and days are done; the map's day names (context) failed without map data, and say why
    status = {c["category"]: c for c in body["categoryStatus"]}
    assert status["route"] == {"category": "route", "status": "done"}
    assert status["context"] == {"category": "context", "status": "failed", "reason": i18n.t(NO_MAP_DATA, "en")}


def test_strava_route_with_dates_gives_one_day_per_date(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_strava("42", gpx_from_points(LONG, name="Strava Alps"))
    trip_id = post(client, headers, {"sourceUrl": "https://www.strava.com/routes/42",
                                     "startDate": "2031-05-01", "endDate": "2031-05-03", "title": "Mine"})
    run_jobs(app)
    trip = reload(trip_id)
    assert len(trip.stages) == 3 and trip.title == "Mine" and trip.source_type == "strava_route"
    distances = [s.distance for s in trip.stages]
    assert distances[0] > distances[1]  # the fatigue factor shortens each day


def test_ridewithgps_route(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_rwgps("9", "RWGPS ride", LONG[:1000])
    trip_id = post(client, headers, {"sourceUrl": "https://ridewithgps.com/routes/9"})
    run_jobs(app)
    trip = reload(trip_id)
    assert trip.source_type == "ride_with_gps" and trip.title == "RWGPS ride" and len(trip.stages) == 2


def test_komoot_collection_gives_one_day_per_tour(app, client, rider, fake_thirdparty):
    _, headers = rider
    for i, tour in enumerate(("11", "12", "13")):
        fake_thirdparty.add_komoot_tour(tour, f"Tour {tour}", make_points(300, start=(45.0 + i * 0.3, 5.0)))
    fake_thirdparty.add_collection("5", "Three days", ["11", "12", "13"])
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/collection/5"})
    run_jobs(app)
    trip = reload(trip_id)
    assert trip.source_type == "komoot_collection" and trip.title == "Three days"
    assert len(trip.stages) == 3
    assert all(abs(s.distance - 29.9) < 0.5 for s in trip.stages)


@pytest.mark.parametrize("status,words", [(404, "not found"), (403, "private"), (500, "unavailable")])
def test_failed_fetch_leaves_a_readable_reason(app, client, rider, fake_thirdparty, status, words):
    _, headers = rider
    fake_thirdparty.fail("/tour/404", status, times=None)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/404"})
    run_jobs(app)
    trip = reload(trip_id)
    route_status, reason = statuses(trip)["route"]
    reason = said_stored(reason, "en")  # kept in no language: what an English reader is told
    assert route_status == "failed" and "could not be fetched" in reason and words in reason
    assert statuses(trip)["stages"][0] == "failed"
    assert trip.stages == [] and trip.status == "draft"
    listing = client.get("/api/trips", headers=headers).get_json()["member"][0]
    assert listing["status"] == "failed"


def test_route_without_points_fails_with_its_reason(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("8", "Empty", [])
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/8"})
    run_jobs(app)
    assert statuses(reload(trip_id))["route"] == ("failed", NO_POINTS)
    assert i18n.t(NO_POINTS, "en") == "The route has no points."


def test_pacing_change_moves_the_version_and_cuts_again(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("777", "Vercors loop", LONG)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/777"})
    run_jobs(app)
    first_ids = {s.id for s in reload(trip_id).stages}
    response = client.patch(f"/api/trips/{trip_id}", json={"maxDistancePerDay": 120},
                            headers={**headers, "If-Match": '"1"'})
    assert response.status_code == 200 and response.headers["ETag"] == '"2"'
    assert response.get_json()["partial"] is True  # the days are being cut again
    run_jobs(app)
    trip = reload(trip_id)
    assert len(trip.stages) == 2 and trip.version == 2
    assert first_ids.isdisjoint({s.id for s in trip.stages})  # a regeneration makes new days
    assert fake_thirdparty.requests_to("/tour/777") == 1  # the stored route is reused


def test_superseded_generation_writes_nothing(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("777", "Vercors loop", LONG)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/777"})
    run_jobs(app)
    client.patch(f"/api/trips/{trip_id}", json={"maxDistancePerDay": 120}, headers={**headers, "If-Match": '"1"'})
    client.patch(f"/api/trips/{trip_id}", json={"maxDistancePerDay": 60}, headers={**headers, "If-Match": '"2"'})
    middle = reload(trip_id).generation - 1
    generate_stages(trip_id, middle)  # the job of the middle generation runs late: it must not write
    trip = reload(trip_id)
    assert len(trip.stages) == 3 and statuses(trip)["stages"] == ("pending", None)
    run_jobs(app)
    trip = reload(trip_id)
    # the last cut, then the analysis it dispatched (one generation more)
    assert len(trip.stages) == 4 and trip.generation == middle + 2 and statuses(trip)["stages"] == ("done", None)
    assert abs(trip.stages[0].distance - 60) < 1.0


def test_final_failure_marks_the_computation_failed(app, client, rider, fake_thirdparty):
    _, headers = rider
    fake_thirdparty.add_komoot_tour("777", "Vercors loop", LONG)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/777"})
    with app.app_context():
        job = get_queue().jobs[0]
    job.retries_left = 1
    on_job_failure(job, None, RuntimeError, RuntimeError("boom"), None)
    assert statuses(reload(trip_id))["route"][0] == "pending"  # RQ will try again
    job.retries_left = 0
    on_job_failure(job, None, RuntimeError, RuntimeError("boom"), None)
    trip = reload(trip_id)
    assert statuses(trip)["route"] == ("failed", INTERNAL_FAILURE)
    assert statuses(trip)["stages"][0] == "failed"


@pytest.mark.slow
def test_a_crashing_job_is_retried_then_failed(app, client, rider, fake_thirdparty, monkeypatch):
    import time

    _, headers = rider
    fake_thirdparty.add_komoot_tour("777", "Vercors loop", LONG)
    trip_id = post(client, headers, {"sourceUrl": "https://www.komoot.com/tour/777"})

    def explode(*_):
        raise RuntimeError("pacing bug")

    monkeypatch.setattr("trips.services.pipeline.plan_days", explode)
    run_jobs(app)  # fetch ok, stages raise: retried after 1 s, then 5 s
    assert statuses(reload(trip_id))["stages"][0] == "running"
    time.sleep(1.2)
    run_jobs(app)
    time.sleep(5.2)
    run_jobs(app)
    trip = reload(trip_id)
    assert statuses(trip)["stages"] == ("failed", INTERNAL_FAILURE)
    assert statuses(trip)["route"] == ("done", None)
