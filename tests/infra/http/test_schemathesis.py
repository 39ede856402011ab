"""A property-based run over the served OpenAPI document (schemathesis, in process against
the ASGI app, with an admin token): no input makes the API answer a server error (5xx), and
every answer has a status the document declares, in the declared shape; and a schema-valid
request (every case here is generated from the schema) is never refused 422, and 400 only for
an exception docs/operators.md lists (``ALLOWED_400``). Bounded: a few examples per operation,
the whole run in seconds."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (content_type_conformance, not_a_server_error,
                                 response_schema_conformance, status_code_conformance)

from tests.helpers import NS
from tests.infra.http.api import api_on, bearer

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
EXAMPLES = 12
# What a schema-valid request may still be refused for with 400: the exceptions listed in
# docs/operators.md ("The HTTP API", "What the schema cannot say"): rules over several
# fields, ids' UTF-8 byte limits, and the read filters parsed by the projection (cursors,
# audit's times and types).
ALLOWED_400 = re.compile("|".join([
    r"(spec|action): a schedule that runs needs both", r"spec: policies and a limit apply only",
    r"update: nothing to change", r"request_id and the Idempotency-Key header differ",
    r"end: .* is before the start", r"offset: \d+s must be less than the interval",
    r"end: the backfill ends before it starts", r"end: a backfill covers times already passed",
    r"cron: ", r"time_zone: .* moves its clock", r".* bytes in UTF-8",
    r"task_queue: reserved", r"workflow_id: reserved", r"search_attributes: ", r"(input|memo): ",
    r"action: the schedule has no action to run", r"spec: at most \d+ intervals and cron",
    r"(start|end|start_at|end_at): must be from 0001-01-02",
    r"cursor .* was not returned by", r"(since|until) .* is not a time",
    r"since is after until", r"(since|until) .* out of range", r"unknown event type"]))


def test_no_input_is_a_server_error(tmp_path: Path) -> None:
    answered: Counter = Counter()
    refused: Counter = Counter()
    with api_on(f"sqlite:///{tmp_path / 'store.db'}") as api:
        # Something to find: a schedule whose rollback is pending.
        api.ok("/v1/schedule/create", {"namespace": NS, "schedule_id": "s1"})
        api.ok("/v1/rollback", {"namespace": NS, "schedule_id": "s1"})
        schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
        operations = [result.ok() for result in schema.get_all_operations()]
        for operation in operations:
            name = f"{operation.method.upper()} {operation.path}"

            @given(operation.as_strategy())
            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                      phases=[Phase.explicit, Phase.generate],
                      suppress_health_check=list(HealthCheck))
            def run(case: schemathesis.Case) -> None:
                response = case.call_and_validate(headers=bearer("admin"), checks=CHECKS)
                answered[name, response.status_code // 100] += 1
                if response.status_code in (400, 422):  # positive data: schema-valid
                    message = response.json()["error"]["message"]
                    assert response.status_code == 400 and ALLOWED_400.match(message), \
                        (name, response.status_code, message[:300])
                    refused[name] += 1

            run()
    assert len(operations) == 37
    assert {name for name, _ in answered} == {f"{o.method.upper()} {o.path}"
                                              for o in operations}
    assert sum(n for (_, kind), n in answered.items() if kind == 2) >= 100, answered
