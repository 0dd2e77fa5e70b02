"""The one JSON loader for request bodies (REST through Flask's JSON provider, and /mcp). A string holding a lone
UTF-16 surrogate (not Unicode text: I-JSON, RFC 7493 §2.1) or a NUL (no PostgreSQL text column stores it) is
refused as a malformed body, naming where it is. NaN and Infinity are read as floats, so a numeric field refuses
them by name like any other out-of-range value.
"""
from __future__ import annotations

import json
from typing import Any

from flask.json.provider import DefaultJSONProvider

from trips.core.text import UNSTORABLE, bounded, mend
from trips.errors import Msg

__all__ = ["InvalidText", "StrictJSONProvider", "find_unstorable", "loads"]

_MAX_PATH_PARTS = 6


class InvalidText(ValueError):
    """The body is JSON, but one of its strings (a value or a member name) holds a lone UTF-16 surrogate or
    a NUL character (valid JSON escapes, but not text any database column can store: PostgreSQL refuses NUL).

    `field` is where (e.g. `params.arguments.title`, `[0].id`), bounded and printable; `text` (a Msg) and
    `message` (its English) say so without quoting the string itself."""

    def __init__(self, field: str):
        self.field = field
        self.text = Msg("refusal.unstorable_text", field=field)
        super().__init__(field)

    @property
    def message(self) -> str:
        return str(self.text)

    def __str__(self) -> str:
        return self.message


def _name(trail) -> str:
    """A printable, bounded name for the place `trail` points to (keys may hold the surrogate themselves).
    `trail` is a linked list (key, parent trail), so that walking a wide and deep body stays linear."""
    path = []
    while trail is not None:
        part, trail = trail
        path.append(part)
    path.reverse()
    parts = path if len(path) <= _MAX_PATH_PARTS else [*path[:_MAX_PATH_PARTS - 1], "…"]
    name = ""
    for part in parts:
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            text = bounded(mend(part))
            name += f".{text}" if name else text
    return name or "body"


def find_unstorable(value: Any) -> str | None:
    """Where the first string holding a lone surrogate or a NUL is in a parsed JSON value, or None.

    Iterative (a body as deep as the parser allows does not exhaust the stack); member names are checked
    too."""
    stack: list[tuple[Any, Any]] = [(value, None)]
    while stack:
        node, trail = stack.pop()
        if isinstance(node, str):
            if UNSTORABLE.search(node):
                return _name(trail)
        elif isinstance(node, dict):
            for key, item in node.items():
                if UNSTORABLE.search(key):
                    return _name((key, trail))
                if isinstance(item, (str, dict, list)):
                    stack.append((item, (key, trail)))
        elif isinstance(node, list):
            stack.extend((item, (i, trail)) for i, item in enumerate(node) if isinstance(item, (str, dict, list)))
    return None


def loads(data: str | bytes | bytearray, **options: Any) -> Any:
    """Parse a JSON body. Raises InvalidText (a ValueError) when a string holds a lone surrogate or a NUL, ValueError
    when the text is not JSON (or not UTF-8/16/32), and RecursionError when it nests deeper than the parser
    goes. `options` go to `json.loads`."""
    value = json.loads(data, **options)
    if _plain(data):
        return value
    where = find_unstorable(value)
    if where is not None:
        raise InvalidText(where)
    return value


_UTF16_32_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _plain(data) -> bool:
    """True when no string parsed from `data` can hold a lone surrogate or a NUL, judged from the text alone, so the
    parsed value need not be walked: no `\\u` escape in it, and no surrogate or NUL written out (as a str's own
    characters; in bytes read as UTF-8, a NUL or the ED lead byte that encodes a surrogate; bytes json.loads would
    read as UTF-16 or UTF-32, which it detects from a BOM or a NUL in the first two bytes, are always walked)."""
    if isinstance(data, str):
        return "\\u" not in data and UNSTORABLE.search(data) is None
    if not isinstance(data, (bytes, bytearray)) or len(data) < 2 or not data[0] or not data[1]:
        return False
    return (not data.startswith(_UTF16_32_BOMS) and b"\\u" not in data and b"\xed" not in data
            and b"\x00" not in data)  # a NUL written out: json.loads takes it inside a string with strict=False


class StrictJSONProvider(DefaultJSONProvider):
    """Flask's JSON provider with `loads` above: every `request.get_json()` refuses lone surrogates (with
    `silent=True` such a body reads as no JSON at all). Dumping is Flask's own."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return loads(s, **kwargs)
