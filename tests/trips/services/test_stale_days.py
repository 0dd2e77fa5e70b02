"""Nothing stale shown as current (docs/RULES.md "Enrichment storage"): a full analysis clears the accommodations a
day off the map no longer has; a scan of some days leaves the others; a chosen lodging stays."""
from tests.enrich_helpers import import_map
from tests.trips.enrich.test_enrich_pipeline import ROUTE, route_map, uploaded
from tests.trips.services.test_pipeline import reload, run_jobs
from trips.core.db import atomic, db
from trips.enrich import registry
from trips.guards import Precondition, trip_lock
from trips.readmodels.day import group_statuses
from trips.services.analysis import analyze_trip
from trips.services.stages import update_stage

STALE = [{"name": "Old hotel", "lat": 45.0, "lon": 5.0, "distanceKm": 0.417, "type": "hotel"}]


def plant(trip_id, index, **values):
    with atomic(lock=trip_lock(trip_id)):
        stage = reload(trip_id).stages[index]
        for name, value in values.items():
            setattr(stage, name, value)


def test_a_full_analysis_clears_the_old_hotels_of_a_day_off_the_map(app, ctx, rider, tmp_path):
    import_map(route_map(ROUTE[:1300]), tmp_path)  # the first day and a half: the last day is off the map
    trip = uploaded(rider)
    run_jobs(app)
    plant(trip.id, -1, accommodations=STALE)  # what an older line of the day (on the map) had found
    analyze_trip(rider[0], trip.id)
    run_jobs(app)
    trip = reload(trip.id)
    assert trip.stages[-1].accommodations == []  # not the old hotel at its old distance, marked done
    assert trip.stages[0].accommodations  # a day on the map is scanned again


def test_a_scan_of_some_days_leaves_the_others_and_a_choice_stays(app, ctx, rider, tmp_path):
    import_map(route_map(ROUTE[:1300]), tmp_path)
    trip = uploaded(rider)
    run_jobs(app)
    plant(trip.id, -1, accommodations=STALE)
    with atomic(lock=trip_lock(trip.id)):
        registry.dispatch(reload(trip.id), names=["accommodations"], stage_ids=[trip.stages[0].id])
    run_jobs(app)
    assert reload(trip.id).stages[-1].accommodations == STALE  # not scanned: untouched
    plant(trip.id, -1, selected_accommodation=STALE[0])
    analyze_trip(rider[0], trip.id)
    run_jobs(app)
    last = reload(trip.id).stages[-1]
    assert last.selected_accommodation == STALE[0] and last.accommodations == STALE
    db.session.rollback()


def test_a_moved_day_reads_running_not_its_old_facts_and_the_others_keep_theirs(app, ctx, rider, tmp_path):
    import_map(route_map(ROUTE), tmp_path)
    trip = uploaded(rider)
    run_jobs(app)
    trip = reload(trip.id)
    assert trip.stages[0].accommodations and trip.stages[0].alerts_by_group
    kept = (trip.stages[2].alerts_by_group, trip.stages[2].accommodations)
    lat, lon = trip.stages[0].geometry[len(trip.stages[0].geometry) // 2][:2]  # halfway along day 1
    update_stage(rider[0], trip.id, trip.stages[0].id, Precondition.exact(trip.version),
                 {"endPoint": {"lat": lat, "lon": lon}})
    trip = reload(trip.id)
    first = trip.stages[0]
    # not the old day's hotels and alerts, at their old distances
    assert first.accommodations == [] and first.alerts_by_group == {}
    # what is left is the coverage the edit's dispatch measured on the new line, nothing the enrichments wrote
    assert first.enrichment == {"mapCoverage": {"share": 1.0, "offMapKm": []}}
    assert set(group_statuses(trip, first).values()) <= {"running", "not computed"}
    assert (trip.stages[2].alerts_by_group, trip.stages[2].accommodations) == kept
    run_jobs(app)
    assert reload(trip.id).stages[0].accommodations  # found again on the new line
