"""``schedfence scheduler`` in its own process wakes at each due time, not only every poll: with
``--poll-interval 30``, a schedule every second starts each second (the pass reports the due
index's next time and the loop sleeps until then), and every time is started once."""
from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta

from schedfence.domain.source.action import make_action, make_policies
from schedfence.domain.source.spec import make_spec
from schedfence.infra.application.service import open_service
from tests.helpers import NS
from tests.infra.cli.cli_runs import ROOT, store  # noqa: F401 (store: a fixture)

PASSES = 3  # passes that start an action, each a second after the last


def _lines(proc: subprocess.Popen, into: queue.Queue) -> None:
    for line in proc.stdout:
        into.put(line)


def test_a_poll_of_30_s_still_starts_a_schedule_every_second(store: str,  # noqa: F811
                                                             tmp_path) -> None:
    with open_service(store, "sim") as svc:
        svc.create_schedule(NS, "tick", spec=make_spec(intervals=[(1, 0)]),
                            action=make_action(workflow_type="W", task_queue="q",
                                               workflow_id="tick-act"),
                            policies=make_policies(overlap="allow_all"))
    errors = (tmp_path / "stderr").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                             "--destination", "sim", "scheduler", "--poll-interval", "30",
                             "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=errors,
                            text=True)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc, lines), daemon=True)
    reader.start()
    passes, deadline = [], time.monotonic() + 20  # a loaded machine: well under one poll
    try:
        while len(passes) < PASSES and time.monotonic() < deadline:
            try:
                doc = json.loads(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if doc["event"] == "pass" and doc["started"]:
                passes.append(doc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)  # its stdout ends: the reading thread ends
        reader.join(timeout=10)
        proc.stdout.close()
        errors.close()
    err = (tmp_path / "stderr").read_text()
    assert proc.returncode == 0 and len(passes) == PASSES, err  # a 30 s poll: one pass
    assert all(p["next_due"] for p in passes)
    with open_service(store, "sim") as svc:
        assert svc.verify() == []  # the checker: I1, I17 (no time twice), I18 (none lost)
        started = sorted(w for ns, w in svc.destination.workflow_ids() if ns == NS)
        assert all(svc.destination.created_count(NS, w) == 1 for w in started)
    times = [datetime.fromisoformat(w.removeprefix("tick-act-").replace("Z", "+00:00"))
             for w in started]
    assert len(times) >= PASSES
    assert all(b - a == timedelta(seconds=1) for a, b in zip(times, times[1:]))  # none missed
