"""A route link's route: fetched from its service (trips/providers/routes.py), read by its format
(trips/route/source_formats.py), bounded by what BTP can plan, and kept 24 h in Redis (key
`btp:route_fetch:{kind}:{id}`). A Komoot collection has one track per tour that could be fetched."""
from __future__ import annotations

import json
import logging
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np
import redis as redis_lib

from trips.errors import Msg
from trips.providers import routes as services
from trips.providers.cache import Cache
from trips.providers.routes import FetchFailed, SourceConfig
from trips.route.gpx import ParsedRoute
from trips.route.pacing import TooLarge, check_route
from trips.route.source_formats import (
    ID_RE, NO_POINTS, FetchError, checked, failed, parse_collection, parse_komoot_tour, parse_rwgps, parse_strava,
)
from trips.route.sources import KOMOOT_COLLECTION, KOMOOT_TOUR, SOURCE_KINDS, STRAVA_ROUTE, SourceRef, UnsupportedSource

log = logging.getLogger(__name__)

COLLECTION_WORKERS = 4
CACHE_TTL_SECONDS = 24 * 3600
CACHE_NAMESPACE = "btp:route_fetch"


def _encode(route: ParsedRoute) -> bytes:
    header = json.dumps({"v": 1, "title": route.title, "n": [len(t) for t in route.tracks]}).encode()
    body = b"".join(np.ascontiguousarray(t, dtype="<f8").tobytes() for t in route.tracks)
    return zlib.compress(header + b"\n" + body)


def _decode(blob: bytes) -> ParsedRoute:
    """Raises ValueError (or zlib.error) on a malformed entry."""
    header, _, body = zlib.decompress(blob).partition(b"\n")
    meta = json.loads(header)
    if meta.get("v") != 1:
        raise ValueError("unknown cache version")
    flat = np.frombuffer(body, dtype="<f8").astype(float)
    counts = [int(n) for n in meta["n"]]
    if sum(counts) * 3 != flat.size:
        raise ValueError("cache entry size mismatch")
    bounds = np.cumsum([0] + counts) * 3
    tracks = [flat[a:b].reshape(-1, 3) for a, b in zip(bounds[:-1], bounds[1:])]
    return ParsedRoute(title=meta.get("title"), tracks=tracks)


def route_cache(client: redis_lib.Redis | None) -> Cache:
    return Cache(client, CACHE_NAMESPACE, CACHE_TTL_SECONDS, label="route", encode=_encode, decode=_decode)


def fetch_route(
    ref: SourceRef,
    config: SourceConfig,
    redis: redis_lib.Redis | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> ParsedRoute:
    """Fetch (or read from the cache) the route `ref` points to; the title is in ParsedRoute.title.

    `sleep` waits between retries (tests inject a no-op). Raises UnsupportedSource for an unknown kind or a
    malformed id, FetchError for every fetch or parse failure, including FetchError(NO_POINTS), and for a
    route BTP cannot plan (docs/RULES.md "Trip limits")."""
    if ref.kind not in SOURCE_KINDS or not isinstance(ref.route_id, str) or not ID_RE.fullmatch(ref.route_id):
        raise UnsupportedSource()
    cache = route_cache(redis)
    cached = cache.get(f"{ref.kind}:{ref.route_id}")
    if cached is not None:
        return _bounded(ref.kind, cached)
    rid = ref.route_id
    try:
        if ref.kind == KOMOOT_TOUR:
            route = checked(parse_komoot_tour(services.komoot(config, sleep).get(f"/tour/{rid}")))
        elif ref.kind == KOMOOT_COLLECTION:
            route = _fetch_collection(rid, config, cache, sleep)
        elif ref.kind == STRAVA_ROUTE:
            body = services.strava(config, sleep).get(f"/routes/{rid}/export_gpx")
            route = checked(parse_strava(body, config.max_bytes))
        else:
            route = checked(parse_rwgps(services.ridewithgps(config, sleep).get(f"/routes/{rid}.json")))
    except FetchFailed as exc:
        raise failed(exc.detail) from None
    cache.set(f"{ref.kind}:{rid}", route)
    return _bounded(ref.kind, route)


def _bounded(kind: str, route: ParsedRoute) -> ParsedRoute:
    """The route, if BTP can plan it: raises FetchError with the reason for a jump between consecutive points
    or a length beyond what 90 days cover (trips/route/pacing.py); a collection's tours are checked one by one."""
    try:
        check_route(route.tracks, joined=kind != KOMOOT_COLLECTION)
    except TooLarge as exc:
        raise FetchError(exc.message) from None
    return route


def _fetch_collection(rid: str, config: SourceConfig, cache: Cache, sleep: Callable[[float], None]) -> ParsedRoute:
    """One track per tour, in collection order; tours that fail are skipped (and logged).

    Raises FetchFailed if the collection page fails, FetchError if it lists no tours or none of its tours could
    be fetched."""
    client = services.komoot(config, sleep)
    name, tour_ids = parse_collection(client.get(f"/collection/{rid}"))
    if not tour_ids:
        raise FetchError(NO_POINTS)

    def one_tour(tid: str) -> np.ndarray | None:
        route = cache.get(f"{KOMOOT_TOUR}:{tid}")
        if route is None:
            try:
                route = checked(parse_komoot_tour(client.get(f"/tour/{tid}")))
            except FetchFailed as exc:
                log.info("collection %s: skipping tour %s: %s", rid, tid, exc.detail)
                return None
            except FetchError as exc:
                log.info("collection %s: skipping tour %s: %s", rid, tid, exc.reason)
                return None
            cache.set(f"{KOMOOT_TOUR}:{tid}", route)
        return np.concatenate(route.tracks)

    with ThreadPoolExecutor(max_workers=min(COLLECTION_WORKERS, len(tour_ids))) as pool:
        tracks = [t for t in pool.map(one_tour, tour_ids) if t is not None]
    if not tracks:
        raise failed(Msg("route.no_tour_fetched"))
    return ParsedRoute(title=name, tracks=tracks)
