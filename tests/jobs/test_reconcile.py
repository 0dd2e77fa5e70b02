"""The reconciler fails the active computations no job will settle any more, and only those."""
from datetime import timedelta

from rq.registry import FailedJobRegistry

from trips.core.queue import get_queue
from trips.core.redis_client import get_redis
from jobs.reconcile import GRACE_S, live_claims, sweep
from jobs.tasks import ROUTE_FAILED_STAGES
from trips.computations import JOB_LOST
from trips.core.db import utcnow
from tests.fakes.thirdparty import make_points
from tests.trips.services.test_pipeline import post, reload, statuses

LATER = timedelta(seconds=GRACE_S + 1)


def new_trip(client, rider, fake_thirdparty) -> str:
    fake_thirdparty.add_komoot_tour("51", "Lost tour", make_points(300))
    return post(client, rider[1], {"sourceUrl": "https://www.komoot.com/tour/51"})


def run_sweep(now=None):
    return sweep(get_redis(), get_queue(), now=now)


def test_computations_of_a_lost_job_are_failed_with_a_reason(app, ctx, client, rider, fake_thirdparty):
    trip_id = new_trip(client, rider, fake_thirdparty)
    get_redis().flushdb()  # Redis restarted empty: the fetch job is gone
    assert sorted(run_sweep(now=utcnow() + LATER)) == [(trip_id, "route", 1), (trip_id, "stages", 1)]
    trip = reload(trip_id)
    assert statuses(trip) == {"route": ("failed", JOB_LOST), "stages": ("failed", ROUTE_FAILED_STAGES)}


def test_a_lost_job_is_said_lost_in_the_reader_s_language(app, ctx, client, rider, fake_thirdparty):
    # Not the generic "The computation failed": the rider (or the agent) learns that a retry is all it takes.
    trip_id = new_trip(client, rider, fake_thirdparty)
    get_redis().flushdb()
    run_sweep(now=utcnow() + LATER)
    said, next_action = {}, {}
    for locale in ("en", "fr"):
        body = client.get(f"/api/trips/{trip_id}", headers={**rider[1], "Accept-Language": locale}).get_json()
        said[locale] = {c["name"]: c["reason"] for c in body["computations"]}["route"]
        next_action[locale] = body["nextAction"]
        assert body["status"] == "draft" and "analyze_trip" in body["nextAction"]
    assert "job was lost" in said["en"] and "computation failed" not in said["en"]
    assert "travail a été perdu" in said["fr"]
    # the agent's next action says why, then to call analyze_trip
    assert "job was lost" in next_action["en"] and "travail a été perdu" in next_action["fr"]


def test_a_queued_job_keeps_its_computations(app, ctx, client, rider, fake_thirdparty):
    trip_id = new_trip(client, rider, fake_thirdparty)
    assert (trip_id, "route", 1) in live_claims(get_redis(), get_queue())
    assert run_sweep(now=utcnow() + timedelta(days=1)) == []
    assert statuses(reload(trip_id)) == {"route": ("pending", None), "stages": ("pending", None)}


def test_a_recent_computation_is_left_to_its_job_on_the_way(app, ctx, client, rider, fake_thirdparty):
    trip_id = new_trip(client, rider, fake_thirdparty)
    get_redis().flushdb()
    assert run_sweep() == []  # set pending just now: its job may be enqueued after the commit
    assert statuses(reload(trip_id))["route"] == ("pending", None)


def test_a_job_failed_without_its_callback_is_settled(app, ctx, client, rider, fake_thirdparty):
    """What RQ does to a job whose work horse died on its last attempt: failed registry, no callback."""
    trip_id = new_trip(client, rider, fake_thirdparty)
    queue = get_queue()
    job = queue.jobs[0]
    queue.remove(job)
    FailedJobRegistry(queue=queue).add(job, ttl=3600, exc_string="Work-horse terminated unexpectedly")
    assert (trip_id, "route", 1) not in live_claims(get_redis(), queue)
    run_sweep(now=utcnow() + LATER)
    assert statuses(reload(trip_id))["route"] == ("failed", JOB_LOST)


def test_a_scheduled_retry_keeps_its_computations(app, ctx, client, rider, fake_thirdparty):
    trip_id = new_trip(client, rider, fake_thirdparty)
    queue = get_queue()
    job = queue.jobs[0]
    queue.remove(job)
    queue.schedule_job(job, utcnow() + timedelta(seconds=5))  # between two attempts
    assert run_sweep(now=utcnow() + LATER) == []
    assert statuses(reload(trip_id))["route"] == ("pending", None)
