"""The overview pages through FastAPI's test client: the summary counts, the schedules table's
owner column, filters and pages, the jobs pages, links into Temporal's Web UI, and a timeline
that leads with its migration steps, names who took each and shows the real state."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import pytest
from fastapi.testclient import TestClient

from schedfence.domain.direction import DIRECTIONS
from schedfence.infra.web.pages import url
from tests.helpers import NS, World, nothing_written
from tests.infra.web import worlds
from tests.infra.web.fake_app import READER_TOKEN, make_app
from tests.infra.web.dom import Node as Page, parse as read

W = worlds
UI = "http://temporal.example:8233/"


def client(w: World, temporal_ui: str | None = None) -> TestClient:
    return TestClient(make_app(w.service, temporal_ui),
                      headers={"Authorization": f"Bearer {READER_TOKEN}"})


def get(c: TestClient, path: str, status: int = 200, **params: str) -> Page:
    response = c.get(path, params=params)
    assert response.status_code == status, response.text[-600:]
    assert "<script" not in response.text.lower()
    return read(response.text)


def table(page: Page) -> dict[str, dict[str, str]]:
    """The schedules table: key -> the row's data attributes and owner/next-run cells."""
    return {r.attrs["data-key"]: {**{k[5:]: v for k, v in r.attrs.items()
                                     if k.startswith("data-")},
                                  "owner_cell": r.cell("owner"), "next": r.cell("next-run")}
            for r in page.rows("table.schedules")}


@pytest.fixture
def mixed(tmp_path: Path) -> Iterator[World]:
    w = W.mixed(f"sqlite:///{tmp_path / 'store.db'}")
    yield w
    w.service.close()


@pytest.fixture
def many(tmp_path: Path) -> Iterator[World]:
    w = W.many(f"sqlite:///{tmp_path / 'store.db'}", 250, 30)
    yield w
    w.service.close()


def key(sid: str) -> str:
    return f"{NS}/{sid}"


# -- the summary and the owner column ----------------------------------------------------------
def test_the_summary_counts_migrations_by_direction_and_state_and_schedules_by_owner(
        mixed: World) -> None:
    with nothing_written(mixed.service):
        page = get(client(mixed), "/ui/")
    counts = page.counts()
    assert counts["owners"] == {"source": 3, "temporal": 2, "none": 1}
    assert counts["counts-rollback"]["completed"] == 3 and counts["counts-rollback"]["parked"] == 1
    assert sum(counts["counts-rollback"].values()) == 4
    assert counts["counts-forward"]["completed"] == 1 and sum(counts["counts-forward"].values()) == 1


def test_the_owner_column_reads_the_stores_history_not_the_sources_pause_flag(
        mixed: World) -> None:
    rows = table(get(client(mixed), "/ui/"))
    owners = {k: r["owner"] for k, r in rows.items()}
    assert owners == {key(W.PLAIN): "source", key(W.PARKED): "source",
                      key(W.HANDED): "temporal", key(W.PAUSED): "temporal",
                      key(W.GONE): "none", key(W.BACK): "source"}
    assert mixed.service.schedule(NS, W.HANDED).paused  # the source's flag, fenced then closed
    top = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    # hourly, from the spec: the next top of the hour (the page may have been read just
    # before the hour this test reads the clock in)
    assert rows[key(W.HANDED)]["next"] in {(top + timedelta(hours=h)).isoformat()
                                           for h in (0, 1)}
    assert rows[key(W.PAUSED)]["next"] == "paused"  # handed over paused: no next run
    assert rows[key(W.PLAIN)]["next"] == "-"
    assert (rows[key(W.BACK)]["direction"], rows[key(W.BACK)]["state"]) == ("forward",
                                                                            "completed")
    assert rows[key(W.PARKED)]["state"] == "parked"
    assert "paused" not in get(client(mixed), "/ui/").header_cells("table.schedules")
    assert "paused: yes" not in get(client(mixed), "/ui/").text


@pytest.mark.parametrize("params, expected", [
    ({"owner": "temporal"}, {W.HANDED, W.PAUSED}),
    ({"owner": "none"}, {W.GONE}),
    ({"direction": "forward"}, {W.BACK}),
    ({"state": "parked"}, {W.PARKED}),
    ({"state": "none"}, {W.PLAIN, W.GONE}),
    ({"key": "handed"}, {W.HANDED, W.PAUSED}),
    ({"key": "handed", "owner": "temporal", "state": "completed", "direction": "rollback"},
     {W.HANDED, W.PAUSED}),
    ({"direction": "rollback", "owner": "source"}, {W.PARKED}),
    ({"key": "nothing-like-it"}, set()),
])
def test_the_table_filters_by_owner_direction_state_and_key(mixed: World, params: dict,
                                                            expected: set) -> None:
    page = get(client(mixed), "/ui/", **params)
    assert set(table(page)) == {key(s) for s in expected}
    assert page.text_of("#matched").startswith(f"{len(expected)} of 6 schedule(s) match")


@pytest.mark.parametrize("params", [{"owner": "bogus"}, {"state": "paused"},
                                    {"direction": "sideways"}, {"page": "0"},
                                    {"page": "x"}, {"per_page": "501"}])
def test_a_bad_filter_is_a_400_page_naming_it(mixed: World, params: dict) -> None:
    with nothing_written(mixed.service):
        page = get(client(mixed), "/ui/", 400, **params)
    assert "invalid_argument" in page.text_of("p.error")
    assert list(params)[0] in page.text_of("p.error")


def test_the_table_pages_in_key_creation_order(many: World) -> None:
    c = client(many)
    seen = []
    for n in (1, 2, 3):
        page = get(c, "/ui/", page=str(n))
        seen += list(table(page))
        links = page.links("nav.pages")
        assert ("next →" in links) == (n < 3) and ("← previous" in links) == (n > 1)
    assert seen == [key(f"s{i:04d}") for i in range(250)]
    assert table(get(c, "/ui/", page="4")) == {}
    small = get(c, "/ui/", owner="temporal", per_page="10", page="3")
    assert list(table(small)) == [key(f"s{i:04d}") for i in range(21, 30)]  # 29: 21st on
    assert small.text_of("#matched").startswith("29 of 250")  # s0001 parked: the source's
    assert "owner=temporal" in small.links("nav.pages")["← previous"]


def test_the_pager_is_above_the_table_as_well_as_below_it(many: World) -> None:
    html = client(many).get("/ui/", params={"page": "2"}).text
    top, table_at, bottom = (html.index('<nav class="pages top">'),
                             html.index('<table class="schedules">'),
                             html.index('<nav class="pages bottom">'))
    assert top < table_at < bottom
    page = get(client(many), "/ui/", page="2")
    assert page.links("nav.pages.top") == page.links("nav.pages.bottom")
    assert set(page.links("nav.pages.top")) == {"← previous", "next →"}


# -- jobs ----------------------------------------------------------------------------------------
def test_the_jobs_page_lists_each_job_with_its_decisions(many: World) -> None:
    page = get(client(many), "/ui/jobs")
    [row] = page.rows("table.jobs")
    assert row.attrs["data-job"] == W.JOB and row.cell("phase") == "done"  # none in progress
    assert row.cell("decided") == "31"
    assert page.links("table.jobs")[W.JOB] == url("job", id=W.JOB)


def test_a_jobs_page_shows_progress_counts_and_the_unfinished_with_reasons(many: World) -> None:
    with nothing_written(many.service):
        page = get(client(many), "/ui/job", id=W.JOB)
    assert page.counts()["job-counts"] == {"completed": 29, "parked": 1, "aborted": 0,
                                           "in_progress": 0, "blocked": 0, "skipped": 1}
    assert page.text_of("#progress").startswith("29 of 31 decided schedule(s) finished")
    assert page.text_of("#blocked-rounds") == "0 round(s)"  # nothing was blocked
    # Who asked, and when: done (nothing in progress), so it has an end and a duration.
    started, ended = page.text_of("#started"), page.text_of("#ended")
    assert page.text_of("#actor") == "carol"
    assert datetime.fromisoformat(started) <= datetime.fromisoformat(ended)
    seconds = (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()
    shown = page.text_of("#duration")
    assert shown.endswith(" s") and abs(float(shown[:-2]) - seconds) <= 0.051, (shown, seconds)
    unfinished = {r.attrs["data-schedule"]: r.texts() for r in page.rows("table.unfinished")}
    assert unfinished[W.FOREIGN][1:3] == ["parked", "foreign_destination"]
    assert unfinished[W.MISSING][1:3] == ["skipped", "not_found"]
    assert len(unfinished) == 2


def test_an_unknown_job_is_a_404_page(many: World) -> None:
    assert "not_found" in get(client(many), "/ui/job", 404, id="no-such-job").text_of("p.error")


# -- Temporal's Web UI -------------------------------------------------------------------------
def test_handed_over_schedules_link_into_temporals_web_ui(mixed: World) -> None:
    page = get(client(mixed, UI), "/ui/")
    links = page.row_links("table.schedules", key(W.HANDED))
    assert links["schedule"] == f"http://temporal.example:8233/namespaces/{NS}/schedules/{W.HANDED}"
    assert links["its workflows"] == (
        f"http://temporal.example:8233/namespaces/{NS}/workflows?query="
        f"TemporalScheduledById%3D%22{W.HANDED}%22")
    assert "schedule" not in page.row_links("table.schedules", key(W.PLAIN))
    plain = get(client(mixed), "/ui/").row_links("table.schedules", key(W.HANDED))
    assert all(h.startswith("/ui/") for h in plain.values())  # no base URL: no link out
    assert plain[key(W.HANDED)] == url("schedule", namespace=NS, schedule=W.HANDED)


def test_ids_are_url_encoded_in_temporal_links(tmp_path: Path) -> None:
    from schedfence.infra.web.overview import TemporalUI
    ui = TemporalUI.at("https://t.example/ui/")
    assert ui.schedule("ns/x", "a b/c?d") == \
        "https://t.example/ui/namespaces/ns%2Fx/schedules/a%20b%2Fc%3Fd"
    assert ui.workflow("ns", "wf#1") == "https://t.example/ui/namespaces/ns/workflows/wf%231"
    assert TemporalUI.at(None).schedule("ns", "x") is None
    for bad in ("ftp://x", "localhost:8233", "http://x/?q=1"):
        with pytest.raises(Exception, match="must be http"):
            TemporalUI.at(bad)


def test_the_action_workflows_link_into_temporal(tmp_path: Path) -> None:
    w = W.mixed(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        w.service.run_scheduler(now=datetime.now(timezone.utc) + timedelta(hours=3))
        page = get(client(w, UI), "/ui/schedule", namespace=NS, schedule=W.PLAIN)
    finally:
        w.service.close()
    temporal = [h for t, h in page.all_links("table.actions") if t == "in Temporal"]
    assert temporal and all(h.startswith(f"http://temporal.example:8233/namespaces/{NS}/"
                                         f"workflows/act-{W.PLAIN}") for h in temporal)


# -- the timeline ------------------------------------------------------------------------------
def test_the_timeline_leads_with_the_steps_names_the_actor_and_shows_the_real_state(
        mixed: World) -> None:
    page = get(client(mixed), "/ui/schedule", namespace=NS, schedule=W.PARKED)
    assert page.text_of("#latest-migration").endswith("(rollback): parked (foreign_destination)")
    assert "pending" not in page.text_of("dl.facts")
    assert page.text_of("#owner") == "source"
    tables = page.table_classes("table.timeline")
    assert tables == ["timeline steps", "timeline others"]
    steps = page.rows("table.timeline.steps")
    replay = mixed.service.replay(NS, W.PARKED)
    assert [int(r.attrs["data-position"]) for r in steps] == [
        s["position"] for s in replay["steps"]]
    assert {r.attrs["data-lane"] for r in steps} == {"migration", "source"}  # its fence too
    others = page.rows("table.timeline.others")
    assert others and {r.attrs["data-lane"] for r in others} <= {"source", "action"}
    assert max(int(r.attrs["data-position"]) for r in others) < \
        int(steps[0].attrs["data-position"])  # log order would put these first
    who = {r.attrs["data-type"]: r.cell("actor") for r in steps}
    assert who["RequestIdAssigned"] == "admin alice"
    assert who["MigrationParked"] == "worker w1"
    assert "no narration" not in page.text and "later release" not in page.text


def test_a_forward_migration_and_its_key_are_narrated_with_their_state(mixed: World) -> None:
    page = get(client(mixed), "/ui/schedule", namespace=NS, schedule=W.BACK)
    assert page.text_of("#latest-migration").endswith("(forward): completed")
    assert page.text_of("#owner") == "source"
    types = [r.attrs["data-type"] for r in page.rows("table.timeline")]
    assert {"ForwardRequested", "ForwardOpened", "ForwardClosed", "Created"} <= set(types)
    assert "later release" not in page.text


def test_directions_are_the_domains_names() -> None:
    assert DIRECTIONS == ("rollback", "forward")


# -- the owner column after an ownership audit --------------------------------------------------
def test_the_owner_column_reads_the_last_audit_where_it_still_describes_the_key(
        tmp_path: Path) -> None:
    from schedfence.infra.application.owners import run_audit
    from schedfence.infra.application.service import open_service
    from tests.infra.cli.owners_world import NS as ONS, make_world
    store = f"sqlite:///{tmp_path / 'store.db'}"
    make_world(store)
    with open_service(store, "sim") as svc:
        c = TestClient(make_app(svc, None), headers={"Authorization": f"Bearer {READER_TOKEN}"})
        before = table(get(c, "/ui/"))
        assert before[f"{ONS}/gone"]["owner"] == "temporal"  # the history: handed over
        audit = run_audit(svc, ONS)
        rows = table(get(c, "/ui/"))
        found = {r.schedule_id: r for r in audit.owner_rows()}
        assert rows[f"{ONS}/gone"]["owner"] == "none"  # deleted by hand: nobody runs it
        assert "missing_at_destination" in rows[f"{ONS}/gone"]["owner_cell"]
        assert "two_owners" in rows[f"{ONS}/both"]["owner_cell"]
        assert rows[f"{ONS}/handed"]["next"] == found["handed"].next_run  # Temporal's own
        assert found["handed"].next_run and "drift" not in rows[f"{ONS}/handed"]["owner_cell"]
        svc.rollback(ONS, "plain", "R-plain-after")  # a migration after the audit
        svc.run_until_idle(retry_for=0)
        assert table(get(c, "/ui/"))[f"{ONS}/plain"]["owner"] == "temporal"  # history, newer
