"""Pictures for the share page, drawn on the server as inline SVG (no tile server, no JavaScript): the route by day,
elevation profiles, a day's weather icon and wind arrow.

Colours are SVG presentation attributes, which the page's CSP (no inline `style=`) does not govern; every SVG has a
viewBox and no size, so it scales. Every string drawn passes the text floor and is XML-escaped. Nothing raises on
an empty, one-point or flat day: it draws less.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

from trips.core import i18n
from trips.core.text import floor
from trips.readmodels import mapsvg, words
from trips.route import profile

# Okabe and Ito's colour-blind-safe palette without its yellow (too pale on white), cycling past seven days.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
MAX_POINTS = 300  # per day: more than the picture's width can show
# A whole trip shares a budget, so a long trip draws no more than a short one; a day keeps at least MIN_POINTS so
# its bends still show.
ROUTE_BUDGET, PROFILE_BUDGET, MIN_POINTS = 2400, 1200, 40
ROUTE_W, ROUTE_PAD = 600, 24
PROFILE_W, PROFILE_H = 400, 150
PLOT = {"left": 58, "right": 14, "top": 14, "bottom": 30}  # the profile's margins for the axis labels
KM = "\u00a0km"  # the unit after a number, kept on its line
_COMPASS = {"N": 0, "NNE": 22.5, "NE": 45, "ENE": 67.5, "E": 90, "ESE": 112.5, "SE": 135, "SSE": 157.5,
            "S": 180, "SSW": 202.5, "SSO": 202.5, "SW": 225, "SO": 225, "WSW": 247.5, "OSO": 247.5,
            "W": 270, "O": 270, "WNW": 292.5, "ONO": 292.5, "NW": 315, "NO": 315, "NNW": 337.5, "NNO": 337.5}
# With only the relative word (docs/RULES.md "Relative wind"): the wind's origin's angle from the direction of travel.
_RELATIVE = {"headwind": 0.0, "crosswind": 90.0, "tailwind": 180.0}


def colour(index: int) -> str:
    """The colour of the day at 0-based `index`; the palette cycles."""
    return PALETTE[index % len(PALETTE)]


def downsample(points: Sequence, limit: int = MAX_POINTS) -> list:
    """At most `limit` (≥ 2) points, evenly spaced by index, the first and the last always kept."""
    points = list(points)
    if len(points) <= limit:
        return points
    step = (len(points) - 1) / (limit - 1)
    return [points[round(i * step)] for i in range(limit)]


def _text(value) -> Markup:
    return escape(floor(str(value)))


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _lat_lon(geometry) -> list[tuple[float, float]]:
    return [(float(p[0]), float(p[1])) for p in geometry or [] if len(p) >= 2]


def project(days: Sequence[Sequence[tuple[float, float]]], width: float, height: float,
            pad: float) -> list[list[tuple[float, float]]]:
    """Each day's (lat, lon) points as (x, y) in a `width`×`height` box, `pad` kept free on every side, the
    aspect kept (x scaled by cos of the mean latitude) and the picture centred (trips/readmodels/mapsvg.py fit). A
    single point (or a trip that never moves) lands in the middle."""
    proj = mapsvg.fit([p for day in days for p in day], width, height, pad)
    return [[proj.xy(lat, lon) for lat, lon in day] for day in days]


def route_height(days: Sequence[Sequence[tuple[float, float]]]) -> int:
    """The viewBox height for the route: its aspect, kept between a wide strip and a square."""
    flat = [p for day in days for p in day]
    if len(flat) < 2:
        return ROUTE_W // 2
    k = math.cos(math.radians(sum(lat for lat, _ in flat) / len(flat)))
    span_x = (max(lon for _, lon in flat) - min(lon for _, lon in flat)) * k
    span_y = max(lat for lat, _ in flat) - min(lat for lat, _ in flat)
    ratio = span_y / span_x if span_x else 1.0
    return int(min(ROUTE_W, max(ROUTE_W * 0.45, (ROUTE_W - 2 * ROUTE_PAD) * ratio + 2 * ROUTE_PAD)))


def route_view(days: Sequence[dict]) -> tuple[list, mapsvg.Projection]:
    """The route's lines as drawn (each day's points thinned to its share of the budget) and the projection that
    fits them in the picture; its `view_box()` is what a map under the route must cover."""
    per_day = max(MIN_POINTS, min(MAX_POINTS, ROUTE_BUDGET // max(len(days), 1)))
    lines = [downsample(_lat_lon(d.get("geometry")), per_day) for d in days]
    return lines, mapsvg.fit([p for day in lines for p in day], ROUTE_W, route_height(lines), ROUTE_PAD)


def route_svg(days: Sequence[dict], title: str = "The route", base=None, scale_label=None) -> Markup:
    """The route outline: `days` = [{"number": int, "geometry": [[lat, lon, ele?], …], "straight"?: [[(lat, lon),
    …], …]}, …] in order; each day in its colour (by position), its stretches joined straight dashed, a numbered
    disc at its end, a ring at the trip's start. Days without two
    points (rest days) draw nothing. Empty Markup when no day has a point. Under it, `base` (trips/osm/basemap.py
    BaseMap of route_view's view box) when given, and a scale bar when `scale_label(km)` writes its length."""
    lines, proj = route_view(days)
    if not any(lines):
        return Markup("")
    height = int(proj.height)
    projected = [[proj.xy(lat, lon) for lat, lon in day] for day in lines]
    parts = [f'<svg class="route" viewBox="0 0 {ROUTE_W} {height}" role="img" aria-labelledby="route-title" '
             f'xmlns="http://www.w3.org/2000/svg"><title id="route-title">{_text(title)}</title>',
             f'<rect width="{ROUTE_W}" height="{height}" fill="#f4f7f8"/>']
    if base is not None:
        parts.extend(mapsvg.layers(base, proj))
    for i, pts in enumerate(projected):
        if len(pts) >= 2:
            coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in pts)
            parts.append(f'<polyline points="{coords}" fill="none" stroke="#ffffff" stroke-width="7" '
                         f'stroke-linejoin="round" stroke-linecap="round"/>'
                         f'<polyline class="day-line" points="{coords}" fill="none" stroke="{colour(i)}" '
                         f'stroke-width="4" stroke-linejoin="round" stroke-linecap="round"/>')
            for join in days[i].get("straight") or []:  # joined straight, no road found: dashed over the line
                coords = " ".join(f"{_n(x)},{_n(y)}" for x, y in (proj.xy(lat, lon) for lat, lon in join))
                parts.append(f'<g class="day-straight"><polyline points="{coords}" fill="none" stroke="#ffffff" '
                             f'stroke-width="5"/><polyline points="{coords}" fill="none" stroke="{colour(i)}" '
                             f'stroke-width="4" stroke-dasharray="7 5"/></g>')
    first = next(pts for pts in projected if pts)
    parts.append(f'<circle class="trip-start" cx="{_n(first[0][0])}" cy="{_n(first[0][1])}" r="10" fill="#ffffff" '
                 f'stroke="#1d2a33" stroke-width="3"/>')
    for i, (day, pts) in enumerate(zip(days, projected)):  # sized for a phone as the map's labels (mapsvg.py)
        if len(pts) >= 2:
            x, y = pts[-1]
            parts.append(f'<g class="day-end"><circle cx="{_n(x)}" cy="{_n(y)}" r="16" fill="{colour(i)}" '
                         f'stroke="#ffffff" stroke-width="2"/><text x="{_n(x)}" y="{_n(y)}" dominant-baseline="central" '
                         f'text-anchor="middle" font-size="{mapsvg.LABEL_SIZE}" font-weight="700" fill="#ffffff">'
                         f'{_text(day.get("number", i + 1))}</text></g>')
    if scale_label is not None:
        parts.append(mapsvg.scale_bar(proj, scale_label, [p for day in projected for p in day]))
    parts.append("</svg>")
    return Markup("".join(parts))


def distance_profile(geometry, start_km: float = 0.0) -> list[tuple[float, float]]:
    """[(km from the start, elevation m)] of a geometry [[lat, lon, ele], …] (trips/route/profile.py `along`);
    points without an elevation are skipped (their distance still counts)."""
    km, ele = profile.along(geometry)
    return [(start_km + float(k), float(e)) for k, e in zip(km, ele) if math.isfinite(e)]


def nice_step(span: float, most: int = 6) -> float:
    """The smallest 1, 2 or 5 × 10ⁿ step giving at most `most` intervals over `span` (> 0)."""
    if span <= 0:
        return 1.0
    base = 10 ** math.floor(math.log10(span / most))
    return next(m * base for m in (1, 2, 5, 10) if span / (m * base) <= most)


def _plain_number(value: float, digits: int) -> str:
    return _n(value) if digits else str(round(value))


def profile_svg(segments: Sequence[Sequence[tuple[float, float]]], title: str = "Elevation profile",
                colours: Sequence[str] | None = None, marks: tuple[str, str] = ("max", "min"),
                number=_plain_number) -> Markup:
    """An elevation profile: `segments` = one [(km, m), …] series per day (km cumulative over the picture),
    each filled in its colour (`colours`, else the palette); x axis in km, y axis in m, the lowest and the
    highest points marked, named by `marks` (the reader's words for max and min); `number(value, digits)` writes
    the numbers as the reader's language does (trips/core/i18n.py number). Empty Markup with fewer than two points
    in all."""
    per_day = max(MIN_POINTS, min(MAX_POINTS, PROFILE_BUDGET // max(len(segments), 1)))
    series = [downsample(s, per_day) for s in segments]
    flat = [p for s in series for p in s]
    if len(flat) < 2:
        return Markup("")
    colours = colours or [colour(i) for i in range(len(series))]
    x0, x1 = min(k for k, _ in flat), max(k for k, _ in flat)
    lo, hi = min(e for _, e in flat), max(e for _, e in flat)
    room = 0.15 * max(hi - lo, 50.0)  # headroom for the max and min labels, above and below their points
    e_step = nice_step(max(hi - lo, 50.0) + 2 * room, 4)
    e_lo, e_hi = math.floor((lo - room) / e_step) * e_step, math.ceil((hi + room) / e_step) * e_step
    if lo >= 0 > e_lo:  # a route at sea level keeps 0 m as its floor
        e_lo = 0.0
    if e_hi - e_lo < e_step:
        e_hi = e_lo + e_step
    left, top = PLOT["left"], PLOT["top"]
    w, h = PROFILE_W - left - PLOT["right"], PROFILE_H - top - PLOT["bottom"]
    span = (x1 - x0) or 1.0

    def sx(km: float) -> float:
        return left + (km - x0) / span * w

    def sy(m: float) -> float:
        return top + (e_hi - m) / (e_hi - e_lo) * h

    base = top + h
    parts = [f'<svg class="profile" viewBox="0 0 {PROFILE_W} {PROFILE_H}" role="img" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{_text(title)}</title>']
    grid = e_lo
    while grid <= e_hi + 1e-9:  # horizontal grid lines, labelled in m
        y = sy(grid)
        parts.append(f'<line x1="{left}" x2="{left + w}" y1="{_n(y)}" y2="{_n(y)}" stroke="#dde4e8"/>'
                     f'<text x="{left - 6}" y="{_n(y + 5)}" text-anchor="end" font-size="14" fill="#5b6b76">'
                     f'{_text(number(grid, 0))}\u00a0m</text>')
        grid += e_step
    k_step = nice_step(span, 4)
    ticks = [math.ceil(x0 / k_step) * k_step + i * k_step for i in range(int(span / k_step) + 2)]
    ticks = [t for t in ticks if t <= x1 + 1e-9]
    for i, tick in enumerate(ticks):  # x ticks in km, the unit written once, after the last
        x = sx(tick)
        last = i == len(ticks) - 1
        anchor = "end" if x > left + w - 24 else "start" if x < left + 12 else "middle"
        parts.append(f'<line x1="{_n(x)}" x2="{_n(x)}" y1="{base}" y2="{base + 5}" stroke="#5b6b76"/>'
                     f'<text x="{_n(x)}" y="{base + 20}" text-anchor="{anchor}" font-size="14" fill="#5b6b76">'
                     f'{_text(number(tick, 1))}{KM if last else ""}</text>')
    for s, fill in zip(series, colours):
        if len(s) < 2:
            continue
        line = " ".join(f"{_n(sx(k))},{_n(sy(e))}" for k, e in s)
        parts.append(f'<polygon class="area" points="{_n(sx(s[0][0]))},{base} {line} {_n(sx(s[-1][0]))},{base}" '
                     f'fill="{fill}" fill-opacity="0.25"/><polyline points="{line}" fill="none" '
                     f'stroke="{fill}" stroke-width="2" stroke-linejoin="round"/>')
    parts.append(f'<line x1="{left}" x2="{left + w}" y1="{base}" y2="{base}" stroke="#5b6b76"/>')
    for (km, m), word, top_mark in ((max(flat, key=lambda p: p[1]), marks[0], True),
                                    (min(flat, key=lambda p: p[1]), marks[1], False)):
        x, y = sx(km), sy(m)
        anchor = "start" if x < left + w * 0.7 else "end"
        dx = 6 if anchor == "start" else -6
        dy = -7 if top_mark or y > base - 18 else 18  # a low minimum is named above its point
        # The white halo is a text of its own under the label: a renderer that ignores paint-order would paint a
        # stroke drawn on the label itself over its letters.
        label = f"{_text(word)} {_text(number(m, 0))}\u00a0m"
        at = (f'x="{_n(x + dx)}" y="{_n(min(max(y + dy, top + 12), base - 4))}" text-anchor="{anchor}" '
              'font-size="14" font-weight="700"')
        parts.append(f'<circle class="extreme" cx="{_n(x)}" cy="{_n(y)}" r="3.5" fill="#1d2a33"/>'
                     f'<text {at} fill="#ffffff" stroke="#ffffff" stroke-width="4" stroke-linejoin="round" '
                     f'aria-hidden="true">{label}</text><text class="extreme-label" {at} fill="#1d2a33">{label}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


# The weather icons, drawn in a 48×48 box. WMO codes and OpenWeather-style icon names (docs/RULES.md "Weather").
_CLOUD = ('<g fill="{fill}"><circle cx="19" cy="27" r="8"/><circle cx="29" cy="23" r="10"/>'
          '<circle cx="37" cy="30" r="6"/><rect x="11" y="27" width="32" height="9" rx="4.5"/></g>')
_SUN = ('<g stroke="#E69F00" stroke-width="3" stroke-linecap="round">{rays}</g>'
        '<circle cx="{c}" cy="{c}" r="{r}" fill="#E69F00"/>')


def _sun(c: float, r: float) -> str:
    rays = "".join(f'<line x1="{_n(c + (r + 4) * math.cos(a))}" y1="{_n(c + (r + 4) * math.sin(a))}" '
                   f'x2="{_n(c + (r + 8) * math.cos(a))}" y2="{_n(c + (r + 8) * math.sin(a))}"/>'
                   for a in (i * math.pi / 4 for i in range(8)))
    return _SUN.format(rays=rays, c=c, r=r)


_ICONS = {
    "sun": _sun(24, 9),
    "partly": _sun(17, 6.5) + _CLOUD.format(fill="#9aa7b0").replace('<g ', '<g transform="translate(2 4)" ', 1),
    "cloud": _CLOUD.format(fill="#9aa7b0"),
    "rain": _CLOUD.format(fill="#8493a0") + '<g stroke="#0072B2" stroke-width="3" '
            'stroke-linecap="round"><line x1="18" y1="39" x2="15" y2="45"/><line x1="26" y1="39" x2="23" '
            'y2="45"/><line x1="34" y1="39" x2="31" y2="45"/></g>',
    "snow": _CLOUD.format(fill="#9aa7b0") + '<g fill="#56B4E9"><circle cx="17" cy="42" r="2.5"/>'
            '<circle cx="25" cy="44" r="2.5"/><circle cx="33" cy="42" r="2.5"/></g>',
    "storm": '<g transform="translate(0 -6)">' + _CLOUD.format(fill="#5b6b76") + '</g>'
             '<polygon points="26,25 14,39 22,39 17,48 34,33 26,33 30,25" '
             'fill="#E69F00" stroke="#ffffff" stroke-width="1"/>',
    "fog": '<g stroke="#8493a0" stroke-width="3.5" stroke-linecap="round"><line x1="8" y1="16" x2="40" y2="16"/>'
           '<line x1="12" y1="24" x2="36" y2="24"/><line x1="8" y1="32" x2="40" y2="32"/>'
           '<line x1="14" y1="40" x2="34" y2="40"/></g>',
}
_BY_ICON = {"01": "sun", "02": "partly", "03": "partly", "04": "cloud", "09": "rain", "10": "rain",
            "11": "storm", "13": "snow", "50": "fog"}
_BY_WORD = {"clear": "sun", "sun": "sun", "sunny": "sun", "partly": "partly", "cloud": "cloud",
            "overcast": "cloud", "drizzle": "rain", "rain": "rain", "shower": "rain", "snow": "snow",
            "thunder": "storm", "storm": "storm", "fog": "fog", "mist": "fog"}


def weather_kind(forecast: dict) -> str | None:
    """sun | partly | cloud | rain | snow | storm | fog from the forecast's WMO weatherCode, else its icon
    ("10d"), else a word of its icon or description; None when nothing says, or for a code outside the WMO table:
    no picture of weather nobody forecast."""
    code = forecast.get("weatherCode")
    if isinstance(code, int) and not isinstance(code, bool):
        for codes, kind in (((0,), "sun"), ((1, 2), "partly"), ((3,), "cloud"), ((45, 48), "fog"),
                            (range(51, 68), "rain"), (range(80, 83), "rain"), (range(71, 78), "snow"),
                            ((85, 86), "snow"), (range(95, 100), "storm")):
            if code in codes:
                return kind
        return None
    icon = str(forecast.get("icon") or "").strip().lower()
    if icon[:2] in _BY_ICON and icon[:2].isdigit():
        return _BY_ICON[icon[:2]]
    words = f"{icon} {str(forecast.get('description') or '').lower()}"
    return next((kind for word, kind in _BY_WORD.items() if word in words), None)


def weather_icon_svg(kind: str | None, label: str = "") -> Markup:
    """The icon of a `weather_kind`, titled `label` (floored); empty Markup for an unknown kind."""
    if kind not in _ICONS:
        return Markup("")
    return Markup(f'<svg class="weather-icon" viewBox="0 0 48 48" role="img" xmlns="http://www.w3.org/2000/svg">'
                  f'<title>{_text(label or kind)}</title>{_ICONS[kind]}</svg>')


def bearing(start: tuple[float, float], end: tuple[float, float]) -> float | None:
    """The initial bearing start → end in degrees [0, 360) (docs/RULES.md "Relative wind"); None when they coincide."""
    (la1, lo1), (la2, lo2) = start, end
    if abs(la2 - la1) + abs(lo2 - lo1) < 1e-6:
        return None
    p1, p2, dl = math.radians(la1), math.radians(la2), math.radians(lo2 - lo1)
    theta = math.atan2(math.sin(dl) * math.cos(p2), math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) *
                       math.cos(dl))
    return math.degrees(theta) % 360


def wind_from(forecast: dict) -> float | None:
    """The direction the wind comes from, degrees: windDirectionDeg, else the compass word (N…NO, N…NW)."""
    deg = forecast.get("windDirectionDeg")
    if isinstance(deg, (int, float)) and not isinstance(deg, bool) and math.isfinite(deg):
        return float(deg) % 360
    return _COMPASS.get(str(forecast.get("windDirection") or "").strip().upper())


def relative_wind(forecast: dict, travel: float | None) -> float | None:
    """Where the wind comes from, degrees clockwise from the direction of travel (0 = head-on): the wind's
    direction against the day's bearing, else the forecast's relativeWindDirection word (a crosswind then
    drawn from the right: the word does not say which side); None when neither is known."""
    origin = wind_from(forecast)
    if origin is not None and travel is not None:
        return (origin - travel) % 360
    return _RELATIVE.get(str(forecast.get("relativeWindDirection") or "").lower())


def wind_svg(relative: float | None, label: str = "") -> Markup:
    """A ring with the direction of travel as a grey chevron at the top and the wind as an arrow pointing
    where it blows (a headwind points down, at the rider); empty Markup when `relative` is None."""
    if relative is None:
        return Markup("")
    towards = (relative + 180) % 360
    return Markup(
        f'<svg class="wind" viewBox="0 0 48 48" role="img" xmlns="http://www.w3.org/2000/svg">'
        f'<title>{_text(label or "wind")}</title>'
        f'<circle cx="24" cy="24" r="21" fill="none" stroke="#dde4e8" stroke-width="2"/>'
        f'<polygon points="24,1 19,8 29,8" fill="#5b6b76"/>'
        f'<g transform="rotate({_n(towards)} 24 24)" fill="#0072B2" stroke="#0072B2">'
        f'<line x1="24" y1="38" x2="24" y2="17" stroke-width="4" stroke-linecap="round"/>'
        f'<polygon points="24,9 16,20 32,20" stroke-width="1"/></g></svg>')


# The page words (trips/readmodels/words.py) of the wind relative to the direction of travel, "" for none.
_WIND_WORDS = {"headwind": "wind.headwind", "tailwind": "wind.tailwind", "crosswind": "wind.crosswind",
               "": "wind.wind"}


def day_weather(forecast: dict | None, start: tuple[float, float], end: tuple[float, float],
                locale: str | None = None) -> dict | None:
    """What the page shows of a day's forecast (stage.enrichment["weather"]): {icon, wind (Markup), kind,
    description, tempMin, tempMax, windSpeed, windGusts, precipitationProbability, relative, relativeText};
    None without a forecast (nothing is drawn: no forecast is never shown as fair weather). The words are in
    `locale` (English by default): the description is the WMO code's word, `relative` stays the English class
    name (headwind | tailwind | crosswind | "") and `relativeText` is its word."""
    if not isinstance(forecast, dict) or not forecast:
        return None
    kind = weather_kind(forecast)
    said = forecast.get("weatherCode") is not None or forecast.get("description")
    description = floor(words.describe(forecast, locale) if said else kind or "")
    relative = relative_wind(forecast, bearing(start, end))
    word = str(forecast.get("relativeWindDirection") or "").lower()
    if word not in _RELATIVE and relative is not None:
        fold = min(relative, 360 - relative)
        word = "headwind" if fold <= 60 else "tailwind" if fold >= 120 else "crosswind"
    word = word if word in _RELATIVE else ""

    def number(key):
        value = forecast.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    text = i18n.t(_WIND_WORDS[word], locale)
    return {"icon": weather_icon_svg(kind, description), "wind": wind_svg(relative, text),
            "kind": kind, "description": description, "relative": word,
            "relativeText": text if word else "",
            **{key: number(key) for key in ("tempMin", "tempMax", "windSpeed", "windGusts",
                                            "precipitationProbability")}}
