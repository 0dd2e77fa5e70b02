"""FIT course files of a planned trip (what Garmin and Wahoo bike computers load), written by BTP's own encoder
(trips/route/fit_writer.py) in the order of Garmin's course cookbook (FIT SDK, "Course File Type"): `course` makes one
course with the riding days as laps, `course_per_day` a ZIP of one course per day (docs/RULES.md "GPX export"). The
times are the rider's pace from each day's local departure (the virtual partner rides it; docs/RULES.md "Times").
A day's cues, when given, become course points (the turn's symbol, the street as the name).
"""
from __future__ import annotations

import io
import math
import zipfile
from datetime import datetime, timedelta, timezone
from typing import Mapping, Sequence

import numpy as np

from trips.core.text import shorten
from trips.route.clock import ride_starts
from trips.route.geo import cumulative_km
from trips.route.pacing import MAX_STAGE_POINTS, fit_points_each
from trips.route.gpx_export import MIN_SPEED_KMH, DayExport, clean_text
from trips.route.fit_writer import Field, FitWriter, Message, fit_seconds, fit_time, semicircles

__all__ = ["MEDIA_TYPE", "CUE_TYPES", "course", "course_per_day"]

MEDIA_TYPE = "application/vnd.ant.fit"  # IANA-registered for FIT files
NAME_BYTES = 40  # course and course point names: devices show the first 15-20 characters
MIN_STRING = NAME_BYTES + 1  # one string size for every name: one definition per message type
CUE_CHARS = 15  # a cue's street as its course point's name: what a computer shows beside the turn
MAX_COURSE_POINTS = 20_000  # records in one course (the whole trip's): a computer loads a larger file slowly
MIN_DAY_POINTS = 500  # a day keeps at least this many, however long the trip

# A cue's turn -> the FIT course_point type (the symbol a computer shows); a roundabout has no symbol of its own.
CUE_TYPES = {"left": 6, "right": 7, "slight_left": 19, "slight_right": 21, "sharp_left": 20, "sharp_right": 22,
             "u_turn": 23, "continue": 8, "roundabout": 0}
GENERIC, SEGMENT_END = 0, 25
COURSE_FILE, DEVELOPMENT, CYCLING, TIMER, START, STOP_ALL = 6, 255, 2, 0, 0, 4

FILE_ID = Message(0, 0, (Field(0, "enum"), Field(1, "uint16"), Field(2, "uint16"), Field(3, "uint32z"),
                         Field(4, "uint32")))
COURSE = Message(31, 0, (Field(4, "enum"), Field(5, "string", MIN_STRING)))
LAP = Message(19, 0, (Field(253, "uint32"), Field(2, "uint32"), Field(3, "sint32"), Field(4, "sint32"),
                      Field(5, "sint32"), Field(6, "sint32"), Field(7, "uint32", scale=1000),
                      Field(8, "uint32", scale=1000), Field(9, "uint32", scale=100)))
EVENT = Message(21, 0, (Field(253, "uint32"), Field(0, "enum"), Field(1, "enum")))
# The records keep their own local message type: no redefinition between them.
RECORD = Message(20, 1, (Field(253, "uint32"), Field(0, "sint32"), Field(1, "sint32"),
                         Field(2, "uint16", scale=5, offset=500), Field(5, "uint32", scale=100)))
COURSE_POINT = Message(32, 0, (Field(1, "uint32"), Field(2, "sint32"), Field(3, "sint32"),
                               Field(4, "uint32", scale=100), Field(5, "enum"), Field(6, "string", MIN_STRING)))

Cue = Mapping[str, object]


def _utf8(text: str) -> int:
    return len(text.encode())


def _name(text: str | None, fallback: str, chars: int | None = None) -> str:
    """Printable text cut at a word to NAME_BYTES of UTF-8 (and `chars` characters), the ellipsis included
    (trips/core/text.py shorten)."""
    value = clean_text(text) or fallback
    value = " ".join("".join(c for c in value if c.isprintable()).split())
    if chars is not None:
        value = shorten(value, chars)
    return shorten(value, NAME_BYTES, _utf8) or fallback


def _days(days: Sequence[DayExport], simplified: Sequence | None = None,
          ) -> list[tuple[DayExport, np.ndarray, np.ndarray]]:
    """The riding days with a line: (day, its line (lat, lon, ele; NaN: unknown) thinned to the day's share of
    MAX_COURSE_POINTS, the metres along each point). The metres are the thinned line's, stretched to the whole
    line's length: a lap is as long as the day, however many points carry it.

    `simplified`: per day of `days`, its line simplified at 20 m already (the day's stored line), thinned in its
    stead when the line has more points than its share: thinning starts with that same 20 m pass (pacing.py
    fit_points), so it keeps the same points for a fraction of the work."""
    first_pass = {id(day): line for day, line in zip(days, simplified or ()) if line is not None and len(line) >= 2}
    out = []
    for day in days:
        line = np.asarray(day.geometry if day.geometry is not None else [], dtype=float)
        if not day.is_rest_day and line.ndim == 2 and len(line) >= 2:
            if line.shape[1] == 2:
                line = np.column_stack((line, np.full(len(line), np.nan)))
            out.append((day, line[:, :3]))
    budget = min(MAX_STAGE_POINTS, max(MIN_DAY_POINTS, MAX_COURSE_POINTS // max(len(out), 1)))
    sources = [_first_pass(first_pass.get(id(day)), line) if len(line) > budget else line for day, line in out]
    long = [i for i, line in enumerate(sources) if len(line) > budget]
    fitted = dict(zip(long, fit_points_each([sources[i] for i in long], budget)))  # every day's passes at once
    thinned = []
    for i, (day, line) in enumerate(out):
        kept = fitted.get(i, sources[i])
        along = cumulative_km(kept) * 1000.0
        if len(kept) < len(line) and along[-1] > 0:
            along *= float(cumulative_km(line)[-1] * 1000.0) / float(along[-1])
        thinned.append((day, kept, along))
    return thinned


def _first_pass(simplified, line: np.ndarray) -> np.ndarray:
    """The day's 20 m line as (lat, lon, ele) when it has one, else its line."""
    if simplified is None:
        return line
    coarse = np.asarray(simplified, dtype=float)
    if coarse.ndim != 2 or coarse.shape[1] < 2:
        return line
    return coarse[:, :3] if coarse.shape[1] >= 3 else np.column_stack((coarse, np.full(len(coarse), np.nan)))


def _end_name(day: DayExport) -> str:
    lodging = (day.accommodation or {}).get("name")
    return _name(lodging or day.end_label or day.label, f"Day {day.day_number} end")


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _cue_points(cues: Sequence[Cue], offset_m: float, length_m: float, begin_ms: int, speed: float) -> list[tuple]:
    """A day's cues as course point values (time, lat, lon, metres, type, name), in their order along the day; a cue
    without a finite position is left out, its km held within the day."""
    out = []
    for cue in cues or ():
        lat, lon, km = _number(cue.get("lat")), _number(cue.get("lon")), _number(cue.get("km"))
        if lat is None or lon is None or not (-90 <= lat <= 90 and -180 <= lon <= 180):
            continue
        along = min(max((km or 0.0) * 1000.0, 0.0), length_m)
        street = cue.get("street") or cue.get("instruction")
        name = _name(street if isinstance(street, str) else None, "", CUE_CHARS)
        out.append((fit_seconds(begin_ms + round(along / speed * 1000)), semicircles(lat), semicircles(lon),
                    offset_m + along, CUE_TYPES.get(str(cue.get("turn")), GENERIC), name))
    return sorted(out, key=lambda p: p[3])


def _unix_ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)


def course(name: str | None, days: Sequence[DayExport], start: datetime, speed_kmh: float,
           cues: Sequence[Sequence[Cue] | None] | None = None, simplified: Sequence | None = None) -> bytes:
    """One course over the riding days of `days` (in order), each a lap leaving at its `departure` (a day without
    one: `start`, the first day's departure, N - 1 days later for day N), or when the day before ends if that is
    later. `cues`: per day of `days` (same order), its cues ({lat, lon, km along the day, turn, street,
    instruction}), written as course points. `simplified`: per day of `days`, its line simplified at 20 m already
    (`_days`). Raises ValueError when no day has a line."""
    by_day = {id(day): list(day_cues or ()) for day, day_cues in zip(days, cues or ())}
    riding = _days(days, simplified)
    if not riding:
        raise ValueError("no riding day with a line to write")
    speed = max(float(speed_kmh or 0), MIN_SPEED_KMH) / 3.6  # m/s
    start = start.astimezone(timezone.utc) if start.tzinfo else start.replace(tzinfo=timezone.utc)
    w = FitWriter()
    w.add(FILE_ID, (COURSE_FILE, DEVELOPMENT, 0, 1, fit_time(datetime.now(timezone.utc))))
    w.add(COURSE, (CYCLING, _name(name, "BTP trip")))
    leaving = [day.departure or start + timedelta(days=day.day_number - riding[0][0].day_number)
               for day, _, _ in riding]
    timed = [along / speed for _, _, along in riding]  # seconds from the day's start at each point
    plan: list[tuple[DayExport, np.ndarray, np.ndarray, np.ndarray, int]] = []  # metres, seconds, start (Unix ms)
    offset = 0.0
    for (day, line, along), secs, leaves in zip(riding, timed, ride_starts(leaving, [t[-1] for t in timed])):
        plan.append((day, line, offset + along, secs, _unix_ms(leaves)))
        offset += float(along[-1])
    for day, line, metres, seconds, began in plan:
        end = fit_seconds(began + round(float(seconds[-1]) * 1000))
        w.add(LAP, (end, fit_seconds(began), semicircles(float(line[0, 0])), semicircles(float(line[0, 1])),
                    semicircles(float(line[-1, 0])), semicircles(float(line[-1, 1])), float(seconds[-1]),
                    float(seconds[-1]), float(metres[-1] - metres[0])))
    w.add(EVENT, (fit_seconds(plan[0][4]), TIMER, START))
    w.add_many(RECORD, _records(plan))
    points = []
    for day, line, metres, seconds, began in plan:
        points += _cue_points(by_day.get(id(day), ()), float(metres[0]), float(metres[-1] - metres[0]), began, speed)
        points.append((fit_seconds(began + round(float(seconds[-1]) * 1000)), semicircles(float(line[-1, 0])),
                       semicircles(float(line[-1, 1])), float(metres[-1]), SEGMENT_END, _end_name(day)))
    for point in points:
        w.add(COURSE_POINT, point)
    last = plan[-1]
    w.add(EVENT, (fit_seconds(last[4] + round(float(last[3][-1]) * 1000)), TIMER, STOP_ALL))
    return w.file()


def _records(plan) -> list[np.ndarray]:
    """The record columns (time, lat, lon, altitude, distance) of every point, encoded as the protocol holds them;
    an unknown elevation (or one the field cannot hold) is the field's invalid value."""
    lines = np.concatenate([line for _, line, _, _, _ in plan])
    metres = np.concatenate([m for _, _, m, _, _ in plan])
    stamps = fit_seconds(np.concatenate([begin + np.rint(secs * 1000).astype(np.int64) for _, _, _, secs, begin in plan]))
    with np.errstate(invalid="ignore"):
        altitude = np.rint((lines[:, 2] + 500.0) * 5.0)
        known = np.isfinite(altitude) & (altitude >= 0) & (altitude < 0xFFFF)
    altitude = np.where(known, altitude, 0xFFFF).astype(np.int64)
    return [stamps, semicircles(lines[:, 0]), semicircles(lines[:, 1]), altitude,
            np.rint(metres * 100.0).astype(np.int64)]


def course_per_day(name: str | None, days: Sequence[DayExport], start: datetime, speed_kmh: float,
                   cues: Sequence[Sequence[Cue] | None] | None = None, simplified: Sequence | None = None) -> bytes:
    """A ZIP of one course per riding day ("day-01.fit", …), each named "Day N: label", with its cues (`cues` and
    `simplified` as `course`'s). Raises ValueError when no day has a line."""
    by_day = {id(day): day_cues for day, day_cues in zip(days, cues or ())}
    coarse = {id(day): line for day, line in zip(days, simplified or ())}
    riding = [day for day, _, _ in _days(days)]
    if not riding:
        raise ValueError("no riding day with a line to write")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for day in riding:
            begin = day.departure or start + timedelta(days=day.day_number - riding[0].day_number)
            title = f"Day {day.day_number}: {day.label}" if day.label else f"Day {day.day_number}: {name or 'BTP'}"
            archive.writestr(f"day-{day.day_number:02d}.fit",
                             course(title, [day], begin, speed_kmh, [by_day.get(id(day))], [coarse.get(id(day))]))
    return buffer.getvalue()
