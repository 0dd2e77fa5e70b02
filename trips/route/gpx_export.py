"""GPX 1.1 export of a planned trip, in the schema's element order: `<metadata>` (title, export time), a `<wpt>` per
day's end or rest day, per chosen accommodation and per cue (a turn, named as RideWithGPS and Garmin read it), then a `<trk>` per riding day with a line ("Day N: label",
coordinates at 7 decimals, elevation at 1). Text is escaped, characters XML 1.0 forbids removed first. `iter_gpx`
gives the document in chunks: a full-resolution route is never held as one tree or one string.
"""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Sequence
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import escape

import numpy as np
from lxml import etree

from trips.core.text import shorten
from trips.route.clock import ride_starts
from trips.route.geo import cumulative_km

__all__ = ["GPX_NS", "DayExport", "iter_gpx", "write_gpx"]

log = logging.getLogger(__name__)

GPX_NS = "http://www.topografix.com/GPX/1/1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA_LOCATION = f"{GPX_NS} {GPX_NS}/gpx.xsd"
MAX_TEXT_CHARS = 1000
MAX_URL_CHARS = 2048
CHUNK_POINTS = 4096  # track points formatted and written at a time
MIN_SPEED_KMH = 5.0  # the pace of the times written, at least

# Everything outside XML 1.0's Char production: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
_NOT_XML_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_URL_CONTROL = re.compile(r"[\x00-\x20\x7f-\x9f]")
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~"


@dataclass
class DayExport:
    """One day of the trip. `geometry` holds (lat, lon, ele) rows (a list or an (n, 3) array; (lat, lon)
    rows are accepted too, then no elevation is written); it may be empty or a single point on a rest day.
    `accommodation` is {"name", "lat", "lon", "type"?, "url"?} or None. `departure`: the instant the day's ride
    leaves (an aware datetime; docs/RULES.md "Times"), None when the times are not written."""

    day_number: int
    label: str | None
    geometry: Any
    end: Sequence[float]
    end_label: str | None = None
    accommodation: dict | None = None
    is_rest_day: bool = False
    departure: datetime | None = None
    # The day's turns (trips/services/day_cues.py): {lat, lon, turn, instruction, km}, each a waypoint at the turn.
    cues: Sequence[dict] = ()


def clean_text(value: Any, limit: int = MAX_TEXT_CHARS) -> str | None:
    """`value` as text without the characters XML 1.0 forbids, stripped and cut at a word to `limit` characters
    (trips/core/text.py shorten); None when nothing is left (or `value` is None)."""
    if value is None:
        return None
    text = shorten(_NOT_XML_CHAR.sub("", str(value)).strip(), limit)
    return text or None


def _safe_url(value: Any) -> str | None:
    """An absolute http(s) URL without userinfo, whitespace or control characters (other unsafe characters,
    e.g. non-ASCII ones, are percent-encoded), or None."""
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or len(url) > MAX_URL_CHARS or _URL_CONTROL.search(url) or _NOT_XML_CHAR.search(url):
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host or "@" in parts.netloc:
        return None
    return quote(url, safe=_URL_SAFE)


def _points(geometry: Any) -> np.ndarray:
    """`geometry` as an (n, 2|3) float array. Raises ValueError on a bad shape, a non-finite coordinate or one
    out of range."""
    pts = np.asarray(geometry if geometry is not None else [], dtype=np.float64)
    if pts.size == 0:
        return pts.reshape(0, 3)
    if pts.ndim == 1:
        pts = pts.reshape(1, -1)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise ValueError("points must be (lat, lon) or (lat, lon, ele) rows")
    lat, lon = pts[:, 0], pts[:, 1]
    if not (np.isfinite(lat).all() and np.isfinite(lon).all()):
        raise ValueError("a point has a latitude or longitude that is not a finite number")
    if (np.abs(lat) > 90).any() or (np.abs(lon) > 180).any():
        raise ValueError("a point has a latitude or longitude out of range")
    return pts


def _format_points(geometry: Any) -> list[tuple[str, str, str | None]]:
    """(lat, lon, ele) strings for each row: 7 decimals (longitude folded into -180..<180), elevation with
    1 decimal or None when missing or not finite. Raises ValueError as _points."""
    pts = _points(geometry)
    if len(pts) == 0:
        return []
    lat, lon = pts[:, 0], pts[:, 1]
    lat = np.round(lat, 7) + 0.0  # + 0.0 turns -0.0 into 0.0
    lon = np.round(lon, 7) + 0.0
    lon[lon >= 180.0] -= 360.0  # GPX longitudes are < 180
    if pts.shape[1] == 3:
        ele = np.round(pts[:, 2], 1) + 0.0
        eles = [f"{e:.1f}" if math.isfinite(e) else None for e in ele.tolist()]
    else:
        eles = [None] * len(pts)
    return [(f"{a:.7f}", f"{o:.7f}", e) for a, o, e in zip(lat.tolist(), lon.tolist(), eles)]


def _number(value: Any) -> float | None:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _sub(parent, tag: str, text: str | None = None, **attrib: str):
    el = etree.SubElement(parent, f"{{{GPX_NS}}}{tag}", **attrib)
    if text is not None:
        el.text = text
    return el


def _wpt(parent, point: Any, name: str | None, desc: str | None, sym: str, kind: str,
         link: str | None = None) -> None:
    """Append a <wpt> in schema order. Raises ValueError on a bad point."""
    formatted = _format_points([point] if point is not None else [])
    if len(formatted) != 1:
        raise ValueError("a waypoint needs one (lat, lon[, ele]) position")
    (lat, lon, ele), = formatted
    wpt = _sub(parent, "wpt", lat=lat, lon=lon)
    if ele is not None:
        _sub(wpt, "ele", ele)
    if name:
        _sub(wpt, "name", name)
    if desc:
        _sub(wpt, "desc", desc)
    if link:
        _sub(wpt, "link", href=link)
    _sub(wpt, "sym", sym)
    _sub(wpt, "type", kind)


def _accommodation_wpt(parent, day: DayExport, n: int) -> None:
    """Append the day's accommodation; one without a valid position is left out (and logged)."""
    acc = day.accommodation
    if not isinstance(acc, dict):
        return
    lat, lon = _number(acc.get("lat")), _number(acc.get("lon"))
    if lat is None or lon is None or abs(lat) > 90 or abs(lon) > 180:
        log.warning("GPX export: day %d accommodation has no valid position; left out", n)
        return
    kind = clean_text(acc.get("type"), 100)
    desc = f"Day {n} accommodation" + (f" ({kind})" if kind else "")
    _wpt(parent, (lat, lon), clean_text(acc.get("name")) or "Accommodation", desc, "Lodging", "accommodation",
         link=_safe_url(acc.get("url")))


# A cue's turn as RideWithGPS names its cue types (its GPX `<type>`, also the `<sym>` Garmin shows).
CUE_TYPES = {"continue": "Straight", "slight_left": "Slight Left", "slight_right": "Slight Right", "left": "Left",
             "right": "Right", "sharp_left": "Sharp Left", "sharp_right": "Sharp Right", "u_turn": "U Turn",
             "roundabout": "Generic"}


def _cue_wpts(parent, day: DayExport, n: int) -> None:
    """Append a waypoint at each of the day's turns; one without a valid position is left out."""
    for cue in day.cues or ():
        lat, lon = _number(cue.get("lat")), _number(cue.get("lon"))
        if lat is None or lon is None or abs(lat) > 90 or abs(lon) > 180:
            continue
        kind = CUE_TYPES.get(str(cue.get("turn")), "Generic")
        km = _number(cue.get("km"))
        _wpt(parent, (lat, lon), clean_text(cue.get("instruction"), 100) or kind,
             f"Day {n}, km {km:.1f}" if km is not None else f"Day {n}", kind, kind)


def _day_number(day: DayExport) -> int:
    n = day.day_number
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError("day_number must be an integer >= 0")
    return int(n)


def _timestamp(when: datetime | None) -> str:
    when = when or datetime.now(timezone.utc)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_gpx(title: str | None, days: list[DayExport], *, creator: str = "BTP",
              time: datetime | None = None, speed_kmh: float | None = None) -> bytes:
    """The whole document of `iter_gpx` as one bytes object (tests, small exports)."""
    return b"".join(iter_gpx(title, days, creator=creator, time=time, speed_kmh=speed_kmh))


def iter_gpx(title: str | None, days: list[DayExport], *, creator: str = "BTP",
             time: datetime | None = None, speed_kmh: float | None = None) -> Iterator[bytes]:
    """The trip as a UTF-8 GPX 1.1 document (see the module docstring for the layout), in chunks: the head and
    waypoints, then each track a few thousand points at a time, so a full-resolution route is never one tree.

    `time` is the `<metadata><time>` (default: now; a naive datetime is taken as UTC). With `speed_kmh`, each track
    point of a day with a `departure` carries its `<time>` (UTC) at that pace from it, as the FIT course's records
    (trips/route/fit_export.py: a day starts when the one before ends if that is later). A riding day with an
    empty geometry gets its end waypoint but no track. Raises ValueError (before the first chunk) when a day
    number is not an integer >= 0, or a geometry or `end` point has a bad shape, a non-finite or out-of-range
    latitude or longitude (a non-finite elevation is left out instead).
    """
    head = etree.Element(f"{{{GPX_NS}}}gpx", nsmap={None: GPX_NS, "xsi": XSI_NS})
    metadata = _sub(head, "metadata")
    name = clean_text(title)
    if name:
        _sub(metadata, "name", name)
    _sub(metadata, "time", _timestamp(time))

    tracks: list[tuple] = []  # (n, label, geometry, seconds from the day's start at each point | None, departure)
    for day in days:
        n = _day_number(day)
        label, end_label = clean_text(day.label), clean_text(day.end_label)
        if day.is_rest_day:
            _wpt(head, day.end, f"Day {n}: rest day", end_label or label, "Flag, Blue", "rest_day")
        else:
            _wpt(head, day.end, f"Day {n} end", end_label or label, "Flag, Blue", "day_end")
            geometry = [] if day.geometry is None else day.geometry
            if len(geometry):
                pts = _points(geometry)  # a bad point raises before the first chunk
                seconds = _seconds(pts, speed_kmh) if speed_kmh is not None and day.departure is not None else None
                tracks.append((n, label, geometry, seconds, day.departure))
        _accommodation_wpt(head, day, n)
        _cue_wpts(head, day, n)
    paced = [i for i, track in enumerate(tracks) if track[3] is not None]
    for i, begin in zip(paced, ride_starts([tracks[i][4] for i in paced], [tracks[i][3][-1] for i in paced])):
        tracks[i] = (*tracks[i][:4], begin)
    return _chunks(head, creator, tracks)


def _seconds(pts: np.ndarray, speed_kmh: float) -> np.ndarray:
    """Seconds from the first point to each, at `speed_kmh` (at least MIN_SPEED_KMH)."""
    return cumulative_km(pts[:, :2]) * 3600.0 / max(float(speed_kmh or 0), MIN_SPEED_KMH)


_MINUTES_SECONDS = [f"{m:02d}:{s:02d}Z" for m in range(60) for s in range(60)]  # the end of a time, by second of hour


def _times(begin: datetime, seconds: np.ndarray) -> list[str]:
    """`begin` + each of `seconds`, as UTC xsd:dateTime to the second: each hour's head written once (a day's
    points share a few), the minutes and seconds taken from a table."""
    at = np.round(begin.timestamp() + seconds).astype(np.int64)
    hours = (at // 3600).tolist()
    heads = {h: datetime.fromtimestamp(h * 3600, timezone.utc).strftime("%Y-%m-%dT%H:") for h in set(hours)}
    return [heads[h] + _MINUTES_SECONDS[s] for h, s in zip(hours, (at % 3600).tolist())]


def _trkpt(lat: str, lon: str, ele: str | None, time: str | None) -> str:
    inner = (f"<ele>{ele}</ele>" if ele is not None else "") + (f"<time>{time}</time>" if time is not None else "")
    return f'      <trkpt lat="{lat}" lon="{lon}">{inner}</trkpt>\n' if inner else f'      <trkpt lat="{lat}" lon="{lon}"/>\n'


def _chunks(head, creator: str | None, tracks: list) -> Iterator[bytes]:
    """The head (metadata and waypoints, serialised by lxml) then each track: its points are numbers formatted
    here (nothing to escape), its name escaped."""
    head.set("version", "1.1")
    head.set("creator", clean_text(creator, 255) or "BTP")
    head.set(f"{{{XSI_NS}}}schemaLocation", SCHEMA_LOCATION)
    text = etree.tostring(head, xml_declaration=True, encoding="UTF-8", pretty_print=True)
    closing = b"</gpx>\n"
    if not text.endswith(closing):  # metadata is always there: the root is never self-closed
        raise ValueError("unexpected GPX head")
    yield text[:-len(closing)]
    for n, label, geometry, seconds, begin in tracks:
        name = escape(f"Day {n}: {label}" if label else f"Day {n}")
        yield (f"  <trk>\n    <name>{name}</name>\n    <number>{n}</number>\n    <type>cycling</type>\n"
               "    <trkseg>\n").encode()
        for at in range(0, len(geometry), CHUNK_POINTS):
            points = _format_points(geometry[at:at + CHUNK_POINTS])
            times = _times(begin, seconds[at:at + CHUNK_POINTS]) if seconds is not None else [None] * len(points)
            yield "".join(_trkpt(lat, lon, ele, time) for (lat, lon, ele), time in zip(points, times)).encode()
        yield b"    </trkseg>\n  </trk>\n"
    yield closing
