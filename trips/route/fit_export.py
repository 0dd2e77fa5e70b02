"""FIT course files of a planned trip (what Garmin and Wahoo bike computers load), written with fit-tool in the
order of Garmin's course cookbook (FIT SDK, "Course File Type"): `course` makes one course with the riding days as
laps, `course_per_day` a ZIP of one course per day (docs/RULES.md "GPX export"). The times are the rider's pace
from each day's local departure (the virtual partner rides it; docs/RULES.md "Times").
"""
from __future__ import annotations

import io
import math
import struct
import zipfile
from datetime import datetime, timedelta, timezone
from typing import Sequence

import numpy as np
from fit_tool.data_message import DataMessage
from fit_tool.definition_message import DefinitionMessage
from fit_tool.fit_file_header import FitFileHeader
from fit_tool.profile.messages.course_message import CourseMessage
from fit_tool.profile.messages.course_point_message import CoursePointMessage
from fit_tool.profile.messages.event_message import EventMessage
from fit_tool.profile.messages.file_id_message import FileIdMessage
from fit_tool.profile.messages.lap_message import LapMessage
from fit_tool.profile.messages.record_message import RecordMessage
from fit_tool.profile.profile_type import CoursePoint, Event, EventType, FileType, Manufacturer, Sport
from fit_tool.record import Record
from fit_tool.utils.crc import crc16

from trips.core.text import shorten
from trips.route.clock import ride_starts
from trips.route.geo import cumulative_km
from trips.route.pacing import MAX_STAGE_POINTS, fit_points
from trips.route.gpx_export import MIN_SPEED_KMH, DayExport, clean_text

__all__ = ["MEDIA_TYPE", "course", "course_per_day"]

MEDIA_TYPE = "application/vnd.ant.fit"  # IANA-registered for FIT files
NAME_BYTES = 40  # course and course point names: devices show the first 15-20 characters
MIN_STRING = NAME_BYTES + 1  # one string size for every name: one definition per message type
RECORD_LOCAL_ID = 1  # the records keep their own local message type: no redefinition between them
MAX_COURSE_POINTS = 20_000  # records in one course (the whole trip's): a computer loads a larger file slowly
MIN_DAY_POINTS = 500  # a day keeps at least this many, however long the trip


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)  # fit-tool takes Unix milliseconds


def _utf8(text: str) -> int:
    return len(text.encode())


def _name(text: str | None, fallback: str) -> str:
    """Printable text cut at a word to NAME_BYTES of UTF-8, the ellipsis included (trips/core/text.py shorten)."""
    value = clean_text(text) or fallback
    value = " ".join("".join(c for c in value if c.isprintable()).split())
    return shorten(value, NAME_BYTES, _utf8) or fallback


class _Writer:
    """FIT records as bytes, in order: each message after its definition (a new one only when the last one of its
    local type cannot carry it)."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.definitions: dict[int, DefinitionMessage] = {}

    def add(self, message: DataMessage) -> None:
        definition = DefinitionMessage.from_data_message(message, min_string_size=MIN_STRING)
        stored = self.definitions.get(message.local_id)
        if stored is None or stored.global_id != definition.global_id or not stored.supports(definition):
            self.definitions[message.local_id] = stored = definition
            self.parts.append(Record.from_message(definition).to_bytes())
        message.set_definition_message(stored)
        self.parts.append(Record.from_message(message).to_bytes())

    def again(self, message: DataMessage) -> None:
        """`message` (already added once) re-filled: its bytes under the same definition."""
        self.parts.append(Record.from_message(message).to_bytes())

    def file(self) -> bytes:
        body = b"".join(self.parts)
        header = FitFileHeader(records_size=len(body), gen_crc=True).to_bytes()
        return header + body + struct.pack("<H", crc16(body, crc=crc16(header)))


def _days(days: Sequence[DayExport]) -> list[tuple[DayExport, np.ndarray, np.ndarray]]:
    """The riding days with a line: (day, its line (lat, lon, ele; NaN: unknown) thinned to the day's share of
    MAX_COURSE_POINTS, the metres along each point). The metres are the thinned line's, stretched to the whole
    line's length: a lap is as long as the day, however many points carry it."""
    out = []
    for day in days:
        line = np.asarray(day.geometry if day.geometry is not None else [], dtype=float)
        if not day.is_rest_day and line.ndim == 2 and len(line) >= 2:
            if line.shape[1] == 2:
                line = np.column_stack((line, np.full(len(line), np.nan)))
            out.append((day, line[:, :3]))
    budget = min(MAX_STAGE_POINTS, max(MIN_DAY_POINTS, MAX_COURSE_POINTS // max(len(out), 1)))
    thinned = []
    for day, line in out:
        kept = fit_points(line, budget) if len(line) > budget else line
        along = cumulative_km(kept) * 1000.0
        if len(kept) < len(line) and along[-1] > 0:
            along *= float(cumulative_km(line)[-1] * 1000.0) / float(along[-1])
        thinned.append((day, kept, along))
    return thinned


def _end_name(day: DayExport) -> str:
    lodging = (day.accommodation or {}).get("name")
    return _name(lodging or day.end_label or day.label, f"Day {day.day_number} end")


def course(name: str | None, days: Sequence[DayExport], start: datetime, speed_kmh: float) -> bytes:
    """One course over the riding days of `days` (in order), each a lap leaving at its `departure` (a day without
    one: `start`, the first day's departure, N - 1 days later for day N), or when the day before ends if that is
    later. Raises ValueError when no day has a line."""
    riding = _days(days)
    if not riding:
        raise ValueError("no riding day with a line to write")
    speed = max(float(speed_kmh or 0), MIN_SPEED_KMH) / 3.6  # m/s
    start = start.astimezone(timezone.utc) if start.tzinfo else start.replace(tzinfo=timezone.utc)
    w = _Writer()
    file_id = FileIdMessage()
    file_id.type, file_id.manufacturer, file_id.product = FileType.COURSE, Manufacturer.DEVELOPMENT.value, 0
    file_id.time_created, file_id.serial_number = _ms(datetime.now(timezone.utc)), 1
    w.add(file_id)
    head = CourseMessage()
    head.course_name, head.sport = _name(name, "BTP trip"), Sport.CYCLING
    w.add(head)
    leaving = [day.departure or start + timedelta(days=day.day_number - riding[0][0].day_number)
               for day, _, _ in riding]
    timed = [along / speed for _, _, along in riding]  # seconds from the day's start at each point
    plan: list[tuple[DayExport, np.ndarray, np.ndarray, np.ndarray, datetime]] = []  # metres, seconds at each point
    offset = 0.0
    for (day, line, along), secs, begin in zip(riding, timed, ride_starts(leaving, [t[-1] for t in timed])):
        plan.append((day, line, offset + along, secs, begin))
        offset += float(along[-1])
    for day, line, metres, seconds, begin in plan:
        lap = LapMessage()
        lap.start_time, lap.timestamp = _ms(begin), _ms(begin + timedelta(seconds=float(seconds[-1])))
        lap.total_elapsed_time = lap.total_timer_time = float(seconds[-1])
        lap.total_distance = float(metres[-1] - metres[0])
        lap.start_position_lat, lap.start_position_long = float(line[0, 0]), float(line[0, 1])
        lap.end_position_lat, lap.end_position_long = float(line[-1, 0]), float(line[-1, 1])
        w.add(lap)
    timer = EventMessage()
    timer.event, timer.event_type, timer.timestamp = Event.TIMER, EventType.START, _ms(plan[0][4])
    w.add(timer)
    # One record message re-filled for every point: fit-tool builds a message with every field of its profile.
    record = RecordMessage(local_id=RECORD_LOCAL_ID)
    first = True
    for _, line, metres, seconds, begin in plan:
        base = _ms(begin)
        for (lat, lon, ele), dist, sec in zip(line.tolist(), metres.tolist(), seconds.tolist()):
            record.position_lat, record.position_long, record.distance = lat, lon, dist
            record.altitude = None if ele is None or math.isnan(ele) else ele
            record.timestamp = base + round(sec * 1000)
            if first:
                record.altitude = 0.0 if record.altitude is None else record.altitude  # defined with the field
                w.add(record)
                w.parts.pop()  # the definition is kept; this point is written below, as it is
                record.altitude = None if ele is None or math.isnan(ele) else ele
                first = False
            w.again(record)
    for day, line, metres, seconds, begin in plan:
        point = CoursePointMessage()
        point.timestamp = _ms(begin + timedelta(seconds=float(seconds[-1])))
        point.position_lat, point.position_long = float(line[-1, 0]), float(line[-1, 1])
        point.distance, point.type = float(metres[-1]), CoursePoint.SEGMENT_END
        point.course_point_name = _end_name(day)
        w.add(point)
    stop = EventMessage()
    stop.event, stop.event_type = Event.TIMER, EventType.STOP_ALL
    stop.timestamp = _ms(plan[-1][4] + timedelta(seconds=float(plan[-1][3][-1])))
    w.add(stop)
    return w.file()


def course_per_day(name: str | None, days: Sequence[DayExport], start: datetime, speed_kmh: float) -> bytes:
    """A ZIP of one course per riding day ("day-01.fit", …), each named "Day N: label". Raises ValueError when no
    day has a line."""
    riding = [day for day, _, _ in _days(days)]
    if not riding:
        raise ValueError("no riding day with a line to write")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for day in riding:
            begin = day.departure or start + timedelta(days=day.day_number - riding[0].day_number)
            title = f"Day {day.day_number}: {day.label}" if day.label else f"Day {day.day_number}: {name or 'BTP'}"
            archive.writestr(f"day-{day.day_number:02d}.fit", course(title, [day], begin, speed_kmh))
    return buffer.getvalue()
