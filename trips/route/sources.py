"""Route sources: which links are accepted, and how a route is fetched from Komoot, Strava or RideWithGPS.

Only the numeric id is taken from the user's link. Every request goes to the operator-configured base URL
plus a fixed path, so the link never chooses the host; redirects are followed only on that same origin.

`fetch_route` returns a `trips.route.gpx.ParsedRoute` whose `title` carries the route's name (no separate tuple).
Non-collection routes have one track; a Komoot collection has one track per tour that could be fetched.
Results are cached in Redis for 24 h as zlib-compressed arrays (key `btp:route_fetch:{kind}:{id}`).
"""
from __future__ import annotations

import json
import logging
import math
import re
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urljoin, urlsplit

import numpy as np
import redis as redis_lib
import requests

from trips.route.gpx import ParsedRoute
from trips.route.pacing import TooLarge, check_route
from trips.core.httpread import BodyTooLarge, BodyTooSlow, BodyUnreadable, read_capped
from trips.route.source_formats import (
    ID_RE, NO_POINTS, FetchError, checked, failed, parse_collection, parse_komoot_tour, parse_rwgps, parse_strava,
)

log = logging.getLogger(__name__)

KOMOOT_TOUR = "komoot_tour"
KOMOOT_COLLECTION = "komoot_collection"
STRAVA_ROUTE = "strava_route"
RIDE_WITH_GPS = "ride_with_gps"
SOURCE_KINDS = (KOMOOT_TOUR, KOMOOT_COLLECTION, STRAVA_ROUTE, RIDE_WITH_GPS)

MAX_URL_LENGTH = 2048
MAX_REDIRECTS = 2
RETRIES = 2
MAX_RETRY_AFTER = 2.0
COLLECTION_WORKERS = 4
CACHE_TTL_SECONDS = 24 * 3600

_ID = r"([0-9]{1,20})/?(?:[?#]\S*)?"
_LOCALE = r"(?:[a-z]{2}-[a-z]{2}/)?"
_URL_PATTERNS = (
    (KOMOOT_TOUR, re.compile(r"https://www\.komoot\.com/" + _LOCALE + r"tour/" + _ID)),
    (KOMOOT_COLLECTION, re.compile(r"https://www\.komoot\.com/" + _LOCALE + r"collection/" + _ID)),
    (STRAVA_ROUTE, re.compile(r"https://www\.strava\.com/routes/" + _ID)),
    (RIDE_WITH_GPS, re.compile(r"https://ridewithgps\.com/routes/" + _ID)),
)

_UNSUPPORTED = (
    "Unsupported route link. Supported forms: https://www.komoot.com/tour/<id>, "
    "https://www.komoot.com/collection/<id> (optionally with a locale such as /fr-fr/), "
    "https://www.strava.com/routes/<id>, https://ridewithgps.com/routes/<id>."
)


_HTTPS_REQUIRED = ("This route link uses http://: BTP only fetches routes over https. Send the same link "
                   "starting with https://.")


class UnsupportedSource(ValueError):
    """The link is not one of the supported forms. The message lists them and never repeats the link."""

    def __init__(self, message: str = _UNSUPPORTED):
        super().__init__(message)


@dataclass(frozen=True)
class SourceRef:
    kind: str
    route_id: str


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


def parse_source_url(url: str) -> SourceRef:
    """Recognise a supported route link and keep only its kind and numeric id.

    Raises UnsupportedSource for anything else (http, other or lookalike hosts, userinfo, bad ids)."""
    if not isinstance(url, str) or len(url) > MAX_URL_LENGTH:
        raise UnsupportedSource()
    url = url.strip()
    for kind, pattern in _URL_PATTERNS:
        match = pattern.fullmatch(url)
        if match:
            return SourceRef(kind, match.group(1))
        if url[:7].lower() == "http://" and pattern.fullmatch("https://" + url[7:]):
            raise UnsupportedSource(_HTTPS_REQUIRED)
    raise UnsupportedSource()


# --- HTTP -------------------------------------------------------------------------------------------------

def _origin(url: str) -> tuple[str, str, int | None]:
    """Raises ValueError on a malformed port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


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


class _Client:
    """GETs fixed paths on one base URL. Each call uses its own Session, so calls may run in threads."""

    def __init__(self, base_url: str, accept: str, config: SourceConfig, sleep: Callable[[float], None]):
        self.base = base_url.rstrip("/")
        self.origin = _origin(self.base)
        self.accept = accept
        self.config = config
        self.sleep = sleep

    def get(self, path: str) -> bytes:
        """Return the body of a 200 answer to GET base+path.

        Raises FetchError on a non-200 status (after retries for 429/5xx/transport errors), a redirect off the
        base origin or more than MAX_REDIRECTS redirects, or a body over config.max_bytes."""
        url = self.base + path
        with requests.Session() as session:
            session.trust_env = False  # no proxy/netrc from the environment: the base URL is the whole truth
            session.headers.update({"User-Agent": self.config.user_agent, "Accept": self.accept})
            for _hop in range(MAX_REDIRECTS + 1):
                with self._send(session, url) as response:
                    if response.is_redirect:
                        url = self._redirect_target(url, response.headers.get("Location"))
                        continue
                    if response.status_code != 200:
                        raise _status_error(response.status_code)
                    return self._read(response)
        raise failed("the service redirected too many times")

    def _redirect_target(self, current: str, location: str | None) -> str:
        """Raises FetchError unless the redirect stays on the base URL's scheme, host and port (no userinfo)."""
        target = urljoin(current, (location or "").strip())
        try:
            same = bool(location) and _origin(target) == self.origin and "@" not in urlsplit(target).netloc
        except ValueError:
            same = False
        if not same:
            raise failed("the service redirected to another address")
        return target

    def _send(self, session: requests.Session, url: str) -> requests.Response:
        timeout = (self.config.timeout, self.config.timeout)
        for attempt in range(RETRIES + 1):
            last = attempt == RETRIES
            try:
                response = session.get(url, stream=True, allow_redirects=False, timeout=timeout)
            except (requests.ConnectionError, requests.Timeout) as exc:
                log.warning("route fetch %s: transport error %s (attempt %d)", url, type(exc).__name__, attempt + 1)
                if last:
                    raise failed("the service is unavailable") from exc
                self.sleep(self._delay(attempt, None))
                continue
            if (response.status_code == 429 or response.status_code >= 500) and not last:
                log.warning("route fetch %s: status %d (attempt %d)", url, response.status_code, attempt + 1)
                delay = self._delay(attempt, response.headers.get("Retry-After"))
                response.close()
                self.sleep(delay)
                continue
            return response
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        """Retry-After (in seconds, capped at MAX_RETRY_AFTER) when given, else exponential backoff."""
        try:
            value = float(retry_after) if retry_after is not None else math.nan
        except ValueError:
            value = math.nan
        return min(max(value, 0.0), MAX_RETRY_AFTER) if math.isfinite(value) else self.config.backoff * 2**attempt

    def _read(self, response: requests.Response) -> bytes:
        limit = self.config.max_bytes
        too_large = failed(f"the response is larger than {_size_label(limit)}")
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        try:
            return read_capped(response, limit, time.monotonic() + self.config.deadline)
        except BodyTooLarge:
            raise too_large from None
        except BodyTooSlow:
            raise failed("the service answered too slowly") from None
        except BodyUnreadable:
            raise failed("the service is unavailable") from None


# --- cache ------------------------------------------------------------------------------------------------

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


class _Cache:
    """Best-effort Redis cache: a Redis failure or an unreadable entry is logged and treated as a miss."""

    def __init__(self, client: redis_lib.Redis | None):
        self.client = client

    def get(self, kind: str, route_id: str) -> ParsedRoute | None:
        key = f"btp:route_fetch:{kind}:{route_id}"
        try:
            blob = self.client.get(key) if self.client is not None else None
            return _decode(blob) if blob is not None else None
        except (redis_lib.RedisError, OSError) as exc:
            log.warning("route cache unavailable on read: %s", exc)
        except (ValueError, TypeError, KeyError, zlib.error) as exc:
            log.warning("route cache entry %s unreadable: %s", key, exc)
        return None

    def set(self, kind: str, route_id: str, route: ParsedRoute) -> None:
        try:
            if self.client is not None:
                self.client.set(f"btp:route_fetch:{kind}:{route_id}", _encode(route), ex=CACHE_TTL_SECONDS)
        except (redis_lib.RedisError, OSError) as exc:
            log.warning("route cache unavailable on write: %s", exc)


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
    cache = _Cache(redis)
    cached = cache.get(ref.kind, ref.route_id)
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
    cache.set(ref.kind, rid, route)
    return _bounded(ref.kind, route)


def _bounded(kind: str, route: ParsedRoute) -> ParsedRoute:
    """The route, if BTP can plan it: raises FetchError with the reason for a jump between consecutive points
    or a length beyond what 90 days cover (trips/route/pacing.py); a collection's tours are checked one by one."""
    try:
        check_route(route.tracks, joined=kind != KOMOOT_COLLECTION)
    except TooLarge as exc:
        raise FetchError(exc.message) from None
    return route


def _fetch_collection(rid: str, config: SourceConfig, cache: _Cache, sleep: Callable[[float], None]) -> ParsedRoute:
    """One track per tour, in collection order; tours that fail are skipped (and logged).

    Raises FetchError if the collection page fails, lists no tours, or none of its tours could be fetched."""
    client = _Client(config.komoot_url, "text/html", config, sleep)
    name, tour_ids = parse_collection(client.get(f"/collection/{rid}"))
    if not tour_ids:
        raise FetchError(NO_POINTS)

    def one_tour(tid: str) -> np.ndarray | None:
        route = cache.get(KOMOOT_TOUR, tid)
        if route is None:
            try:
                route = checked(parse_komoot_tour(client.get(f"/tour/{tid}")))
            except FetchError as exc:
                log.info("collection %s: skipping tour %s: %s", rid, tid, exc.reason)
                return None
            cache.set(KOMOOT_TOUR, tid, route)
        return np.concatenate(route.tracks)

    with ThreadPoolExecutor(max_workers=min(COLLECTION_WORKERS, len(tour_ids))) as pool:
        tracks = [t for t in pool.map(one_tour, tour_ids) if t is not None]
    if not tracks:
        raise failed("none of the collection's tours could be fetched")
    return ParsedRoute(title=name, tracks=tracks)
