"""Fetching a route from Komoot, Strava or RideWithGPS through the hardened client and the Redis cache.

`fetch_route` returns a `trips.route.gpx.ParsedRoute` whose `title` carries the route's name. Non-collection
routes have one track; a Komoot collection has one track per tour that could be fetched. Results are cached
for 24 h as zlib-compressed arrays (key `btp:route_fetch:{kind}:{id}`). Same-origin redirects are followed
twice at most; 429, 5xx and transport errors are retried twice.
"""
from __future__ import annotations

import json
import logging
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np
import redis as redis_lib

from trips.providers import http
from trips.providers.cache import Cache
from trips.route.gpx import ParsedRoute
from trips.route.pacing import TooLarge, check_route
from trips.route.source_formats import (
    ID_RE, NO_POINTS, FetchError, checked, failed, parse_collection, parse_komoot_tour, parse_rwgps, parse_strava,
)
from trips.route.sources import (
    KOMOOT_COLLECTION, KOMOOT_TOUR, SOURCE_KINDS, STRAVA_ROUTE, SourceRef, UnsupportedSource,
)

log = logging.getLogger(__name__)

MAX_REDIRECTS = 2
RETRIES = 2
MAX_RETRY_AFTER = 2.0
COLLECTION_WORKERS = 4
CACHE_TTL_SECONDS = 24 * 3600
CACHE_NAMESPACE = "btp:route_fetch"


@dataclass
class SourceConfig:
    """Operator settings. `backoff` is the first retry delay in seconds (doubled each retry);
    `deadline` bounds the whole download of one response."""

    komoot_url: str = "https://www.komoot.com"
    strava_url: str = "https://www.strava.com"
    ridewithgps_url: str = "https://ridewithgps.com"
    user_agent: str = "BTP/1.0 (+bike trip planner)"
    timeout: float = 10.0
    max_bytes: int = 30 * 1024 * 1024
    backoff: float = 0.5
    deadline: float = 60.0

    def policy(self, accept: str) -> http.HttpPolicy:
        return http.HttpPolicy(user_agent=self.user_agent, accept=accept, timeout=self.timeout,
                               deadline=self.deadline, max_bytes=self.max_bytes, retries=RETRIES,
                               backoff=self.backoff, max_retry_after=MAX_RETRY_AFTER, max_redirects=MAX_REDIRECTS)


def _size_label(n: int) -> str:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return f"{n // (1024 * 1024)} MB"
    return f"{n // 1024} KB" if n >= 1024 else f"{n} bytes"


def _status_error(status: int) -> FetchError:
    if status == 404:
        return failed("the service answered 404 (not found)")
    if status in (401, 403):
        return failed(f"the service answered {status} (private or access denied)")
    return failed("the service is unavailable" if status == 429 or status >= 500 else f"the service answered {status}")


def _failure(exc: http.HttpFailure, config: SourceConfig) -> FetchError:
    if exc.kind == http.OFF_ORIGIN:
        return failed("the service redirected to another address")
    if exc.kind == http.TOO_MANY_REDIRECTS:
        return failed("the service redirected too many times")
    if exc.kind == http.TOO_LARGE:
        return failed(f"the response is larger than {_size_label(config.max_bytes)}")
    if exc.kind == http.TOO_SLOW:
        return failed("the service answered too slowly")
    return failed("the service is unavailable")


class _Client:
    """GETs fixed paths on one base URL; a 200 answer's body or FetchError."""

    def __init__(self, base_url: str, accept: str, config: SourceConfig, sleep: Callable[[float], None]):
        self.config = config
        try:
            self.client = http.HttpClient(base_url, config.policy(accept), sleep)
        except http.HttpFailure as exc:
            raise _failure(exc, config) from None

    def get(self, path: str) -> bytes:
        """Raises FetchError on a non-200 status (after retries for 429/5xx/transport errors), a redirect off the
        base origin or more than MAX_REDIRECTS redirects, a body over config.max_bytes or past its deadline."""
        try:
            answer = self.client.request("GET", path)
        except http.HttpFailure as exc:
            raise _failure(exc, self.config) from None
        if answer.status != 200:
            raise _status_error(answer.status)
        return answer.body


# --- cache entries ----------------------------------------------------------------------------------------

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


# --- entry point ------------------------------------------------------------------------------------------

def fetch_route(
    ref: SourceRef,
    config: SourceConfig,
    redis: redis_lib.Redis | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> ParsedRoute:
    """Fetch (or read from the 24 h cache) the route `ref` points to; the title is in ParsedRoute.title.

    `sleep` waits between retries (tests inject a no-op). Raises UnsupportedSource for an unknown kind or a
    malformed id, FetchError for every fetch or parse failure, including FetchError(NO_POINTS), and for a
    route BTP cannot plan (a jump between consecutive points, a length beyond 90 days; trips/route/pacing.py)."""
    if ref.kind not in SOURCE_KINDS or not isinstance(ref.route_id, str) or not ID_RE.fullmatch(ref.route_id):
        raise UnsupportedSource()
    cache = route_cache(redis)
    cached = cache.get(f"{ref.kind}:{ref.route_id}")
    if cached is not None:
        return _bounded(ref.kind, cached)
    rid = ref.route_id
    if ref.kind == KOMOOT_TOUR:
        client = _Client(config.komoot_url, "text/html", config, sleep)
        route = checked(parse_komoot_tour(client.get(f"/tour/{rid}")))
    elif ref.kind == KOMOOT_COLLECTION:
        route = _fetch_collection(rid, config, cache, sleep)
    elif ref.kind == STRAVA_ROUTE:
        client = _Client(config.strava_url, "application/gpx+xml", config, sleep)
        route = checked(parse_strava(client.get(f"/routes/{rid}/export_gpx"), config.max_bytes))
    else:
        client = _Client(config.ridewithgps_url, "application/json", config, sleep)
        route = checked(parse_rwgps(client.get(f"/routes/{rid}.json")))
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

    Raises FetchError if the collection page fails, lists no tours, or none of its tours could be fetched."""
    client = _Client(config.komoot_url, "text/html", config, sleep)
    name, tour_ids = parse_collection(client.get(f"/collection/{rid}"))
    if not tour_ids:
        raise FetchError(NO_POINTS)

    def one_tour(tid: str) -> np.ndarray | None:
        route = cache.get(f"{KOMOOT_TOUR}:{tid}")
        if route is None:
            try:
                route = checked(parse_komoot_tour(client.get(f"/tour/{tid}")))
            except FetchError as exc:
                log.info("collection %s: skipping tour %s: %s", rid, tid, exc.reason)
                return None
            cache.set(f"{KOMOOT_TOUR}:{tid}", route)
        return np.concatenate(route.tracks)

    with ThreadPoolExecutor(max_workers=min(COLLECTION_WORKERS, len(tour_ids))) as pool:
        tracks = [t for t in pool.map(one_tour, tour_ids) if t is not None]
    if not tracks:
        raise failed("none of the collection's tours could be fetched")
    return ParsedRoute(title=name, tracks=tracks)
