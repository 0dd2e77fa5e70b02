"""A day's surfaces, way types and cues end to end (docs/RULES.md "Surfaces and way types", "Cues"): a ride uploaded
over the generated town of known streets (tests/osm_maps.py surfaced_town) is analysed; REST says km by surface
and way type adding up to the day's distance and the turns onto the streets, get_stage says them compactly; a
road bike is warned of the unpaved km, a touring bike is not; a day off the map has null tables with the reason;
a bad bikeType is refused by name."""
import pytest

from tests.enrich_helpers import import_map
from tests.fakes.thirdparty import gpx_from_points
from tests.mcp_helpers import call, mcp_token, payload
from tests.osm_maps import TOWN_STRETCHES, TOWN_TURNS, MapBuilder, map_support_or_skip, plane_line, surfaced_town
from tests.trips.api.test_gpx_upload import upload
from tests.trips.services.test_pipeline import run_jobs
from trips.core.db import db

RIDE = MapBuilder()
LINE = surfaced_town(RIDE)


@pytest.fixture
def town(app, ctx, tmp_path):
    map_support_or_skip(db.engine)
    return import_map(RIDE, tmp_path)


def ride(app, client, headers, line=LINE, **form) -> tuple[str, dict]:
    response = upload(client, headers, gpx_from_points([(lat, lon, 100.0) for lat, lon in line], name="Town"),
                      **form)
    assert response.status_code == 201, response.get_json()
    trip_id = response.get_json()["id"]
    run_jobs(app)
    db.session.rollback()  # end the test's read transaction: the reads see the jobs' commits
    trip = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()
    day = client.get(f"/api/trips/{trip_id}/stages/{trip['stages'][0]['stageId']}", headers=headers).get_json()
    return trip_id, day


def test_the_day_says_its_km_by_surface_and_way_type_adding_up_to_its_distance(app, client, rider, town):
    _, day = ride(app, client, rider[1])
    expected_surfaces, expected_kinds = {}, {}
    for a, b, _name, surface, kind in TOWN_STRETCHES:
        expected_surfaces[surface] = expected_surfaces.get(surface, 0) + (b - a)
        expected_kinds[kind] = expected_kinds.get(kind, 0) + (b - a)
    assert day["waysReason"] is None
    for table, expected in ((day["surfaces"], expected_surfaces), (day["wayTypes"], expected_kinds)):
        assert sum(round(v * 10) for v in table.values()) == round(day["distance"] * 10)  # exactly, in tenths
        for kind, km in expected.items():
            assert table[kind] == pytest.approx(km, abs=0.15), (kind, table)
    assert day["wayTypes"]["ferry"] == 0 and day["wayTypes"]["path"] == 0


def test_the_day_turns_onto_the_streets_it_rides_in_the_reader_s_language(app, client, rider, town):
    trip_id, day = ride(app, client, rider[1])
    assert [(c["turn"], c["street"]) for c in day["cues"]] == [(t, s) for _km, t, s in TOWN_TURNS]
    assert day["cues"][0]["instruction"] == "Turn left onto Chemin Beta"
    french = client.get(f"/api/trips/{trip_id}/stages/{day['stageId']}",
                        headers={**rider[1], "Accept-Language": "fr"}).get_json()
    assert french["cues"][1]["instruction"] == "Tournez à droite sur Piste Gamma"
    assert all(isinstance(c["lat"], float) and isinstance(c["lon"], float) for c in day["cues"])


def test_get_stage_says_the_tables_and_turns_compactly(app, client, rider, town):
    user, headers = rider
    trip_id, day = ride(app, client, headers)
    answer = payload(call(client, mcp_token(app, user), "get_stage", {"tripId": trip_id, "stageId": day["stageId"]}))
    ways = answer["ways"]
    assert ways["reason"] is None and ways["surfaces"].startswith("paved 1.0")
    assert ways["cues"] == [f"{km:.1f} {turn} {street}" for km, turn, street in TOWN_TURNS]


def test_a_road_bike_is_warned_of_the_unpaved_km_and_a_touring_bike_is_not(app, client, rider, town):
    _, touring = ride(app, client, rider[1])
    _, road = ride(app, client, rider[1], bikeType="road")
    assert "surface_beyond_bike" not in [a["code"] for a in touring["alerts"]]
    alert = next(a for a in road["alerts"] if a["code"] == "surface_beyond_bike")
    assert alert["severity"] == "warning" and "1.6 km" in alert["message"]  # compacted 0.8 + unpaved 0.8
    assert road["groups"]["surface"] in ("done", "partial")  # the town's extent ends where the ride does


def test_a_day_off_the_map_has_no_tables_and_says_why(app, client, rider, town):
    _, day = ride(app, client, rider[1], line=plane_line((0, 50_000), (3000, 50_000)))
    assert day["surfaces"] is None and day["wayTypes"] is None and day["cues"] is None
    assert day["waysReason"] and "map" in day["waysReason"]


def test_a_day_not_analysed_yet_says_so_rather_than_zeros(app, client, rider, town):
    response = upload(client, rider[1], gpx_from_points([(lat, lon, 1.0) for lat, lon in LINE], name="Town"))
    trip = client.get(f"/api/trips/{response.get_json()['id']}", headers=rider[1]).get_json()
    day = trip["stages"][0]
    assert day["surfaces"] is None and day["wayTypes"] is None and day["waysReason"]


def test_a_bad_bike_type_is_refused_naming_the_field(app, client, rider, town):
    _, headers = rider
    response = upload(client, headers, gpx_from_points([(lat, lon, 1.0) for lat, lon in LINE]), bikeType="unicycle")
    assert response.status_code == 422 and "bikeType" in response.get_json()["errors"]
    trip_id, _ = ride(app, client, headers)
    trip = client.get(f"/api/trips/{trip_id}", headers=headers)
    assert trip.get_json()["bikeType"] == "touring"
    refused = client.patch(f"/api/trips/{trip_id}", json={"bikeType": "tandem"},
                           headers={**headers, "If-Match": trip.headers["ETag"]})
    assert refused.status_code == 422 and list(refused.get_json()["errors"]) == ["bikeType"]
    changed = client.patch(f"/api/trips/{trip_id}", json={"bikeType": "gravel"},
                           headers={**headers, "If-Match": trip.headers["ETag"]})
    assert changed.status_code == 200 and changed.get_json()["bikeType"] == "gravel"


def test_the_share_page_draws_the_bars_and_prints_the_cue_sheet(app, client, rider, town):
    trip_id, _ = ride(app, client, rider[1])
    code = client.post(f"/api/trips/{trip_id}/share", headers=rider[1]).get_json()["shortCode"]
    html = client.get(f"/s/{code}").get_data(as_text=True)
    assert html.count('class="bar"') == 2 and 'class="part-unpaved"' in html and 'class="part-track"' in html
    assert "paved 1\u00a0km" in html or "paved 1.0\u00a0km" in html
    sheet = html[html.index('<table class="cues">'):html.index("</table>")]
    assert [line for _km, _t, line in TOWN_TURNS if line in sheet] == [s for *_, s in TOWN_TURNS]
    assert "Turn left onto Chemin Beta" in sheet and "Turn right onto Route Delta" in sheet


def test_the_gpx_places_a_waypoint_named_as_ridewithgps_at_each_turn(app, client, rider, town):
    from lxml import etree

    from tests.osm_maps import TOWN_RIDE, plane_point
    from trips.osm.geometry import GEOD

    trip_id, _ = ride(app, client, rider[1])
    gpx = etree.fromstring(client.get(f"/api/trips/{trip_id}.gpx", headers=rider[1]).data)
    ns = {"g": "http://www.topografix.com/GPX/1/1"}
    turns = [w for w in gpx.findall("g:wpt", ns) if w.findtext("g:type", namespaces=ns) in ("Left", "Right")]
    assert [(w.findtext("g:type", namespaces=ns), w.findtext("g:name", namespaces=ns)) for w in turns] == [
        ("Left", "Turn left onto Chemin Beta"), ("Right", "Turn right onto Piste Gamma"),
        ("Right", "Turn right onto Route Delta")]
    assert all(w.findtext("g:sym", namespaces=ns) == w.findtext("g:type", namespaces=ns) for w in turns)
    for w, corner in zip(turns, TOWN_RIDE[1:4]):  # placed at the turn
        lat, lon = plane_point(*corner)
        assert GEOD.inv(lon, lat, float(w.get("lon")), float(w.get("lat")))[2] < 30
    assert gpx.index(turns[-1]) < gpx.index(gpx.find("g:trk", ns))  # the schema's order: wpt before trk


def test_mcp_takes_a_bike_type_and_refuses_one_it_does_not_know(app, client, rider, town):
    from tests.factories import make_user

    trip_id, _ = ride(app, client, rider[1])
    token = mcp_token(app, rider[0])
    refused = call(client, token, "update_trip_settings", {"id": trip_id, "version": 1, "bikeType": "tandem"})
    assert refused["isError"] and "bikeType" in str(payload(refused)["error"])
    taken = call(client, token, "update_trip_settings", {"id": trip_id, "version": 1, "bikeType": "mountain"})
    assert not taken["isError"], payload(taken)
    assert payload(call(client, token, "get_trip", {"id": trip_id}))["bikeType"] == "mountain"
    stranger = mcp_token(app, make_user("stranger@example.org"))
    assert call(client, stranger, "update_trip_settings", {"id": trip_id, "version": 1, "bikeType": "road"})["isError"]


def test_a_day_off_the_map_beside_one_on_it_says_so_and_the_one_on_it_counts_the_rest_unknown(app, client, rider,
                                                                                                town):
    _, headers = rider
    beyond = LINE + plane_line((1800, 0), (61_800, 0), step=500.0)[1:]  # on east, 60 km past the town's map
    trip_id, first = ride(app, client, headers, line=beyond, maxDistancePerDay="30")
    days = client.get(f"/api/trips/{trip_id}", headers=headers).get_json()["stages"]
    assert len(days) >= 2
    last = days[-1]
    assert last["surfaces"] is None and last["wayTypes"] is None and last["groups"]["surface"] == "off map"
    assert last["waysReason"] == "This day is off the imported map: import its region (flask osm import)."
    assert first["surfaces"]["unknown"] >= first["distance"] - 3.5  # all but the town's km: no way matched
    assert round(sum(first["surfaces"].values()) * 10) == round(sum(first["wayTypes"].values()) * 10) \
        == round(first["distance"] * 10)
