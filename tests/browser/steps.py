"""What a person does in the browser: sign in, follow a link, take a screenshot."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as arrived
from selenium.webdriver.support.wait import WebDriverWait

MAX_SCREENSHOT_HEIGHT = 8000


def sign_in(browser: Any, base: str, path: str, token: str) -> None:
    """Open ``path``; the page sends the browser to the login form, which returns to it."""
    browser.get(base + path)
    assert browser.current_url.startswith(base + "/ui/login?next=")
    browser.find_element(By.NAME, "token").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "form.login button").click()
    follow(browser, arrived.url_to_be(base + path))


def follow(browser: Any, condition: Any) -> None:
    """Wait for the navigation a click started (a click returns before the page loads)."""
    WebDriverWait(browser, 15).until(condition)


def screenshot(browser: Any, path: Path) -> int:
    """The whole page as a PNG at ``path``; returns its size in bytes."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1500, min(max(int(height) + 120, 600), MAX_SCREENSHOT_HEIGHT))
    assert browser.save_screenshot(str(path))
    return path.stat().st_size
