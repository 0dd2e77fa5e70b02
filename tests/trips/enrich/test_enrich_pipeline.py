"""The analysis end to end on a generated map (docs/RULES.md "Enrichments"): every enrichment runs and its fields land
on the days; also a trip off the map, one partly on it, a run the trip moved past (nothing written), and a slow
compute that holds neither a transaction nor the trip's lock."""
import io
import threading
from dataclasses import replace

import pytest

from trips.core.queue import get_queue
from jobs.tasks import bind_app, run_enrichment
from tests.enrich_helpers import import_map
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.osm_maps import MapBuilder, offset_north
from tests.trips.api.test_gpx_upload import upload
from tests.trips.services.test_pipeline import analysis, reload, run_jobs
from trips.core.db import atomic, db
from trips.enrich import registry
from trips.enrich.registry import ENRICHMENTS, NO_MAP_DATA
from trips.guards import trip_lock
from trips.models import Trip
from trips.services.trips import import_gpx

ROUTE = make_points(2400, step_m=100.0)  # 239.9 km north-east of (45, 5): three days of ≤ 80 km
GPX = gpx_from_points(ROUTE, name="Mapped")
# An uploaded GPX has no start date: what needs one (weather, wind, calendar, daylight) is withheld, never pending
# (the dated analysis with the fake Open-Meteo: tests/trips/enrich/test_enrich_weather.py).
UNDATED = [n for n, e in ENRICHMENTS.items() if not e.requires_start_date]
GROUPS = {ENRICHMENTS[n].group for n in UNDATED if ENRICHMENTS[n].group}
EVERY = 50  # a cluster of places every 50 route points (5 km): every day's ends have a village and a camp site


def box(points, margin: float = 0.05) -> tuple[float, float, float, float]:
    lats, lons = [p[0] for p in points], [p[1] for p in points]
    return min(lats) - margin, min(lons) - margin, max(lats) + margin, max(lons) + margin


def route_map(points) -> MapBuilder:
    """A region whose recorded area holds `points` (with a margin), with a village, a shop, a tap, a camp site
    and a museum next to the route every 5 km, and the road the route follows."""
    region = MapBuilder(bounds=box(points))
    for i in range(0, len(points), EVERY):
        lat, lon = points[i][0], points[i][1]
        region.node(lat, lon, {"place": "village", "name": f"Village {i}"})
        region.node(*offset_north(lat, lon, 60), {"shop": "supermarket", "name": f"Shop {i}"})
        region.node(*offset_north(lat, lon, -60), {"amenity": "drinking_water"})
        region.node(*offset_north(lat, lon, 300), {"tourism": "camp_site", "name": f"Camping {i}"})
        region.node(*offset_north(lat, lon, -200), {"tourism": "museum", "name": f"Museum {i}"})
    region.way([(p[0], p[1]) for p in points[::10]], {"highway": "tertiary", "surface": "asphalt"})
    return region


@pytest.fixture
def mapped(app, ctx, tmp_path):
    """The map around the whole route, imported."""
    return import_map(route_map(ROUTE), tmp_path)


def uploaded(rider) -> Trip:
    """A trip from the route (the service behind the GPX upload): days cut, its analysis queued."""
    return import_gpx(rider[0], io.BytesIO(GPX), {})


def test_the_analysis_runs_by_itself_and_fills_every_day(app, client, rider, mapped):
    _, headers = rider
    response = upload(client, headers, GPX)
    assert response.status_code == 201
    trip_id = response.get_json()["id"]
    assert set(analysis(reload(trip_id))) == set(UNDATED)  # dispatched with the days, nothing asked
    with atomic():
        db.session.get(Trip, trip_id).stages[0].end_label = "Chez nous"  # the rider's own label
    run_jobs(app)
    trip = reload(trip_id)
    assert analysis(trip) == {name: ("done", None) for name in UNDATED}
    assert trip.out_of_zone is False and len(trip.stages) == 3
    for stage in trip.stages:
        assert set(stage.alerts_by_group) == GROUPS, stage.day_number
        assert all(isinstance(facts, list) for facts in stage.alerts_by_group.values())
        data = stage.enrichment
        assert data["labels"]["start"].startswith("Village") and data["labels"]["end"].startswith("Village")
        assert 0 < len(data["resupply"]) <= 6 and data["supplyTimeline"]
        assert data["culturalPois"] and "terrain" in data
        assert 0 < len(stage.accommodations) <= 5
        assert all(c["name"].startswith("Camping") for c in stage.accommodations)
    first = trip.stages[0]
    assert first.end_label == "Chez nous" and first.enrichment["labels"]["end"].startswith("Village")
    assert [s.end_label for s in trip.stages[1:]] == [None, None]  # the map's labels stay in their own field
    days = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()["stages"]
    assert days[0]["endLabel"] == "Chez nous"  # the reader sees the rider's label first, else the map's
    assert days[1]["endLabel"] == trip.stages[1].enrichment["labels"]["end"]


def test_a_trip_no_map_covers_fails_its_map_computations_with_the_reason(app, ctx, rider, tmp_path):
    far = [(lat + 5.0, lon + 5.0) for lat, lon, _ in ROUTE[:50]]
    import_map(route_map(far), tmp_path)  # an imported region, somewhere else
    trip = uploaded(rider)
    run_jobs(app)
    trip = reload(trip.id)
    # borders need no map (docs/RULES.md "Crossings": the offline lookup): they ran, the rest failed with the reason
    assert analysis(trip) == {name: ("done", None) if name == "border_crossing" else ("failed", NO_MAP_DATA)
                              for name in UNDATED}
    assert trip.out_of_zone is True
    # only the dispatch's measure of each day's coverage (docs/RULES.md "Map coverage"), none of it on the map, and
    # the borders' offline lookup of each day's time zone (docs/RULES.md "Times")
    assert all(set(s.alerts_by_group) == {"border_crossing"} and set(s.enrichment) == {"mapCoverage", "timeZone"}
               and s.accommodations == [] for s in trip.stages)
    assert [s.enrichment["timeZone"] for s in trip.stages] == ["Europe/Paris"] * 3  # each day starts in France
    # the generated route (north-east of 45° N 5° E) really enters Switzerland on its third day
    assert [[f["params"] for f in s.alerts_by_group["border_crossing"]] for s in trip.stages] == [
        [], [], [{"fromCountry": "FR", "country": "CH"}]]
    for s in trip.stages:
        ((start, end),) = s.enrichment["mapCoverage"]["offMapKm"]
        assert s.enrichment["mapCoverage"]["share"] == 0.0 and start == 0.0 and abs(end - s.distance) < 1.0
    from trips.readmodels.trip import next_action

    told = next_action(trip)  # the cure is an import first, then another analysis
    assert told.startswith("No map data covers this trip") and "flask osm import" in told


def test_a_partly_covered_trip_is_out_of_zone_and_its_covered_days_are_analysed(app, ctx, rider, tmp_path):
    import_map(route_map(ROUTE[:1300]), tmp_path)  # the first day and a half
    trip = uploaded(rider)
    assert trip.out_of_zone is True  # known as soon as the days are cut
    run_jobs(app)
    trip = reload(trip.id)
    assert analysis(trip) == {name: ("done", None) for name in UNDATED}
    first, _, last = trip.stages
    assert set(first.alerts_by_group) == GROUPS and first.enrichment["labels"]["end"]
    # Off the map the day was never looked at ("never ran", not "nothing found"), but for terrain, whose
    # rules on the geometry alone (climbs, continuity) hold anywhere and which says what the map covered, and
    # borders (the offline country lookup, which also stores the day's time zone).
    assert set(last.alerts_by_group) == {"terrain", "border_crossing"}
    assert set(last.enrichment) == {"terrain", "mapCoverage", "timeZone"}
    assert last.enrichment["terrain"]["mapCoverage"] == 0 and last.accommodations == []
    assert last.enrichment["mapCoverage"]["share"] == 0.0 and first.enrichment["mapCoverage"]["share"] == 1.0


def test_a_whole_map_trip_is_not_out_of_zone_and_no_days_is_not_either(app, ctx, rider, mapped):
    trip = uploaded(rider)
    assert trip.out_of_zone is False
    assert registry.out_of_zone(Trip(stages=[])) is False


def test_a_run_the_trip_moved_past_is_superseded_and_writes_nothing(app, ctx, rider, mapped, monkeypatch):
    trip = uploaded(rider)
    get_queue().empty()
    real = ENRICHMENTS["pois"].compute

    def moving_on(snap, engine):
        result = real(snap, engine)
        assert result.data  # it found something: the test shows it is not written
        with atomic(lock=trip_lock(snap.id)):  # meanwhile an edit re-dispatches other enrichments
            registry.dispatch(db.session.get(Trip, snap.id), names=["labels"])
        return result

    monkeypatch.setitem(ENRICHMENTS, "pois", replace(ENRICHMENTS["pois"], compute=moving_on))
    trip_id, generation = trip.id, trip.generation
    run_enrichment(trip_id, "pois", generation)
    fresh = reload(trip_id)
    assert analysis(fresh)["pois"] == ("superseded", None)
    assert all("pois" not in s.alerts_by_group and "resupply" not in s.enrichment for s in fresh.stages)
    run_enrichment(trip_id, "labels", generation)  # a job of the old generation: nothing at all
    fresh = reload(trip_id)
    assert analysis(fresh)["labels"] == ("pending", None)
    assert all(set(s.enrichment) == {"mapCoverage"} for s in fresh.stages)


def test_a_slow_compute_blocks_no_writer(app, ctx, rider, mapped, monkeypatch):
    """The compute runs with no transaction and no trip lock: an edit of the same trip, and a write to
    another, land while it runs (on SQLite a transaction held across it would block every writer)."""
    trip, other = uploaded(rider), uploaded(rider)
    get_queue().empty()
    entered, release, outcome = threading.Event(), threading.Event(), {}
    real = ENRICHMENTS["water_points"].compute

    def slow(snap, engine):
        entered.set()
        outcome["released"] = release.wait(20)  # False: the writers below were kept waiting
        return real(snap, engine)

    monkeypatch.setitem(ENRICHMENTS, "water_points", replace(ENRICHMENTS["water_points"], compute=slow))
    bind_app(app)
    worker = threading.Thread(target=run_enrichment, args=(trip.id, "water_points", trip.generation))
    worker.start()
    try:
        assert entered.wait(20)
        with atomic(lock=trip_lock(trip.id), lock_timeout=1.0):
            db.session.get(Trip, trip.id).title = "Edited while analysed"
        with atomic():
            db.session.get(Trip, other.id).title = "Another trip"
    finally:
        release.set()
        worker.join(30)
    assert outcome == {"released": True}
    fresh = reload(trip.id)
    assert fresh.title == "Edited while analysed" and analysis(fresh)["water_points"] == ("done", None)
    assert all("water_point" in s.alerts_by_group for s in fresh.stages)


def test_a_scan_job_failing_for_good_fails_its_computation(app, ctx, rider):
    """The failure callback reads a scoped job's (trip, name, generation) whatever it carries after them."""
    from types import SimpleNamespace

    from jobs.tasks import INTERNAL_FAILURE, settle_failed

    trip = uploaded(rider)
    trip_id, generation, day = trip.id, trip.generation, trip.stages[0].id
    job = SimpleNamespace(id="j", func_name="jobs.tasks.run_enrichment",
                          args=(trip_id, "accommodations", generation, [day], 8.0))
    settle_failed(job, "RuntimeError")
    statuses = analysis(reload(trip_id))
    assert statuses["accommodations"] == ("failed", INTERNAL_FAILURE) and statuses["pois"] == ("pending", None)


def test_the_registry_refuses_a_duplicate_and_an_unknown_dispatch(ctx, rider):
    with pytest.raises(ValueError, match="twice"):
        registry.register(ENRICHMENTS["pois"])
    with pytest.raises(ValueError, match="unknown category"):
        registry.register(replace(ENRICHMENTS["pois"], name="pois2", category="nowhere"))
    with pytest.raises(ValueError, match="not registered before it"):  # the cascade has no cycle
        registry.register(replace(ENRICHMENTS["pois"], name="pois3", needs=("pois4",)))
    assert "pois2" not in ENRICHMENTS and "pois3" not in ENRICHMENTS
    trip = uploaded(rider)
    with pytest.raises(ValueError, match="unknown enrichments"):
        registry.select(trip, names=["events"])  # not registered: never reported pending
    with pytest.raises(ValueError, match="scoped"):
        registry.dispatch(trip, names=["pois"], stage_ids=[trip.stages[0].id])
    assert "weather" not in analysis(trip) and set(registry.select(trip, triggers=["DATES"])) == {
        "pois", "accommodations", "terrain", "fords"}  # undated: weather, wind and the calendar withheld
    generation = trip.generation
    assert registry.dispatch(trip, names=[]) == [] and trip.generation == generation  # nothing touched


def test_a_copy_keeps_the_analysis_and_runs_what_was_unfinished(app, ctx, rider, mapped):
    from trips.services.trips import duplicate_trip

    trip = uploaded(rider)
    trip_id = trip.id
    run_jobs(app)
    with atomic():  # one enrichment re-dispatched on the original and not run yet
        registry.dispatch(db.session.get(Trip, trip_id), names=["labels"])
    copy, _ = duplicate_trip(rider[0], trip_id, "copy-of-the-analysed-trip")
    copy_id = copy.id
    original, copy = reload(trip_id), db.session.get(Trip, copy_id)
    assert analysis(copy) == {**{n: ("done", None) for n in UNDATED}, "labels": ("pending", None)}
    assert [s.alerts_by_group for s in copy.stages] == [s.alerts_by_group for s in original.stages]
    assert [s.enrichment for s in copy.stages] == [s.enrichment for s in original.stages]
    assert copy.out_of_zone is False
    run_jobs(app)
    assert analysis(reload(copy_id))["labels"] == ("done", None)
