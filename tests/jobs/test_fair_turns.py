"""One account's heavy trip never holds another account's analysis (jobs/route_turns.py): on one real worker, a
route drawn through fifty places goes one leg a turn, each turn queued at the back, so a light account's analysis
queued meanwhile is done while the heavy route is still being drawn; and the heavy route, once drawn, is whole."""
import io



from jobs.route_turns import KEY
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.procs import wait_for, worker_running
from tests.trips.services.test_trips_from_places import ROAD_KM, along, road_map  # noqa: F401 (a fixture)
from trips import computations
from trips.core.db import db
from trips.core.redis_client import get_redis
from trips.enrich import registry
from trips.models import Trip
from trips.services import trips as services
from trips.services.inputs import MAX_WAYPOINTS

ZIG_ZAG = [along(0 if i % 2 == 0 else ROAD_KM) for i in range(MAX_WAYPOINTS)]


def statuses(trip_id: str) -> dict[str, str]:
    db.session.rollback()  # the worker writes from its own process: read afresh (objects stay attached)
    trip = db.session.get(Trip, trip_id)
    return {c.name: c.status for c in trip.computations}


def analysis_settled(trip_id: str) -> bool:
    found = statuses(trip_id)
    return all(found.get(name) not in computations.ACTIVE for name in registry.ENRICHMENTS)


def test_a_light_analysis_is_done_while_a_heavy_route_is_still_drawn(app, ctx, app_config, road_map, tmp_path,  # noqa: F811
                                                                     capsys):
    heavy, light = make_user("heavy@example.org"), make_user("light@example.org")
    log = tmp_path / "worker.log"
    with worker_running(app_config, log):
        trip, _ = services.create_trip(heavy, {"waypoints": ZIG_ZAG}, "heavy-trip-key-0001")
        heavy_id = trip.id
        wait_for(lambda: statuses(heavy_id)["route"] == "running", 120, "the heavy route to start", (log,))
        gpx = io.BytesIO(gpx_from_points(make_points(200, start=(46.0, 6.0))))
        light_trip = services.import_gpx(light, gpx, {})
        waited = wait_for(lambda: analysis_settled(light_trip.id), 120, "the light analysis", (log,))
        assert statuses(heavy_id)["route"] == "running"  # the light account did not wait for the heavy route
        assert get_redis().hlen(KEY.format(heavy_id, 1)) < MAX_WAYPOINTS - 1
        wait_for(lambda: statuses(heavy_id)["route"] != "running", 240, "the heavy route", (log,))
    assert statuses(heavy_id)["route"] == "done"
    drawn = db.session.get(Trip, heavy_id)
    assert len(drawn.route_legs) == MAX_WAYPOINTS - 1 and all(leg["routed"] for leg in drawn.route_legs)
    assert abs(drawn.route.distance_km - ROAD_KM * (MAX_WAYPOINTS - 1)) < MAX_WAYPOINTS  # every leg on the road
    assert not get_redis().exists(KEY.format(heavy_id, 1))  # the legs kept between turns are gone
    with capsys.disabled():
        print(f"\n[fair turns] the light account's analysis took {waited:.1f} s with the heavy route being drawn")
