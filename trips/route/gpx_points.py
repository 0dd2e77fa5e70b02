"""The track points of a GPX document as lxml reads them (trips/route/gpx.py): each <trkseg>'s finished points in
bulk with XPath, checked, then pruned from the tree; and the refusal every part of the parser raises."""
from __future__ import annotations

import numpy as np
from lxml import etree

from trips.core.text import shorten
from trips.errors import Msg, N_, as_msg

TITLE_MAX_CHARS = 255
INVALID = N_("gpx.invalid")
DOCTYPE = N_("gpx.doctype")
NO_POINTS = N_("gpx.no_points")
NOT_A_NUMBER = N_("gpx.not_a_number")
BAD_ELE = N_("gpx.bad_elevation")
_MISSING = N_("gpx.missing_coordinates")


class GpxError(ValueError):
    """A GPX upload was refused. `message` (a Msg, or a key) is safe to show to the user: it never quotes the
    file."""

    def __init__(self, message: str | Msg):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return str(as_msg(self.message))  # English: logs



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


def to_floats(values: list[str], message: str, blank_is_missing: bool = False) -> np.ndarray:
    """Convert numeric strings in bulk; raise GpxError(message) when one is not a number. With
    `blank_is_missing` (elevations), a blank text is NaN (unknown, docs/RULES.md "Elevation") and a text
    reading as NaN is refused like any other non-number."""
    try:
        out = np.array(values, dtype=np.float64)
    except ValueError:
        out = np.empty(len(values))
        for i, text in enumerate(values):
            try:
                out[i] = float(text)
            except ValueError:
                if not (blank_is_missing and not text.strip()):
                    raise GpxError(message) from None
                out[i] = np.nan
                continue
            if blank_is_missing and np.isnan(out[i]):
                raise GpxError(message)
        return out
    if blank_is_missing and np.isnan(out).any():
        raise GpxError(message)
    return out


def _first_ele_text(point, ele_tag: str) -> str | None:
    for child in point:
        if child.tag == ele_tag:
            return child.text
    return None


def _elevations(seg, xp: dict, n: int, open_last: bool) -> np.ndarray:
    """Elevations of the first `n` points of `seg` (NaN where missing or blank); `open_last` tells that the
    last point (possibly incomplete) is excluded."""
    texts = xp["ele"](seg)
    extra = 1 if open_last and _first_ele_text(seg[-1], xp["ele_tag"]) is not None else 0
    if len(texts) != n + extra:  # some points lack an <ele> text: one by one
        if not xp["n_ele"](seg):
            return np.full(n, np.nan)
        texts = [_first_ele_text(pt, xp["ele_tag"]) or "" for pt in seg.iterchildren(xp["trkpt_tag"])]
    return to_floats(texts[:n], BAD_ELE, blank_is_missing=True)


class Collector:
    """Accumulates track points, a <trkseg> at a time, and the title."""

    def __init__(self, split_tracks: bool):
        self.split_tracks = split_tracks
        self.tracks: list[_Points] = []
        self.title: str | None = None
        self.title_done = False
        self.document_name: str | None = None  # <metadata><name> (GPX 1.1): the whole document's name
        self._new_track = True

    def name(self, el) -> None:
        parent = local_name(el.getparent())
        if not self.title_done and parent == "trk":
            self.title = shorten("".join(el.itertext()).strip(), TITLE_MAX_CHARS) or None
            self.title_done = True
        elif parent == "metadata" and self.document_name is None:
            self.document_name = shorten("".join(el.itertext()).strip(), TITLE_MAX_CHARS) or None

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
            self.add(np.column_stack((to_floats(lat[:n], NOT_A_NUMBER), to_floats(lon[:n], NOT_A_NUMBER),
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
        raise GpxError(NOT_A_NUMBER)
    if np.isinf(block[:, 2]).any():  # NaN is a missing elevation (a text reading NaN was refused already)
        raise GpxError(BAD_ELE)
    if (np.abs(block[:, 0]) > 90).any():
        raise GpxError(N_("gpx.latitude_range"))
    if (np.abs(block[:, 1]) > 180).any():
        raise GpxError(N_("gpx.longitude_range"))


def local_name(el) -> str:
    tag = el.tag if el is not None else None
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2]


def root_of(el):
    """The document's root, checked: no DOCTYPE, and a <gpx> element."""
    tree = el.getroottree()
    if tree.docinfo.doctype:
        raise GpxError(DOCTYPE)
    root = tree.getroot()
    if local_name(root) != "gpx":
        raise GpxError(INVALID)
    return root


def take_open_segment(root, collector: Collector) -> None:
    """Read the finished points of the <trkseg> still open at the end of a chunk, if any."""
    node = root
    while len(node):
        node = node[-1]
        if local_name(node) == "trkseg":
            collector.take(node, finished=False)
            return


def prune(root) -> None:
    """Drop finished elements: all but the last child of each element on the open path. The open <trkseg>
    keeps its points (`take` drops them once read), and an open track point keeps its first <ele>."""
    node, in_point = root, False
    while len(node):
        kind = local_name(node)
        if kind == "trkseg":
            node, in_point = node[-1], True
            continue
        if len(node) > 1:
            if in_point and kind == "trkpt":
                kept_ele = False
                for child in node[:-1]:
                    if local_name(child) == "ele" and not kept_ele:
                        kept_ele = True
                    else:
                        node.remove(child)
            else:
                del node[:-1]
        node = node[-1]
