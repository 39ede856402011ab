"""``--actor`` on every state-changing schedule command: each event it writes names who asked
(without it, ``SCHEDFENCE_ACTOR`` or the OS user at this host: never the worker id), ``audit --actor`` finds them and the narration names them, read
by fresh ``schedfence`` processes."""
from __future__ import annotations

import getpass
import json
import os
import socket
from datetime import datetime, timedelta, timezone

from tests.infra.cli.cli_runs import store, subprocess_cli  # noqa: F401 (fixture)

KEY = ("payments", "nightly")
PERSON = f"{getpass.getuser()}@{socket.gethostname()}"  # who asks when no one is named
BASE_ENV = {k: v for k, v in os.environ.items() if k != "SCHEDFENCE_ACTOR"}
CHANGES = [  # (command and its arguments, the operator event it records)
    (["create", *KEY, "--interval", "1h", "--workflow-type", "W", "--task-queue", "q"],
     "Created"),
    (["pause", *KEY], "Paused"),
    (["unpause", *KEY], "Paused"),
    (["notes", *KEY, "n"], "NotesUpdated"),
    (["update", *KEY, "--limit", "3"], "ProgramUpdated"),
    (["trigger", *KEY], "Triggered"),
    (["backfill", *KEY, "--start", "{start}", "--end", "{end}"], "BackfillRequested"),
    (["delete", *KEY], "Deleted"),
]


def _cli(store: str, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess_cli(store, "--destination", "sim", "--worker-id", "w-cli", *args,
                          env=dict(BASE_ENV, **(env or {})))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_each_schedule_change_records_its_actor(store: str) -> None:
    end = datetime.now(timezone.utc).replace(microsecond=0)
    times = {"start": (end - timedelta(hours=2)).isoformat(), "end": end.isoformat()}
    for i, (args, _) in enumerate(CHANGES):
        who = [] if i == 1 else ["--actor", f"op{i}"]  # the pause: no --actor
        _cli(store, "schedule", *[a.format(**times) for a in args], *who)
    entries = json.loads(_cli(store, "audit", "--schedule", "/".join(KEY), "--limit", "1000",
                              "--json"))["entries"]
    operator = [(e["type"], e["actor"]) for e in entries
                if e["type"] in {t for _, t in CHANGES} and e["aggregate"] == "schedule"]
    assert operator == [(t, PERSON if i == 1 else f"op{i}")
                        for i, (_, t) in enumerate(CHANGES)]
    found = json.loads(_cli(store, "audit", "--actor", "op3", "--json"))["entries"]
    assert [e["type"] for e in found] == ["NotesUpdated"]
    narrated = _cli(store, "history", *KEY, "--narrate")
    assert "notes updated by op3" in narrated and "schedule deleted by op7" in narrated
    assert f"paused=yes by {PERSON}" in narrated


def test_a_bad_actor_is_refused_and_writes_nothing(store: str) -> None:
    _cli(store, "schedule", "create", *KEY)
    before = json.loads(_cli(store, "audit", "--limit", "1000", "--json"))["entries"]
    done = subprocess_cli(store, "schedule", "pause", *KEY, "--actor", "two\nlines")
    assert done.returncode == 1 and done.stderr.startswith("error: invalid_argument: actor")
    assert "Traceback" not in done.stderr
    after = json.loads(_cli(store, "audit", "--limit", "1000", "--json"))["entries"]
    assert after == before


def _actors(store: str) -> list[tuple[str, str]]:
    entries = json.loads(_cli(store, "audit", "--limit", "1000", "--json"))["entries"]
    return [(e["type"], e["actor"]) for e in entries
            if e["type"] in ("Created", "Paused", "RequestIdAssigned", "NotesUpdated")
            and e["aggregate"] in ("schedule", "migration")]


def test_the_actor_is_the_person_by_default_and_settable_once(store: str) -> None:
    _cli(store, "schedule", "create", *KEY)  # no --actor, no SCHEDFENCE_ACTOR: user@host
    _cli(store, "schedule", "pause", *KEY, env={"SCHEDFENCE_ACTOR": "alice"})
    _cli(store, "schedule", "notes", *KEY, "n", "--actor", "bob",
         env={"SCHEDFENCE_ACTOR": "alice"})  # --actor wins over the environment
    _cli(store, "rollback", *KEY, env={"SCHEDFENCE_ACTOR": "alice"})
    assert _actors(store) == [("Created", PERSON), ("Paused", "alice"), ("NotesUpdated", "bob"),
                              ("RequestIdAssigned", "alice")]
    assert "w-cli" not in [actor for _, actor in _actors(store)]  # the worker id never asks


def test_a_bad_actor_in_the_environment_is_refused_naming_it(store: str) -> None:
    _cli(store, "schedule", "create", *KEY)
    before = _actors(store)
    done = subprocess_cli(store, "--destination", "sim", "schedule", "pause", *KEY,
                          env=dict(BASE_ENV, SCHEDFENCE_ACTOR=" alice"))
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: invalid_argument: SCHEDFENCE_ACTOR: actor")
    assert "Traceback" not in done.stderr
    assert _actors(store) == before
