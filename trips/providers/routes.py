"""The route services' clients (Komoot, Strava, RideWithGPS): each GETs a fixed path on its operator-configured base
URL through the hardened client and answers the body, or FetchFailed with a phrase fit for the user."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from trips.errors import Msg
from trips.providers import http

MAX_REDIRECTS = 2
RETRIES = 2
MAX_RETRY_AFTER = 2.0


class FetchFailed(Exception):
    """A route service's answer could not be had; `detail` is a phrase fit for the user (a Msg: never the body)."""

    def __init__(self, detail: Msg):
        super().__init__(str(detail))
        self.detail = detail


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


def _size_label(n: int) -> Msg:
    if n >= 1024 * 1024 and n % (1024 * 1024) == 0:
        return Msg("size.megabytes", size=n // (1024 * 1024))
    return Msg("size.kilobytes", size=n // 1024) if n >= 1024 else Msg("size.bytes", size=n)


def _status_error(status: int) -> FetchFailed:
    if status == 404:
        return FetchFailed(Msg("route.answered_not_found"))
    if status in (401, 403):
        return FetchFailed(Msg("route.answered_denied", status=str(status)))
    return FetchFailed(Msg("route.unavailable") if status == 429 or status >= 500
                       else Msg("route.answered", status=str(status)))


def _failure(exc: http.HttpFailure, config: SourceConfig) -> FetchFailed:
    if exc.kind == http.OFF_ORIGIN:
        return FetchFailed(Msg("route.redirected_away"))
    if exc.kind == http.TOO_MANY_REDIRECTS:
        return FetchFailed(Msg("route.redirected_too_often"))
    if exc.kind == http.TOO_LARGE:
        return FetchFailed(Msg("route.too_large", size=_size_label(config.max_bytes)))
    if exc.kind == http.TOO_SLOW:
        return FetchFailed(Msg("route.too_slow"))
    return FetchFailed(Msg("route.unavailable"))


class SourceClient:
    """GETs fixed paths on one base URL; a 200 answer's body or FetchFailed."""

    def __init__(self, base_url: str, accept: str, config: SourceConfig, sleep: Callable[[float], None]):
        self.config = config
        try:
            self.client = http.HttpClient(base_url, config.policy(accept), sleep)
        except http.HttpFailure as exc:
            raise _failure(exc, config) from None

    def get(self, path: str) -> bytes:
        """Raises FetchFailed on a non-200 status (after retries for 429/5xx/transport errors), a redirect off the
        base origin or more than MAX_REDIRECTS redirects, a body over config.max_bytes or past its deadline."""
        try:
            answer = self.client.request("GET", path)
        except http.HttpFailure as exc:
            raise _failure(exc, self.config) from None
        if answer.status != 200:
            raise _status_error(answer.status)
        return answer.body


def komoot(config: SourceConfig, sleep: Callable[[float], None]) -> SourceClient:
    """Komoot's pages: `/tour/<id>`, `/collection/<id>`."""
    return SourceClient(config.komoot_url, "text/html", config, sleep)


def strava(config: SourceConfig, sleep: Callable[[float], None]) -> SourceClient:
    """Strava's GPX export: `/routes/<id>/export_gpx`."""
    return SourceClient(config.strava_url, "application/gpx+xml", config, sleep)


def ridewithgps(config: SourceConfig, sleep: Callable[[float], None]) -> SourceClient:
    """RideWithGPS's route JSON: `/routes/<id>.json`."""
    return SourceClient(config.ridewithgps_url, "application/json", config, sleep)
