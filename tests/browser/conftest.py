"""Headless Chromium for the browser tests (Debian's ``chromium`` and ``chromium-driver``,
which ``.ci/run`` installs when missing); ``served.py`` runs the app they browse.

Outside CI a missing browser skips these tests with the reason; in CI (``CI=true``) it fails
them, as a missing PostgreSQL does (tests/pgtools.py).
"""
from __future__ import annotations

import os
import shutil
from typing import Iterator

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("SCHEDFENCE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("SCHEDFENCE_CHROMEDRIVER", "/usr/bin/chromedriver")


def _missing() -> str | None:
    """Why the browser cannot run here (selenium itself is a test dependency), or None."""
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and not shutil.which(path):
            return f"{path} not found (apt-get install {package})"
    return None


def require_browser() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"headless Chromium is required in CI: {reason}")
    pytest.skip(reason)


def chromium() -> webdriver.Chrome:
    """A headless Chromium, driven through chromium-driver (nothing is downloaded)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1500,1000", "--lang=en-US"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    require_browser()
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()
