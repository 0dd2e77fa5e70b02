"""The reconciler: a computation left pending or running with no job left to settle it is failed, with a reason
that says its job was lost (trips/computations.py JOB_LOST), the days of a route that never came excepted.

RQ's callbacks and `BTPWorker.handle_work_horse_killed` settle the usual endings at once. What they miss — a job
lost from Redis (restarted empty, flushed), an enqueue that failed after its commit, a failure callback that
could not write, a job failed by a path RQ runs no callback on — leaves a computation claimed by no job. The
worker's maintenance (every MAINTENANCE_S seconds) calls `sweep`, which fails every active computation older than
GRACE_S that no queued, scheduled, deferred or started job claims. Bound: GRACE_S + MAINTENANCE_S after the job
ended or was lost, while a worker runs.
"""
from __future__ import annotations

import logging
from datetime import timedelta

import sqlalchemy as sa
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.utils import as_text, parse_composite_key

from jobs.tasks import ROUTE_FAILED_STAGES, app_context
from trips.computations import ACTIVE, JOB_LOST
from trips.core.db import atomic, db, utcnow
from trips.core.epochs import writing_trip
from trips.enrich.registry import dependents
from trips.models import Computation, TripRoute

log = logging.getLogger(__name__)

GRACE_S = 30  # a computation set pending this recently may have its job on the way (enqueued after commit)
BATCH = 500  # computations settled per sweep at most: a sweep stays short whatever piled up
ANY = None  # a claim on every generation of a computation (the job learns the generation when it runs)


def claims(job: Job) -> set[tuple[str, str, int | None]]:
    """(trip id, computation, generation or ANY) that `job` may still move; empty for a job it does not know."""
    func, args = job.func_name, job.args
    if func == "jobs.tasks.fetch_route":
        return {(args[0], "route", args[1]), (args[0], "stages", ANY)}  # it enqueues the cutting at the end
    if func == "jobs.tasks.generate_stages":
        return {(args[0], "stages", args[1])}
    if func == "jobs.tasks.run_enrichment":  # and what waits on it (the weather cascade queues them when it ends)
        return {(args[0], args[1], args[2])} | {(args[0], d, args[2]) for d in dependents(args[1])}
    if func == "jobs.tasks.reroute_stage":
        return {(args[0], "route_segment", ANY)}
    return set()


def live_claims(connection: Redis, queue: Queue) -> set[tuple[str, str, int | None]]:
    """What the jobs still to run (or running) claim. The job ids of every state are read in one MULTI, so a job
    moving between states (a retry: started → scheduled) is seen in one of them. Raises redis errors."""
    with connection.pipeline(transaction=True) as pipe:
        pipe.lrange(queue.key, 0, -1)
        pipe.lrange(queue.intermediate_queue_key, 0, -1)
        for registry in (queue.started_job_registry, queue.scheduled_job_registry, queue.deferred_job_registry):
            pipe.zrange(registry.key, 0, -1)
        queued, moving, started, scheduled, deferred = pipe.execute()
    ids = {as_text(i) for i in (*queued, *moving, *scheduled, *deferred)}
    ids |= {parse_composite_key(as_text(entry))[0] for entry in started}
    out: set = set()
    for job in Job.fetch_many(sorted(ids), connection=connection):
        if job is None:
            continue
        try:
            out |= claims(job)
        except Exception:  # a job whose data cannot be read cannot run either
            log.warning("reconciler: cannot read job %s", job.id, exc_info=True)
    return out


def sweep(connection: Redis, queue: Queue, now=None) -> list[tuple[str, str, int]]:
    """Fail the active computations no job claims (older than GRACE_S); returns (trip, name, generation) failed.

    Redis is read before the database: a computation set pending after the snapshot is younger than GRACE_S,
    and a job moving on enqueues its successor before it leaves the started registry."""
    with app_context():
        cutoff = (now or utcnow()) - timedelta(seconds=GRACE_S)
        candidates = (sa.select(Computation.trip_id, Computation.name, Computation.generation)
                      .where(Computation.status.in_(ACTIVE), Computation.updated_at < cutoff)
                      .order_by(Computation.updated_at).limit(BATCH))
        if not db.session.execute(candidates.limit(1)).first():
            db.session.remove()
            return []  # the usual case: nothing old is active, Redis need not be read
        db.session.commit()  # the read below must be a snapshot taken after the Redis one
        claimed = live_claims(connection, queue)
        rows = db.session.execute(candidates).all()
        orphans = [r for r in rows if (r.trip_id, r.name, r.generation) not in claimed
                   and (r.trip_id, r.name, ANY) not in claimed]
        settled = []
        with atomic():
            for trip_id, name, generation in orphans:
                routed = name != "stages" or db.session.scalar(
                    sa.select(sa.func.count()).select_from(TripRoute).where(TripRoute.trip_id == trip_id))
                with writing_trip(db.session, trip_id):
                    result = db.session.execute(
                        sa.update(Computation)
                        .where(Computation.trip_id == trip_id, Computation.name == name,
                               Computation.generation == generation, Computation.status.in_(ACTIVE),
                               Computation.updated_at < cutoff)
                        .values(status="failed", reason=JOB_LOST if routed else ROUTE_FAILED_STAGES,
                                updated_at=utcnow())
                        .execution_options(synchronize_session=False))
                if result.rowcount:
                    settled.append((trip_id, name, generation))
        db.session.remove()
    for item in settled:
        log.warning("reconciler: no job left for computation %s/%s (generation %s): failed", *item)
    return settled
