"""Fenced rollbacks/s against a real Temporal dev server, beside unfenced loops making the same
destination calls at the same concurrency, side by side in one run.

    .venv/bin/python benchmarks/temporal_throughput.py [--migrations 500] [--runs 3] [--quick]

Each run starts its own dev server (``temporal server start-dev``, tests/temporal_server.py) on
a free port and stops it by pid at the end of the run. Every path uses fresh schedule ids, so
paths never collide at the server, and deletes its schedules afterwards (not timed); each
path's clock starts once the server process is quiet (``--settle``); the order of the paths
rotates from run to run. Per run:

- ``fenced``: on a fresh PostgreSQL schema, N pause-and-notes schedules are created first (not
  timed); then, timed, ``svc.rollback_many`` (500 per call: reads, one sentinel describe per
  schedule, one append) and ``svc.worker.attempt_batch`` over the migration ids, ``BATCH_SIZE``
  at a time (one append of claims, the starts on a pool of ``concurrency`` threads, one append of
  answers, one of closes). Each start is the adapter's CreateSchedule with the durable request
  id, then the describe that proves whose the schedule is. Afterwards every migration must be
  completed and the invariant checker must find nothing ("checker: ok").
- ``unfenced, raw CreateSchedule`` (what upstream did before the fix): the same
  CreateSchedule requests (``temporal_schedule.create_request`` of the same ``StartWorkflow``
  the fence sends, request id derived the same way), on a pool of the same ``concurrency``
  threads over the same adapter connection; no describe, no store.
- ``unfenced, adapter start``: the adapter's ``start_workflow`` on the same requests and pool
  (CreateSchedule + the proving describe), no store: the fence's destination calls minus the
  sentinel describes.

Rates are migrations (schedules handed over) per second, medians of ``--runs`` runs; ratios are
of medians measured in the same run of this script. Then where the fenced path's time went
(medians over runs, seconds per run). Not a timed test: figures depend on the machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import defaultdict
from contextlib import nullcontext
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import ROOT, machine, median, pg_store  # noqa: E402

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from tests.temporal_server import start_dev_server, temporal_binary  # noqa: E402

NS = "default"
ROLLBACK_CHUNK = 500  # schedules per rollback_many call, as benchmarks/batch_throughput.py
QUIET_BELOW = 0.15  # of one core: the server counts as quiet
PATHS = ("fenced", "raw", "adapter")
LABELS = {"fenced": "fenced (rollback_many + attempt_batch)",
          "raw": "unfenced, raw CreateSchedule",
          "adapter": "unfenced, adapter start"}


def server_cpu(pid: int) -> float:
    """CPU seconds the server process has used (Linux /proc; 0.0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def quiet(pid: int, timeout: float, busy: float = QUIET_BELOW, step: float = 0.5) -> float:
    """Wait (at most ``timeout`` s) until the server used less than ``busy`` of a core over
    ``step`` s: the previous path's creates leave its scheduler workflows to run. Seconds
    waited."""
    t0 = time.perf_counter()
    used = server_cpu(pid)
    while time.perf_counter() - t0 < timeout:
        time.sleep(step)
        now = server_cpu(pid)
        if now - used < busy * step:
            break
        used = now
    return time.perf_counter() - t0


def plain_request(sid: str) -> Any:
    """The start the fence sends for a fresh pause-and-notes schedule (``d.start_request`` of
    its migration), built without a store: same fields, same derived request id."""
    from schedfence.domain.ids import (SCHEDULER_WORKFLOW_TYPE, derive_request_id,
                                       destination_workflow_id)
    from schedfence.domain.ports import StartWorkflow
    return StartWorkflow(
        namespace=NS, workflow_id=destination_workflow_id(sid),
        request_id=derive_request_id(NS, sid, 1), workflow_type=SCHEDULER_WORKFLOW_TYPE,
        input={"namespace": NS, "schedule_id": sid, "incarnation": 1, "paused": False,
               "notes": ""},
        id_reuse_policy="allow_duplicate", id_conflict_policy="fail")


@dataclass
class Probe:
    """Where the fenced path's time goes: the worker's crash-hook points (every append and
    every start call) time-stamped, and the destination's describes counted by phase."""

    phase: str = "setup"
    marks: list[tuple[str, float]] = field(default_factory=list)  # main thread's appends
    call_s: float = 0.0  # start calls, summed over threads
    describes: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    requests: list[Any] = field(default_factory=list)
    rolled: float = 0.0  # seconds in rollback_many
    _open: dict[int, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def hook(self, point: str) -> None:
        now = time.perf_counter()
        if point.endswith("_append"):
            self.marks.append((point, now))
        elif point == "start.before_call":
            self._open[threading.get_ident()] = now
        elif point == "start.after_call":
            with self._lock:
                self.call_s += now - self._open.pop(threading.get_ident())

    def watch(self, dest: Any) -> None:
        """Count and time ``dest``'s describes and record its starts (instance attributes:
        the adapter's own calls to ``describe`` go through them too)."""
        describe, start = dest.describe, dest.start_workflow

        def timed_describe(*args: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return describe(*args, **kw)
            finally:
                with self._lock:
                    self.describes[self.phase].append((t0, time.perf_counter()))

        def recorded_start(request: Any) -> Any:
            self.requests.append(request)
            return start(request)
        dest.describe, dest.start_workflow = timed_describe, recorded_start

    def appends(self) -> dict[str, float]:
        """Seconds in each kind of append, and the windows between a claim append and the next
        answer append (the batch's concurrent starts)."""
        spent: dict[str, float] = defaultdict(float)
        opened: dict[str, float] = {}
        last_claim = None
        for point, t in self.marks:
            label, _, when = point.partition(".")
            if when == "before_append":
                opened[label] = t
                if label == "answer" and last_claim is not None:
                    spent["starts window"] += t - last_claim
            else:
                spent[f"{label} append"] += t - opened.pop(label)
                if label == "claim":
                    last_claim = t
        return dict(spent)


def _destination(target: str) -> Any:
    """A new adapter, connected (one describe of an id nobody uses) before any clock starts."""
    from schedfence.domain.ports import DestinationNotFound
    from schedfence.infra.adapters.destination.temporal import TemporalDestination
    dest = TemporalDestination(target, NS, rpc_timeout=30.0)
    try:
        dest.describe(NS, f"warm-up-{uuid.uuid4().hex}")
    except DestinationNotFound:
        pass
    return dest


def _concurrency() -> int:
    from schedfence.infra.engines.attempt import RollbackEngine
    return RollbackEngine.concurrency


def _rollback_and_attempt(svc: Any, probe: Probe, sids: list[str]) -> float:
    """The timed fenced part: every rollback, then every migration's batch; seconds taken."""
    from schedfence.infra.engines.attempt import BATCH_SIZE
    t0 = time.perf_counter()
    probe.phase = "rollback_many"
    ids = []
    for k in range(0, len(sids), ROLLBACK_CHUNK):
        ids += [r.migration_id for r in svc.rollback_many(NS, sids[k:k + ROLLBACK_CHUNK])]
    probe.phase, rolled = "attempt_batch", time.perf_counter() - t0
    mids = [uuid.UUID(str(m)) for m in ids]
    for k in range(0, len(mids), BATCH_SIZE):
        svc.worker.attempt_batch(mids[k:k + BATCH_SIZE])
    probe.rolled = rolled
    return time.perf_counter() - t0


def fenced_run(target: str, sids: list[str], settle: Callable[[], float],
               keep: str | None = None) -> tuple[float, dict[str, float]]:
    """Migrations/s of the fenced path on a fresh schema (or on ``keep``, left in place), and
    where its time went; ``settle()`` runs after the creates, before the clock starts."""
    from schedfence.infra.application.service import open_service
    probe = Probe()
    dest = _destination(target)
    probe.watch(dest)
    try:
        with nullcontext(keep) if keep else pg_store() as store, open_service(store, dest, worker_id="bench",
                                               crash_hook=probe.hook) as svc:
            for sid in sids:  # not timed (each create asks the server first, I1)
                svc.create_schedule(NS, sid)
            settle()
            wall = _rollback_and_attempt(svc, probe, sids)
            by_state = svc.stats()["by_state"]
            assert by_state.get("completed") == len(sids), by_state
            violations = svc.verify()
            assert violations == [], violations[:3]
    finally:
        dest.close()
    sent = probe.requests[0]
    assert sent == plain_request(sent.input["schedule_id"]), (sent, "differs from the unfenced")
    return len(sids) / wall, _profile(probe, wall, len(sids))


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``spans`` (calls in flight together count once)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        total += max(0.0, b - max(a, end))
        end = max(end, b)
    return total


def _profile(probe: Probe, wall: float, n: int) -> dict[str, float]:
    spent = probe.appends()
    sentinel = _covered(probe.describes["rollback_many"])
    rolled = probe.rolled
    batches = wall - rolled
    starts = spent.get("starts window", 0.0)
    return {
        "total": wall,
        "rollback_many": rolled,
        "  sentinel describes (concurrent, wall)": sentinel,
        "  rollback append": spent.get("rollback append", 0.0),
        "  reads + deciding": rolled - sentinel - spent.get("rollback append", 0.0),
        "attempt_batch": batches,
        "  claim appends": spent.get("claim append", 0.0),
        "  starts (concurrent windows)": starts,
        "  answer appends": spent.get("answer append", 0.0),
        "  close appends": spent.get("close append", 0.0),
        "  reads + deciding ": batches - starts - sum(
            spent.get(f"{k} append", 0.0) for k in ("claim", "answer", "close")),
        "mean start call, ms": 1000 * probe.call_s / n,
        "mean describe in a start, ms": 1000 * median(
            [b - a for a, b in probe.describes["attempt_batch"]] or [0.0]),
    }


def unfenced_run(target: str, sids: list[str], raw: bool,
                 settle: Callable[[], float]) -> tuple[float, float]:
    """Migrations/s of the same requests sent with no store on a pool of the same bound (one
    pool over all of them, as a plain loop would); and the mean call in ms."""
    from schedfence.infra.adapters.destination.temporal_wire import start_error
    from schedfence.infra.adapters.destination.temporal_schedule import create_request
    dest = _destination(target)
    requests = [plain_request(sid) for sid in sids]
    now = datetime.now(timezone.utc)  # not timed, as the fence's own inputs are prepared

    def create(request: Any) -> float:
        t0 = time.perf_counter()
        if raw:
            rpc = create_request(request, dest.identity, now)
            dest._rpc("create schedule", "create_schedule", rpc, start_error)
        else:
            answer = dest.start_workflow(request)
            assert answer.started, answer
        return time.perf_counter() - t0
    try:
        settle()
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=_concurrency()) as pool:
            calls = list(pool.map(create, requests))
        wall = time.perf_counter() - t0
    finally:
        dest.close()
    return len(sids) / wall, 1000 * sum(calls) / len(calls)


def one_round(server: Any, n: int, run: int, a: argparse.Namespace,
              rates: dict[str, list[float]], profiles: list[dict[str, float]],
              calls: dict[str, list[float]]) -> None:
    """Every path once, in an order rotated by ``run``, each on fresh schedule ids, each
    clock started once the server is quiet."""
    order = PATHS[run % 3:] + PATHS[:run % 3]
    waited: list[float] = []

    def wait() -> float:
        waited.append(quiet(server.pid, a.settle))
        return waited[-1]
    target = server.target
    for path in order:
        sids = [f"tt-{uuid.uuid4().hex[:8]}-{i:05d}" for i in range(n)]
        if path == "fenced":
            rate, profile = fenced_run(target, sids, wait, a.store)
            profiles.append(profile)
            calls["fenced"].append(profile["mean start call, ms"])
        else:
            rate, call_ms = unfenced_run(target, sids, path == "raw", wait)
            calls[path].append(call_ms)
        rates[path].append(rate)
        print(f"# run {run + 1}: {path:8} {rate:8.1f} migrations/s (server quiet after "
              f"{waited[-1]:.1f} s)", flush=True)
        delete_all(target, sids)  # not timed: the next path finds the server as this one did


def delete_all(target: str, sids: list[str]) -> None:
    """DeleteSchedule for every schedule a path created (their scheduler workflows would
    otherwise keep the server busier run after run)."""
    from temporalio.api.workflowservice.v1 import DeleteScheduleRequest

    from schedfence.infra.adapters.destination.temporal_wire import describe_error
    dest = _destination(target)

    def delete(sid: str) -> None:
        dest._rpc("delete schedule", "delete_schedule", DeleteScheduleRequest(
            namespace=NS, schedule_id=sid, identity=dest.identity), describe_error)
    try:
        with ThreadPoolExecutor(max_workers=_concurrency()) as pool:
            list(pool.map(delete, sids))
    finally:
        dest.close()


def report(rates: dict[str, list[float]], profiles: list[dict[str, float]],
           calls: dict[str, list[float]]) -> None:
    m = {k: median(v) for k, v in rates.items()}
    print(f"{'path':40} {'migrations/s':>12}  {'runs (min-max)':>17}  {'mean call ms':>12}")
    for path in PATHS:
        print(f"{LABELS[path]:40} {m[path]:12.1f}  {min(rates[path]):8.1f}-"
              f"{max(rates[path]):<8.1f}  {median(calls[path]):12.1f}")
    ratio = m["fenced"] / m["raw"]
    print(f"ratio fenced / unfenced raw CreateSchedule = {ratio:.2f}x "
          f"(target >= 0.8x: {'met' if ratio >= 0.8 else 'NOT met'})")
    print(f"ratio fenced / unfenced adapter start = {m['fenced'] / m['adapter']:.2f}x")
    print("where the fenced path's time went (median over runs; seconds per run, share):")
    total = median([p["total"] for p in profiles])
    for key in profiles[0]:
        value = median([p[key] for p in profiles])
        share = f"{100 * value / total:5.1f}%" if not key.startswith("mean") else ""
        unit = "" if key.startswith("mean") else " s"
        print(f"  {key.rstrip():34} {value:9.3f}{unit:2} {share}")
    print("checker: ok (every fenced run: all migrations completed, no violation)", flush=True)


def _server_version() -> str:
    out = subprocess.run([temporal_binary(), "--version"], capture_output=True, text=True,
                         timeout=30).stdout.strip()
    return out.removeprefix("temporal version ") or "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--migrations", type=int, default=500)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--settle", type=float, default=60.0,
                    help="at most this many seconds waiting, before each path's clock starts, "
                         "for the server to go quiet (its own scheduler workflows run after "
                         "each create)")
    ap.add_argument("--store", help="the fenced runs' PostgreSQL store URL, kept afterwards "
                    "(default: a fresh schema per run, dropped)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (smoke run)")
    a = ap.parse_args(argv)
    if a.quick:
        a.migrations, a.runs, a.settle = 20, 1, 10.0
    n, runs = a.migrations, a.runs
    if n < 1 or runs < 1:
        ap.error("--migrations and --runs must be positive")
    print(f"# Temporal dev server {_server_version()}, a fresh one per run; PostgreSQL store; "
          f"{n} migrations per path per run, median of {runs} runs; concurrency "
          f"{_concurrency()}")
    print(f"# machine: {machine()}", flush=True)
    rates: dict[str, list[float]] = {p: [] for p in PATHS}
    calls: dict[str, list[float]] = {p: [] for p in PATHS}
    profiles: list[dict[str, float]] = []
    for run in range(runs):
        workdir = Path(tempfile.mkdtemp(prefix="schedfence-bench-temporal-"))
        server = start_dev_server(workdir)
        try:
            print(f"# run {run + 1}: server at {server.target} (pid {server.pid})", flush=True)
            one_round(server, n, run, a, rates, profiles, calls)
        finally:
            server.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    report(rates, profiles, calls)
    return 0


def _exit(code: Callable[[], int]) -> None:
    """Run, flush, and leave with ``os._exit``: the SDK's bridge can crash the interpreter's
    own exit after its clients were dropped (temporalio/sdk-python#300)."""
    status = 1
    try:
        status = code()
    except SystemExit as exc:  # argparse's --help and errors
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - shown, then the same hard exit
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    _exit(main)
