"""Forensic replay (``MigrationService.replay``, ``schedfence replay``): every step of a
migration re-derived from the stored events alone, on every failure mode's history, with
``--at``, state diffs checked against the aggregate's own fold, violations at the step that
caused them, the CLI's text and JSON (validated against the published schema), and no
destination anywhere."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

import jsonschema
import pytest
from click.testing import CliRunner
from eventsourcing.utils import register_topic

from schedfence.infra.application.actor import default_actor
from schedfence.domain.errors import InvalidArgument, NotFound
from schedfence.domain.rollback.aggregate import _Event
from schedfence.infra.cli.commands import cli
from schedfence.infra.application.offline import OfflineDestination, open_offline
from schedfence.infra.application.service import MIGRATION_TOPICS, MigrationService
from tests import pgtools
from tests.helpers import NS, SID, new_world, plant_legacy
from tests.replay.scenarios import SCENARIOS, corrupt, f1, f3

SCHEMA = json.loads((Path(__file__).resolve().parents[4] / "schemas" /
                     "replay.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def replays(service: MigrationService) -> list[dict]:
    """The replay of every migration in the store, each by its id on its own key."""
    docs = []
    for note in service.app.notifications(MIGRATION_TOPICS):
        st = service.app.repository.get(note.originator_id).state
        docs.append(service.replay(st.namespace, st.schedule_id, migration_id=st.migration_id))
    return docs


def steps_of(doc: dict, type_: str) -> list[dict]:
    return [s for s in doc["steps"] if s["type"] == type_]


def expected_diff(before, after) -> list[dict]:
    old, new = (asdict(before) if before else {}), asdict(after)
    return [{"field": k, "before": old.get(k), "after": v} for k, v in new.items()
            if k not in old or old[k] != v]


# -- every failure mode's history --------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n != "corrupt_history"])
def test_replay_of_every_failure_mode_matches_the_aggregates_own_fold(name, world):
    w = world
    SCENARIOS[name][2](w)
    docs = replays(w.service)
    assert docs, "every failure-mode history holds a migration"
    for doc in docs:
        VALIDATOR.validate(doc)
        mid = uuid.UUID(doc["migration_id"])
        positions = [s["position"] for s in doc["steps"]]
        assert positions == sorted(set(positions))
        mine = [s for s in doc["steps"] if s["role"] == "migration"]
        assert [s["version"] for s in mine] == list(range(1, len(mine) + 1))
        for s in mine:  # the diff is exactly what the repository's fold changed at that version
            before = w.service.app.repository.get(mid, version=s["version"] - 1) \
                if s["version"] > 1 else None
            after = w.service.app.repository.get(mid, version=s["version"])
            assert s["diff"] == expected_diff(before and before.state, after.state), s["type"]
        assert doc["state"] == asdict(w.service.app.repository.get(mid).state)
        sources = {s["type"] for s in doc["steps"] if s["role"] == "source"}
        assert "FencedForMigration" in sources and sources <= {
            "FencedForMigration", "ClosedByMigration", "FenceReleased"}
        assert doc["ok"] and doc["violations"] == []


def test_f1_replay_shows_the_ids_compared_and_the_decisions(world):
    w = world
    f1(w)
    doc = w.service.replay(NS, "f1")
    [foreign, ours] = steps_of(doc, "DestinationAnswered")
    cmp = {c["name"]: c for c in foreign["decision"]["comparisons"]}
    assert cmp["start_request_id == request id"] == {
        "name": "start_request_id == request id", "left": "foreign-request", "right": "R1",
        "equal": False}
    assert foreign["decision"]["next"] == "reconcile" and foreign["attempt"] == 1
    assert foreign["worker"] == "w1" and foreign["payload"]["kind"] == "already_started"
    [chain] = steps_of(doc, "ChainVerified")
    assert chain["decision"]["comparisons"][-1] == {
        "name": "head_create_request_id == request id", "left": "foreign-request",
        "right": "R1", "equal": False}
    [parked] = steps_of(doc, "MigrationParked")
    assert {d["field"]: (d["before"], d["after"]) for d in parked["diff"]}["phase"] == (
        "claimed", "parked")
    assert parked["decision"]["next"] == "check_foreign"
    [rearm] = steps_of(doc, "StartClaimRearmed")
    assert (rearm["decision"]["step"], rearm["decision"]["next"]) == ("check_foreign",
                                                                      "claim_and_start")
    assert ours["payload"]["kind"] == "created" and doc["next_step"] == "drop"
    [closed] = [s for s in doc["steps"] if s["role"] == "source" and
                s["type"] == "ClosedByMigration"]
    assert all(c["equal"] for c in closed["decision"]["comparisons"])


def test_f3_replay_accepts_via_the_chain_head_after_an_unknown_answer(world):
    w = world
    f3(w)
    doc = w.service.replay(NS, "f3")
    [answer] = steps_of(doc, "DestinationAnswered")
    assert answer["payload"]["kind"] == "unavailable" and answer["decision"]["next"] == "reconcile"
    [accept] = steps_of(doc, "OwnershipAccepted")
    assert accept["payload"]["evidence"] == "chain_head"
    assert accept["decision"]["comparisons"][-1]["name"] == "receipt == verified chain head"
    assert accept["decision"]["comparisons"][-1]["equal"] is True


# -- --at ----------------------------------------------------------------------------------------
def test_at_shows_the_state_as_of_a_migration_version(world):
    w = world
    f3(w)
    full = w.service.replay(NS, "f3")
    mid = uuid.UUID(full["migration_id"])
    for version in range(1, full["version"] + 1):
        doc = w.service.replay(NS, "f3", at=version)
        VALIDATOR.validate(doc)
        assert doc["version"] == version and doc["at"] == version
        assert doc["state"] == asdict(w.service.app.repository.get(mid, version=version).state)
        cut = [s for s in full["steps"] if s["position"] <= doc["steps"][-1]["position"]]
        assert doc["steps"] == cut and doc["steps"][-1]["version"] == version
    assert w.service.replay(NS, "f3", at=2)["state"]["phase"] == "claimed"
    for bad in (0, full["version"] + 1, True, "2"):
        with pytest.raises(InvalidArgument):
            w.service.replay(NS, "f3", at=bad)


# -- a corrupted history ---------------------------------------------------------------------
def test_violations_are_reported_at_the_step_that_caused_them(world):
    w = world
    corrupt(w)
    doc = w.service.replay(NS, "bad")
    VALIDATOR.validate(doc)
    flagged = {s["type"]: sorted(v["invariant"] for v in s["checks"])
               for s in doc["steps"] if s["checks"]}
    assert flagged == {"DestinationStartIssued": ["I11", "I4"], "SourceClosed": ["I2"]}
    [start] = steps_of(doc, "DestinationStartIssued")
    assert all(start["position"] in v["positions"] for v in start["checks"])
    assert [v["invariant"] for v in doc["final_checks"]] == ["I10"]
    assert not doc["ok"] and len(doc["violations"]) == 4
    assert sorted(v.invariant for v in w.service.verify()) == ["I10", "I11", "I2", "I4"]
    assert w.service.replay(NS, "bad", at=1)["ok"]  # before the bad events


class OperatorNoted(_Event):
    """A migration event type today's reducer has never heard of (a future recovery event)."""

    TOPIC: ClassVar[str] = "schedfence.migration.test.OperatorNoted"
    note: str


register_topic(OperatorNoted.TOPIC, OperatorNoted)


def test_an_event_type_the_reducer_does_not_know_is_shown_not_skipped(world):
    w = world
    w.service.create_schedule(NS, SID)
    mid = w.service.rollback(NS, SID, "R1").migration_id
    version = w.service.app.repository.get(uuid.UUID(mid)).version
    # Stored as a later release would write it (applying it here would need the reducer).
    event = OperatorNoted(originator_id=uuid.UUID(mid), originator_version=version + 1,
                          request_id="R1", note="looked at it")
    w.service.app.recorder.insert_events([w.service.app.mapper.to_stored_event(event)])
    doc = w.service.replay(NS, SID)
    [noted] = steps_of(doc, "OperatorNoted")
    assert noted["error"].startswith("reducer refused OperatorNoted")
    assert noted["diff"] == [] and [v["invariant"] for v in noted["checks"]] == ["I0"]
    assert "note=looked at it" in noted["decision"]["summary"]


def test_recovery_events_replay_generically(world):
    w = world
    w.service.create_schedule(NS, SID, notes="old")
    plant_legacy(w.service)
    w.service.recover("adopt", NS, SID, actor="ops", reason="adopt-it", request_id="RA")
    doc = w.service.replay(NS, SID)
    VALIDATOR.validate(doc)
    assert [(s["role"], s["type"]) for s in doc["steps"]][0] == ("migration",
                                                                 "RequestIdAssigned")
    types = {s["type"]: s for s in doc["steps"]}
    assert types["FenceAdopted"]["role"] == "source"
    adopted = types["LegacyMigrationAdopted"]
    assert {d["field"]: d["after"] for d in adopted["diff"]}["request_id"] == "RA"
    assert "request id RA" in adopted["decision"]["summary"]
    assert doc["request_id"] == "RA" and doc["ok"]


# -- the CLI ---------------------------------------------------------------------------------
@pytest.fixture
def f1_store(file_store_url: str) -> str:
    store = file_store_url  # a SQLite file or a PostgreSQL schema
    w = new_world(store)  # an in-memory destination: the store holds events only
    f1(w)
    corrupt(w)
    w.service.close()
    return store


def cli_run(store: str, *args: str):
    return CliRunner().invoke(cli, ["--store", store, "replay", *args])


def test_cli_text_is_one_block_per_step(f1_store):
    result = cli_run(f1_store, NS, "f1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # No actor named: requested by who asked by default (user@host), not the worker id w1.
    assert re.match(r"^replay default/f1 migration [0-9a-f-]{36} request id R1, requested by "
                    + re.escape(default_actor()) + r": \d+ steps, version 12$", lines[0])
    heads = [i for i, line in enumerate(lines) if line.startswith("#")]
    for i in heads:  # each block: header, decision, (compared,) state, checks
        block = lines[i + 1:next((h for h in heads if h > i), len(lines) - 3)]
        assert block[0].startswith("  decision: ") and block[-1] == "  checks: ok"
        assert any(b.startswith("  state: ") for b in block)
    claim = lines.index(next(x for x in lines if " StartClaimConsumed" in x))
    assert re.match(r"^#\d+ v2 StartClaimConsumed  attempt 1 worker w1$", lines[claim])
    assert lines[claim + 3] == ("  state: phase pending → claimed, claim_armed true → false, "
                                "attempts 0 → 1, last_worker \"\" → w1")
    assert re.match(r"^#\d+ source v2 FencedForMigration$", lines[heads[0]])
    assert any("compared: start_request_id == request id: foreign-request ≠ R1" in x
               for x in lines)
    assert lines[-3:] == [lines[-3], "final checks: ok", "invariants: ok"]
    assert lines[-3].startswith("state at v12: phase completed")


def test_cli_shows_a_violation_at_its_step_and_exits_1(f1_store):
    result = cli_run(f1_store, NS, "bad")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    start = lines.index(next(x for x in lines if " DestinationStartIssued" in x))
    checks = next(x for x in lines[start:] if x.startswith("  checks: "))
    assert "I4 VIOLATED: start issued without a claim consumed" in checks
    assert lines[-1] == "invariants: 4 violation(s)"
    assert lines[-2].startswith("final checks: I10 VIOLATED")


@pytest.mark.parametrize("args", [(NS, "f1"), (NS, "f1", "--at", "4"), (NS, "bad")])
def test_cli_json_validates_against_the_published_schema(f1_store, args):
    result = cli_run(f1_store, *args, "--json")
    assert result.exit_code == (1 if "bad" in args else 0)
    doc = json.loads(result.stdout)
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    VALIDATOR.validate(doc)
    broken = dict(doc, steps=[dict(doc["steps"][0], role="worker")])
    assert not VALIDATOR.is_valid(broken)  # the schema does constrain the output


@pytest.mark.parametrize("args, code", [
    ((NS, "nope"), "error: not_found: schedule default/nope not found"),
    ((NS, "f1", "--migration", str(uuid.uuid4())), "error: not_found: migration"),
    ((NS, "f1", "--migration", "xyz"), "error: invalid_argument: --migration 'xyz'"),
    ((NS, "f1", "--at", "99"), "error: invalid_argument: --at 99"),
])
def test_cli_errors_are_one_line(f1_store, args, code):
    result = cli_run(f1_store, *args)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(code)


def store_tables(url: str) -> list[str]:
    if not url.startswith("sqlite:///"):
        return sorted(pgtools.table_names(url))
    with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
        return sorted(r[0] for r in db.execute("select name from sqlite_master"))


def test_cli_replays_a_copy_of_a_store_without_touching_a_destination(f1_store, tmp_path,
                                                                      store_kind,
                                                                      new_store_url):
    if store_kind == "postgres":
        # The schema itself stands for the copy: the replay must leave its tables as they are.
        copy_url, absent_url = f1_store, new_store_url("absent")
    else:
        copy = tmp_path / "copy.db"
        shutil.copy(f1_store.removeprefix("sqlite:///"), copy)
        copy_url, absent_url = f"sqlite:///{copy}", f"sqlite:///{tmp_path}/absent.db"
    before = store_tables(copy_url)
    result = cli_run(copy_url, NS, "f1", "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["ok"]
    assert store_tables(copy_url) == before  # no simulator tables were created beside the events
    missing = cli_run(absent_url, NS, "f1")
    if store_kind == "postgres":
        assert missing.exit_code == 1 and "no such schema" in missing.stderr
        assert missing.stderr.startswith("error: invalid_argument: ")
        assert not pgtools.schema_exists(absent_url)
    else:
        assert missing.exit_code == 1 and "no such file" in missing.stderr
        assert not (tmp_path / "absent.db").exists()


def test_replay_works_with_a_destination_that_refuses_every_call(f1_store):
    service = open_offline(f1_store)
    assert isinstance(service.destination, OfflineDestination)
    try:
        for call in (lambda: service.destination.describe(NS, "x"),
                     lambda: service.destination.start_workflow(None)):
            with pytest.raises(Exception, match="offline"):
                call()
        doc = service.replay(NS, "f1")
        assert doc["ok"] and doc["state"]["phase"] == "completed"
        with pytest.raises(NotFound):
            service.replay(NS, "nope")
    finally:
        service.close()


def test_replay_on_postgres_creates_nothing_and_never_shows_the_password(pg_database):
    """Replay opens no schema it would have to create, and its errors carry no password."""
    url = pgtools.database_url(pg_database, "t_never_made").replace(
        "postgres@", "postgres:s3cret-pw@")
    missing = cli_run(url, NS, "f1")
    assert missing.exit_code == 1 and missing.stderr.startswith("error: invalid_argument: ")
    assert "no such schema" in missing.stderr and "s3cret-pw" not in missing.stderr
    assert not pgtools.schema_exists(url)
    unreachable = cli_run(f"postgresql://postgres:s3cret-pw@127.0.0.1:1/{pg_database}", NS, "f1")
    assert unreachable.exit_code == 1
    assert unreachable.stderr.startswith("error: store_unavailable: ")
    assert "s3cret-pw" not in unreachable.stderr and "***" in unreachable.stderr
