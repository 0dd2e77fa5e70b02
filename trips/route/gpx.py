"""Hardened, streaming GPX track parser (docs/RULES.md "GPX parsing").

Only `<trkpt lat lon>` with an optional `<ele>` child is read (GPX 1.0, 1.1 or without namespace); routes
(`rtept`) and waypoints (`wpt`) are ignored. The document is fed to lxml's pull parser in chunks; after each
chunk the finished points of the open `<trkseg>` are read in bulk (XPath) and every finished element is
pruned, and the byte count is checked as it streams, so memory stays flat in the document size beyond the
output arrays. A segment in the plain form most exporters write is read from the bytes instead, with numpy,
and withheld from lxml (see "fast path" below): the same points, titles and messages, in a fraction of the
time lxml takes to build and query the elements.

Hostile input: a DOCTYPE is refused before it reaches the XML parser (the raw bytes up to the root element
are scanned for `<!DOCTYPE`, any case, in ASCII-compatible, UTF-16 and UTF-32 forms, and an encoding
declaration that could hide it is refused), entities are never resolved, the network is never used, and
libxml2's size and depth limits stay on.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

import numpy as np
from lxml import etree

__all__ = ["MAX_BYTES", "GpxError", "ParsedRoute", "parse_gpx"]

MAX_BYTES = 30 * 1024 * 1024
TITLE_MAX_CHARS = 255
_CHUNK_BYTES = 256 * 1024
_HEAD_BYTES = 1024
# Elements with events. Track points are read in bulk from their <trkseg> after each chunk, then finished
# elements are pruned from the root, whose `start` event must come within the first MiB.
_EVENT_TAGS = ("{*}gpx", "{*}trkseg", "{*}name", "{*}trk")
_ROOT_WITHIN_BYTES = 1024 * 1024

INVALID = "The file is not a valid GPX document."
DOCTYPE = "GPX documents with a DOCTYPE are not allowed."
NO_POINTS = "The GPX file has no track points."

_DOCTYPE_FORMS = tuple({"<!doctype".encode(enc) for enc in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le",
                                                             "utf-32-be")})
_SCAN_OVERLAP = max(len(f) for f in _DOCTYPE_FORMS) - 1
_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Declared encodings in which "<!DOCTYPE" can only be written with its ASCII bytes (no UTF-7, EBCDIC,
# ISO-2022 or other stateful encodings). Names as normalised by codecs.lookup().
_ASCII_SAFE_ENCODINGS = frozenset(
    ["utf-8", "ascii", "latin-1", "koi8-r", "koi8-u", "mac-roman", "shift_jis", "cp932", "euc_jp", "euc_kr",
     "cp949", "gb2312", "gbk", "gb18030", "big5", "cp950"]
    + [f"iso8859-{i}" for i in range(1, 17)] + [f"cp125{i}" for i in range(9)]
)
_XML_DECL_ENCODING = re.compile(rb"\A\s*<\?xml[^>]*?\bencoding\s*=\s*[\"']([^\"']{0,64})[\"']", re.IGNORECASE)


class GpxError(ValueError):
    """A GPX upload was refused. `message` is safe to show to the user: it never quotes the file."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


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
    too_large = GpxError(f"The GPX file is larger than the {max_bytes / (1024 * 1024):g} MB limit.")
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
    head = b""
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
    for bom in _BOMS:
        if head.startswith(bom):
            head = head[len(bom):]
            break
    if head and head[:1] not in (b"<", b"\x00", b" ", b"\t", b"\r", b"\n"):
        raise GpxError(INVALID)
    if head.lstrip().startswith(b"<?xml") and b"?>" not in head:
        raise GpxError(INVALID)  # an XML declaration longer than the head: nothing legitimate needs that
    match = _XML_DECL_ENCODING.match(head)
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


_NOT_A_NUMBER = "A track point has a latitude or longitude that is not a number."
_BAD_ELE = "A track point has an elevation that is not a number."
_MISSING = "A track point has no latitude or longitude."

_XPATHS: dict[str, dict[str, etree.XPath]] = {}


def _xpaths(seg) -> dict[str, etree.XPath]:
    """Compiled bulk queries over a <trkseg>'s points, in the segment's own namespace."""
    tag = seg.tag
    ns = tag[1:].partition("}")[0] if tag[0] == "{" else ""
    found = _XPATHS.get(ns)
    if found is None:
        p = "g:" if ns else ""
        opts = {"namespaces": {"g": ns}} if ns else {}
        found = _XPATHS[ns] = {
            "count": etree.XPath(f"count({p}trkpt)", **opts),
            "lat": etree.XPath(f"{p}trkpt/@lat", smart_strings=False, **opts),
            "lon": etree.XPath(f"{p}trkpt/@lon", smart_strings=False, **opts),
            "ele": etree.XPath(f"{p}trkpt/{p}ele[1]/text()[1]", smart_strings=False, **opts),
            "n_ele": etree.XPath(f"count({p}trkpt/{p}ele)", **opts),
            "ele_tag": f"{{{ns}}}ele" if ns else "ele", "trkpt_tag": f"{{{ns}}}trkpt" if ns else "trkpt",
        }
    return found


def _to_floats(values: list[str], message: str, blank_is_zero: bool = False) -> np.ndarray:
    """Convert numeric strings in bulk; raise GpxError(message) when one is not a number."""
    try:
        return np.array(values, dtype=np.float64)
    except ValueError:
        pass
    out = np.empty(len(values))
    for i, text in enumerate(values):
        try:
            out[i] = float(text)
        except ValueError:
            if not (blank_is_zero and not text.strip()):
                raise GpxError(message) from None
            out[i] = 0.0
    return out


def _first_ele_text(point, ele_tag: str) -> str | None:
    for child in point:
        if child.tag == ele_tag:
            return child.text
    return None


def _elevations(seg, xp: dict, n: int, open_last: bool) -> np.ndarray:
    """Elevations of the first `n` points of `seg` (0.0 where missing or blank); `open_last` tells that the
    last point (possibly incomplete) is excluded."""
    texts = xp["ele"](seg)
    extra = 1 if open_last and _first_ele_text(seg[-1], xp["ele_tag"]) is not None else 0
    if len(texts) != n + extra:  # some points lack an <ele> text: one by one
        if not xp["n_ele"](seg):
            return np.zeros(n)
        texts = [_first_ele_text(pt, xp["ele_tag"]) or "" for pt in seg.iterchildren(xp["trkpt_tag"])]
    return _to_floats(texts[:n], _BAD_ELE, blank_is_zero=True)


class _Collector:
    """Accumulates track points, a <trkseg> at a time, and the title."""

    def __init__(self, split_tracks: bool):
        self.split_tracks = split_tracks
        self.tracks: list[_Points] = []
        self.title: str | None = None
        self.title_done = False
        self.document_name: str | None = None  # <metadata><name> (GPX 1.1): the whole document's name
        self._new_track = True

    def name(self, el) -> None:
        parent = _local(el.getparent())
        if not self.title_done and parent == "trk":
            self.title = "".join(el.itertext()).strip()[:TITLE_MAX_CHARS] or None
            self.title_done = True
        elif parent == "metadata" and self.document_name is None:
            self.document_name = "".join(el.itertext()).strip()[:TITLE_MAX_CHARS] or None

    def end_track(self) -> None:
        self.title_done = True  # the title comes from the first <trk> only
        if self.split_tracks:
            self._new_track = True

    def take(self, seg, finished: bool) -> None:
        """Read the finished track points of `seg` (all of them once the segment has ended), then drop them."""
        xp = _xpaths(seg)
        total = int(xp["count"](seg))
        open_last = not finished and len(seg) and seg[-1].tag == xp["trkpt_tag"]
        n = total - 1 if open_last else total
        if n > 0:
            lat, lon = xp["lat"](seg), xp["lon"](seg)
            if len(lat) != total or len(lon) != total:
                raise GpxError(_MISSING)
            self.add(np.column_stack((_to_floats(lat[:n], _NOT_A_NUMBER), _to_floats(lon[:n], _NOT_A_NUMBER),
                                      _elevations(seg, xp, n, bool(open_last)))))
        if finished:
            del seg[:]
        elif len(seg) > 1:
            del seg[:-1]

    def add(self, block: np.ndarray) -> None:
        """Check then append a block of points, read in document order."""
        self.title_done = True  # the title search stops at the first track point
        _check(block)
        if self._new_track or not self.tracks:
            self.tracks.append(_Points())
            self._new_track = False
        self.tracks[-1].add(block)

    def result(self) -> list[np.ndarray]:
        return [points.array() for points in self.tracks if points.count]


class _Points:
    """A track's points, appended a block at a time into one array grown in place (realloc: no second copy
    of the points while they are gathered, as joining a list of blocks at the end would make)."""

    def __init__(self):
        self.buf = np.empty((4096, 3))
        self.count = 0

    def add(self, block: np.ndarray) -> None:
        end = self.count + len(block)
        if end > len(self.buf):
            self.buf.resize((max(end, 2 * len(self.buf)), 3), refcheck=False)  # no view of buf is ever kept
        self.buf[self.count:end] = block
        self.count = end

    def array(self) -> np.ndarray:
        self.buf.resize((self.count, 3), refcheck=False)
        return self.buf


def _check(block: np.ndarray) -> None:
    if not np.isfinite(block[:, :2]).all():
        raise GpxError(_NOT_A_NUMBER)
    if not np.isfinite(block[:, 2]).all():
        raise GpxError(_BAD_ELE)
    if (np.abs(block[:, 0]) > 90).any():
        raise GpxError("A track point has a latitude outside -90..90.")
    if (np.abs(block[:, 1]) > 180).any():
        raise GpxError("A track point has a longitude outside -180..180.")


def _local(el) -> str:
    tag = el.tag if el is not None else None
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2]


def _root_of(el):
    """The document's root, checked: no DOCTYPE, and a <gpx> element."""
    tree = el.getroottree()
    if tree.docinfo.doctype:
        raise GpxError(DOCTYPE)
    root = tree.getroot()
    if _local(root) != "gpx":
        raise GpxError(INVALID)
    return root


def _take_open_segment(root, collector: _Collector) -> None:
    """Read the finished points of the <trkseg> still open at the end of a chunk, if any."""
    node = root
    while len(node):
        node = node[-1]
        if _local(node) == "trkseg":
            collector.take(node, finished=False)
            return


def _prune(root) -> None:
    """Drop finished elements: all but the last child of each element on the open path. The open <trkseg>
    keeps its points (`take` drops them once read), and an open track point keeps its first <ele>."""
    node, in_point = root, False
    while len(node):
        kind = _local(node)
        if kind == "trkseg":
            node, in_point = node[-1], True
            continue
        if len(node) > 1:
            if in_point and kind == "trkpt":
                kept_ele = False
                for child in node[:-1]:
                    if _local(child) == "ele" and not kept_ele:
                        kept_ele = True
                    else:
                        node.remove(child)
            else:
                del node[:-1]
        node = node[-1]


# ------------------------------------------------------------------ fast path
# A <trkseg> written exactly as most exporters write it (points `<trkpt lat="N" lon="N">` with an optional
# `<ele>N</ele>` then an optional `<time>…</time>`, whitespace or other text between, ASCII only, no
# reference, comment, CDATA or other markup) is read straight from the bytes with numpy, a chunk at a time, and cut out of what
# the XML parser is fed: the parser then sees `<trkseg></trkseg>`. The rest of the document (and any point
# not in that form, from the first such point to the end of its segment) goes through lxml as before. The
# cut bytes are a sequence of complete elements, so the document is well-formed exactly when what lxml sees
# is and the cut part matches that form; the points read are the ones the lxml path reads (the segment's
# own unprefixed trkpt children, the first direct <ele>), converted with the same float parsing (on the
# characters allowed here numpy's and Python's float() agree, and any failure is retried with the lxml
# path's conversion for the same message). Used only for UTF-8 or ASCII documents with no comment,
# processing instruction or CDATA outside the XML declaration, for a start tag written `<trkseg>` that lxml
# reports as a segment opened outside any other. (One difference, in documents that are not GPX: points of
# a <trkseg> nested inside another one's point come in document order, where the lxml path's order
# depended on where the chunks fell.)


def _first_banned(buf: bytes, arr: np.ndarray) -> int:
    """Offset of the first byte never read on the fast path, len(buf) when none: outside printable ASCII,
    tab, LF and CR; '&' (no reference is read); ']' (text never holds "]]>")."""
    first = len(buf)
    for byte in (b"&", b"]", b"\x7f"):
        at = buf.find(byte, 0, first)
        if at >= 0:
            first = at
    if not buf.isascii():
        first = min(first, int(np.argmax(arr[:first] >= 128)))
    low = np.flatnonzero(arr[:first] < 32)  # then only tab, LF and CR may be among them
    byte = arr[low]
    control = low[(byte != 10) & (byte != 9) & (byte != 13)]
    return int(control[0]) if len(control) else first


def _word(text: bytes) -> tuple[int, int]:
    """The little-endian 64-bit word of up to 8 bytes, and the mask of those bytes."""
    return int.from_bytes(text.ljust(8, b"\0"), "little"), (1 << (8 * len(text))) - 1


# Token kinds: <trkpt lat=", <ele>, </ele>, <time>, </time>, </trkpt>, anything else; each is told by the
# 8 bytes at its '<' (and <trkpt lat=" by the 8 at its 5th byte too).
_PT, _ELE, _EELE, _TIME, _ETIME, _EPT, _OTHER = range(7)
_TOKENS = [_word(t) for t in (b"<trkpt l", b"<ele>", b"</ele>", b"<time>", b"</time>", b"</trkpt>")]
_PT_TAIL = _word(b'pt lat="')[0]
_LON = _word(b'" lon="')
_TOKEN_LEN = np.array([12, 5, 6, 6, 7, 8, 0])
_FOLLOWS = np.zeros((7, 7), bool)  # _FOLLOWS[a, b]: token b may come right after token a
for _a, _b in ((_PT, _ELE), (_PT, _TIME), (_PT, _EPT), (_ELE, _EELE), (_EELE, _TIME), (_EELE, _EPT),
               (_TIME, _ETIME), (_ETIME, _EPT), (_EPT, _PT)):
    _FOLLOWS[_a, _b] = True
del _a, _b
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], np.uint64)  # [k]: the low k bytes
_PAD = bytes(48)  # room for the 8-byte words read from near the end
_MAX_NUMBER_CHARS = 32  # longer numbers go through lxml
_STUCK_BYTES = 8192  # unread bytes beyond this in a fast segment are not in the fast form
_MIN_WINDOW, _MAX_WINDOW = 1024, 4 * 1024 * 1024
_TRIAL_SEGMENTS = 32  # then the fast path stays on only if its segments averaged 64 points or more
_SEG_OPEN, _SEG_CLOSE = b"<trkseg>", b"</trkseg>"


def _grid(words: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The bytes [start, end) of each range (at most _MAX_NUMBER_CHARS of them, more are cut) as the rows
    of a zero-padded byte grid, gathered 8 bytes at a time."""
    length = np.minimum(end - start, _MAX_NUMBER_CHARS)
    n_words = 2 if not len(length) or length.max() <= 16 else _MAX_NUMBER_CHARS // 8
    grid = np.empty((len(start), n_words), np.uint64)
    for k in range(n_words):
        grid[:, k] = words[start + 8 * k] & _MASKS[np.clip(length - 8 * k, 0, 8)]
    return grid.view(np.uint8)


def _fast_floats(grid: np.ndarray, message: str, blank_is_zero: bool = False) -> np.ndarray:
    """Convert the rows of a byte grid. numpy reads a bytes item as float() does (checked on every
    printable ASCII form in tests); on any failure the lxml path's conversion gives its outcome and message."""
    strings = np.ascontiguousarray(grid).view(f"S{grid.shape[1]}").ravel()
    try:
        return strings.astype(np.float64)
    except ValueError:
        return _to_floats([s.decode("ascii") for s in strings.tolist()], message, blank_is_zero)


def _scan_points(buf: bytes) -> tuple[int, np.ndarray | None]:
    """Read the leading run of fast-form track points of `buf` (text first allowed). Return the offset
    just after the last point of the run (0 when there is none) and the points as an (n, 3) array."""
    padded = buf + _PAD
    arr = np.frombuffer(padded, np.uint8)
    words = np.ndarray((len(buf) + 40,), "<u8", padded, 0, (1,))  # words[i]: the 8 bytes from i
    n = _first_banned(buf, arr)  # the run ends before it
    lt = np.flatnonzero(arr[:n] == 60)
    if not len(lt):
        return 0, None
    first = words[lt]
    kind = np.full(len(lt), _OTHER, np.intp)
    for k, (value, mask) in enumerate(_TOKENS):
        kind[(first & np.uint64(mask)) == np.uint64(value)] = k
    pts = np.flatnonzero(kind == _PT)
    kind[pts[words[lt[pts] + 4] != np.uint64(_PT_TAIL)]] = _OTHER
    # The longest prefix of tokens in the point grammar, cut after its last </trkpt>.
    bad = kind == _OTHER
    bad[1:] |= ~_FOLLOWS[kind[:-1], kind[1:]]
    bad[0] |= kind[0] != _PT
    m = int(np.argmax(bad)) if bad.any() else len(kind)
    ends = np.flatnonzero(kind[:m] == _EPT)
    if not len(ends):
        return 0, None
    m = int(ends[-1]) + 1
    kind, lt = kind[:m], lt[:m]
    pts, ept = np.flatnonzero(kind == _PT), np.flatnonzero(kind == _EPT)  # one of each per point, in order
    s = lt[pts]
    # <trkpt lat="A" lon="B">: the quotes after lat=", then `" lon="` and `">`, both values non-empty.
    quotes = np.flatnonzero(arr[:n] == 34)
    if len(quotes) < 3:
        return 0, None
    i1 = np.searchsorted(quotes, s + 12)
    pt_bad = i1 + 2 >= len(quotes)
    i1 = np.minimum(i1, len(quotes) - 3)
    q1, q1b, q2 = quotes[i1], quotes[i1 + 1], quotes[i1 + 2]
    pt_bad |= (q1b != q1 + 6) | (q1 == s + 12) | (q2 == q1b + 1) | (arr[q2 + 1] != ord(">"))
    pt_bad |= (words[q1] & np.uint64(_LON[1])) != np.uint64(_LON[0])
    pt_bad |= (q1 - s - 12 > _MAX_NUMBER_CHARS) | (q2 - q1b - 1 > _MAX_NUMBER_CHARS)
    pt_bad |= lt[pts + 1] <= q2 + 1  # the tag ends before the next '<'
    # Text between the tags is character data the lxml path ignores too (nothing banned is in it, so it is
    # well-formed); that of <ele> is converted, as the values are.
    tag_end = lt + _TOKEN_LEN[kind]
    has_ele = kind[pts + 1] == _ELE
    ele_at = pts[has_ele]
    ele_a, ele_b = tag_end[ele_at + 1], lt[ele_at + 2]
    pt_bad[np.flatnonzero(has_ele)[ele_b - ele_a > _MAX_NUMBER_CHARS]] = True
    good = int(np.argmax(pt_bad)) if pt_bad.any() else len(pts)
    if not good:
        return 0, None
    s, q1, q1b, q2 = s[:good], q1[:good], q1b[:good], q2[:good]
    lat = _fast_floats(_grid(words, s + 12, q1), _NOT_A_NUMBER)
    lon = _fast_floats(_grid(words, q1b + 1, q2), _NOT_A_NUMBER)
    ele = np.zeros(good)
    rows = np.flatnonzero(has_ele[:good])
    ele_a, ele_b = ele_a[:len(rows)], ele_b[:len(rows)]
    filled = ele_b > ele_a  # an empty <ele/> is 0, as on the lxml path
    if filled.any():
        ele[rows[filled]] = _fast_floats(_grid(words, ele_a[filled], ele_b[filled]), _BAD_ELE, blank_is_zero=True)
    return int(tag_end[ept[good - 1]]), np.column_stack((lat, lon, ele))


def _fast_allowed(head: bytes) -> bool:
    """UTF-8 or ASCII: the only encodings the fast path reads."""
    if head.startswith(codecs.BOM_UTF8):
        head = head[len(codecs.BOM_UTF8):]
    elif any(head.startswith(bom) for bom in _BOMS) or b"\x00" in head[:4]:
        return False
    match = _XML_DECL_ENCODING.match(head)
    if not match:
        return True
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name in ("utf-8", "ascii")
    except (LookupError, UnicodeError):
        return False


class _Reader:
    """Feeds the document to the pull parser and handles its events; reads fast-form segments itself."""

    def __init__(self, parser, collector: _Collector):
        self.parser, self.collector = parser, collector
        self.root = None
        self.open_segments = 0
        self.last_event: tuple[str, str] | None = None
        self.fast: bool | None = None  # unknown until the first chunk, then whether the fast path may run
        self.in_fast = False  # inside a fast-form <trkseg>, its content withheld from the parser
        self.window = _MIN_WINDOW  # bytes read at once in a fast segment: small at first, for short ones
        self.fast_segments = self.fast_points = 0
        self.pending = b""

    def drain(self) -> None:
        for event, el in self.parser.read_events():
            if self.root is None:
                self.root = _root_of(el)
            kind = _local(el)
            self.last_event = (event, kind)
            if event == "start":
                if kind == "trkseg":
                    self.open_segments += 1
                continue
            if kind == "trkseg":
                self.open_segments -= 1
                self.collector.take(el, finished=True)
            elif kind == "name":
                self.collector.name(el)
            elif kind == "trk":
                self.collector.end_track()

    def feed(self, data: bytes, final: bool = False) -> None:
        if self.fast is None:
            self.fast = _fast_allowed(data)
            body = data[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else data
            if self.fast and body.startswith(b"<?xml"):  # the declaration's "<?" is the one allowed
                cut = len(data) - len(body) + body.find(b"?>") + 2
                self.parser.feed(data[:cut])
                data = data[cut:]
        if not self.fast:
            if data:
                self.parser.feed(data)
            return
        buf = self.pending + data if self.pending else data
        pos = 0  # what is before it has been fed or read; every search starts there, so a chunk of many
        markup = -1  # short segments costs linear time (the first "<!" or "<?" from pos, once looked for)
        while self.fast and pos < len(buf):
            if self.in_fast:
                stop = min(len(buf), pos + self.window)
                end, block = _scan_points(buf[pos:stop])
                if block is not None:
                    self.collector.add(block)
                    self.fast_points += len(block)
                    pos += end
                    if 2 * end >= stop - (pos - end):  # the window was the limit: widen it
                        self.window = min(4 * self.window, _MAX_WINDOW)
                if buf[pos:pos + _STUCK_BYTES].lstrip(b" \t\r\n").startswith(_SEG_CLOSE):
                    self.in_fast = False
                elif block is not None and stop < len(buf):
                    continue  # read on from there
                elif stop < len(buf) and stop - pos < _STUCK_BYTES:
                    self.window *= 4  # too narrow to tell a point that is not in the fast form
                elif final or len(buf) - pos > _STUCK_BYTES:
                    self.in_fast = False  # not in the fast form: the rest of the segment goes to lxml
                else:
                    break  # an incomplete point: wait for more
            else:
                if markup < pos:
                    markup = _first_markup(buf, pos)
                at = buf.find(_SEG_OPEN, pos)
                if markup < len(buf) and (at < 0 or markup < at):  # a comment, CDATA or PI: lxml reads the rest
                    self.fast = False
                    break
                if at < 0:
                    cut = len(buf) if final else max(len(buf) - len(_SEG_OPEN) + 1, pos)
                    if cut > pos:
                        self.parser.feed(buf[pos:cut])
                    pos = cut
                    break
                at += len(_SEG_OPEN)
                self.parser.feed(buf[pos:at])
                pos = at
                self.drain()
                if self.fast_segments >= _TRIAL_SEGMENTS and self.fast_points < 64 * self.fast_segments:
                    self.fast = False  # short segments: a scan each costs more than lxml's reading
                    continue
                self.in_fast = self.open_segments == 1 and self.last_event == ("start", "trkseg")
                self.fast_segments += self.in_fast
                self.window = _MIN_WINDOW
        if not self.fast and pos < len(buf):  # turned off: lxml reads the rest
            self.parser.feed(buf[pos:])
            pos = len(buf)
        self.pending = buf[pos:]


def _first_markup(buf: bytes, start: int) -> int:
    """Where the first "<!" or "<?" at or after `start` is (len(buf) when none)."""
    found = [at for at in (buf.find(b"<!", start), buf.find(b"<?", start)) if at >= 0]
    return min(found) if found else len(buf)

def parse_gpx(source, max_bytes: int = MAX_BYTES, split_tracks: bool = False) -> ParsedRoute:
    """Parse the track points of a GPX document.

    `source` is bytes or a binary file-like object (read in chunks, never all at once). All `<trk>` and
    `<trkseg>` points are concatenated into one track in document order, unless `split_tracks` is true: then
    each `<trk>` with points becomes its own array. The title is the document's `<metadata><name>` when it
    has one, else the first `<name>` of the first `<trk>`,
    before any track point, stripped and cut at 255 characters; None when absent or empty.

    Raises GpxError when the document is larger than `max_bytes`, has a DOCTYPE, is empty, not XML, not
    well-formed or not a `<gpx>` document, has no track point, or has a track point whose latitude or
    longitude is missing, not a finite number or out of range (or whose elevation is not a number).
    Raises TypeError when `source` is neither bytes nor a binary file-like object.
    """
    parser = etree.XMLPullParser(
        events=("start", "end"), tag=_EVENT_TAGS, resolve_entities=False, no_network=True, huge_tree=False,
        load_dtd=False, dtd_validation=False, remove_comments=True, remove_pis=True, remove_blank_text=True,
        collect_ids=False,
    )
    collector = _Collector(split_tracks)
    reader = _Reader(parser, collector)
    tail, seen = b"", 0
    try:
        for chunk in _blocks(source, max_bytes):
            _check_chunk(chunk, seen == 0, reader.root is None, tail)
            reader.feed(chunk)
            seen += len(chunk)
            tail = (tail + chunk)[-_SCAN_OVERLAP:]
            reader.drain()
            if reader.root is not None:
                _take_open_segment(reader.root, collector)
                _prune(reader.root)
            elif seen > _ROOT_WITHIN_BYTES:
                raise GpxError(INVALID)
        if not seen:
            raise GpxError(INVALID)
        reader.feed(b"", final=True)
        reader.drain()
        root = parser.close()
    except etree.ParseError:
        raise GpxError(INVALID) from None
    if root.getroottree().docinfo.doctype:
        raise GpxError(DOCTYPE)
    if _local(root) != "gpx":
        raise GpxError(INVALID)
    tracks = collector.result()
    if not tracks:
        raise GpxError(NO_POINTS)
    return ParsedRoute(title=collector.document_name or collector.title, tracks=tracks)


def _check_chunk(chunk: bytes, first: bool, in_prolog: bool, tail: bytes) -> None:
    """Check one chunk before it is fed: the head for its encoding, the prolog for a DOCTYPE."""
    if first:
        _check_head(chunk)
    if in_prolog and _has_doctype(tail + chunk):
        raise GpxError(DOCTYPE)
