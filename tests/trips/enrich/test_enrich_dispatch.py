"""What each edit re-dispatches (docs/RULES.md "What an edit invalidates"), supersession, and the accommodations scan endpoint.

Every test starts from a settled analysis (every computation `done`, nothing queued) and looks at which
computations an edit sets pending again, which stay as they were, and which jobs it queues.
"""
import io
from datetime import date, timedelta

import pytest

from trips.core.queue import get_queue
from jobs.tasks import run_enrichment
from tests.enrich_helpers import import_map
from tests.factories import auth, make_token, make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.osm_maps import MapBuilder, offset_north
from tests.trips.services.test_pipeline import reload, run_jobs
from trips import computations
from trips.core.db import atomic, db
from trips.enrich import registry
from trips.models import Stage, Trip
from trips.services.trips import import_gpx

GPX = gpx_from_points(make_points(2400, step_m=100.0), name="Dispatch")  # 239.9 km → 3 days of ≤ 80 km
FUTURE = (date.today() + timedelta(days=60)).isoformat()


def by_trigger(trigger: str, dated: bool = True) -> set[str]:
    """The registry's enrichments a trigger selects (those needing a start date only on a dated trip)."""
    return {e.name for e in registry.ENRICHMENTS.values()
            if trigger in e.triggers and (dated or not e.requires_start_date)}


def registered(*names: str) -> set[str]:
    return {n for n in names if n in registry.ENRICHMENTS}


def settle(trip_id: str) -> Trip:
    """As if the analysis had finished: every computation done, the queue empty."""
    get_queue().empty()
    with atomic():
        trip = db.session.get(Trip, trip_id)
        for row in trip.computations:
            row.status, row.reason = "done", None
    return reload(trip_id)


def pending(trip: Trip) -> set[str]:
    return {c.name for c in trip.computations if c.status == "pending"}


def waiting(names: set[str]) -> set[str]:
    """Those of `names` dispatched with one they need: queued when it settles (the weather cascade)."""
    return {n for n in names if set(registry.ENRICHMENTS[n].needs) & names}


def queued() -> list[tuple]:
    """(computation, generation) of every queued enrichment job."""
    return sorted((job.args[1], job.args[2]) for job in get_queue().get_jobs()
                  if job.func_name == "jobs.tasks.run_enrichment")


@pytest.fixture
def trip(rider):
    made = import_gpx(rider[0], io.BytesIO(GPX), {})
    return settle(made.id)


@pytest.fixture
def dated(rider):
    made = import_gpx(rider[0], io.BytesIO(GPX), {"startDate": FUTURE})
    return settle(made.id)


def patch(client, headers, trip, body):
    response = client.patch(f"/api/trips/{trip.id}", json=body, headers={**headers, "If-Match": "*"})
    assert response.status_code == 200, response.get_json()
    return reload(trip.id)


# --- settings ----------------------------------------------------------------------------------------------

SETTINGS = [
    ({"startDate": FUTURE}, lambda: by_trigger("DATES")),
    ({"ebikeMode": True}, lambda: {"terrain"}),
    # weather is withheld on this undated trip (a dated one: tests/trips/enrich/test_enrich_weather.py)
    # pois: resupply's "open at passage" is the hour the rider passes the shop
    ({"departureHour": 6}, lambda: {"terrain", "pois"}),
    ({"averageSpeed": 22.5}, lambda: {"terrain", "pois"}),
    ({"enabledAccommodationTypes": ["hotel", "camp_site"]}, lambda: {"accommodations"}),
]


@pytest.mark.parametrize("body,expected", SETTINGS, ids=[next(iter(b)) for b, _ in SETTINGS])
def test_a_setting_re_dispatches_what_it_invalidates(client, rider, trip, body, expected):
    _, headers = rider
    generation, version, days = trip.generation, trip.version, [s.id for s in trip.stages]
    fresh = patch(client, headers, trip, body)
    names = expected()
    assert pending(fresh) == names and names  # and nothing else: the others stay done
    assert {c.name for c in fresh.computations if c.status == "done"} >= {"route", "stages"}
    assert fresh.generation == generation + 1 and fresh.version == version  # no re-pacing: the same days
    assert [s.id for s in fresh.stages] == days
    assert queued() == sorted((n, fresh.generation) for n in names - waiting(names))


def test_the_dates_trigger_names_the_dated_enrichments():
    assert {"pois", "accommodations", "terrain"} <= by_trigger("DATES")
    assert not by_trigger("DATES") & {"bike_shops", "water_points", "railway_stations", "health_services"}


def test_a_title_dispatches_nothing(client, rider, trip):
    _, headers = rider
    generation = trip.generation
    fresh = patch(client, headers, trip, {"title": "Renamed"})
    assert pending(fresh) == set() and queued() == [] and fresh.generation == generation


def test_a_setting_given_its_current_value_dispatches_nothing(client, rider, trip):
    _, headers = rider
    fresh = patch(client, headers, trip, {"ebikeMode": False, "departureHour": trip.departure_hour})
    assert pending(fresh) == set() and queued() == []


def test_several_settings_are_one_dispatch_of_the_union(client, rider, trip):
    _, headers = rider
    generation = trip.generation
    fresh = patch(client, headers, trip, {"ebikeMode": True, "enabledAccommodationTypes": ["hostel"],
                                          "title": "Both"})
    assert pending(fresh) == {"terrain", "accommodations"}
    assert fresh.generation == generation + 1  # one dispatch, one generation
    assert queued() == [("accommodations", fresh.generation), ("terrain", fresh.generation)]


def test_re_pacing_cuts_the_days_and_the_analysis_follows_them(app, client, rider, trip):
    from jobs.tasks import generate_stages

    _, headers = rider
    old_ids = {s.id for s in trip.stages}
    fresh = patch(client, headers, trip, {"maxDistancePerDay": 60, "ebikeMode": True})
    assert pending(fresh) == {"stages"}  # the enrichments wait for the new days
    get_queue().empty()
    generate_stages(trip.id, fresh.generation)
    cut = reload(trip.id)
    assert {s.id for s in cut.stages}.isdisjoint(old_ids) and len(cut.stages) == 4
    assert pending(cut) == by_trigger("GEOMETRY", dated=False) | by_trigger("DATES", dated=False)  # undated


def test_clearing_the_start_date_re_dispatches_the_dated_enrichments(client, rider, dated):
    _, headers = rider
    fresh = patch(client, headers, dated, {"startDate": None})
    assert fresh.start_date is None and pending(fresh) == by_trigger("DATES", dated=False) >= {"terrain"}
    moved = patch(client, headers, settle(dated.id), {"startDate": FUTURE})
    assert pending(moved) == by_trigger("DATES", dated=True)  # those needing a date are withheld no more


# --- stage edits -------------------------------------------------------------------------------------------

def geometry_names() -> set[str]:
    return by_trigger("GEOMETRY", dated=False)


def _point(stage, dlat=0.0):
    return {"lat": round(stage.end_lat + dlat, 6), "lon": round(stage.end_lon, 6)}


EDITS = {
    "add": lambda t: ("post", f"/api/trips/{t.id}/stages", {"startPoint": _point(t.stages[-1]),
                                                             "endPoint": _point(t.stages[-1], 0.1)}),
    "update points": lambda t: ("patch", f"/api/trips/{t.id}/stages/{t.stages[0].id}",
                                {"endPoint": _point(t.stages[0], 0.01)}),
    "cut": lambda t: ("patch", f"/api/trips/{t.id}/stages/{t.stages[0].id}", {"distance": 30}),
    "move": lambda t: ("patch", f"/api/trips/{t.id}/stages/{t.stages[2].id}/move", {"toIndex": 0}),
    "delete": lambda t: ("delete", f"/api/trips/{t.id}/stages/{t.stages[1].id}", None),
    "rest day": lambda t: ("post", f"/api/trips/{t.id}/stages/{t.stages[0].id}/rest-day", None),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_day_edit_re_dispatches_the_geometry_enrichments(client, rider, trip, edit):
    _, headers = rider
    method, url, body = EDITS[edit](trip)
    kwargs = {"headers": {**headers, "If-Match": "*"}} | ({"json": body} if body is not None else {})
    response = getattr(client, method)(url, **kwargs)
    assert response.status_code == 200, response.get_json()
    fresh = reload(trip.id)
    assert pending(fresh) == geometry_names() and "bike_shops" in geometry_names()
    assert queued() == sorted((n, fresh.generation) for n in geometry_names())


def test_a_label_alone_dispatches_nothing(client, rider, trip):
    _, headers = rider
    response = client.patch(f"/api/trips/{trip.id}/stages/{trip.stages[0].id}", json={"label": "Lakes"},
                            headers={**headers, "If-Match": "*"})
    assert response.status_code == 200 and pending(reload(trip.id)) == set() and queued() == []


def _with_candidates(stage_id: str, *names_: str) -> list[dict]:
    with atomic():
        stage = db.session.get(Stage, stage_id)
        stage.accommodations = [{"name": n, "type": "hotel", "lat": round(stage.end_lat + i * 0.001, 6),
                                 "lon": stage.end_lon, "source": "osm"} for i, n in enumerate(names_)]
        return [dict(c) for c in stage.accommodations]


def test_choosing_an_accommodation_re_dispatches_geometry_and_the_scan_keeps_the_choice(client, rider, trip):
    """The day's road moves to the lodging (docs/RULES.md "Choosing an accommodation"): every GEOMETRY enrichment
    runs again, the scan too (the next day's line moved), and it never writes the chosen day."""
    _, headers = rider
    day = trip.stages[0]
    candidates = _with_candidates(day.id, "Gîte", "Hôtel")
    response = client.patch(f"/api/trips/{trip.id}/stages/{day.id}/accommodation", headers={
        **headers, "If-Match": "*"}, json={"lat": candidates[1]["lat"], "lon": candidates[1]["lon"]})
    assert response.status_code == 200
    fresh = reload(trip.id)
    assert pending(fresh) >= geometry_names()
    run_enrichment(trip.id, "accommodations", fresh.generation)
    fresh = reload(trip.id)
    assert fresh.stages[0].selected_accommodation["name"] == "Hôtel" and names_of(fresh.stages[0]) == ["Gîte", "Hôtel"]


def test_clearing_the_choice_looks_for_that_days_accommodations_again(client, rider, trip):
    _, headers = rider
    day = trip.stages[0]
    chosen = _with_candidates(day.id, "Gîte")[0]
    with atomic():
        db.session.get(Stage, day.id).selected_accommodation = chosen
    response = client.patch(f"/api/trips/{trip.id}/stages/{day.id}/accommodation",
                            headers={**headers, "If-Match": "*"}, json={"lat": None, "lon": None})
    assert response.status_code == 200
    assert pending(reload(trip.id)) == {"accommodations"} and scan_jobs() == [([day.id], None)]


def test_a_reroute_once_applied_re_dispatches_the_geometry_enrichments(app, client, rider, trip):
    from jobs.tasks import reroute_stage

    _, headers = rider
    day = trip.stages[0]
    lat, lon, _ = day.geometry[len(day.geometry) // 2]
    response = client.post(f"/api/trips/{trip.id}/stages/{day.id}/poi-waypoint", headers=headers,
                           json={"lat": lat + 0.01, "lon": lon})
    assert response.status_code == 202
    asked = reload(trip.id)
    assert pending(asked) == {"route_segment"}  # nothing moved yet
    get_queue().empty()
    reroute_stage(trip.id, day.id, asked.stages[0].waypoint["requestId"])
    fresh = reload(trip.id)
    assert computations.status_of(fresh, "route_segment") == "done"
    assert pending(fresh) == geometry_names()


def test_a_setting_changed_while_a_reroute_waits_does_not_cancel_it(app, client, rider, trip):
    """A waypoint's reroute is no enrichment: a dispatch for an edit leaves it pending, and its job still runs
    (it reads the generation its own computation was set for, not the trip's newest)."""
    from jobs.tasks import reroute_stage

    _, headers = rider
    day = trip.stages[0]
    lat, lon, _ = day.geometry[len(day.geometry) // 2]
    response = client.post(f"/api/trips/{trip.id}/stages/{day.id}/poi-waypoint", headers=headers,
                           json={"lat": lat + 0.01, "lon": lon})
    assert response.status_code == 202
    request_id = reload(trip.id).stages[0].waypoint["requestId"]
    edited = patch(client, headers, reload(trip.id), {"ebikeMode": True})
    assert computations.status_of(edited, "route_segment") == "pending" and "terrain" in pending(edited)
    reroute_stage(trip.id, day.id, request_id)
    fresh = reload(trip.id)
    assert computations.status_of(fresh, "route_segment") == "done"
    assert fresh.stages[0].approximate  # the day now goes through the waypoint (a straight detour offline)


# --- the same services through MCP --------------------------------------------------------------------------

def test_the_mcp_tools_dispatch_as_rest_does(app, client, rider, trip):
    from tests.mcp_helpers import call, mcp_token, payload

    token = mcp_token(app, rider[0])
    args = {"id": trip.id, "version": trip.version, "ebikeMode": True}
    saved = payload(call(client, token, "update_trip_settings", args))  # no recut: no confirmation asked
    assert "confirmationRequired" not in saved and "no day, edit or chosen accommodation" in saved["result"]
    assert pending(reload(trip.id)) == {"terrain"}
    settle(trip.id)
    day = trip.stages[0]
    candidate = _with_candidates(day.id, "Gîte")[0]
    chosen = call(client, token, "choose_accommodation", {
        "tripId": trip.id, "stageId": day.id, "version": reload(trip.id).version,
        "selectedAccommodationLat": candidate["lat"], "selectedAccommodationLon": candidate["lon"]})
    assert not chosen["isError"], payload(chosen)
    assert pending(reload(trip.id)) == geometry_names()  # as REST: the road moved to the lodging
    settle(trip.id)
    rest = call(client, token, "edit_stages", {"tripId": trip.id, "action": "rest_day", "stageId": day.id,
                                               "version": reload(trip.id).version})
    assert not rest["isError"], payload(rest)
    assert pending(reload(trip.id)) == geometry_names()


# --- supersession ------------------------------------------------------------------------------------------

def test_an_edit_during_an_analysis_supersedes_its_late_result(app, client, rider, trip, monkeypatch):
    _, headers = rider
    first = patch(client, headers, trip, {"ebikeMode": True})
    old = first.generation
    with atomic():
        assert computations.transition(trip.id, "terrain", old, "running")
    second = patch(client, headers, first, {"ebikeMode": False})
    assert second.generation == old + 1 and pending(second) == {"terrain"}
    run_enrichment(trip.id, "terrain", old)  # the first dispatch's job, late: it writes nothing
    late = reload(trip.id)
    assert computations.status_of(late, "terrain") == "pending"
    assert next(c for c in late.computations if c.name == "terrain").generation == second.generation
    assert all("terrain" not in (s.alerts_by_group or {}) for s in late.stages)


def test_an_edit_keeps_what_was_still_to_run(client, rider, trip):
    """A dispatch moves the trip to a new generation: what the previous one had not finished runs again."""
    _, headers = rider
    first = patch(client, headers, trip, {"enabledAccommodationTypes": ["hotel"]})
    assert pending(first) == {"accommodations"}
    second = patch(client, headers, first, {"ebikeMode": True})
    assert pending(second) == {"accommodations", "terrain"}
    assert ("accommodations", second.generation) in queued()


def test_an_edit_on_a_started_trip_dispatches_nothing(client, rider, trip):
    _, headers = rider
    with atomic():
        db.session.get(Trip, trip.id).start_date = date.today()
    response = client.patch(f"/api/trips/{trip.id}", json={"ebikeMode": True}, headers={**headers, "If-Match": "*"})
    assert response.status_code == 423 and pending(reload(trip.id)) == set() and queued() == []


# --- the accommodations scan endpoint ----------------------------------------------------------------------

def scan(client, headers, trip_id, body):
    return client.post(f"/api/trips/{trip_id}/accommodations/scan", json=body, headers=headers)


def scan_jobs() -> list[tuple]:
    """The scope (stage ids, radius in km) of every queued accommodations job."""
    return [tuple(job.args[3:]) for job in get_queue().get_jobs()
            if job.func_name == "jobs.tasks.run_enrichment" and job.args[1] == "accommodations"]


def test_a_scan_dispatches_the_accommodations_with_its_radius(client, rider, trip):
    _, headers = rider
    version = trip.version
    response = scan(client, headers, trip.id, {"radiusKm": 12, "stageId": trip.stages[1].id})
    assert response.status_code == 202 and response.headers["ETag"] == f'"{version}"'
    assert response.get_json()["id"] == trip.id
    fresh = reload(trip.id)
    assert pending(fresh) == {"accommodations"}
    assert scan_jobs() == [([trip.stages[1].id], 12.0)]
    get_queue().empty()
    assert scan(client, headers, trip.id, {}).status_code == 409  # the first scan has not run yet
    settle(trip.id)
    assert scan(client, headers, trip.id, {}).status_code == 202
    assert scan_jobs() == [(None, 5.0)]  # every day, the default radius


@pytest.mark.parametrize("body", [{"radiusKm": 0.9}, {"radiusKm": 15.1}, {"radiusKm": "far"}, {"radiusKm": True},
                                  {"radiusKm": None}, {"stageId": 7}, {"stageId": ""}, {"radius": 5}])
def test_scan_refusals_name_the_field(client, rider, trip, body):
    _, headers = rider
    response = scan(client, headers, trip.id, body)
    assert response.status_code == 422
    assert set(response.get_json()["errors"]) == set(body) and pending(reload(trip.id)) == set()


def test_the_radius_bounds_are_inclusive(client, rider, trip):
    _, headers = rider
    assert scan(client, headers, trip.id, {"radiusKm": 1}).status_code == 202
    settle(trip.id)
    assert scan(client, headers, trip.id, {"radiusKm": 15}).status_code == 202


def test_a_day_of_another_trip_is_not_found_like_an_unknown_one(client, rider, trip):
    user, headers = rider
    other = import_gpx(user, io.BytesIO(GPX), {})
    stranger = import_gpx(make_user(), io.BytesIO(GPX), {})
    unknown = scan(client, headers, trip.id, {"stageId": "0192f000-0000-7000-8000-000000000000"})
    mine = scan(client, headers, trip.id, {"stageId": other.stages[0].id})
    theirs = scan(client, headers, trip.id, {"stageId": stranger.stages[0].id})
    assert unknown.status_code == mine.status_code == theirs.status_code == 404
    assert unknown.get_json() == mine.get_json() == theirs.get_json()
    assert pending(reload(trip.id)) == set()


def test_a_strangers_trip_is_not_found_and_a_started_one_locked(client, rider, trip):
    _, headers = rider
    outsider = auth(make_token(make_user()))
    assert scan(client, outsider, trip.id, {}).status_code == 404
    with atomic():
        db.session.get(Trip, trip.id).start_date = date.today() - timedelta(days=1)
    assert scan(client, headers, trip.id, {"radiusKm": 99}).status_code == 423  # locked before validation
    assert pending(reload(trip.id)) == set() and queued() == []


def test_a_day_with_a_chosen_accommodation_is_not_scanned(client, rider, trip):
    _, headers = rider
    day = trip.stages[0]
    chosen = _with_candidates(day.id, "Mine")[0]
    with atomic():
        db.session.get(Stage, day.id).selected_accommodation = chosen
    response = scan(client, headers, trip.id, {"stageId": day.id})
    assert response.status_code == 422 and "stageId" in response.get_json()["errors"]


def test_a_trip_without_days_has_nothing_to_scan(client, rider, trip):
    _, headers = rider
    with atomic():
        for stage in db.session.get(Trip, trip.id).stages:
            db.session.delete(stage)
    response = scan(client, headers, trip.id, {})
    assert response.status_code == 422 and "stages" in response.get_json()["errors"]


# --- the scan on real map data: expand, and the rider's choice kept ----------------------------------------

def _lodgings(trip: Trip, tmp_path, metres_north: dict) -> None:
    """Guest houses north of each day's end: {day index: [(name, metres north), ...]}."""
    lats = [p[0] for s in trip.stages for p in s.geometry]
    lons = [p[1] for s in trip.stages for p in s.geometry]
    m = MapBuilder(bounds=(min(lats) - 0.3, min(lons) - 0.3, max(lats) + 0.3, max(lons) + 0.3))
    for index, places in metres_north.items():
        stage = trip.stages[index]
        for name, north in places:
            m.node(*offset_north(stage.end_lat, stage.end_lon, north), {"tourism": "guest_house", "name": name})
    import_map(m, tmp_path)


def names_of(stage) -> list[str]:
    return [c["name"] for c in stage.accommodations]


def test_an_expand_scan_keeps_the_candidates_and_adds_new_ones(app, client, rider, trip, tmp_path):
    _, headers = rider
    _lodgings(trip, tmp_path, {0: [("Near", 3000), ("Far", 9000)], 1: [("Other day", 9500)]})
    _with_candidates(trip.stages[0].id, "Kept")
    settle(trip.id)
    assert scan(client, headers, trip.id, {"radiusKm": 10, "stageId": trip.stages[0].id}).status_code == 202
    run_jobs(app)
    fresh = reload(trip.id)
    assert computations.status_of(fresh, "accommodations") == "done"
    first, second = fresh.stages[0], fresh.stages[1]
    assert names_of(first)[0] == "Kept" and sorted(names_of(first)[1:]) == ["Far", "Near"]
    assert names_of(second) == []  # another day: not scanned by a one-day scan


def test_a_scan_never_overwrites_a_chosen_accommodation(app, client, rider, trip, tmp_path):
    _, headers = rider
    _lodgings(trip, tmp_path, {0: [("Near", 2000)], 1: [("Second", 2000)]})
    chosen = _with_candidates(trip.stages[0].id, "Mine")[0]
    with atomic():
        db.session.get(Stage, trip.stages[0].id).selected_accommodation = chosen
    settle(trip.id)
    assert scan(client, headers, trip.id, {"radiusKm": 15}).status_code == 202
    run_jobs(app)
    fresh = reload(trip.id)
    assert fresh.stages[0].selected_accommodation == chosen and names_of(fresh.stages[0]) == ["Mine"]
    assert names_of(fresh.stages[1]) == ["Second"]
