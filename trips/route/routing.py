"""Rerouting a day through a waypoint: by bicycle with a Valhalla routing service, or as a straight detour.

With `RoutingConfig.valhalla_url` set, `reroute` POSTs one request to `{valhalla_url}/route` (bicycle costing,
start and end as "break" locations, the waypoint as a "through" location, no directions) and joins the legs'
shapes (polyline, 6 decimals) into one geometry. Redirects are not followed, the answer is capped at
MAX_RESPONSE_BYTES and the exchange at about `timeout` seconds. Valhalla serves no elevation here, so every
routed point has elevation 0.0. Without a URL the detour is the straight line start → waypoint → end, with
its WGS-84 geodesic length, flagged `approximate`.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any, Sequence
from urllib.parse import urlsplit

import requests

from trips.route.geo import total_distance_km
from trips.core.httpread import BodyTooLarge, BodyTooSlow, BodyUnreadable, read_capped

__all__ = ["MAX_RESPONSE_BYTES", "Reroute", "RoutingConfig", "RoutingError", "decode_polyline6", "reroute"]

MAX_RESPONSE_BYTES = 5 * 1024 * 1024
_MILE_KM = 1.609344
# Valhalla error codes meaning "there is no route": unconnected regions, no edge near a location, no path.
_NO_ROUTE_CODES = frozenset({170, 171, 442})
_TOO_LONG_CODES = frozenset({154})  # path distance exceeds the service's limit

NO_ROUTE = "No cycling route could be found through this waypoint."
TOO_LONG = "The detour is too long for the routing service."
UNAVAILABLE = "The routing service is unavailable; try again later."
TIMEOUT = "The routing service did not answer in time; try again later."
UNREADABLE = "The routing service's answer could not be read."
TOO_LARGE = "The routing service's answer is too large."
REDIRECTED = "The routing service answered with a redirect, which is not followed."
MISCONFIGURED = "The routing service address is not a valid http(s) URL."

Point = tuple[float, float, float]


class RoutingError(Exception):
    """Rerouting failed; `reason` is a sentence fit for the user (never a response body)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class RoutingConfig:
    """`valhalla_url` is the base URL of a Valhalla service (None or "" for the straight-detour fallback)."""

    valhalla_url: str | None
    timeout: float = 5.0
    user_agent: str = "BTP/1.0"


@dataclass
class Reroute:
    """The new geometry of the day, (lat, lon, ele) rows; `approximate` marks the straight-line fallback."""

    geometry: list[Point]
    distance_km: float
    approximate: bool


def decode_polyline6(encoded: str) -> list[tuple[float, float]]:
    """Decode an encoded polyline with 6-digit precision (Valhalla's shape format) into (lat, lon) pairs.

    Raises ValueError on a character outside '?'..'~', a truncated value or a value of more than 60 bits.
    """
    coords: list[tuple[float, float]] = []
    index, lat, lon, n = 0, 0, 0, len(encoded)
    while index < n:
        deltas = []
        for _ in range(2):
            result = shift = 0
            while True:
                if index >= n:
                    raise ValueError("truncated polyline")
                byte = ord(encoded[index]) - 63
                index += 1
                if not 0 <= byte < 64:
                    raise ValueError("invalid character in polyline")
                result |= (byte & 0x1F) << shift
                shift += 5
                if byte < 0x20:
                    break
                if shift > 60:
                    raise ValueError("polyline value too long")
            deltas.append(~(result >> 1) if result & 1 else result >> 1)
        lat += deltas[0]
        lon += deltas[1]
        coords.append((lat / 1e6, lon / 1e6))
    return coords


def _point(value: Any, what: str) -> Point:
    """(lat, lon, ele) floats; a missing or non-finite elevation is 0.0.

    Raises ValueError unless `value` is (lat, lon) or (lat, lon, ele) with finite, in-range coordinates."""
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ValueError(f"the {what} must be (lat, lon) or (lat, lon, ele) numbers") from None
    if len(values) not in (2, 3):
        raise ValueError(f"the {what} must be (lat, lon) or (lat, lon, ele) numbers")
    lat, lon = values[0], values[1]
    if not (math.isfinite(lat) and math.isfinite(lon)) or abs(lat) > 90 or abs(lon) > 180:
        raise ValueError(f"the {what} has a latitude or longitude out of range")
    ele = values[2] if len(values) == 3 and math.isfinite(values[2]) else 0.0
    return lat, lon, ele


def reroute(start: Sequence[float], waypoint: Sequence[float], end: Sequence[float],
            config: RoutingConfig) -> Reroute:
    """The route from `start` through `waypoint` to `end` ((lat, lon) or (lat, lon, ele) points).

    Raises ValueError on a malformed point. With a Valhalla URL, raises RoutingError when the service cannot
    be reached, times out, answers with a redirect, an error (no route: error codes 170/171/442), a body
    over MAX_RESPONSE_BYTES or an answer that cannot be read; it never falls back silently.
    """
    points = [_point(start, "start"), _point(waypoint, "waypoint"), _point(end, "end")]
    if not config.valhalla_url:
        return Reroute(geometry=points, distance_km=total_distance_km(points), approximate=True)
    return _valhalla_route(points, config)


# --- Valhalla ---------------------------------------------------------------------------------------------

def _valhalla_route(points: list[Point], config: RoutingConfig) -> Reroute:
    """Raises RoutingError (see reroute)."""
    base = (config.valhalla_url or "").strip().rstrip("/")
    try:
        parts = urlsplit(base)
        valid = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        raise RoutingError(MISCONFIGURED)
    kinds = ("break", "through", "break")
    body = {
        "locations": [{"lat": lat, "lon": lon, "type": kind} for (lat, lon, _), kind in zip(points, kinds)],
        "costing": "bicycle",
        "directions_type": "none",
        "units": "kilometers",
    }
    status, payload = _post_json(base + "/route", body, config)
    if status != 200:
        raise RoutingError(_status_reason(status, payload))
    return _parse_trip(payload)


def _post_json(url: str, body: dict, config: RoutingConfig) -> tuple[int, bytes]:
    """POST `body` as JSON; return (status, response body). The body is read for 200 and 4xx answers only.

    Raises RoutingError on a transport error, a timeout (each socket operation, and the whole exchange
    checked between reads), a redirect, or a body over MAX_RESPONSE_BYTES."""
    deadline = time.monotonic() + config.timeout
    headers = {"User-Agent": config.user_agent, "Accept": "application/json"}
    try:
        with requests.Session() as session:
            session.trust_env = False  # no proxy or netrc from the environment
            with session.post(url, json=body, headers=headers, timeout=(config.timeout, config.timeout),
                              allow_redirects=False, stream=True) as response:
                status = response.status_code
                if 300 <= status < 400:
                    raise RoutingError(REDIRECTED)
                if status != 200 and not 400 <= status < 500:
                    return status, b""
                try:
                    return status, read_capped(response, MAX_RESPONSE_BYTES, deadline)
                except BodyTooLarge:
                    raise RoutingError(TOO_LARGE) from None
                except BodyTooSlow:
                    raise RoutingError(TIMEOUT) from None
                except BodyUnreadable:
                    raise RoutingError(UNAVAILABLE) from None
    except requests.Timeout as exc:
        raise RoutingError(TIMEOUT) from exc
    except requests.RequestException as exc:
        raise RoutingError(UNAVAILABLE) from exc


def _status_reason(status: int, payload: bytes) -> str:
    """The user-facing reason for a non-200 answer (Valhalla's `error_code` decides for 4xx)."""
    if status == 429 or status >= 500:
        return UNAVAILABLE
    try:
        data = json.loads(payload) if payload else None
    except (ValueError, RecursionError):
        data = None
    code = data.get("error_code") if isinstance(data, dict) else None
    if code in _NO_ROUTE_CODES:
        return NO_ROUTE
    if code in _TOO_LONG_CODES:
        return TOO_LONG
    return f"The routing service refused the request (HTTP {status})."


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _parse_trip(payload: bytes) -> Reroute:
    """Join the legs' shapes (the joint point once) and read trip.summary.length. Raises RoutingError."""
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError) as exc:
        raise RoutingError(UNREADABLE) from exc
    trip = data.get("trip") if isinstance(data, dict) else None
    legs = trip.get("legs") if isinstance(trip, dict) else None
    summary = trip.get("summary") if isinstance(trip, dict) else None
    length = _number(summary.get("length")) if isinstance(summary, dict) else None
    if not isinstance(legs, list) or not legs or length is None or length < 0:
        raise RoutingError(UNREADABLE)
    geometry: list[Point] = []
    for leg in legs:
        shape = leg.get("shape") if isinstance(leg, dict) else None
        if not isinstance(shape, str):
            raise RoutingError(UNREADABLE)
        try:
            pairs = decode_polyline6(shape)
        except ValueError as exc:
            raise RoutingError(UNREADABLE) from exc
        if geometry and pairs and pairs[0] == geometry[-1][:2]:
            pairs = pairs[1:]
        geometry.extend((lat, lon, 0.0) for lat, lon in pairs)
    if len(geometry) < 2 or any(abs(lat) > 90 or abs(lon) > 180 for lat, lon, _ in geometry):
        raise RoutingError(UNREADABLE)
    if trip.get("units") in ("miles", "mi"):
        length *= _MILE_KM
    return Reroute(geometry=geometry, distance_km=length, approximate=False)
