"""The map under the share page's route (trips/readmodels/pictures.py route_svg): an equirectangular projection
fitted to the route, and the imported map's layers (trips/osm/basemap.py) drawn in SVG — water, main roads, places
with their names, a scale bar. Names are floored and XML-escaped; a label overlapping one already placed is left out.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import escape

from trips.core.text import label as name_label

WATER, COAST, RIVER = "#cfe3f1", "#7fb0d3", "#9cc6e4"
ROAD_MINOR, ROAD_MAJOR, PATH = "#d8d0bf", "#e2a55a", "#e3e0d8"
LABEL = "#33414a"
MAX_LABEL = 24  # characters of a place's name, cut at a word (trips/core/text.py shorten)
# Text sizes in the 600-unit picture, for a 390 px phone, where it is drawn at about 0.6 of its size: 11.5 px and
# more. static/btp.css brings them down on wider screens, so the labels are laid out (`_places`) at their largest.
LABEL_SIZE, LABEL_MAJOR = 19.5, 21
MAJOR = ' class="major"'  # a city's or a town's name, a little larger
_CHAR_W = 5.6  # the average width of a label's character at font-size 10, for the overlap test


@dataclass(frozen=True)
class Projection:
    """x = lon·k·scale + off_x, y = −lat·scale + off_y, in a width × height picture."""

    k: float
    scale: float
    off_x: float
    off_y: float
    width: float
    height: float

    def xy(self, lat: float, lon: float) -> tuple[float, float]:
        return lon * self.k * self.scale + self.off_x, -lat * self.scale + self.off_y

    def view_box(self) -> tuple[float, float, float, float] | None:
        """The (min_lat, min_lon, max_lat, max_lon) the picture shows; None for a route that never moves."""
        if not self.scale or not self.k:
            return None
        lats = [(self.off_y - y) / self.scale for y in (0.0, self.height)]
        lons = [(x - self.off_x) / (self.k * self.scale) for x in (0.0, self.width)]
        return min(lats), min(lons), max(lats), max(lons)

    def metres_per_unit(self) -> float:
        """Ground metres per picture unit along the x axis (at the mean latitude: k = its cosine)."""
        return 111_319.49 / self.scale if self.scale else 0.0


def fit(points: Sequence[tuple[float, float]], width: float, height: float, pad: float) -> Projection:
    """The projection that fits `points` (lat, lon) in the picture, `pad` free on every side, the aspect kept and the
    picture centred. No point, or a route that never moves: scale 0 (everything lands in the middle)."""
    if not points:
        return Projection(1.0, 0.0, width / 2, height / 2, width, height)
    k = math.cos(math.radians(sum(lat for lat, _ in points) / len(points)))
    xs, ys = [lon * k for _, lon in points], [-lat for lat, _ in points]
    span_x, span_y = max(xs) - min(xs), max(ys) - min(ys)
    room_x, room_y = width - 2 * pad, height - 2 * pad
    scale = min(room_x / span_x if span_x else math.inf, room_y / span_y if span_y else math.inf)
    if scale == math.inf:
        scale = 0.0
    off_x = pad + (room_x - span_x * scale) / 2 - min(xs) * scale
    off_y = pad + (room_y - span_y * scale) / 2 - min(ys) * scale
    return Projection(k, scale, off_x, off_y, width, height)


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _path(proj: Projection, lines, closed: bool = False) -> str:
    """One SVG path's `d` for many lines ((n, 2) lat, lon arrays)."""
    parts = []
    for line in lines:
        if len(line) < 2:
            continue
        xy = [proj.xy(float(lat), float(lon)) for lat, lon in line]
        parts.append("M" + " L".join(f"{_n(x)} {_n(y)}" for x, y in xy) + (" Z" if closed else ""))
    return " ".join(parts)


def layers(base, proj: Projection) -> list[str]:
    """The SVG elements of `base` (trips/osm/basemap.py BaseMap) under the route, bottom to top, each layer with a
    class naming it (`map-water`, `map-coast`, `map-river`, `map-path`, `map-road`, `map-road-major`, `map-place`)."""
    out = []
    for cls, d, attrs in (
            ("map-water", _path(proj, base.water, closed=True), f'fill="{WATER}" stroke="{COAST}" stroke-width="0.6"'),
            ("map-coast", _path(proj, base.coastline), f'fill="none" stroke="{COAST}" stroke-width="1.4"'),
            ("map-river", _path(proj, base.rivers), f'fill="none" stroke="{RIVER}" stroke-width="1.2"'),
            ("map-path", _path(proj, base.paths), f'fill="none" stroke="{PATH}" stroke-width="0.6"'),
            ("map-road", _path(proj, [line for major, line in base.roads if not major]),
             f'fill="none" stroke="{ROAD_MINOR}" stroke-width="1.1"'),
            ("map-road-major", _path(proj, [line for major, line in base.roads if major]),
             f'fill="none" stroke="{ROAD_MAJOR}" stroke-width="1.6"')):
        if d:
            out.append(f'<path class="{cls}" d="{d}" {attrs} stroke-linejoin="round" stroke-linecap="round"/>')
    out.extend(_places(base.places, proj))
    return out


def _places(places, proj: Projection) -> list[str]:
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for name, rank, lat, lon in places:
        x, y = proj.xy(lat, lon)
        if not (0 <= x <= proj.width and 0 <= y <= proj.height):
            continue
        major = rank <= 2
        size = LABEL_MAJOR if major else LABEL_SIZE
        text = name_label(str(name), MAX_LABEL)
        if not text:
            continue
        w = len(text) * _CHAR_W * size / 10
        box = (x + 4, y - size, x + 4 + w, y + 3)
        if box[2] > proj.width:  # no room on the right: the label goes to the left of its dot
            box = (x - 4 - w, y - size, x - 4, y + 3)
        if box[0] < 0 or any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in placed):
            continue
        placed.append(box)
        out.append(f'<g class="map-place"><circle cx="{_n(x)}" cy="{_n(y)}" r="{2.5 if rank <= 2 else 1.8}" '
                   f'fill="{LABEL}"/><text{MAJOR if major else ""} x="{_n(box[0])}" y="{_n(y + 3)}" '
                   f'font-size="{size}" fill="{LABEL}" '
                   f'stroke="#ffffff" stroke-width="2.5" paint-order="stroke" stroke-linejoin="round">'
                   f'{escape(text)}</text></g>')
    return out


def nice_km(most_km: float) -> float:
    """The longest 1, 2 or 5 × 10ⁿ km not above `most_km` (> 0)."""
    base = 10 ** math.floor(math.log10(most_km))
    return next(m * base for m in (5, 2, 1) if m * base <= most_km)


def scale_bar(proj: Projection, label, avoid: Sequence[tuple[float, float]] = ()) -> str:
    """A bar of a round length (about a fifth of the picture's width) in a bottom corner, the left one unless more
    of the `avoid` points (the route as drawn) fall there; `label(km)` writes its length in the page's language.
    Empty for a route that never moves."""
    per_unit = proj.metres_per_unit()
    if per_unit <= 0:
        return ""
    km = nice_km(proj.width / 5 * per_unit / 1000)
    length = km * 1000 / per_unit
    y = proj.height - 12.0
    corners = (12.0, proj.width - 12.0 - length)
    x = min(corners, key=lambda left: sum(1 for px, py in avoid if left - 12 <= px <= left + length + 12
                                          and py >= y - 38))
    return (f'<g class="map-scale"><rect x="{_n(x - 4)}" y="{_n(y - 26)}" width="{_n(length + 8)}" height="32" '
            f'fill="#ffffff" fill-opacity="0.8"/><path d="M{_n(x)} {_n(y - 4)} V{_n(y)} H{_n(x + length)} '
            f'V{_n(y - 4)}" fill="none" stroke="#1d2a33" stroke-width="1.5"/><text x="{_n(x + length / 2)}" '
            f'y="{_n(y - 6)}" font-size="{LABEL_SIZE}" text-anchor="middle" fill="#1d2a33">{escape(label(km))}</text>'
            '</g>')

