"""Moving a day's start or end keeps the road (docs/RULES.md "Editing a day's points"): a point on the route cuts
the full-resolution route there and the neighbour takes the rest; a point off it is routed or joined straight
(approximate); the answer says what moved."""
import io
import math

import numpy as np
import pytest
from pyproj import Geod

from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.mcp_helpers import call, mcp_token, payload
from mcp.tools import edit_stages

from tests.factories import make_user
from trips.core.db import db
from trips.errors import Invalid, NotFound
from trips.guards import Precondition
from trips.route.geo import cumulative_km, elevation_gain_loss, locate_on_line, slice_km
from trips.services import day_points, stages as stage_ops
from trips.services.trips import import_gpx


def moved(summary) -> str:
    """What the MCP answer says the edit moved, in English."""
    return edit_stages.moved(summary, "en")


def how(trip) -> list[str]:
    """How the edit joined its points, in English (the summary keeps Msgs)."""
    return [str(note) for note in trip.edit_summary["how"]]

_GEOD = Geod(ellps="WGS84")


def zigzag(legs: int = 20, leg_m: float = 3000.0, gap_m: float = 300.0, step_m: float = 50.0) -> list:
    """A 60 km road of east-west legs `gap_m` apart: a point 5 km back along it is ~1 km away as the crow flies."""
    points, lat, lon = [], 45.0, 5.0
    for leg in range(legs):
        heading = 90.0 if leg % 2 == 0 else 270.0
        for _ in range(int(leg_m / step_m)):
            points.append((round(lat, 7), round(lon, 7), 300.0 + 20 * math.sin(len(points) / 40)))
            lon, lat, _ = _GEOD.fwd(lon, lat, heading, step_m)
        for _ in range(int(gap_m / step_m)):
            points.append((round(lat, 7), round(lon, 7), 300.0))
            lon, lat, _ = _GEOD.fwd(lon, lat, 0.0, step_m)
    points.append((round(lat, 7), round(lon, 7), 300.0))
    return points


def new_trip(user, points, **form):
    return import_gpx(user, io.BytesIO(gpx_from_points(points, name="Road")), form)


def at_km(points, km):
    pts = np.asarray(points, dtype=float)
    return slice_km(pts, cumulative_km(pts), km, km)[0]


def update(user, trip, stage, version, **body):
    return stage_ops.update_stage(user, trip.id, stage.id, Precondition.exact(version), body)


def riding(trip):
    return [s for s in trip.stages if not s.is_rest_day]


def joined(trip):
    days = riding(trip)
    return all(math.isclose(a.end_lat, b.start_lat, abs_tol=1e-6) and math.isclose(a.end_lon, b.start_lon, abs_tol=1e-6)
               for a, b in zip(days, days[1:]))


@pytest.mark.parametrize("shift_km", [-5.0, 5.0])
def test_moving_day_one_end_along_a_zigzag_road_moves_the_road_distance(ctx, rider, shift_km):
    user, _ = rider
    road = zigzag()
    total = float(cumulative_km(np.asarray(road, dtype=float))[-1])
    trip = new_trip(user, road, maxDistancePerDay="30")
    d1, d2, rest = trip.stages[0].distance, trip.stages[1].distance, sum(s.distance for s in trip.stages[2:])
    lat, lon, _ = at_km(road, d1 + shift_km)
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": lat, "lon": lon})
    one, two = trip.stages[0], trip.stages[1]
    # Before: a straight two-point line (1 km as the crow flies) and day 2 untouched.
    assert one.distance == pytest.approx(d1 + shift_km, abs=0.05)
    assert two.distance == pytest.approx(d2 - shift_km, abs=0.05)
    assert sum(s.distance for s in trip.stages) == pytest.approx(total, abs=0.05)
    assert sum(s.distance for s in trip.stages[2:]) == pytest.approx(rest, abs=1e-6)
    assert len(one.geometry) > 2 and joined(trip) and not one.approximate and not two.approximate
    summary = trip.edit_summary
    assert [d["day"] for d in summary["changed"]] == [1, 2]
    text = moved(summary)
    assert f"day 1 is {round(one.distance, 1):g} km" in text and f"day 2 is {round(two.distance, 1):g} km" in text
    assert f"cut on the route at km {round(d1 + shift_km, 1):g}" in text


def test_moving_a_start_gives_the_previous_day_the_road(ctx, rider):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    d1, d2 = trip.stages[0].distance, trip.stages[1].distance
    lat, lon, _ = at_km(road, d1 + 3.0)
    trip = update(user, trip, trip.stages[1], trip.version, startPoint={"lat": lat + 0.0005, "lon": lon})  # ~55 m off
    assert trip.stages[0].distance == pytest.approx(d1 + 3.0, abs=0.05)
    assert trip.stages[1].distance == pytest.approx(d2 - 3.0, abs=0.05)
    assert joined(trip) and how(trip)[0].startswith("start point cut on the route at km")


def test_a_road_passing_twice_is_cut_at_the_pass_nearest_the_current_end():
    out = [(45.0 + i * 0.001, 5.0, 0.0) for i in range(101)]  # ~11 km north, then back 100 m east of it
    back = [(45.1 - i * 0.001, 5.00127, 0.0) for i in range(101)]
    line = np.asarray(out + back)
    cum = cumulative_km(line)
    near_start = locate_on_line(line, cum, 45.02, 5.0006, 200.0, ref_km=1.0)
    near_end = locate_on_line(line, cum, 45.02, 5.0006, 200.0, ref_km=21.0)
    assert near_start[0] == pytest.approx(2.22, abs=0.05) and near_end[0] == pytest.approx(20.2, abs=0.1)
    assert locate_on_line(line, cum, 45.02, 5.02, 200.0, ref_km=1.0) is None  # 1.5 km away: not on the route


def test_a_point_off_the_route_without_a_router_is_joined_straight_and_approximate(ctx, rider):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    d1, d2 = trip.stages[0].distance, trip.stages[1].distance
    lat, lon, _ = at_km(road, d1 - 5.0)
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": lat + 0.01, "lon": lon - 0.01})
    one, two = trip.stages[0], trip.stages[1]
    assert one.approximate and two.approximate and joined(trip)
    assert one.end_lat == pytest.approx(lat + 0.01)
    pts = np.asarray(road, dtype=float)
    _, off_m = locate_on_line(pts, cumulative_km(pts), lat + 0.01, lon - 0.01, None, d1 - 5.0)
    assert off_m > 1000  # out to the point and back to the road: the days grow by twice that, straight
    assert one.distance + two.distance == pytest.approx(d1 + d2 + 2 * off_m / 1000, abs=0.05)
    assert d1 - 5.5 < one.distance - off_m / 1000 < d1 - 4.0
    assert one.elevation_loss < 5  # the point came without elevation: level with the road, not a drop to 0 m
    assert "joined straight: approximate" in moved(trip.edit_summary)


def test_a_point_off_the_route_with_a_router_is_routed(app, ctx, rider, fake_valhalla, monkeypatch):
    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    d1 = trip.stages[0].distance
    lat, lon, _ = at_km(road, d1 - 5.0)
    target = (lat + 0.01, lon - 0.01, 0.0)
    fake_valhalla.set_route([(lat, lon, 0.0), (lat + 0.005, lon, 0.0), target], length_km=1.7)
    order = []
    real_join, real_write = day_points._join, stage_ops.guarded_write
    monkeypatch.setattr(day_points, "_join", lambda a, b: order.append("route") or real_join(a, b))
    monkeypatch.setattr(stage_ops, "guarded_write", lambda ctx: order.append("lock") or real_write(ctx))
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": target[0], "lon": target[1]})
    assert order == ["route", "route", "lock"]  # no trip lock nor write transaction held across the router
    assert not trip.stages[0].approximate
    assert len(fake_valhalla.bodies) == 2  # out and back, asked before the trip lock and not again under it
    assert how(trip) == ["end point routed"] and joined(trip)


def test_days_made_of_added_lines_use_their_own_lines(ctx, rider):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    trip.route = None  # e.g. a trip made of added days: no stored route
    db.session.commit()
    d1, d2 = trip.stages[0].distance, trip.stages[1].distance
    lat, lon, _ = at_km(road, d1 - 10.0)
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": lat, "lon": lon})
    assert trip.stages[0].distance == pytest.approx(d1 - 10.0, abs=0.3)
    assert trip.stages[0].distance + trip.stages[1].distance == pytest.approx(d1 + d2, abs=1e-6)


def test_a_rest_day_point_and_a_foreign_trip_are_refused(ctx, rider):
    user, _ = rider
    trip = new_trip(user, make_points(2400, step_m=100.0))
    trip = stage_ops.insert_rest_day(user, trip.id, trip.stages[0].id, Precondition.exact(trip.version))
    rest = trip.stages[1]
    with pytest.raises(Invalid) as refused:
        update(user, trip, rest, trip.version, endPoint={"lat": 45.1, "lon": 5.1})
    assert "stageId" in refused.value.errors
    one = trip.stages[0]
    with pytest.raises(Invalid) as onto_its_start:  # a 0 km day: refused, naming the point
        update(user, trip, one, trip.version, endPoint={"lat": one.start_lat, "lon": one.start_lon})
    assert "endPoint" in onto_its_start.value.errors
    with pytest.raises(NotFound):
        update(make_user("other@example.org"), trip, trip.stages[0], trip.version, endPoint={"lat": 45.1, "lon": 5.1})


def test_deleting_a_day_says_the_end_date_moved(ctx, rider):
    user, _ = rider
    trip = new_trip(user, make_points(2400, step_m=100.0), startDate="2031-06-01", endDate="2031-06-04")
    trip = stage_ops.delete_stage(user, trip.id, trip.stages[1].id, Precondition.exact(trip.version))
    assert "The end date moved from 2031-06-04 to 2031-06-03." in moved(trip.edit_summary)


def test_a_cut_at_a_distance_measures_the_days_on_the_full_route(ctx, rider):
    user, _ = rider
    road = zigzag()
    pts = np.asarray(road, dtype=float)
    trip = new_trip(user, road, maxDistancePerDay="30")
    trip = update(user, trip, trip.stages[0], trip.version, distance=12.5)
    head = slice_km(pts, cumulative_km(pts), 0.0, 12.5)
    gain, _ = elevation_gain_loss(head[:, 2])
    # not the climbing of the simplified stored line, which drops the small rises along the straight legs
    assert trip.stages[0].distance == pytest.approx(12.5, abs=0.01)
    assert trip.stages[0].elevation == pytest.approx(gain, abs=0.5) and joined(trip)


def test_the_mcp_answer_says_what_moved(app, client, rider):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road, startDate="2031-06-01", endDate="2031-06-03")
    d1 = trip.stages[0].distance
    lat, lon, _ = at_km(road, d1 - 5.0)
    token = mcp_token(app, user)
    answer = payload(call(client, token, "edit_stages", {
        "tripId": trip.id, "action": "update", "stageId": trip.stages[0].id, "version": trip.version,
        "endPoint": {"lat": lat, "lon": lon}}))
    # not only "The day has been changed."
    assert f"day 1 is {round(d1 - 5.0, 1):g} km" in answer["result"] and "End point cut on the route at km" in answer["result"]
    bad = call(client, token, "edit_stages", {"tripId": trip.id, "action": "update", "stageId": trip.stages[0].id,
                                              "version": answer["version"], "endPoint": {"lat": 91, "lon": 5}})
    assert bad["isError"] and "endPoint" in bad["content"][0]["text"]


def test_both_points_at_once_and_a_rest_day_between(ctx, rider):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    d1, d2, d3 = (s.distance for s in trip.stages)
    trip = stage_ops.insert_rest_day(user, trip.id, trip.stages[0].id, Precondition.exact(trip.version))
    one, rest, two, three = trip.stages
    start, end = at_km(road, d1 + 2.0), at_km(road, d1 + d2 - 4.0)
    trip = update(user, trip, two, trip.version, startPoint={"lat": start[0], "lon": start[1]},
                  endPoint={"lat": end[0], "lon": end[1]})
    one, rest, two, three = trip.stages
    # day 1 (across the rest day) takes 2 km, day 3 takes 4 km: the route is still whole
    assert [one.distance, two.distance, three.distance] == pytest.approx([d1 + 2.0, d2 - 6.0, d3 + 4.0], abs=0.05)
    assert rest.is_rest_day and (rest.start_lat, rest.start_lon) == pytest.approx((one.end_lat, one.end_lon))
    assert joined(trip) and len(trip.edit_summary["how"]) == 2
    assert [d["day"] for d in trip.edit_summary["changed"]] == [1, 2, 3, 4]


def test_an_added_day_is_approximate_without_a_router_and_routed_with_one(app, ctx, rider, fake_valhalla, monkeypatch):
    user, _ = rider
    trip = new_trip(user, make_points(2400, step_m=100.0))
    body = {"startPoint": {"lat": 46.0, "lon": 6.0}, "endPoint": {"lat": 46.1, "lon": 6.1}}
    trip = stage_ops.add_stage(user, trip.id, Precondition.exact(trip.version), body)
    assert trip.stages[-1].approximate  # a straight line does not pass for a road
    assert "New day joined straight: approximate." in moved(trip.edit_summary)
    monkeypatch.setattr(app.extensions["btp_providers"], "valhalla", fake_valhalla.config())
    fake_valhalla.set_route([(46.0, 6.0, 0.0), (46.05, 6.02, 0.0), (46.1, 6.1, 0.0)], length_km=14.0)
    trip = stage_ops.add_stage(user, trip.id, Precondition.exact(trip.version), body)
    assert not trip.stages[-1].approximate and len(trip.stages[-1].geometry) >= 3
    assert len(fake_valhalla.bodies) == 1  # asked once, before the trip lock: not again under it
    assert how(trip) == ["new day routed"]


def out_and_back(km: float = 30.0, gap_m: float = 100.0, step_m: float = 100.0) -> list:
    """North `km`, `gap_m` east, then back south beside the way out: every point of it is passed twice."""
    points, lat, lon = [], 45.0, 5.0
    for heading, steps in ((0.0, int(km * 1000 / step_m)), (90.0, 1), (180.0, int(km * 1000 / step_m))):
        for _ in range(steps):
            points.append((round(lat, 7), round(lon, 7), 400.0))
            lon, lat, _ = _GEOD.fwd(lon, lat, heading, step_m if heading != 90.0 else gap_m)
    points.append((round(lat, 7), round(lon, 7), 400.0))
    return points


def test_a_road_passing_twice_is_cut_on_the_pass_nearest_the_day_end(ctx, rider):
    user, _ = rider
    road = out_and_back(40.0)
    trip = new_trip(user, road, maxDistancePerDay="50")  # day 1 ends ~2 km down the way back
    d1, d2 = trip.stages[0].distance, trip.stages[1].distance
    assert 41.0 < d1 < 43.0
    lat, lon, _ = at_km(road, 37.0)  # on the way out, 100 m from the way back at its km 43.1
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": lat, "lon": lon + 0.0006})
    assert trip.stages[0].distance == pytest.approx(43.1, abs=0.1)  # not 37: the pass nearer its end (km d1)
    assert trip.stages[0].distance + trip.stages[1].distance == pytest.approx(d1 + d2, abs=0.01)


def _map_with_a_spur(tmp_path, road, index: int, north_m: float = 1100.0, west_m: float = 800.0):
    """The imported map: the route's road for 3 km each side of point `index`, and a side street from that point
    `north_m` north then `west_m` west. Returns the side street's corner and end."""
    from tests.osm_maps import MapBuilder, map_support_or_skip
    from trips.osm.importer import import_file

    map_support_or_skip(db.engine)
    m = MapBuilder()
    ids = [m.node(lat, lon) for lat, lon, _ in road[index - 30:index + 31]]
    m.way(ids, {"highway": "secondary"})
    lat, lon = road[index][:2]
    corner = (lat + north_m / 111_132.0, lon)
    end = (corner[0], lon - west_m / (111_320.0 * math.cos(math.radians(lat))))
    m.way([ids[30], corner, end], {"highway": "residential"})
    import_file(db.engine, m.write(tmp_path / "spur.osm.pbf"))
    return corner, end


def test_a_point_off_the_route_is_routed_on_the_imported_map(ctx, rider, tmp_path):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    d1, d2 = trip.stages[0].distance, trip.stages[1].distance
    index = int(round((d1 - 5.0) * 10))
    corner, end = _map_with_a_spur(tmp_path, road, index)
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": end[0], "lon": end[1]})
    one, two = trip.stages[0], trip.stages[1]
    assert not one.approximate and not two.approximate and joined(trip)
    assert how(trip) == ["end point routed"]
    line = np.asarray([p[:2] for p in one.geometry], dtype=float)
    assert np.abs(line - np.array(corner)).max(axis=1).min() < 1e-5  # along the side street, not straight
    # out along the street (1.9 km) and back: the two days grow by about twice that
    assert one.distance + two.distance == pytest.approx(d1 + d2 + 3.8, abs=0.4)


def test_a_point_the_map_does_not_cover_is_joined_straight_even_with_a_map(ctx, rider, tmp_path):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    d1 = trip.stages[0].distance
    _map_with_a_spur(tmp_path, road, int(round((d1 - 5.0) * 10)))
    lat, lon, _ = at_km(road, d1 - 40.0)  # 35 km from the map's roads
    trip = update(user, trip, trip.stages[0], trip.version, endPoint={"lat": lat + 0.02, "lon": lon - 0.02})
    assert trip.stages[0].approximate and "joined straight: approximate" in moved(trip.edit_summary)


def test_an_added_day_is_routed_on_the_imported_map(ctx, rider, tmp_path):
    user, _ = rider
    road = make_points(2400, step_m=100.0)
    trip = new_trip(user, road)
    index = 1000
    _, end = _map_with_a_spur(tmp_path, road, index)
    start = road[index - 25][:2]
    body = {"startPoint": {"lat": start[0], "lon": start[1]}, "endPoint": {"lat": end[0], "lon": end[1]}}
    trip = stage_ops.add_stage(user, trip.id, Precondition.exact(trip.version), body)
    day = trip.stages[-1]
    assert not day.approximate and how(trip) == ["new day routed"]
    assert day.distance == pytest.approx(2.5 + 1.9, abs=0.2) and len(day.geometry) > 20
    # no point of it came with an elevation: the day's climbing is unknown, never a flat 0 m
    assert all(p[2] is None for p in day.geometry) and day.elevation is None
