"""``schedule describe`` shows an action's inputs decoded: a ``json/plain`` payload as its JSON
value (text and ``--json``), any other by its encoding and size, never as base64. Read by a
fresh process, as a person runs it."""
from __future__ import annotations

import json

from schedfence.domain.source.payload import Payload, json_payload, shown

from tests.infra.cli.cli_runs import store, subprocess_cli  # noqa: F401 (fixture)

CREATE = ["schedule", "create", "ns", "a", "--interval", "1h", "--workflow-type", "W",
          "--task-queue", "q"]


def _cli(store: str, *args: str) -> str:
    done = subprocess_cli(store, "--destination", "sim", *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_describe_decodes_a_json_input(store: str) -> None:
    _cli(store, *CREATE, "--input", '{"region": "eu", "n": [1, 2]}')
    text = _cli(store, "schedule", "describe", "ns", "a")
    [line] = [line for line in text.splitlines() if line.strip().startswith("input ")]
    assert line.split(None, 1)[1] == '{"n":[1,2],"region":"eu"}'
    doc = json.loads(_cli(store, "schedule", "describe", "ns", "a", "--json"))
    assert doc["inputs"] == [{"encoding": "json/plain", "value": {"n": [1, 2], "region": "eu"}}]
    stored = doc["action"]["inputs"]  # the stored payload is kept, byte for byte
    assert stored == [json_payload({"region": "eu", "n": [1, 2]}).model_dump()]


def test_describe_without_inputs_says_none(store: str) -> None:
    _cli(store, *CREATE)
    text = _cli(store, "schedule", "describe", "ns", "a")
    assert any(line.split() == ["input", "none"] for line in text.splitlines())


def test_a_payload_in_another_encoding_is_shown_by_its_size() -> None:
    raw = Payload.of({"encoding": b"binary/protobuf"}, b"\x08\x96\x01")
    assert shown(raw.model_dump()) == {"encoding": "binary/protobuf", "bytes": 3}
    assert shown(json_payload(None).model_dump()) == {"encoding": "binary/null", "value": None}
