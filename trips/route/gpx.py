"""Hardened, streaming GPX track parser (docs/RULES.md "GPX parsing"). The document is fed to lxml's pull parser in
chunks and finished elements are pruned, so memory stays flat beyond the output arrays; a segment in the plain form
most exporters write is read from the bytes with numpy instead (trips/route/gpx_fast.py). A DOCTYPE is refused
before it reaches the parser, entities are never resolved and the network never used.
"""
from __future__ import annotations

import codecs
from dataclasses import dataclass, field

import numpy as np
from lxml import etree

from trips.errors import Msg
from trips.route.gpx_fast import BOMS, XML_DECL_ENCODING, Reader
from trips.route.gpx_points import (DOCTYPE, INVALID, NO_POINTS, Collector, GpxError, local_name, prune,
                                    take_open_segment)

__all__ = ["MAX_BYTES", "GpxError", "ParsedRoute", "parse_gpx"]

MAX_BYTES = 30 * 1024 * 1024
# libxml2 holds one text (a comment, a CDATA section, a text node, an attribute value) to 10 000 000 bytes, counted
# with what is fed beside it (a chunk): 9 MiB is what always fits. Over it, the file is refused for its size.
MAX_TEXT_BYTES = 9 * 1024 * 1024
# What libxml2 says when a text is over its limit (pinned by tests/trips/route/test_gpx.py, kind by kind).
_TOO_LARGE_SAID = ("too big found", "text node too long", "buffer size limit", "attvalue length too long",
                   "huge input lookup")
_CHUNK_BYTES = 256 * 1024
_HEAD_BYTES = 1024
# Elements with events. Track points are read in bulk from their <trkseg> after each chunk, then finished
# elements are pruned from the root, whose `start` event must come within the first MiB.
_EVENT_TAGS = ("{*}gpx", "{*}trkseg", "{*}name", "{*}trk")
_ROOT_WITHIN_BYTES = 1024 * 1024


_DOCTYPE_FORMS = tuple({"<!doctype".encode(enc) for enc in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le",
                                                             "utf-32-be")})
_SCAN_OVERLAP = max(len(f) for f in _DOCTYPE_FORMS) - 1
# Declared encodings in which "<!DOCTYPE" can only be written with its ASCII bytes (no UTF-7, EBCDIC,
# ISO-2022 or other stateful encodings). Names as normalised by codecs.lookup().
_ASCII_SAFE_ENCODINGS = frozenset(
    ["utf-8", "ascii", "latin-1", "koi8-r", "koi8-u", "mac-roman", "shift_jis", "cp932", "euc_jp", "euc_kr",
     "cp949", "gb2312", "gbk", "gb18030", "big5", "cp950"]
    + [f"iso8859-{i}" for i in range(1, 17)] + [f"cp125{i}" for i in range(9)]
)


@dataclass
class ParsedRoute:
    """Parsed track points. `tracks` holds (n, 3) float64 arrays (lat, lon, ele): a single array with every
    track point in document order, or one array per `<trk>` when parsed with split_tracks=True."""

    title: str | None
    tracks: list[np.ndarray] = field(default_factory=list)

    @property
    def points(self) -> np.ndarray:
        """All track points as one (n, 3) array."""
        if len(self.tracks) == 1:
            return self.tracks[0]
        return np.concatenate(self.tracks) if self.tracks else np.zeros((0, 3))


def _chunks(source, max_bytes: int):
    """Yield the document in chunks; raise GpxError once more than `max_bytes` have been read."""
    too_large = GpxError(Msg("gpx.too_large", megabytes=round(max_bytes / (1024 * 1024), 2)))
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = memoryview(source).cast("B")
        if len(data) > max_bytes:
            raise too_large
        for start in range(0, len(data), _CHUNK_BYTES):
            yield bytes(data[start:start + _CHUNK_BYTES])
        return
    read = getattr(source, "read", None)
    if read is None:
        raise TypeError("source must be bytes or a binary file-like object")
    total, pending = 0, bytearray()
    while True:  # gather reads into full chunks, whatever size the stream hands out
        data = read(_CHUNK_BYTES)
        if data and not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("source must be opened in binary mode")
        total += len(data) if data else 0
        if total > max_bytes:
            raise too_large
        if data:
            pending += data
        if pending and (not data or len(pending) >= _CHUNK_BYTES):
            yield bytes(pending)
            pending.clear()
        if not data:
            return


def _blocks(source, max_bytes: int):
    """Like _chunks, but the first block holds at least _HEAD_BYTES (or the whole document)."""
    head: bytes | None = b""
    for chunk in _chunks(source, max_bytes):
        if head is None:
            yield chunk
        elif len(head) + len(chunk) < _HEAD_BYTES:
            head += chunk
        else:
            yield head + chunk
            head = None
    if head:
        yield head


def _check_head(head: bytes) -> None:
    """Refuse encodings the DOCTYPE scan cannot see through (EBCDIC, UTF-7, ...)."""
    for bom in BOMS:
        if head.startswith(bom):
            head = head[len(bom):]
            break
    if head and head[:1] not in (b"<", b"\x00", b" ", b"\t", b"\r", b"\n"):
        raise GpxError(INVALID)
    if head.lstrip().startswith(b"<?xml") and b"?>" not in head:
        raise GpxError(INVALID)  # an XML declaration longer than the head: nothing legitimate needs that
    match = XML_DECL_ENCODING.match(head)
    if match:
        try:
            name = codecs.lookup(match.group(1).decode("ascii")).name
        except (LookupError, UnicodeError):
            name = ""
        if name not in _ASCII_SAFE_ENCODINGS:
            raise GpxError(INVALID)


def _has_doctype(window: bytes) -> bool:
    low = window.lower()
    return any(form in low for form in _DOCTYPE_FORMS)


def parse_gpx(source, max_bytes: int = MAX_BYTES, split_tracks: bool = False) -> ParsedRoute:
    """Parse the track points of a GPX document.

    `source` is bytes or a binary file-like object (read in chunks, never all at once). All `<trk>` and
    `<trkseg>` points are concatenated into one track in document order, unless `split_tracks` is true: then
    each `<trk>` with points becomes its own array. The title is the document's `<metadata><name>` when it
    has one, else the first `<name>` of the first `<trk>`,
    before any track point, stripped and cut at 255 characters; None when absent or empty.

    Raises GpxError when the document is larger than `max_bytes` or holds a text larger than MAX_TEXT_BYTES (as
    libxml2 counts it), has a DOCTYPE, is empty, not XML, not
    well-formed or not a `<gpx>` document, has no track point, or has a track point whose latitude or
    longitude is missing, not a finite number or out of range (or whose elevation is not a number).
    Raises TypeError when `source` is neither bytes nor a binary file-like object.
    """
    parser = etree.XMLPullParser(
        events=("start", "end"), tag=_EVENT_TAGS, resolve_entities=False, no_network=True, huge_tree=False,
        load_dtd=False, dtd_validation=False, remove_comments=True, remove_pis=True, remove_blank_text=True,
        collect_ids=False,
    )
    collector = Collector(split_tracks)
    reader = Reader(parser, collector)
    tail, seen = b"", 0
    blocks = _blocks(source, max_bytes)
    try:
        for chunk in blocks:
            _check_chunk(chunk, seen == 0, reader.root is None, tail)
            reader.feed(chunk)
            seen += len(chunk)
            tail = (tail + chunk)[-_SCAN_OVERLAP:]
            reader.drain()
            if reader.root is not None:
                take_open_segment(reader.root, collector)
                prune(reader.root)
            elif seen > _ROOT_WITHIN_BYTES:
                raise GpxError(INVALID)
        if not seen:
            raise GpxError(INVALID)
        reader.feed(b"", final=True)
        reader.drain()
        root = parser.close()
    except etree.ParseError as exc:
        if not _over_the_text_limit(exc):
            raise GpxError(INVALID) from None
        for _ in blocks:  # a file over its own limit is refused for that first (raises GpxError)
            pass
        raise GpxError(Msg("gpx.text_too_large", megabytes=MAX_TEXT_BYTES // (1024 * 1024))) from None
    if root.getroottree().docinfo.doctype:
        raise GpxError(DOCTYPE)
    if local_name(root) != "gpx":
        raise GpxError(INVALID)
    tracks = collector.result()
    if not tracks:
        raise GpxError(NO_POINTS)
    return ParsedRoute(title=collector.document_name or collector.title, tracks=tracks)


def _over_the_text_limit(exc: etree.ParseError) -> bool:
    """True when libxml2 refused a text for its size (nesting too deep is no size: it stays INVALID)."""
    said = str(exc).lower()
    return "depth" not in said and any(words in said for words in _TOO_LARGE_SAID)


def _check_chunk(chunk: bytes, first: bool, in_prolog: bool, tail: bytes) -> None:
    """Check one chunk before it is fed: the head for its encoding, the prolog for a DOCTYPE."""
    if first:
        _check_head(chunk)
    if in_prolog and _has_doctype(tail + chunk):
        raise GpxError(DOCTYPE)
