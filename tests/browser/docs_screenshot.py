"""Regenerate docs/operators.md's screenshot of a timeline (docs/timeline.png):

    .venv/bin/python -m tests.browser.docs_screenshot docs/timeline.png

A schedule takes actions (one start's answer lost, then deduplicated), is rolled back and
handed over (tests/replay/scenarios.py ``s1``); ``schedfence serve`` serves the store and its
timeline page is shot in headless Chromium.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from schedfence.infra.web.pages import url
from tests.browser.conftest import chromium
from tests.browser.served import schedfence_serve
from tests.browser.steps import screenshot, sign_in
from tests.helpers import NS, new_world
from tests.infra.web.fake_app import READER_TOKEN
from tests.replay import scenarios


def main(target: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{Path(tmp) / 'store.db'}"
        w = new_world(store)
        scenarios.s1(w)
        browser = chromium()
        try:
            with schedfence_serve(store, [("alice", "reader", READER_TOKEN)],
                                  Path(tmp)) as base:
                sign_in(browser, base, url("schedule", namespace=NS, schedule="s1"),
                        READER_TOKEN)
                screenshot(browser, Path(target))
        finally:
            browser.quit()
            w.service.close()
    print(f"{target}: {Path(target).stat().st_size} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/timeline.png")
