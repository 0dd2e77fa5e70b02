"""Job functions: ids in, an app context, their own unit of work, safe to run twice.

A job of a generation the trip has moved past writes nothing: every status change is conditional on it.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager

from flask import current_app, has_app_context

from trips import computations
from trips.core.db import after_commit, atomic, db, engine_pid_guard
from trips.errors import N_
from trips.core.queue import enqueue
from trips.core.redis_client import get_redis
from trips.enrich import registry
from trips.guards import trip_lock
from trips.models import Stage, Trip
from trips.providers.settings import configs
from trips.services.route_links import fetch_route as fetch
from trips.providers.valhalla import RoutingError
from trips.route.pacing import TooLarge
from trips.services.routing import reroute
from trips.route.source_formats import FetchError
from trips.route.sources import UnsupportedSource, parse_source_url
from jobs import route_turns
from trips.services import pipeline, planned
from trips.services.waypoints import apply_reroute

log = logging.getLogger(__name__)
ROUTE_FAILED_STAGES = N_("reason.route_missing")
INTERNAL_FAILURE = N_("reason.internal_failure")
ROUTE_NOT_FETCHED = N_("reason.route_not_fetched")


_bound_app = None


def bind_app(app) -> None:
    """The app whose configuration jobs run with in this process: `flask worker` binds the one it was started with,
    once (its work horses, forked for each job, inherit it). RQ may run a job in another thread."""
    global _bound_app
    _bound_app = app


@contextmanager
def app_context():
    """The job's app context: the one it runs in already (a test, a caller's request), else the bound app's.
    Raises RuntimeError in a process that bound none (a job must run under `flask worker`)."""
    if has_app_context():
        engine_pid_guard()
        yield current_app
        return
    if _bound_app is None:
        raise RuntimeError("no app bound for jobs in this process: run them with `flask --app app worker`")
    with _bound_app.app_context():
        engine_pid_guard()
        yield _bound_app


def fetch_route(trip_id: str, generation: int, leg: int = 0) -> None:
    """Fetch and parse the trip's route link (or draw the route through its points, one leg a turn from `leg` on:
    jobs/route_turns.py), store it, then dispatch the cutting into days."""
    with app_context():
        with atomic():
            if not computations.transition(trip_id, "route", generation, "running"):
                return
            trip = db.session.get(Trip, trip_id)
            source_url, points, bike = trip.source_url, trip.source_points, trip.bike_type
        legs, kind = None, planned.SOURCE_TYPE
        try:
            if points is not None:  # a trip planned from places: BTP draws the route
                drawn = route_turns.draw(trip_id, generation, points, leg, bike)
                if drawn is None:
                    return  # the next leg's turn is queued
                parsed, legs = drawn.parsed, drawn.legs
            else:
                ref = parse_source_url(source_url)
                parsed, kind = fetch(ref, configs().routes, get_redis()), ref.kind
        except (FetchError, UnsupportedSource, RoutingError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "message", None) or ROUTE_NOT_FETCHED
            with atomic(lock=trip_lock(trip_id)):
                trip = db.session.get(Trip, trip_id)
                if trip is not None and computations.transition(trip_id, "route", generation, "failed", reason):
                    computations.transition(trip_id, "stages", trip.generation, "failed", ROUTE_FAILED_STAGES)
            return
        with atomic(lock=trip_lock(trip_id)):
            trip = db.session.get(Trip, trip_id)
            if trip is None or not computations.transition(trip_id, "route", generation, "done"):
                return
            pipeline.store_route(trip, parsed)
            trip.source_type, trip.route_legs = kind, legs
            if not trip.title and parsed.title:
                trip.title = parsed.title[:255]
            after_commit(enqueue, "jobs.tasks.generate_stages", trip_id, trip.generation)


def generate_stages(trip_id: str, generation: int) -> None:
    """Cut the stored route into days for `generation`; nothing is written if the trip moved past it."""

    with app_context():
        with atomic():
            if not computations.transition(trip_id, "stages", generation, "running"):
                return
        trip = db.session.get(Trip, trip_id)
        if trip is None:
            return  # deleted meanwhile
        try:
            plans = pipeline.plan_days(trip)  # CPU work outside the trip's write lock
        except TooLarge as exc:  # more days, or a longer route, than BTP plans: failed with the reason
            with atomic(lock=trip_lock(trip_id)):
                computations.transition(trip_id, "stages", generation, "failed", exc.message)
            return
        with atomic(lock=trip_lock(trip_id)):
            trip = db.session.get(Trip, trip_id)
            if trip is None or trip.generation != generation:
                return
            if computations.transition(trip_id, "stages", generation, "done"):
                pipeline.replace_stages(trip, plans)
                pipeline.start_analysis(trip)


def _current_waypoint(stage_id: str, request_id: str):
    """The day, if it still exists and this is still its latest waypoint request."""
    stage = db.session.get(Stage, stage_id)
    return stage if stage is not None and (stage.waypoint or {}).get("requestId") == request_id else None


def reroute_stage(trip_id: str, stage_id: str, request_id: str) -> None:
    """Reroute a day through its waypoint; a newer request for the day, or a regeneration, wins."""
    with app_context():
        with atomic():
            stage = _current_waypoint(stage_id, request_id)
            if stage is None:
                return
            # The generation its computation was set for: an enrichment dispatch since then moved the trip's.
            generation = next((c.generation for c in stage.trip.computations if c.name == "route_segment"),
                              stage.trip.generation)
            computations.transition(trip_id, "route_segment", generation, "running")
            start, end = (stage.start_lat, stage.start_lon), (stage.end_lat, stage.end_lon)
            via = (stage.waypoint["lat"], stage.waypoint["lon"])
        try:
            result = reroute(start, via, end, configs().valhalla)
        except RoutingError as exc:
            with atomic(lock=trip_lock(trip_id)):
                if _current_waypoint(stage_id, request_id) is not None:
                    computations.transition(trip_id, "route_segment", generation, "failed", exc.reason)
            return
        with atomic(lock=trip_lock(trip_id)):
            stage = _current_waypoint(stage_id, request_id)
            if stage is not None and computations.transition(trip_id, "route_segment", generation, "done"):
                apply_reroute(stage, result.geometry, result.approximate, result.stretches)


def run_enrichment(trip_id: str, name: str, generation: int, stage_ids=None, radius_km=None) -> None:
    """Run one enrichment for `generation` (trips/enrich/registry.py); its writes land only if the trip is still
    at that generation, else it is `superseded`. `stage_ids`/`radius_km`: an accommodations scan.

    The compute runs with no session and no lock: on SQLite a write transaction held across it would block
    every writer of the database, and the trip lock every edit of the trip. Raises what the compute raises
    (RQ retries; settle_failed fails it after the last attempt)."""
    with app_context():
        with atomic():
            if name not in registry.ENRICHMENTS or not computations.transition(trip_id, name, generation, "running"):
                return
            trip = db.session.get(Trip, trip_id)
            snap = registry.snapshot(trip) if trip is not None and trip.generation == generation else None
        # Committed: the session holds no transaction nor connection while the compute runs on its own reads.
        if snap is None:
            with atomic():
                computations.transition(trip_id, name, generation, "superseded")
            return
        result = registry.run_compute(name, snap, db.engine, stage_ids=stage_ids, radius_km=radius_km)
        failure = registry.NO_MAP_DATA if not result.covered else result.failure
        if failure:  # no imported area touches the trip, or a provider is down: say so, store nothing
            with atomic():
                if computations.transition(trip_id, name, generation, "failed", failure):
                    registry.cascade(trip_id, name, generation)
            return
        with atomic(lock=trip_lock(trip_id)):
            trip = db.session.get(Trip, trip_id)
            scoped = stage_ids is not None or radius_km is not None
            if trip is not None and registry.apply(trip, name, generation, result, expand=radius_km is not None,
                                                   scoped=scoped):
                computations.transition(trip_id, name, generation, "done")
                registry.cascade(trip_id, name, generation)  # what waited on it runs now, on what it stored
            else:
                computations.transition(trip_id, name, generation, "superseded")


def _failed_computations(job) -> list[tuple[str, str, int]]:
    """(trip id, computation, generation) that a job's final failure leaves failed."""
    if job.func_name == "jobs.tasks.fetch_route":
        trip_id, generation = job.args[:2]
        trip = db.session.get(Trip, trip_id)
        return [(trip_id, "route", generation)] + ([(trip_id, "stages", trip.generation)] if trip else [])
    if job.func_name == "jobs.tasks.generate_stages":
        return [(job.args[0], "stages", job.args[1])]
    if job.func_name == "jobs.tasks.run_enrichment":
        trip_id, name, generation = job.args[:3]
        return [(trip_id, name, generation)]
    if job.func_name == "jobs.tasks.reroute_stage":
        trip_id, stage_id, request_id = job.args
        stage = _current_waypoint(stage_id, request_id)
        return [(trip_id, "route_segment", stage.trip.generation)] if stage else []
    return []


def settle_failed(job, cause: str) -> None:
    """Mark the computations of a job that failed for good as failed, with a reason (idempotent: every
    transition is conditional). Raises database errors (the reconciler settles what this could not)."""
    log.error("job %s (%s) failed for good: %s", job.id, job.func_name, cause)
    with app_context():
        with atomic():
            for trip_id, name, generation in _failed_computations(job):
                reason = ROUTE_FAILED_STAGES if (job.func_name.endswith("fetch_route") and name == "stages") \
                    else INTERNAL_FAILURE
                if computations.transition(trip_id, name, generation, "failed", reason) \
                        and job.func_name == "jobs.tasks.run_enrichment":
                    registry.cascade(trip_id, name, generation)  # its dependents must not wait for ever


def on_job_failure(job, connection, exc_type, exc_value, tb) -> None:
    """RQ failure callback: run in the work horse after an exception or a timeout, and by the started-registry
    cleanup for an abandoned job (its worker died). After the last attempt, the computations are failed."""
    if job.retries_left:
        return  # RQ will run it again
    settle_failed(job, exc_type.__name__)
