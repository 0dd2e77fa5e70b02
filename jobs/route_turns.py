"""A route drawn from places on the map, one leg a turn: each job draws one leg and queues the next at the back of
the queue, so the jobs queued meanwhile (another account's analysis) run between two legs, never after the whole
trip. A leg is bounded (trips/osm/router.py MAX_LEG_KM), so a turn is too. The legs drawn so far wait in Redis,
one hash per trip and generation, until the last one joins them."""
from __future__ import annotations

import pickle

from trips.core.queue import enqueue
from trips.core.redis_client import get_redis
from trips.services import planned

KEY = "btp:route-legs:{}:{}"
KEEP_S = 3600  # the legs of a trip whose turns stopped (it moved on, a job was lost) go by themselves


def draw(trip_id: str, generation: int, points: list[list[float]], leg: int, bike: str) -> planned.Planned | None:
    """The whole route once its last leg is drawn; None when this turn drew leg `leg` and queued the next (or the
    first again, when the legs kept so far were lost). Raises RoutingError, and Redis errors (the job is retried)."""
    if not planned.on_the_map() or len(points) <= 2:  # Valhalla's one call, or a single leg: no turns
        return planned.plan_route(points, bike)
    redis, key = get_redis(), KEY.format(trip_id, generation)
    drawn = planned.draw_legs(points, leg, 0.0, bike)[0]
    with redis.pipeline() as pipe:
        pipe.hset(key, str(leg), pickle.dumps(drawn))
        pipe.expire(key, KEEP_S)
        pipe.execute()
    if leg + 2 < len(points):
        enqueue("jobs.tasks.fetch_route", trip_id, generation, leg + 1)
        return None
    kept = redis.hgetall(key)
    redis.delete(key)
    found = [kept.get(str(i).encode()) for i in range(len(points) - 1)]
    if any(item is None for item in found):  # Redis lost some (restarted empty): draw them all again
        enqueue("jobs.tasks.fetch_route", trip_id, generation, 0)
        return None
    return planned.from_legs(points, [pickle.loads(item) for item in found])  # noqa: S301 (our own, in our Redis)
