"""A property over every HTTP body field and every option of the CLI's writing commands: each
field in turn gets a value drawn from the pydantic models' own types or from the nasty values of
issue 28 (lone surrogates, control characters, NaN, 1e-300, int64 overflow, deep nesting, times
past year 1 or 9999, wrong JSON types). The outcome is a success or one refusal: never
``internal``, never a 5xx, no event written on a refusal, and the reads (list, describe, the
schedule page) still answer afterwards, in process after each example and, for the CLI, from
fresh processes at the end. Values are drawn by each field's kind (read from the models'
annotations), so a time field gets the hostile times. Bounded: 100 examples per side,
derandomized, seconds each."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedfence.infra.cli.commands import cli
from schedfence.infra.http import bodies as b
from tests.helpers import NS
from tests.infra.cli.cli_runs import ROOT
from tests.infra.http.api import Api, api_on, bearer

EXAMPLES = 100
DEEP = json.loads("[" * 70 + "]" * 70)
TIMES = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "0001-01-02T00:00:00Z",
         "9999-12-30T23:59:59Z", "2026-02-30T00:00:00Z", "2020-01-01T00:00:00Z",
         "2020-01-01T00:00:00", "2020-01-01T00:00:00.123456789+05:45", "yesterday"]
INTS = [0, -1, 1, 9, 2**31, 2**63, -2**63 - 1, 10**30, 3162240001, 1.0, 1.5]
FLOATS = [0.0, 1e-300, 1e300, -0.0, 0.0009, 0.001, 10_000.0, 31.0, float("nan"),
          float("inf"), 2**63]
STRINGS = ["", " ", " a", "a ", "a\udc80", "\ud800", "a\x00b", "a\rb", "a\nb", "a\u202eb",
           "\ufeffa", "x" * 1001, "é" * 600, "skip", "workflow", "source_kept", "UTC",
           "Mars/Base", "* * * * *", "0 0 * * 1#2", "0 0 L * *", "@hourly", "/_sys/q",
           "temporal-sys-per-ns-tq", "temporal-sys-scheduler:x", "NoSuchEvent", "Created",
           "1e-300/s", "J*", "[", "WorkflowId"]
JSONS = [DEEP, {"\udc80": 1}, ["\udfff"], {"k": float("nan")}, [float("inf")], 2**63,
         10**400 // 10**100, "x" * 300_000, {"WorkflowType": "x"}, {"k": {"n": [None]}}]
WRONG = [None, True, False, [], {}, [1], {"a": 1}, "1", 1, 1.5]
KINDS = {"time": TIMES, "int": INTS, "float": FLOATS, "str": STRINGS, "json": JSONS,
         "bool": [True, False, 0, "true"], "list": [[], [""], ["a", "a"], ["x" * 1001] * 3]}
KEY = {"namespace": NS, "schedule_id": "s"}
SPEC = {"intervals": [{"every": 60}]}
ACTION = {"workflow_type": "W", "task_queue": "q"}
# Each write route with a body the schema and the domain take (on some state).
ROUTES: dict[str, tuple[type, dict[str, Any]]] = {
    "/v1/schedule/create": (b.CreateSchedule, dict(KEY, spec=SPEC, action=ACTION,
                                                   policies={}, notes="n", limit=5)),
    "/v1/schedule/update": (b.UpdateSchedule, dict(KEY, spec=SPEC, action=ACTION, limit=3)),
    "/v1/schedule/notes": (b.Notes, dict(KEY, notes="n")),
    "/v1/schedule/pause": (b.Key, KEY),
    "/v1/schedule/trigger": (b.Trigger, dict(KEY, overlap="skip")),
    "/v1/schedule/backfill": (b.Backfill, dict(KEY, start="2020-01-01T00:00:00Z",
                                                end="2020-01-01T00:10:00Z")),
    "/v1/rollback": (b.Rollback, dict(KEY, request_id="r1")),
    "/v1/abort": (b.Abort, dict(KEY, reason="why")),
    "/v1/recover/rearm": (b.Recover, dict(KEY, reason="why")),
    "/v1/worker/drain": (b.Drain, {"max_attempts": 2, "retry_for": 0}),
    "/v1/forward": (b.Forward, dict(KEY, request_id="f1")),
    "/v1/forward/abort": (b.ForwardAbort, dict(KEY, request_id="f1", reason="why")),
    "/v1/migrate": (b.Migrate, {"namespace": NS, "to": "workflow", "job_id": "J",
                                "rate": 5.0, "dry_run": True}),
    "/v1/job/cancel": (b.CancelJob, {"job_id": "J", "reason": "why"}),
}
NESTED = {"spec": b.Spec, "action": b.Action, "policies": b.Policies}


def _fields(model: type) -> list[tuple[str, ...]]:
    """Every field of ``model`` as a path, nested parts of a program included."""
    out: list[tuple[str, ...]] = []
    for name in model.model_fields:
        out.append((name,))
        if name in NESTED:
            out += [(name, inner) for inner in NESTED[name].model_fields]
    out += [("spec", "intervals", "0", inner) for inner in b.Interval.model_fields
            if "spec" in model.model_fields]
    return out


FIELDS = [(route, path) for route, (model, _) in ROUTES.items() for path in _fields(model)]


def _kind(path: tuple[str, ...], model: type) -> str:
    """What a field holds, read from its model's annotation (JSON values, times, ...)."""
    for part in path:
        if part.isdigit():
            continue
        field = model.model_fields[part]
        text = repr(field.annotation)
        inner = next((m for m in (b.Spec, b.Action, b.Policies, b.Interval)
                      if m.__name__ in text), None)
        if inner is not None and part != path[-1]:
            model = inner
            continue
    for needle, kind in (("AwareDatetime", "time"), ("Any", "json"), ("bool", "bool"),
                         ("float", "float"), ("list[", "list"), ("int", "int")):
        if needle in text:
            return kind
    return "str"


@st.composite
def targets(draw: Any) -> tuple[str, tuple[str, ...], Any]:
    """A field of a route, and a value for it: mostly one of the hostile values of its kind
    (or a string the models' own type makes), sometimes a value of another JSON type."""
    route, path = draw(st.sampled_from(FIELDS))
    kind = _kind(path, ROUTES[route][0])
    own = st.sampled_from(KINDS[kind])
    if kind == "str":
        own = st.one_of(own, st.text(max_size=12))
    return route, path, draw(st.one_of(own, own, own, st.sampled_from(WRONG)))


def _with(body: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    doc = json.loads(json.dumps(body))
    at: Any = doc
    for part in path[:-1]:
        if isinstance(at, list):
            at = at[int(part)]
        else:
            at = at.setdefault(part, [{}] if part == "intervals" else {})
    if isinstance(at, list):
        at[int(path[-1])] = value
    else:
        at[path[-1]] = value
    return doc


def _reads_answer(api: Api) -> None:
    head = bearer("reader")
    assert api.client.get("/v1/schedules", headers=head).status_code == 200
    described = api.client.get("/v1/schedule/describe", headers=head,
                               params={"namespace": NS, "schedule_id": "kept"})
    assert described.status_code == 200, described.text
    page = api.client.get("/ui/schedule", headers=head,
                          params={"namespace": NS, "schedule": "kept"})
    assert page.status_code == 200


def _refusal(answer: Any) -> str:
    doc = answer.json()
    assert set(doc) == {"error"} and set(doc["error"]) == {"code", "message"}, doc
    assert "\n" not in doc["error"]["message"]
    return doc["error"]["code"]


def test_every_http_body_field_answers_a_success_or_one_refusal(tmp_path: Path) -> None:
    with api_on(f"sqlite:///{tmp_path / 'api.db'}") as api:
        api.ok("/v1/schedule/create", dict(KEY, schedule_id="kept", spec=SPEC, action=ACTION))
        api.ok("/v1/schedule/create", dict(KEY, spec=SPEC, action=ACTION))
        seen: dict[str, int] = {}

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(target=targets())
        def one(target: tuple[str, tuple[str, ...], Any]) -> None:
            route, path, value = target
            body = _with(ROUTES[route][1], path, value)
            before = api.service.event_count()
            answer = api.client.post(route, content=json.dumps(body),
                                     headers={**bearer("admin"),
                                              "content-type": "application/json"})
            assert answer.status_code < 500, (route, path, value, answer.text)
            if answer.status_code != 200:
                code = _refusal(answer)
                assert code != "internal", answer.text
                assert api.service.event_count() == before, (route, path, answer.text)
            seen[str(answer.status_code)] = seen.get(str(answer.status_code), 0) + 1
            _reads_answer(api)

        one()
    # mostly hostile values: a few successes (derandomized: the same every run), many refusals
    assert seen.get("200", 0) >= 2 and seen.get("422", 0) + seen.get("400", 0) >= 50, seen


# -- the CLI: every option of its writing commands ------------------------------------------------
COMMANDS = {
    ("schedule", "create", NS, "c"): ["--interval", "--cron", "--tz", "--start", "--end",
                                      "--jitter", "--overlap", "--catchup-window",
                                      "--workflow-type", "--task-queue", "--workflow-id",
                                      "--input", "--limit", "--notes"],
    ("schedule", "update", NS, "kept"): ["--interval", "--start", "--end", "--input",
                                         "--limit", "--catchup-window", "--conflict-token"],
    ("schedule", "backfill", NS, "kept", "--end", "2020-01-01T00:00:00Z"): ["--start"],
    ("schedule", "notes", NS, "kept"): [""],
    ("rollback", NS, "kept"): ["--request-id", "--actor"],
    ("abort", NS, "kept", "--actor", "ops"): ["--reason"],
    ("migrate", "--namespace", NS, "--to", "workflow", "--job-id", "J", "--dry-run"):
        ["--rate", "--match", "--schedule-id", "--concurrency", "--actor"],
    ("schedule", "trigger", NS, "kept"): ["--overlap"],
    ("recover", "rearm", NS, "kept", "--actor", "ops"): ["--reason"],
    ("job", "cancel", "--job-id", "J", "--actor", "ops"): ["--reason"],
    ("worker", "--until-idle"): ["--concurrency", "--max-attempts", "--retry-for",
                                 "--poll-interval", "--claim-grace"],
    ("status", NS): [""],
    ("audit",): ["--schedule", "--namespace", "--type", "--exclude-type", "--request-id",
                 "--migration", "--actor", "--since", "--until", "--limit", "--after"],
    ("oncall",): ["--stuck-after"],
    ("migrations",): ["--state", "--limit", "--after"],
    ("list",): ["--namespace", "--limit", "--after"],
    ("replay", NS, "kept"): ["--at", "--migration"],
}
CLI_FIELDS = [(command, option) for command, options in COMMANDS.items() for option in options]
BASE = {"schedule create": ["--interval", "1m", "--workflow-type", "W", "--task-queue", "q"]}
JSON_TEXTS = ["[" * 5000, "9" * 5000, "[1e400]", "NaN", '{"\\ud800":1}', "[" * 70 + "]" * 70,
              str(2**63), '"\\udc80"', "{", "null", '{"a": [1, 2.5, "x"]}']
DURATIONS = ["0", "-1", "1", "1e-300", "nan", "inf", "99999999999999d", "100000000000d",
             "1m/2m", "1m/30s", "30s", "1h"]
RATES = ["1e-300/s", "1e-300", "0", "-1", "nan", "inf", "1e400", "0.0009/s", "0.001/s",
         "10001", "5/s"]
WHOLES = ["-1", "0", "9", "1e3", "9" * 30, "1.5", "nan"]
SECONDS = ["nan", "inf", "-inf", "-1", "0", "1e-300", "1e300", "3601", "0.5"]  # never a long wait
AGO = [*TIMES, "90s", "1e300s", "99999999999999999999d", "nan"]
OPTION_VALUES = {"--start": TIMES, "--end": TIMES, "--input": JSON_TEXTS, "--rate": RATES,
                 "--interval": DURATIONS, "--jitter": DURATIONS, "--catchup-window": DURATIONS,
                 "--limit": WHOLES, "--conflict-token": WHOLES, "--concurrency": WHOLES,
                 "--max-attempts": WHOLES, "--at": WHOLES, "--since": AGO, "--until": AGO,
                 "--stuck-after": SECONDS, "--retry-for": SECONDS, "--poll-interval": SECONDS,
                 "--claim-grace": SECONDS}


@st.composite
def cli_targets(draw: Any) -> tuple[tuple[str, ...], str, str]:
    """An option of a command and a value: hostile values of its kind, or any text."""
    command, option = draw(st.sampled_from(CLI_FIELDS))
    own = st.sampled_from(OPTION_VALUES.get(option, STRINGS))
    if OPTION_VALUES.get(option) is SECONDS:  # any text could be a long, valid wait
        return command, option, draw(own)
    return command, option, draw(st.one_of(own, own, own, st.text(max_size=20)))


def test_every_cli_option_answers_a_success_or_one_refusal(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(cli, ["--store", store, "--destination", "sim", *args])

    assert run("schedule", "create", NS, "kept", *BASE["schedule create"]).exit_code == 0
    counted = run("stats", "--json")
    assert counted.exit_code == 0

    def events() -> int:
        from schedfence.infra.adapters.destination.simulator import SimulatedDestination
        from schedfence.infra.application.service import open_service
        with open_service(store, SimulatedDestination()) as service:
            return service.event_count()

    # the store moves on between examples (a rollback, a worker's run), so a failure may come
    # back as hypothesis's FlakyFailure: its sub-exception is the finding
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(target=cli_targets())
    def one(target: tuple[tuple[str, ...], str, str]) -> None:
        command, option, value = target
        base = BASE.get(" ".join(command[:2]), [])
        extra = [a for pair in zip(base[::2], base[1::2]) if pair[0] != option for a in pair]
        args = [*command, *extra, *([option, value] if option else [value])]
        before = events()
        result = run(*args)
        lines = result.stderr.strip().splitlines()
        if result.exit_code != 0 and lines[-1:] and \
                lines[-1].startswith("error: not_drained: "):
            pass  # the worker ran (its log lines above) and left work: an outcome, not input
        elif result.exit_code != 0:
            assert result.exit_code in (1, 2), (args[:8], result.stderr[-500:])
            if result.exit_code == 1:  # ours: one line with a code
                assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
                assert not lines[0].startswith("error: internal"), lines
            else:  # click's usage error: its own Error: line
                assert lines[-1].startswith("Error: "), result.stderr
            assert events() == before, args[:8]
        assert run("list", "--json").exit_code == 0
        assert run("schedule", "describe", NS, "kept", "--json").exit_code == 0

    one()
    for read in (["list", "--json"], ["schedule", "describe", NS, "kept", "--json"],
                 ["verify", "--json"]):  # and from a fresh process, after all of them
        done = subprocess.run([sys.executable, "-m", "schedfence.infra.cli", "--store", store,
                               "--destination", "sim", *read], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0 and json.loads(done.stdout), (read, done.stderr[-500:])
