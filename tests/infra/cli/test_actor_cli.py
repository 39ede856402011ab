"""``--actor`` on every state-changing schedule command: each event it writes names who asked
(the worker id without it), ``audit --actor`` finds them and the narration names them, read
by fresh ``schedfence`` processes."""
from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from tests.infra.cli.cli_runs import store, subprocess_cli  # noqa: F401 (fixture)

KEY = ("payments", "nightly")
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


def _cli(store: str, *args: str) -> str:
    done = subprocess_cli(store, "--destination", "sim", "--worker-id", "w-cli", *args)
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
    assert operator == [(t, "w-cli" if i == 1 else f"op{i}")
                        for i, (_, t) in enumerate(CHANGES)]
    found = json.loads(_cli(store, "audit", "--actor", "op3", "--json"))["entries"]
    assert [e["type"] for e in found] == ["NotesUpdated"]
    narrated = _cli(store, "history", *KEY, "--narrate")
    assert "notes updated by op3" in narrated and "schedule deleted by op7" in narrated
    assert "paused=yes by w-cli" in narrated


def test_a_bad_actor_is_refused_and_writes_nothing(store: str) -> None:
    _cli(store, "schedule", "create", *KEY)
    before = json.loads(_cli(store, "audit", "--limit", "1000", "--json"))["entries"]
    done = subprocess_cli(store, "schedule", "pause", *KEY, "--actor", "two\nlines")
    assert done.returncode == 1 and done.stderr.startswith("error: invalid_argument: actor")
    assert "Traceback" not in done.stderr
    after = json.loads(_cli(store, "audit", "--limit", "1000", "--json"))["entries"]
    assert after == before
