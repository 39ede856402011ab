"""The overview as ``schedfence serve`` answers it from a process of its own, started after the
writes (so it reads the projection's new rows itself: forward migrations, the key table), and
``serve`` refusing a bad Temporal Web UI URL in one line, before it opens anything."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.browser.served import schedfence_serve
from tests.helpers import NS
from tests.infra.web import worlds
from tests.infra.web.dom import parse
from tests.infra.web.fake_app import READER_TOKEN

UI = "http://localhost:8233"


def test_a_fresh_serve_process_shows_the_counts_and_owners(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    worlds.mixed(store).service.close()
    with schedfence_serve(store, [("alice", "reader", READER_TOKEN)], tmp_path,
                          "--temporal-ui", UI) as base, \
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {READER_TOKEN}"},
                         timeout=30) as http:
        page = parse(http.get("/ui/").text)
        assert page.counts()["owners"] == {"source": 3, "temporal": 2, "none": 1}
        assert page.counts()["counts-forward"]["completed"] == 1
        forward = parse(http.get("/ui/", params={"direction": "forward"}).text)
        [row] = forward.rows("table.schedules")
        assert (row.attrs["data-key"], row.attrs["data-owner"]) == (f"{NS}/{worlds.BACK}",
                                                                    "source")
        handed = parse(http.get("/ui/", params={"owner": "temporal"}).text)
        assert handed.row_links("table.schedules", f"{NS}/{worlds.HANDED}")["schedule"] == \
            f"{UI}/namespaces/{NS}/schedules/{worlds.HANDED}"
        assert "No job." in parse(http.get("/ui/jobs").text).text
        assert http.get("/ui/job", params={"id": "nope"}).status_code == 404


def test_serve_refuses_a_bad_temporal_ui_url_in_one_line(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"alice reader {READER_TOKEN}\n")
    tokens.chmod(0o600)
    store = tmp_path / "never.db"
    done = subprocess.run(
        [sys.executable, "-m", "schedfence.infra.cli", "--store", f"sqlite:///{store}",
         "--destination", "sim", "serve", "--tokens", str(tokens),
         "--temporal-ui", "localhost:8233"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "must be http(s)://HOST" in line
    assert not store.exists()  # refused before the store was opened
