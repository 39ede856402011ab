"""The operator pages in headless Chromium, served by a real ``schedfence serve`` process on a
loopback port with a tokens file: sign in with a token, the on-call list shows a parked
migration, and a schedule's timeline shows every step of a completed rollback in order (the
steps first, then the source's own events), with whole ids that link to their own views. A screenshot of each page is written under the test's
temporary directory and its size checked."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as arrived

from schedfence.infra.web.pages import COOKIE, url
from tests.browser.served import schedfence_serve
from tests.browser.steps import follow, screenshot, sign_in
from tests.helpers import NS, World
from tests.infra.web.fake_app import DONE, PARKED, READER_TOKEN, parked_and_done

MIN_SCREENSHOT_BYTES = 20_000  # a blank or error page is far smaller
TOKENS = [("alice", "reader", READER_TOKEN)]


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[World, str]]:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    w = parked_and_done(store)
    try:
        with schedfence_serve(store, TOKENS, tmp_path) as base:
            yield w, base
    finally:
        w.service.close()


def test_the_oncall_list_shows_a_parked_migration(browser: Any, site: tuple[World, str],
                                                  tmp_path: Path) -> None:
    w, base = site
    sign_in(browser, base, "/ui/", READER_TOKEN)
    [cookie] = [c for c in browser.get_cookies() if c["name"] == COOKIE]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    parked = w.service.migration(NS, PARKED)
    [item] = browser.find_elements(By.CSS_SELECTOR, "ol.oncall li.item")
    assert "parked" in item.get_attribute("class")
    assert item.get_attribute("data-migration") == parked.migration_id
    assert "parked (foreign_destination)" in item.text
    verdicts = {row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
                for row in item.find_elements(By.CSS_SELECTOR, "table.verdicts tbody tr")}
    assert verdicts == w.service.oncall()[0].verdicts
    assert screenshot(browser, tmp_path / "oncall.png") > MIN_SCREENSHOT_BYTES
    item.find_element(By.LINK_TEXT, parked.migration_id).click()
    follow(browser, arrived.url_contains("/ui/migration?"))
    assert parked.migration_id in browser.find_element(By.TAG_NAME, "h1").text
    assert "parked foreign_destination" in browser.find_element(By.TAG_NAME, "main").text
    assert screenshot(browser, tmp_path / "migration.png") > MIN_SCREENSHOT_BYTES


def test_the_timeline_shows_every_step_of_a_completed_rollback_in_order_with_full_ids(
        browser: Any, site: tuple[World, str], tmp_path: Path) -> None:
    w, base = site
    sign_in(browser, base, url("schedule", namespace=NS, schedule=DONE), READER_TOKEN)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr[data-position]")
    positions = [int(r.get_attribute("data-position")) for r in rows]
    lead = {s["position"] for s in w.service.replay(NS, DONE)["steps"]}  # the steps first
    history = [e.position for e in w.service.history(NS, DONE)]
    assert positions == [p for p in history if p in lead] + [p for p in history if p not in lead]
    steps = [r for r in rows if r.get_attribute("data-lane") == "migration"]
    assert [r.get_attribute("data-type") for r in steps] == w.migration_events(DONE)
    view = w.service.migration(NS, DONE)
    for row in steps:  # each step names its migration in full, and has its decision
        assert row.find_element(By.CSS_SELECTOR, "td.event a.migration").text == \
            view.migration_id
        assert "checks: ok" in row.find_element(By.CSS_SELECTOR, "td.decision").text
    text = browser.find_element(By.TAG_NAME, "main").text
    for uuid in (view.migration_id, view.destination_first_run_id):
        assert uuid in text
        assert not re.search(rf"(?<![0-9a-f-]){uuid[:8]}(?![0-9a-f-])", text)
    assert screenshot(browser, tmp_path / "timeline.png") > MIN_SCREENSHOT_BYTES
    receipt = browser.find_element(By.CSS_SELECTOR, "tr[data-type=SourceClosed] td.what a.run")
    assert receipt.text == view.destination_first_run_id
    receipt.click()
    follow(browser, arrived.url_contains("/ui/run?"))
    assert view.destination_first_run_id in browser.find_element(By.TAG_NAME, "h1").text
    named = browser.find_elements(By.CSS_SELECTOR, "table.timeline tbody tr[data-position]")
    assert [r.get_attribute("data-type") for r in named] == [
        "DestinationAnswered", "OwnershipAccepted", "ClosedByMigration", "SourceClosed"]
    assert screenshot(browser, tmp_path / "run.png") > MIN_SCREENSHOT_BYTES
