"""The share page in headless Chromium: a 14-day analysed trip drawn as pictures (trips/readmodels/pictures.py) at 390
and 1 200 px; the SVGs have a size, the phone does not scroll sideways, the CSP refused nothing. Screenshots go to
<repo>/test-artifacts/ (gitignored) for a person to look at."""
import io
import json
import math

import pytest

from tests.factories import make_user
from pyproj import Geod

from tests.fakes.thirdparty import gpx_from_points
from tests.pages.chromium import chromium_or_skip, headless_chrome
from tests.live import ROOT, gunicorn
from trips.core.db import db
from trips.models import Trip
from trips.services.sharing import share_trip
from trips.services.trips import import_gpx

pytestmark = pytest.mark.slow
chromium_or_skip()

from selenium.webdriver.common.by import By  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
GEOD = Geod(ellps="WGS84")
WEATHER = [  # the first seven days: what D1's weather enrichment stores (docs/RULES.md "Weather"), varied
    {"icon": "01d", "weatherCode": 0, "description": "clear sky", "tempMin": 14.2, "tempMax": 26.8, "windSpeed": 12.0,
     "windGusts": 20.5, "windDirection": "SO", "precipitationProbability": 5, "relativeWindDirection": "tailwind"},
    {"icon": "02d", "weatherCode": 1, "description": "mainly clear", "tempMin": 13.0, "tempMax": 24.1, "windSpeed": 18.0,
     "windDirection": "NE", "precipitationProbability": 10, "relativeWindDirection": "headwind"},
    {"icon": "10d", "weatherCode": 63, "description": "rain", "tempMin": 11.5, "tempMax": 17.9, "windSpeed": 25.0, "windGusts": 48.0,
     "windDirection": "O", "precipitationProbability": 85, "relativeWindDirection": "crosswind"},
    {"icon": "11d", "weatherCode": 95, "description": "thunderstorm", "tempMin": 16.0, "tempMax": 29.5, "windSpeed": 30.0,
     "windGusts": 62.0, "windDirection": "S", "precipitationProbability": 70},
    {"icon": "04d", "weatherCode": 3, "description": "overcast", "tempMin": 12.0, "tempMax": 19.0, "windSpeed": 8.0,
     "windDirection": "N", "precipitationProbability": 20},
    {"icon": "50d", "weatherCode": 45, "description": "fog", "tempMin": 6.5, "tempMax": 12.0, "windSpeed": 3.0,
     "precipitationProbability": 15, "relativeWindDirection": "unknown"},
    {"icon": "13d", "weatherCode": 73, "description": "snow", "tempMin": -3.0, "tempMax": 1.5, "windSpeed": 22.0,
     "windDirection": "NO", "precipitationProbability": 90},
]
ALERTS = [
    {"terrain": [{"code": "traffic_main_road", "params": {"count": 3, "length": 4.2}},
                 {"code": "steep_gradient", "params": {"gradient": 11.5, "distance": 1.8}},
                 {"code": "elevation_gain", "params": {"elevation": 1240}}],
     "water_point": [{"code": "water_point_gap", "params": {"threshold": 30, "gap": 42.5, "fromKm": 12.0,
                                                            "toKm": 54.5}}]},
    {"pois": [{"code": "resupply_closed_at_passage", "params": {"count": 4}}],
     "calendar": [{"code": "calendar_sunday", "params": {"date": "2031-06-08"}}]},
    {"terrain": [{"code": "surface_rough", "params": {"length": 6.4, "surface": "gravel, unpaved"}}],
     "bike_shop": [{"code": "bike_shop_none_nearby", "params": {}}]},
    {},
]


def _points() -> list:
    """~1 050 km of meandering road from the Drôme, north then east then south (a loop's worth of turning),
    with hills and a mountain pass or two."""
    lat, lon, points = 44.7, 5.0, []
    for i in range(2100):
        ele = 220 + 380 * math.sin(i / 90) ** 2 + 650 * max(0.0, math.sin(i / 330)) ** 6 + 40 * math.sin(i / 7)
        points.append((round(lat, 7), round(lon, 7), round(ele, 1)))
        heading = -20 + 200 * i / 2100 + 35 * math.sin(2 * math.pi * i / 60)
        lon, lat, _ = GEOD.fwd(lon, lat, heading, 500.0)
    return points


@pytest.fixture(scope="module")
def site(app, app_config, tmp_path_factory):
    with gunicorn(app_config, tmp_path_factory.mktemp("browser-share") / "gunicorn.log") as live:
        yield live


@pytest.fixture
def shared_code(ctx):
    user = make_user("sharer@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(_points(), name="Alps & Jura, <two weeks>")),
                      {"startDate": "2031-06-01"})
    trip = db.session.get(Trip, trip.id)
    stages = sorted(trip.stages, key=lambda s: s.day_number)
    assert len(stages) == 14, "the route must cut into 14 days"
    for i, stage in enumerate(stages):
        stage.alerts_by_group = ALERTS[i % len(ALERTS)]
        extra = dict(stage.enrichment or {})
        if i < len(WEATHER):
            extra["weather"] = WEATHER[i]
        stage.enrichment = extra
        stage.accommodations = [{"name": f"Camping municipal du Lac {i + 1}", "type": "camp_site",
                                 "lat": stage.end_lat, "lon": stage.end_lon, "estimatedPriceMin": 12,
                                 "estimatedPriceMax": 18, "currency": "EUR"}]
        if i % 3 == 0:
            stage.selected_accommodation = {"name": "Hôtel de la Gare", "type": "hotel", "lat": stage.end_lat,
                                            "lon": stage.end_lon, "estimatedPriceMin": 75, "estimatedPriceMax": 75,
                                            "currency": "EUR"}
    db.session.commit()
    return share_trip(user, trip.id)[0].short_code


@pytest.fixture
def browser(tmp_path):
    driver = headless_chrome(tmp_path / "profile", "--hide-scrollbars", browser_log=True)
    yield driver
    driver.quit()


def _viewport(driver, width: int, height: int) -> None:
    """The layout viewport exactly `width`×`height` CSS px (the window has borders in some builds)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                                  "deviceScaleFactor": 1, "mobile": False})


def _screenshot(driver, width: int, name: str) -> dict:
    """Load nothing; lay the page out at `width`, shoot its full height into test-artifacts/, and answer
    its measurements."""
    _viewport(driver, width, 900)
    sizes = driver.execute_script(
        "return {scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,"
        " height: document.documentElement.scrollHeight,"
        " svgs: Array.from(document.querySelectorAll('main svg')).map(e => {"
        "   const r = e.getBoundingClientRect(); return {cls: e.getAttribute('class'), w: r.width, h: r.height,"
        "   right: r.right}; })};")
    _viewport(driver, width, sizes["height"])
    ARTIFACTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / name))
    # Close-ups a person can read without zooming: the two trip-wide pictures and the seven days with a forecast.
    parts = driver.find_elements(By.CSS_SELECTOR, "main > figure.picture")
    parts += driver.find_elements(By.CSS_SELECTOR, "li.day")[:7]
    for i, element in enumerate(parts):
        element.screenshot(str(ARTIFACTS / name.replace(".png", f"-part{i + 1}.png")))
    return sizes


def test_the_share_page_draws_a_fourteen_day_trip(site, shared_code, browser):
    browser.get(f"{site.url}/s/{shared_code}")
    assert "Alps & Jura, <two weeks>" in browser.find_element(By.TAG_NAME, "h1").text

    phone = _screenshot(browser, 390, "share-390.png")
    assert phone["client"] == 390 and phone["scroll"] <= 390, phone["scroll"]  # no sideways scrolling
    kinds = [s["cls"] for s in phone["svgs"]]
    assert kinds.count("route") == 1 and kinds.count("profile") == 15  # the trip's and one a day
    assert kinds.count("weather-icon") == len(WEATHER) and kinds.count("wind") == 6  # fog: no direction
    for svg in phone["svgs"]:
        assert svg["w"] > 0 and svg["h"] > 0 and svg["right"] <= 390, svg
    route = next(s for s in phone["svgs"] if s["cls"] == "route")
    assert route["w"] > 300 and route["h"] > 130  # the picture fills the phone's width

    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.route polyline.day-line")) == 14
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.route g.day-end")) == 14
    assert len(browser.find_elements(By.CSS_SELECTOR, ".badge.sev-critical")) == 4  # days 1, 5, 9, 13

    wide = _screenshot(browser, 1200, "share-1200.png")
    assert wide["scroll"] <= 1200 and all(s["w"] > 0 and s["h"] > 0 for s in wide["svgs"])

    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    printed = _screenshot(browser, 700, "share-print.png")
    assert printed["scroll"] <= 700 and not browser.find_element(By.CSS_SELECTOR, "header.top").is_displayed()
    breaks = browser.execute_script("return Array.from(document.querySelectorAll('li.day'))"
                                    ".map(e => getComputedStyle(e).breakBefore);")
    assert breaks == ["auto"] + ["page"] * 13  # one day a printed page
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})

    log = browser.get_log("browser")
    refused = [e["message"] for e in log if "Content Security Policy" in e["message"] or "Refused" in e["message"]]
    assert not refused, json.dumps(refused)[:2000]
    assert not [e for e in log if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]], log


def test_a_csp_violation_would_be_seen(site, shared_code, browser):
    """The CSP check above can fail: an inline style= added to the page is refused and logged."""
    browser.get(f"{site.url}/s/{shared_code}")
    browser.execute_script("const d = document.createElement('div'); d.innerHTML = "
                           "'<p style=\"color: red\">x</p><img src=\"data:image/png;base64,AA==\">';"
                           "document.body.appendChild(d);")
    messages = [e["message"] for e in browser.get_log("browser")]
    assert any("Content Security Policy" in m for m in messages), messages
