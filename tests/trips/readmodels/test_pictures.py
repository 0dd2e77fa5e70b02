"""The share page's drawings (trips/readmodels/pictures.py): projection, colours, profile scaling, weather
icons and wind, degenerate days, hostile text, well-formed SVG."""
import math
import re

import pytest
from lxml import etree

from trips.readmodels import pictures

SVG = "{http://www.w3.org/2000/svg}"


def parse(markup) -> etree._Element:
    """The markup as XML (raises on anything not well formed)."""
    return etree.fromstring(str(markup).encode())


def line(n: int, start=(45.0, 5.0), step=(0.01, 0.02), ele=200.0, climb=1.0) -> list:
    return [[start[0] + i * step[0], start[1] + i * step[1], ele + i * climb] for i in range(n)]


def coords(polyline) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in polyline.get("points").split()]


def test_the_projection_fits_the_box_keeps_the_aspect_and_centres():
    days = [[(45.0, 5.0), (45.5, 5.5)], [(45.5, 5.5), (46.0, 7.0)]]
    out = pictures.project(days, 600, 400, 20)
    xs = [x for d in out for x, _ in d]
    ys = [y for d in out for _, y in d]
    assert min(xs) >= 20 - 1e-9 and max(xs) <= 580 + 1e-9 and min(ys) >= 20 - 1e-9 and max(ys) <= 380 + 1e-9
    assert math.isclose(min(ys), 20) and math.isclose(max(ys), 380)  # the taller side fills the room
    assert math.isclose((min(xs) + max(xs)) / 2, 300)  # the other is centred
    wide = pictures.project([[(45.0, 5.0), (45.1, 8.0)]], 600, 400, 20)[0]
    assert math.isclose(wide[0][0], 20) and math.isclose(wide[1][0], 580)
    assert math.isclose((wide[0][1] + wide[1][1]) / 2, 200)
    assert out[0][1][1] < out[0][0][1]  # north is up
    k = math.cos(math.radians(45.5))  # mean latitude of the four points
    assert math.isclose((max(ys) - min(ys)) / (max(xs) - min(xs)), 1.0 / (2.0 * k), rel_tol=1e-9)


def test_a_single_point_or_nothing_lands_without_crashing():
    assert pictures.project([[(45.0, 5.0)]], 600, 400, 20) == [[(300.0, 200.0)]]
    assert pictures.project([[], []], 600, 400, 20) == [[], []]
    assert pictures.route_svg([]) == "" and pictures.route_svg([{"number": 1, "geometry": []}]) == ""
    one = parse(pictures.route_svg([{"number": 1, "geometry": [[45.0, 5.0, 100.0]]}]))
    assert one.findall(f"{SVG}polyline") == []  # a one-point day draws no line and no end marker
    assert pictures.profile_svg([[]]) == "" and pictures.profile_svg([[(0.0, 100.0)]]) == ""
    flat = parse(pictures.profile_svg([[(0.0, 300.0), (10.0, 300.0)]]))  # a flat day still has an axis
    assert flat.find(f"{SVG}polygon") is not None
    assert pictures.distance_profile([[45.0, 5.0]]) == []  # no elevation: nothing to draw


def test_each_day_has_its_colour_and_the_palette_cycles():
    days = [{"number": i + 1, "geometry": line(20, start=(45.0 + 0.2 * i, 5.0))} for i in range(9)]
    svg = parse(pictures.route_svg(days))
    strokes = [p.get("stroke") for p in svg.iter(f"{SVG}polyline") if p.get("class") == "day-line"]
    assert strokes == [pictures.colour(i) for i in range(9)]
    assert strokes[:7] == list(pictures.PALETTE) and strokes[7] == strokes[0]  # 7 colours, then again
    assert len(set(pictures.PALETTE)) == len(pictures.PALETTE)
    ends = svg.findall(f"{SVG}g[@class='day-end']")
    assert [e.find(f"{SVG}text").text for e in ends] == [str(i + 1) for i in range(9)]
    last = coords([p for p in svg.iter(f"{SVG}polyline") if p.get("class") == "day-line"][-1])[-1]
    assert (float(ends[-1][0].get("cx")), float(ends[-1][0].get("cy"))) == last  # the marker is at the day's end


def test_long_days_are_downsampled_keeping_both_ends():
    pts = list(range(5000))
    out = pictures.downsample(pts, 300)
    assert len(out) == 300 and out[0] == 0 and out[-1] == 4999 and out == sorted(out)
    assert pictures.downsample(pts[:10], 300) == pts[:10]
    svg = parse(pictures.route_svg([{"number": 1, "geometry": line(5000, step=(0.0001, 0.0002))}]))
    assert len(coords(svg.find(f"{SVG}polyline[@class='day-line']"))) == pictures.MAX_POINTS
    month = [{"number": i + 1, "geometry": line(1000, start=(45 + i * 0.1, 5.0), step=(0.0001, 0.0002))}
             for i in range(30)]  # a long trip shares one budget: 30 × 80 points, not 30 × 300
    drawn = [coords(p) for p in parse(pictures.route_svg(month)).iter(f"{SVG}polyline") if p.get("class")]
    assert [len(d) for d in drawn] == [pictures.ROUTE_BUDGET // 30] * 30
    profile = parse(pictures.profile_svg([pictures.distance_profile(d["geometry"]) for d in month]))
    assert {len(coords(p)) for p in profile.iter(f"{SVG}polyline")} == {pictures.MIN_POINTS}  # 1200 // 30 = 40


def test_the_profile_scales_distance_and_elevation_into_the_plot():
    series = [[(0.0, 250.0), (20.0, 980.0), (40.0, 400.0)], [(40.0, 400.0), (75.0, 120.0)]]
    svg = parse(pictures.profile_svg(series, colours=["#111111", "#222222"]))
    left, top = pictures.PLOT["left"], pictures.PLOT["top"]
    right = pictures.PROFILE_W - pictures.PLOT["right"]
    base = pictures.PROFILE_H - pictures.PLOT["bottom"]
    lines = svg.findall(f"{SVG}polyline")
    assert [p.get("stroke") for p in lines] == ["#111111", "#222222"]
    pts = coords(lines[0]) + coords(lines[1])
    assert math.isclose(pts[0][0], left) and math.isclose(pts[-1][0], right)  # 0 km and 75 km at the ends
    assert all(top - 1e-9 <= y <= base + 1e-9 for _, y in pts)
    highest, lowest = min(pts, key=lambda p: p[1]), max(pts, key=lambda p: p[1])
    assert highest == pts[1] and lowest == pts[-1]
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    labels = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "extreme-label"]
    assert labels == ["max 980\u00a0m", "min 120\u00a0m"]  # each once, drawn over its own halo (a text of its own)
    halos = [t for t in svg.iter(f"{SVG}text") if t.get("aria-hidden") == "true"]
    assert [h.text for h in halos] == labels and all(h.get("fill") == "#ffffff" for h in halos)
    assert any(t.endswith("\u00a0km") for t in texts) and "0" in texts  # the x axis in km
    grid = [int(t[:-2]) for t in texts if re.fullmatch(r"\d+\u00a0m", t)]
    assert grid[0] <= 120 and grid[-1] >= 980  # the y axis spans min and max, in round steps
    assert len({b - a for a, b in zip(grid, grid[1:])}) == 1
    french = [t.text for t in parse(pictures.profile_svg(
        [[(0.0, 1200.0), (10.0, 2450.5)]], marks=("max", "min"),
        number=lambda v, d: f"{v:,.0f}".replace(",", "\u202f"))).iter(f"{SVG}text")]
    assert "max 2\u202f450\u00a0m" in french  # the numbers as the reader writes them


def test_distance_profile_accumulates_from_the_day_start():
    geometry = [[45.0, 5.0, 100.0], [45.009, 5.0, 110.0], [45.018, 5.0]]
    out = pictures.distance_profile(geometry, start_km=50.0)
    assert [round(km, 2) for km, _ in out] == [50.0, 51.0] and [e for _, e in out] == [100.0, 110.0]


@pytest.mark.parametrize(("forecast", "kind"), [
    ({"icon": "01d"}, "sun"), ({"icon": "02d"}, "partly"), ({"icon": "03d"}, "partly"), ({"icon": "04d"}, "cloud"), ({"icon": "10d"}, "rain"),
    ({"icon": "09d"}, "rain"), ({"icon": "13d"}, "snow"), ({"icon": "11d"}, "storm"), ({"icon": "50d"}, "fog"),
    ({"weatherCode": 95}, "storm"), ({"weatherCode": 73}, "snow"), ({"weatherCode": 45}, "fog"),
    ({"description": "Light drizzle"}, "rain"), ({"icon": "zz", "weatherCode": 7}, None), ({}, None),
    ({"icon": "01d", "description": "unknown", "weatherCode": 42}, None),  # outside the WMO table: no sun
    ({"icon": "01d", "weatherCode": 63}, "rain"),  # the code wins over the icon
])
def test_weather_kinds(forecast, kind):
    assert pictures.weather_kind(forecast) == kind
    icon = pictures.weather_icon_svg(kind)
    assert (icon == "") is (kind is None)
    if kind:
        parse(icon)


def test_the_wind_arrow_is_relative_to_the_direction_of_travel():
    north = pictures.bearing((45.0, 5.0), (46.0, 5.0))
    east = pictures.bearing((45.0, 5.0), (45.0, 6.0))
    assert math.isclose(north, 0.0, abs_tol=1e-9) and 89 < east < 91
    assert pictures.bearing((45.0, 5.0), (45.0, 5.0)) is None
    assert pictures.relative_wind({"windDirection": "N"}, north) == 0.0  # from ahead: headwind
    assert pictures.relative_wind({"windDirection": "O"}, east) == pytest.approx(180, abs=1)  # from behind
    assert pictures.relative_wind({"windDirectionDeg": 200.0, "windDirection": "N"}, 20.0) == 180.0
    assert pictures.relative_wind({"relativeWindDirection": "tailwind"}, None) == 180.0
    assert pictures.relative_wind({"windDirection": "??"}, north) is None
    headwind = parse(pictures.wind_svg(0.0))
    assert headwind.find(f"{SVG}g").get("transform") == "rotate(180 24 24)"  # it blows at the rider
    assert pictures.wind_svg(None) == ""


def test_day_weather_says_nothing_without_a_forecast_and_derives_the_word():
    assert pictures.day_weather(None, (45.0, 5.0), (46.0, 5.0)) is None
    assert pictures.day_weather({}, (45.0, 5.0), (46.0, 5.0)) is None
    day = pictures.day_weather({"icon": "10d", "description": "rain", "tempMin": 9.5, "tempMax": "hot",
                                "windDirection": "S"}, (45.0, 5.0), (46.0, 5.0))
    assert day["kind"] == "rain" and day["relative"] == "tailwind" and day["tempMin"] == 9.5
    assert day["tempMax"] is None  # not a number: not shown
    parse(day["icon"]), parse(day["wind"])


def test_hostile_text_is_floored_and_escaped():
    hostile = "Evil\u202e</title><script>alert(1)</script>\u200b\nride & co"
    route = pictures.route_svg([{"number": 1, "geometry": line(5)}], hostile)
    assert "<script" not in route and "\u202e" not in route and "\u200b" not in route and "\n" not in route
    assert parse(route).find(f"{SVG}title").text == "Evil</title><script>alert(1)</script> ride & co"
    profile = pictures.profile_svg([[(0, 1), (1, 2)]], hostile)
    assert parse(profile).find(f"{SVG}title").text.startswith("Evil</title>")
    day = pictures.day_weather({"icon": "01d", "description": hostile}, (45.0, 5.0), (46.0, 5.0))
    assert "\u202e" not in day["description"] and "<script" not in day["icon"]
    assert parse(day["icon"]).find(f"{SVG}title").text == day["description"]


def test_the_drawings_are_well_formed_svg_with_a_viewbox_and_no_inline_style():
    days = [{"number": i + 1, "geometry": line(400, start=(44 + i * 0.3, 5 + i * 0.1))} for i in range(14)]
    profile = [pictures.distance_profile(d["geometry"]) for d in days]
    for markup in (pictures.route_svg(days), pictures.profile_svg(profile), pictures.wind_svg(33.0),
                   *(pictures.weather_icon_svg(k) for k in ("sun", "partly", "cloud", "rain", "snow", "storm",
                                                              "fog"))):
        svg = parse(markup)
        assert svg.tag == f"{SVG}svg" and len(svg.get("viewBox").split()) == 4
        assert svg.get("width") is None and svg.get("height") is None  # the stylesheet sizes it
        assert not [e for e in svg.iter() if e.get("style") is not None]  # CSP style-src 'self' would refuse


def test_the_share_page_draws_the_riding_days_and_no_weather_it_does_not_have(client, rider):
    import io

    from tests.fakes.thirdparty import gpx_from_points, make_points
    from trips.core.db import db
    from trips.models import Trip
    from trips.services.sharing import share_trip
    from trips.services.trips import import_gpx

    user, headers = rider
    gpx = gpx_from_points(make_points(1800, step_m=100.0), name="Ride\u202e <b>bold</b>")
    trip = import_gpx(user, io.BytesIO(gpx), {})
    rest = client.post(f"/api/trips/{trip.id}/stages/{trip.stages[0].id}/rest-day",
                       headers={**headers, "If-Match": '"1"'})
    assert rest.status_code == 200  # a rest day (one point, no distance) sits between the first two days
    db.session.rollback()
    trip = db.session.get(Trip, trip.id)
    first = min(trip.stages, key=lambda s: s.day_number)
    first.enrichment = {**(first.enrichment or {}), "weather": {"icon": "10d", "description": "rain",
                                                                 "tempMin": 8, "tempMax": 13, "windDirection": "N"}}
    db.session.commit()
    page = client.get(f"/s/{share_trip(user, trip.id)[0].short_code}")
    html = page.get_data(as_text=True)
    tree = etree.HTML(html)
    days = len([s for s in trip.stages if not s.is_rest_day])
    assert days >= 2 and len(trip.stages) == days + 1
    assert len(tree.xpath("//li[contains(@class, 'rest')]//svg")) == 0  # a rest day draws nothing
    assert len(tree.xpath("//svg[@class='route']//polyline[@class='day-line']")) == days
    assert len(tree.xpath("//svg[@class='profile']")) == days + 1
    assert len(tree.xpath("//div[@class='weather']")) == 1  # only the day that has a forecast
    assert len(tree.xpath("//svg[@class='weather-icon']")) == 1 and len(tree.xpath("//svg[@class='wind']")) == 1
    assert "\u202e" not in html and "<b>bold" not in html
    assert tree.xpath("//svg[@class='route']/title")[0].text == "Ride <b>bold</b>"
    assert not tree.xpath("//*[@style]")  # the CSP (style-src 'self') would refuse any inline style
