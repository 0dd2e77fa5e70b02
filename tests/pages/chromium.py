"""Headless Chromium for the page tests: Debian's chromium and chromedriver (.ci/run installs them)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium_or_skip() -> tuple[str, str]:
    """(chromium, chromedriver). Skips the calling test module without them, except in CI, where they must be."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        if os.environ.get("CI"):
            raise RuntimeError("CI must have chromium and chromedriver (.ci/run installs them)")
        pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)
    return chromium, driver


def headless_chrome(profile: Path, *extra: str, browser_log: bool = False):
    """A driver of a fresh headless Chromium (390 × 900 window) with its own profile folder; quit it after use.
    Without the background-networking flags Chromium knocks at this closed network again and again."""
    from selenium import webdriver

    chromium, driver = chromium_or_skip()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*FLAGS, *extra, f"--user-data-dir={profile}", "--window-size=390,900"):
        options.add_argument(flag)
    if browser_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver))
    chrome.set_page_load_timeout(20)
    return chrome
