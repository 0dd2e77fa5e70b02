"""Valhalla, the bicycle routing service: one POST to `{valhalla_url}/route` (bicycle costing, stops only at the two
ends, no directions), the legs' shapes joined into one geometry. Redirects are not followed, the answer is capped at
MAX_RESPONSE_BYTES. Valhalla serves no elevation here, so every point has elevation 0.0.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from trips.errors import Msg, N_
from trips.providers import http

MAX_RESPONSE_BYTES = 5 * 1024 * 1024
_MILE_KM = 1.609344
# Valhalla error codes meaning "there is no route": unconnected regions, no edge near a location, no path.
_NO_ROUTE_CODES = frozenset({170, 171, 442})
_TOO_LONG_CODES = frozenset({154})  # path distance exceeds the service's limit

NO_ROUTE = N_("routing.no_route")
TOO_LONG = N_("routing.too_long")
UNAVAILABLE = N_("routing.unavailable")
TIMEOUT = N_("routing.timeout")
UNREADABLE = N_("routing.unreadable")
TOO_LARGE = N_("routing.too_large")
REDIRECTED = N_("routing.redirected")
MISCONFIGURED = N_("routing.misconfigured")

Point = tuple[float, float, float]


class RoutingError(Exception):
    """Rerouting failed; `reason` (a key, or a Msg) is a sentence fit for the user (never a response body)."""

    def __init__(self, reason: str | Msg):
        super().__init__(reason)
        self.reason = reason


@dataclass
class RoutingConfig:
    """`valhalla_url` is the base URL of a Valhalla service (None or "" for the straight-detour fallback)."""

    valhalla_url: str | None
    timeout: float = 5.0
    user_agent: str = "BTP/1.0"

    def policy(self) -> http.HttpPolicy:
        # One POST, no retry and no redirect followed; the whole exchange within about `timeout` seconds.
        return http.HttpPolicy(user_agent=self.user_agent, timeout=self.timeout, deadline=self.timeout,
                               max_bytes=MAX_RESPONSE_BYTES)


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


# --- the answer ---------------------------------------------------------------------------------------------

def route_through(points: list[Point], config: RoutingConfig) -> tuple[list[Point], float]:
    """The bicycle route through `points` (start, the points to pass, end) from Valhalla: (geometry, length in km).

    Raises RoutingError when the service cannot be reached, times out, answers with a redirect, an error
    (no route: error codes 170/171/442), a body over MAX_RESPONSE_BYTES or an answer that cannot be read."""
    try:
        client = http.HttpClient(config.valhalla_url or "", config.policy())
    except http.HttpFailure:
        raise RoutingError(MISCONFIGURED) from None
    kinds = ("break", *["through"] * (len(points) - 2), "break")  # stops only at the two ends
    body = {
        "locations": [{"lat": lat, "lon": lon, "type": kind} for (lat, lon, _), kind in zip(points, kinds)],
        "costing": "bicycle",
        "directions_type": "none",
        "units": "kilometers",
    }
    try:
        answer = client.request("POST", "/route", json=body)
    except http.HttpFailure as exc:
        raise RoutingError(_FAILURES.get(exc.kind, UNAVAILABLE)) from None
    if 300 <= answer.status < 400:
        raise RoutingError(REDIRECTED)
    if answer.status != 200:
        raise RoutingError(_status_reason(answer.status, answer.body))
    return _parse_trip(answer.body)


_FAILURES = {http.TIMEOUT: TIMEOUT, http.TOO_SLOW: TIMEOUT, http.TOO_LARGE: TOO_LARGE,
             http.OFF_ORIGIN: REDIRECTED, http.TOO_MANY_REDIRECTS: REDIRECTED}


def _status_reason(status: int, payload: bytes) -> str | Msg:
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
    return Msg("routing.refused", status=str(status))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _parse_trip(payload: bytes) -> tuple[list[Point], float]:
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
    return geometry, length
