"""A person in a real browser (headless Chromium): sign in by e-mail link, approve an agent on the consent
page, see it on the account page and disconnect it. Catches what a test client cannot: cookies, the
Content-Security-Policy on forms and redirects, real form submission."""
import base64
import hashlib
import re
import secrets
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests

from tests.pages.chromium import chromium_or_skip, headless_chrome
from tests.live import free_port, gunicorn

pytestmark = pytest.mark.slow
chromium_or_skip()

from selenium.common.exceptions import WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as until  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def site(app, app_config, tmp_path_factory):
    with gunicorn(app_config, tmp_path_factory.mktemp("browser") / "gunicorn.log", own_base_url=True) as live:
        yield live


@pytest.fixture
def browser(tmp_path):
    driver = headless_chrome(tmp_path / "profile")
    yield driver
    driver.quit()


def outbox_link(app) -> str:
    newest = max((Path(app.instance_path) / "outbox").glob("*.eml"), key=lambda p: p.stat().st_mtime_ns)
    return re.search(r"http://\S+/login/\S+", newest.read_text()).group(0)


def test_a_person_connects_an_agent_and_disconnects_it(app, site, browser, ctx, tmp_path):
    redirect = f"http://127.0.0.1:{free_port()}/callback"  # nothing listens: the browser just lands there
    client_id = requests.post(site.url + "/oauth/register", json={"client_name": "Browser Agent",
                                                                  "redirect_uris": [redirect]}).json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    authorize = site.url + "/oauth/authorize?" + urlencode({
        "response_type": "code", "client_id": client_id, "redirect_uri": redirect, "state": "s1",
        "scope": "trips:read trips:write", "code_challenge": challenge, "code_challenge_method": "S256",
        "resource": site.url + "/mcp"})
    wait = WebDriverWait(browser, 10)
    try:
        browser.get(authorize)
        assert urlsplit(browser.current_url).path == "/login"  # signed out: sign in first, then come back
        browser.find_element(By.ID, "email").send_keys("walker@example.org")
        browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        wait.until(until.title_contains("Check your e-mail"))
        browser.get(outbox_link(app))
        browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        wait.until(until.title_contains("Connect an application"))
        assert browser.find_element(By.CLASS_NAME, "client-name").text == "Browser Agent"
        browser.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
        wait.until(lambda driver: driver.current_url.startswith(redirect))
        query = parse_qs(urlsplit(browser.current_url).query)
        assert query["state"] == ["s1"] and query["iss"] == [site.url]
        tokens = requests.post(site.url + "/oauth/token", data={
            "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": redirect,
            "client_id": client_id, "code_verifier": verifier, "resource": site.url + "/mcp"})
        assert tokens.status_code == 200
        mcp = {"Authorization": f"Bearer {tokens.json()['access_token']}", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert requests.post(site.url + "/mcp", json=ping, headers=mcp).status_code == 200
        browser.get(site.url + "/account")
        assert "Browser Agent" in browser.find_element(By.CLASS_NAME, "agents").text
        browser.find_element(By.CSS_SELECTOR, ".agent form button").click()
        wait.until(lambda driver: _main_says(driver, "No application can use"))  # the page is being replaced
        assert requests.post(site.url + "/mcp", json=ping, headers=mcp).status_code == 401
    finally:
        browser.save_screenshot(str(tmp_path / "last.png"))


def _main_says(driver, words: str) -> bool:
    """`words` in the page's <main>; False while the page is swapped under the lookup (Chromium then answers a
    generic "node does not belong to the document" error, which WebDriverWait does not ignore by itself)."""
    try:
        return words in driver.find_element(By.TAG_NAME, "main").text
    except WebDriverException:
        return False


# The computed style of the first element matching a selector: what a person sees of a control.
LOOK = ("const e = document.querySelector(arguments[0]); const s = getComputedStyle(e);"
        "return Object.fromEntries(arguments[1].map(p => [p, s.getPropertyValue(p)]));")
FIELD = ["font-size", "font-family", "padding-top", "padding-left", "border-top-width", "border-top-color",
         "border-top-left-radius"]
BUTTON = ["background-color", "color", "font-size", "padding-top", "padding-left", "border-top-left-radius",
          "text-decoration-line", "min-height"]


def test_the_account_page_s_controls_look_like_the_other_pages(app, site, browser, ctx):
    """The language select looks like the sign-in page's field, the link to delete the account like the delete
    page's own button (a real browser's computed styles)."""
    browser.get(site.url + "/login")
    field = browser.execute_script(LOOK, "#email", FIELD)
    browser.find_element(By.ID, "email").send_keys("styled@example.org")
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(until.title_contains("Check your e-mail"))
    browser.get(outbox_link(app))
    browser.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
    WebDriverWait(browser, 10).until(lambda driver: urlsplit(driver.current_url).path == "/account")
    select = browser.execute_script(LOOK, "select#locale", FIELD)
    link = browser.execute_script(LOOK, "a[href$='/account/delete']", BUTTON)
    save = browser.execute_script(LOOK, "form.locale button", BUTTON)
    browser.get(site.url + "/account/delete")
    danger = browser.execute_script(LOOK, "button.danger", BUTTON)
    assert select == field, (select, field)
    assert link == danger, (link, danger)
    assert link["text-decoration-line"] == "none" and link["background-color"] != save["background-color"]
