"""The formats of the route services: Komoot's page props, a Strava GPX export, RideWithGPS JSON.

Each parser turns a response body into a `ParsedRoute`, or raises FetchError with a sentence fit for the
user (never the body itself).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Iterable

import numpy as np

from trips.route import gpx
from trips.route.gpx import GpxError, ParsedRoute, parse_gpx
from trips.core.text import mend, shorten
from trips.errors import Msg, N_, as_msg

NO_POINTS = N_("route.no_points")
MAX_TITLE_LENGTH = 255
MAX_COLLECTION_TOURS = 100
ID_RE = re.compile(r"[0-9]{1,20}")


class FetchError(Exception):
    """The route could not be fetched or read; `reason` (a Msg, or a key) is a sentence fit for the user (no
    response body)."""

    def __init__(self, reason: str | Msg):
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return str(as_msg(self.reason))  # English: logs


def failed(detail: Msg) -> FetchError:
    return FetchError(Msg("route.could_not_fetch", detail=detail))


UNREADABLE = N_("route.unreadable")


def _num(value: Any) -> float:
    """A JSON number as a float; anything else (null, bool, string, huge int) is NaN, which _clean handles."""
    try:
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    except OverflowError:
        return math.nan


def _track(rows: Iterable[tuple[Any, Any, Any]]) -> np.ndarray:
    return np.array([(_num(lat), _num(lon), _num(ele)) for lat, lon, ele in rows], dtype=float).reshape(-1, 3)


def _clean(track: np.ndarray) -> np.ndarray:
    """Drop rows with a non-finite or out-of-range lat/lon; a missing or non-finite elevation is NaN: unknown,
    not 0 (docs/RULES.md "Elevation")."""
    track = np.asarray(track, dtype=float).reshape(-1, 3)
    lat, lon = track[:, 0], track[:, 1]
    keep = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90.0) & (np.abs(lon) <= 180.0)
    track = track[keep].copy()
    track[~np.isfinite(track[:, 2]), 2] = np.nan
    return track


def _title(value: Any) -> str | None:
    # A JSON \ud800 escape in a service's answer is a lone surrogate here, which no database can store:
    # third-party text is mended (U+FFFD), not refused (trips/core/text.py).
    return (shorten(mend(value.strip()), MAX_TITLE_LENGTH) or None) if isinstance(value, str) else None


def _dig(obj: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


# The JS string literal up to its first unescaped closing quote (unrolled-loop form: linear time).
_SET_PROPS = re.compile(r'kmtBoot\.setProps\("([^"\\]*(?:\\.[^"\\]*)*)"', re.S)
_JS_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]{2}|.)", re.S)


def _js_to_json_escape(seq: str) -> str:
    """JSON lacks JS's \\' and \\xHH escapes; rewrite them, keep every other escape."""
    return "'" if seq == "'" else "\\u00" + seq[1:] if len(seq) == 3 else "\\" + seq


def komoot_props(body: bytes) -> dict:
    """Raises FetchError when the page has no readable `kmtBoot.setProps("…")` payload."""
    unreadable = failed(Msg(UNREADABLE))
    match = _SET_PROPS.search(body.decode("utf-8", errors="replace"))
    if not match:
        raise unreadable
    literal = _JS_ESCAPE.sub(lambda m: _js_to_json_escape(m.group(1)), match.group(1))
    try:
        props = json.loads(json.loads(f'"{literal}"', strict=False))
    except (ValueError, TypeError) as exc:
        raise unreadable from exc
    if not isinstance(props, dict):
        raise unreadable
    return props


def parse_komoot_tour(body: bytes) -> ParsedRoute:
    """Raises FetchError when the page cannot be read."""
    tour = _dig(komoot_props(body), "page", "_embedded", "tour")
    if not isinstance(tour, dict):
        raise failed(Msg(UNREADABLE))
    items = _dig(tour, "_embedded", "coordinates", "items")
    items = items if isinstance(items, list) else []
    track = _track((i.get("lat"), i.get("lng"), i.get("alt")) for i in items if isinstance(i, dict))
    return ParsedRoute(title=_title(tour.get("name")) or "Komoot Tour", tracks=[track])


def parse_collection(body: bytes) -> tuple[str, list[str]]:
    """Return (name, tour ids); raises FetchError when the page cannot be read."""
    hal = _dig(komoot_props(body), "page", "_embedded", "collectionHal")
    if not isinstance(hal, dict):
        raise failed(Msg(UNREADABLE))
    items = _dig(hal, "_embedded", "compilation", "_embedded", "items")
    ids: list[str] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not str(item.get("type") or "tour").startswith("tour"):
            continue
        tid = item.get("id")
        tid = str(tid) if isinstance(tid, (int, str)) and not isinstance(tid, bool) else ""
        if ID_RE.fullmatch(tid) and tid not in ids:
            ids.append(tid)
    return _title(hal.get("name")) or "Komoot Collection", ids[:MAX_COLLECTION_TOURS]


def parse_strava(body: bytes, max_bytes: int) -> ParsedRoute:
    """Raises FetchError when the GPX cannot be parsed or has no track point."""
    try:
        parsed = parse_gpx(body, max_bytes=max_bytes)
    except GpxError as exc:
        if exc.message == gpx.NO_POINTS:
            raise FetchError(NO_POINTS) from exc
        raise failed(Msg(UNREADABLE)) from exc
    return ParsedRoute(title=_title(parsed.title), tracks=list(parsed.tracks))


def parse_rwgps(body: bytes) -> ParsedRoute:
    """Accepts track points as {x: lon, y: lat, e} (RideWithGPS) or {lat, lng, e}; raises FetchError."""
    try:
        route = _dig(json.loads(body), "route")
    except ValueError as exc:
        raise failed(Msg(UNREADABLE)) from exc
    if not isinstance(route, dict):
        raise failed(Msg(UNREADABLE))
    items = route.get("track_points")
    rows = ((p.get("lat"), p.get("lng"), p.get("e")) if "lat" in p else (p.get("y"), p.get("x"), p.get("e"))
            for p in (items if isinstance(items, list) else []) if isinstance(p, dict))
    return ParsedRoute(title=_title(route.get("name")), tracks=[_track(rows)])


def checked(route: ParsedRoute) -> ParsedRoute:
    """Clean every track, drop the empty ones; raises FetchError(NO_POINTS) if nothing is left."""
    tracks = [t for t in (_clean(t) for t in route.tracks) if len(t)]
    if not tracks:
        raise FetchError(NO_POINTS)
    return ParsedRoute(title=route.title, tracks=tracks)


