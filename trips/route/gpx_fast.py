"""The fast path of the GPX parser (trips/route/gpx.py): segments in the plain form most exporters write are read
from the bytes with numpy, and `Reader` feeds everything else to lxml's pull parser."""
from __future__ import annotations

import codecs
import re

import numpy as np

from trips.route.gpx_points import BAD_ELE, NOT_A_NUMBER, Collector, local_name, root_of, to_floats

BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
XML_DECL_ENCODING = re.compile(rb"\A\s*<\?xml[^>]*?\bencoding\s*=\s*[\"']([^\"']{0,64})[\"']", re.IGNORECASE)


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
    codes = arr[low]
    control = low[(codes != 10) & (codes != 9) & (codes != 13)]
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


def _fast_floats(grid: np.ndarray, message: str, blank_is_missing: bool = False) -> np.ndarray:
    """Convert the rows of a byte grid. numpy reads a bytes item as float() does (checked on every
    printable ASCII form in tests); on any failure (or a NaN among elevations) the lxml path's conversion
    gives its outcome and message."""
    strings = np.ascontiguousarray(grid).view(f"S{grid.shape[1]}").ravel()
    try:
        out = strings.astype(np.float64)
        if not (blank_is_missing and np.isnan(out).any()):
            return out
    except ValueError:
        pass
    return to_floats([s.decode("ascii") for s in strings.tolist()], message, blank_is_missing)


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
    lat = _fast_floats(_grid(words, s + 12, q1), NOT_A_NUMBER)
    lon = _fast_floats(_grid(words, q1b + 1, q2), NOT_A_NUMBER)
    ele = np.full(good, np.nan)  # no <ele>: unknown (docs/RULES.md "Elevation")
    rows = np.flatnonzero(has_ele[:good])
    ele_a, ele_b = ele_a[:len(rows)], ele_b[:len(rows)]
    filled = ele_b > ele_a  # an empty <ele/> is unknown, as on the lxml path
    if filled.any():
        ele[rows[filled]] = _fast_floats(_grid(words, ele_a[filled], ele_b[filled]), BAD_ELE, blank_is_missing=True)
    return int(tag_end[ept[good - 1]]), np.column_stack((lat, lon, ele))


def _fast_allowed(head: bytes) -> bool:
    """UTF-8 or ASCII: the only encodings the fast path reads."""
    if head.startswith(codecs.BOM_UTF8):
        head = head[len(codecs.BOM_UTF8):]
    elif any(head.startswith(bom) for bom in BOMS) or b"\x00" in head[:4]:
        return False
    match = XML_DECL_ENCODING.match(head)
    if not match:
        return True
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name in ("utf-8", "ascii")
    except (LookupError, UnicodeError):
        return False


class Reader:
    """Feeds the document to the pull parser and handles its events. A `<trkseg>` in the fast form (points
    `<trkpt lat="N" lon="N">` with an optional `<ele>` then `<time>`, ASCII text between, no reference or other
    markup) is read by `_scan_points` and withheld from the parser, which sees `<trkseg></trkseg>`: the cut bytes
    are complete elements, so the document is well-formed exactly when what lxml sees is, and the points are the
    ones lxml would read. Only in UTF-8 or ASCII documents with no comment, CDATA or processing instruction past
    the XML declaration; a point not in the form sends the rest of its segment to lxml."""

    def __init__(self, parser, collector: Collector):
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
                self.root = root_of(el)
            kind = local_name(el)
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
