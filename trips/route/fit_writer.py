"""A compact FIT encoder (Garmin's FIT protocol: a 14-byte file header with its CRC, definition and data messages,
the file's CRC-16 last), for the few messages a course needs. Each message type has one definition written before
its first message; the many `record` messages are packed as one numpy array.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

import numpy as np

__all__ = ["Field", "Message", "FitWriter", "crc16", "fit_seconds", "fit_time", "semicircles", "FIT_EPOCH_MS"]

FIT_EPOCH_MS = 631_065_600_000  # 1989-12-31T00:00:00Z, FIT's time zero, in Unix milliseconds
PROTOCOL_VERSION = 0x23
PROFILE_VERSION = 21212
HEADER = struct.Struct("<BBHI4sH")

# base type: (its number in the protocol, struct code, invalid value)
BASE = {
    "enum": (0x00, "B", 0xFF), "uint8": (0x02, "B", 0xFF), "sint16": (0x83, "h", 0x7FFF),
    "uint16": (0x84, "H", 0xFFFF), "sint32": (0x85, "i", 0x7FFFFFFF), "uint32": (0x86, "I", 0xFFFFFFFF),
    "uint32z": (0x8C, "I", 0), "string": (0x07, "s", b""),
}


def _crc_table() -> tuple[int, ...]:
    """CRC-16 with Garmin's polynomial (reflected 0xA001), one entry per byte value: the SDK's nibble table twice."""
    table = []
    for value in range(256):
        crc = value
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _crc_table()


def crc16(data: bytes, crc: int = 0) -> int:
    """The FIT CRC of `data`, continuing from `crc`."""
    table = _TABLE
    for byte in data:
        crc = (crc >> 8) ^ table[(crc ^ byte) & 0xFF]
    return crc


def fit_seconds(unix_ms):
    """Unix milliseconds (a number or a numpy array) as FIT's seconds since its time zero, rounded to the nearest."""
    if isinstance(unix_ms, np.ndarray):
        return np.rint((unix_ms - FIT_EPOCH_MS) * 0.001).astype(np.int64)
    return round((unix_ms - FIT_EPOCH_MS) * 0.001)


def fit_time(moment: datetime) -> int:
    """An instant as FIT's seconds since its time zero (UTC)."""
    return fit_seconds(round(moment.timestamp() * 1000))


def semicircles(degrees):
    """Degrees as FIT semicircles (2^31 per 180°), rounded to the nearest; a number or a numpy array."""
    if isinstance(degrees, np.ndarray):
        return np.rint(2147483648.0 * degrees / 180.0).astype(np.int64)
    return round(2147483648.0 * degrees / 180.0)


@dataclass(frozen=True)
class Field:
    number: int
    base: str
    size: int = 0  # strings only: the bytes the field holds, its NUL included
    scale: float = 1.0
    offset: float = 0.0

    @property
    def bytes(self) -> int:
        return self.size if self.base == "string" else struct.calcsize("<" + BASE[self.base][1])

    def encode(self, value):
        kind = BASE[self.base]
        if self.base == "string":
            raw = (value or "").encode()[:self.size - 1]
            return raw.ljust(self.size, b"\0")
        if value is None:
            return kind[2]
        if self.scale != 1.0 or self.offset != 0.0:
            value = round((value + self.offset) * self.scale)
        return int(value)


@dataclass(frozen=True)
class Message:
    """A message type as this encoder writes it: its global number, its local type and its fields in order."""
    number: int
    local: int
    fields: tuple[Field, ...]

    def definition(self) -> bytes:
        head = struct.pack("<BBBHB", 0x40 | self.local, 0, 0, self.number, len(self.fields))
        return head + b"".join(struct.pack("<BBB", f.number, f.bytes, BASE[f.base][0]) for f in self.fields)

    def layout(self) -> struct.Struct:
        codes = "".join(f"{f.size}s" if f.base == "string" else BASE[f.base][1] for f in self.fields)
        return struct.Struct("<B" + codes)


class FitWriter:
    """FIT messages as bytes in the order they are added; `file()` the whole file."""

    def __init__(self):
        self.parts: list[bytes] = []
        self.defined: dict[int, Message] = {}  # local type -> the message type it is defined as now
        self.layouts: dict[Message, struct.Struct] = {}

    def _define(self, message: Message) -> None:
        if self.defined.get(message.local) != message:
            self.defined[message.local] = message
            self.parts.append(message.definition())

    def add(self, message: Message, values: Sequence) -> None:
        """One message; `values` in the order of its fields (None: the field's invalid value)."""
        self._define(message)
        layout = self.layouts.get(message)
        if layout is None:
            layout = self.layouts[message] = message.layout()
        self.parts.append(layout.pack(message.local, *(f.encode(v) for f, v in zip(message.fields, values))))

    def add_many(self, message: Message, columns: Sequence[np.ndarray]) -> None:
        """Messages of one type from columns of already-encoded integers (one array per field, no strings)."""
        self._define(message)
        dtype = np.dtype([("header", "u1")] + [
            (f"f{i}", "<" + {"B": "u1", "h": "i2", "H": "u2", "i": "i4", "I": "u4"}[BASE[f.base][1]])
            for i, f in enumerate(message.fields)])
        packed = np.empty(len(columns[0]), dtype=dtype)
        packed["header"] = message.local
        for i, column in enumerate(columns):
            packed[f"f{i}"] = column
        self.parts.append(packed.tobytes())

    def file(self) -> bytes:
        body = b"".join(self.parts)
        head = HEADER.pack(14, PROTOCOL_VERSION, PROFILE_VERSION, len(body), b".FIT", 0)[:12]
        header = head + struct.pack("<H", crc16(head))
        return header + body + struct.pack("<H", crc16(body, crc16(header)))
