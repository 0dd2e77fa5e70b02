"""The share page's map in headless Chromium: the imported map's layers drawn under the route at 390 px, 1 200 px and in
print, every layer sized inside the picture, the names drawn, no sideways scroll on a phone, nothing refused by the
CSP. Screenshots go to <repo>/test-artifacts/share-map-*.png (gitignored) for a person to look at."""
import io
import json

import pytest

from tests.pages.chromium import chromium_or_skip
from tests.enrich_helpers import import_map
from tests.factories import make_user
from tests.fakes.thirdparty import gpx_from_points, make_points
from tests.live import ROOT, gunicorn
from tests.pages.test_browser_share import browser  # noqa: F401 (the fixture: headless Chromium, its log kept)
from tests.trips.readmodels.test_share_map import region
from trips.services.sharing import share_trip
from trips.services.trips import import_gpx

pytestmark = pytest.mark.slow
chromium_or_skip()

ARTIFACTS = ROOT / "test-artifacts"
LAYERS = ("map-water", "map-coast", "map-river", "map-road", "map-road-major", "map-place", "map-scale")
MEASURE = (
    "const svg = document.querySelector('svg.route'); const box = svg.getBoundingClientRect();"
    "const layers = {}; for (const cls of arguments[0]) { layers[cls] = Array.from(svg.querySelectorAll('.' + cls))"
    "  .map(e => { const r = e.getBoundingClientRect(); return {w: r.width, h: r.height, left: r.left, top: r.top,"
    "  right: r.right, bottom: r.bottom, fill: getComputedStyle(e).fill}; }); }"
    "return {svg: {w: box.width, h: box.height, left: box.left, top: box.top, right: box.right, bottom: box.bottom},"
    " layers, names: Array.from(svg.querySelectorAll('.map-place text')).map(t => t.textContent),"
    " scroll: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight};")


@pytest.fixture(scope="module")
def site(app, app_config, tmp_path_factory):
    with gunicorn(app_config, tmp_path_factory.mktemp("browser-share-map") / "gunicorn.log") as live:
        yield live


@pytest.fixture
def shared_code(ctx, tmp_path):
    import_map(region(), tmp_path)
    user = make_user("map-sharer@example.org")
    trip = import_gpx(user, io.BytesIO(gpx_from_points(make_points(1800, step_m=100.0), name="Lakes and coast")), {})
    return share_trip(user, trip.id)[0].short_code


def _shoot(driver, width: int, name: str) -> dict:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900,
                                                                  "deviceScaleFactor": 1, "mobile": False})
    measured = driver.execute_script(MEASURE, list(LAYERS))
    ARTIFACTS.mkdir(exist_ok=True)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": measured["height"],
                                                                  "deviceScaleFactor": 1, "mobile": False})
    driver.save_screenshot(str(ARTIFACTS / f"share-map-{name}.png"))
    driver.find_element("css selector", "svg.route").screenshot(str(ARTIFACTS / f"share-map-{name}-route.png"))
    return measured


def _drawn(measured: dict, width: int) -> None:
    svg = measured["svg"]
    assert svg["w"] > 0.7 * min(width, 700) and svg["h"] > 100, svg
    for cls in LAYERS:
        shapes = measured["layers"][cls]
        assert shapes, f"{cls} is not drawn"
        for r in shapes:
            assert r["w"] > 0 or r["h"] > 0, (cls, r)
            # inside the picture, give or take the parts of a line the picture crops
            assert r["right"] > svg["left"] and r["left"] < svg["right"], (cls, r, svg)
    assert measured["layers"]["map-water"][0]["fill"] == "rgb(207, 227, 241)"  # filled, not an outline
    assert {"Valence", "Annecy"} <= set(measured["names"]), measured["names"]


def test_the_share_page_draws_the_map_at_every_width_and_in_print(site, shared_code, browser):  # noqa: F811
    browser.get(f"{site.url}/s/{shared_code}")
    phone = _shoot(browser, 390, "390")
    _drawn(phone, 390)
    assert phone["scroll"] <= 390, phone["scroll"]  # no sideways scrolling
    _drawn(_shoot(browser, 1200, "1200"), 1200)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    _drawn(_shoot(browser, 700, "print"), 700)
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    log = browser.get_log("browser")
    refused = [e["message"] for e in log if "Content Security Policy" in e["message"] or "Refused" in e["message"]]
    assert not refused, json.dumps(refused)[:2000]


# Each text of the route's picture: its font size as drawn (the computed size times the picture's scale), and each
# day's disc with its number's box.
LEGIBLE = (
    "const svg = document.querySelector('svg.route');"
    "const texts = Array.from(svg.querySelectorAll('text')).map(t => { const m = t.getScreenCTM();"
    "  return {layer: t.parentElement.getAttribute('class'), text: t.textContent,"
    "          px: parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b)}; });"
    "const discs = Array.from(svg.querySelectorAll('.day-end')).map(g => {"
    "  const c = g.querySelector('circle').getBoundingClientRect(), t = g.querySelector('text').getBoundingClientRect();"
    "  return {w: c.width, inside: t.left >= c.left && t.right <= c.right && t.top >= c.top - 1"
    "          && t.bottom <= c.bottom + 1}; });"
    "return {texts, discs};")


@pytest.mark.parametrize("width, most", [(390, 16.0), (1200, 16.0)])
def test_every_map_label_and_disc_is_legible(site, shared_code, browser, width, most):  # noqa: F811
    browser.get(f"{site.url}/s/{shared_code}")
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900,
                                                                  "deviceScaleFactor": 1, "mobile": False})
    seen = browser.execute_script(LEGIBLE)
    layers = {t["layer"] for t in seen["texts"]}
    assert {"map-place", "map-scale", "day-end"} <= layers, layers
    small = [t for t in seen["texts"] if t["px"] < 11.0]
    assert not small, small  # at least 11 px drawn, the scale bar's and the discs' too
    assert all(t["px"] <= most for t in seen["texts"]), seen["texts"]  # and no poster on a wide screen
    assert seen["discs"] and all(d["w"] >= 18.0 and d["inside"] for d in seen["discs"]), seen["discs"]
