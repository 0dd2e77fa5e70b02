"""Nothing stale shown as current (docs/RULES.md "Enrichment storage"): a full analysis clears the accommodations a
day off the map no longer has; a scan of some days leaves the others; a chosen lodging stays."""
from tests.enrich_helpers import import_map
from tests.test_enrich_pipeline import ROUTE, route_map, uploaded
from tests.test_pipeline import reload, run_jobs
from trips.core.db import atomic, db
from trips.enrich import registry
from trips.guards import trip_lock
from trips.services.analysis import analyze_trip

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
    assert trip.stages[-1].accommodations == []  # was: the old hotel at its old distance, marked done
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
