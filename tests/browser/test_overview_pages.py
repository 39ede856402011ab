"""The overview pages in headless Chromium, served by a real ``schedfence serve`` process over a
store of 1,000 schedules, a batch job of which handed 100 to Temporal (one parked on a foreign
run, one named schedule missing): the summary counts, the schedules table paged and filtered
with its owners, the jobs pages, and a timeline that leads with its migration steps. Each test
writes a screenshot under its temporary directory and checks its size."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as arrived
from selenium.webdriver.support.ui import Select

from schedfence.infra.web.pages import url
from tests.browser.served import schedfence_serve
from tests.browser.steps import follow, screenshot, sign_in
from tests.helpers import NS, World
from tests.infra.web import worlds
from tests.infra.web.fake_app import READER_TOKEN

MIN_SCREENSHOT_BYTES = 20_000  # a blank or error page is far smaller
TOKENS = [("alice", "reader", READER_TOKEN)]
SCHEDULES, HANDED = 1000, 100
UI = "http://temporal.example:8233"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[World, str]]:
    tmp = tmp_path_factory.mktemp("overview")
    store = f"sqlite:///{tmp / 'store.db'}"
    w = worlds.many(store, SCHEDULES, HANDED)
    try:
        with schedfence_serve(store, TOKENS, tmp, "--temporal-ui", UI) as base:
            yield w, base
    finally:
        w.service.close()


def counts(browser: Any, table_id: str) -> dict[str, int]:
    rows = browser.find_elements(By.CSS_SELECTOR, f"table#{table_id} tbody tr")
    return {r.find_element(By.TAG_NAME, "th").text: int(r.find_element(By.TAG_NAME, "td").text)
            for r in rows}


def shown_rows(browser: Any) -> list[tuple[str, str]]:
    """(key, owner) of each row of the schedules table."""
    return [(r.get_attribute("data-key"), r.find_element(By.CSS_SELECTOR, "td.owner").text)
            for r in browser.find_elements(By.CSS_SELECTOR, "table.schedules tbody tr[data-key]")]


def test_the_summary_counts_migrations_and_owners(browser: Any, site: tuple[World, str],
                                                  tmp_path: Path) -> None:
    _, base = site
    sign_in(browser, base, "/ui/", READER_TOKEN)
    assert counts(browser, "owners") == {"source": SCHEDULES - HANDED + 1,
                                         "temporal": HANDED - 1, "none": 0}
    rollback = counts(browser, "counts-rollback")
    assert (rollback["completed"], rollback["parked"], sum(rollback.values())) == (
        HANDED - 1, 1, HANDED)
    assert sum(counts(browser, "counts-forward").values()) == 0
    assert screenshot(browser, tmp_path / "summary.png") > MIN_SCREENSHOT_BYTES


def test_a_thousand_schedules_page_by_page_with_their_owners(browser: Any,
                                                             site: tuple[World, str],
                                                             tmp_path: Path) -> None:
    _, base = site
    sign_in(browser, base, "/ui/", READER_TOKEN)
    first = shown_rows(browser)
    assert first[:2] == [(f"{NS}/s0000", "temporal"), (f"{NS}/s0001", "source")]  # s0001 parked
    assert len(first) == 100 and "page 1 of 10" in browser.find_element(By.ID, "matched").text
    seen = list(first)
    for n in range(2, 11):
        browser.find_element(By.LINK_TEXT, "next →").click()
        follow(browser, arrived.url_contains(f"page={n}"))
        seen += shown_rows(browser)
    assert [k for k, _ in seen] == [f"{NS}/s{i:04d}" for i in range(SCHEDULES)]
    assert sum(o == "temporal" for _, o in seen) == HANDED - 1
    assert browser.find_elements(By.LINK_TEXT, "next →") == []
    assert screenshot(browser, tmp_path / "last-page.png") > MIN_SCREENSHOT_BYTES
    Select(browser.find_element(By.NAME, "owner")).select_by_value("temporal")
    browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
    follow(browser, arrived.url_contains("owner=temporal"))
    handed = shown_rows(browser)
    assert {o for _, o in handed} == {"temporal"} and len(handed) == HANDED - 1
    link = browser.find_element(By.CSS_SELECTOR, "table.schedules tbody tr a.temporal")
    assert link.get_attribute("href") == f"{UI}/namespaces/{NS}/schedules/s0000"
    assert screenshot(browser, tmp_path / "handed-over.png") > MIN_SCREENSHOT_BYTES


def test_the_jobs_page_and_a_jobs_progress(browser: Any, site: tuple[World, str],
                                           tmp_path: Path) -> None:
    _, base = site
    sign_in(browser, base, "/ui/jobs", READER_TOKEN)
    [row] = browser.find_elements(By.CSS_SELECTOR, "table.jobs tbody tr[data-job]")
    assert row.find_element(By.CSS_SELECTOR, "td.decided").text == str(HANDED + 1)
    assert screenshot(browser, tmp_path / "jobs.png") > MIN_SCREENSHOT_BYTES
    row.find_element(By.LINK_TEXT, worlds.JOB).click()
    follow(browser, arrived.url_contains("/ui/job?"))
    assert counts(browser, "job-counts") == {"completed": HANDED - 1, "parked": 1, "aborted": 0,
                                             "in_progress": 0, "blocked": 0, "skipped": 1}
    progress = browser.find_element(By.CSS_SELECTOR, "#progress progress")
    assert (progress.get_attribute("value"), progress.get_attribute("max")) == (
        str(HANDED - 1), str(HANDED + 1))
    unfinished = {r.get_attribute("data-schedule"): r.text for r in
                  browser.find_elements(By.CSS_SELECTOR, "table.unfinished tbody tr")}
    assert set(unfinished) == {worlds.FOREIGN, worlds.MISSING}
    assert "parked foreign_destination" in unfinished[worlds.FOREIGN]
    assert "skipped not_found" in unfinished[worlds.MISSING]
    assert screenshot(browser, tmp_path / "job.png") > MIN_SCREENSHOT_BYTES


def test_a_timeline_leads_with_its_migration_steps(browser: Any, site: tuple[World, str],
                                                   tmp_path: Path) -> None:
    w, base = site
    sign_in(browser, base, url("schedule", namespace=NS, schedule=worlds.FOREIGN),
            READER_TOKEN)
    assert browser.find_element(By.ID, "latest-migration").text.endswith(
        "(rollback): parked (foreign_destination)")
    [steps, others] = browser.find_elements(By.CSS_SELECTOR, "table.timeline")
    assert steps.location["y"] < others.location["y"]  # the steps come first on the page
    positions = [int(r.get_attribute("data-position"))
                 for r in steps.find_elements(By.CSS_SELECTOR, "tbody tr[data-position]")]
    replay = w.service.replay(NS, worlds.FOREIGN)
    assert positions == [s["position"] for s in replay["steps"]]
    first = steps.find_element(By.CSS_SELECTOR, "tbody tr[data-type=RequestIdAssigned]")
    assert first.find_element(By.CSS_SELECTOR, "td.actor").text.split() == ["admin", "carol"]
    assert screenshot(browser, tmp_path / "timeline-steps-first.png") > MIN_SCREENSHOT_BYTES
