"""A property-based run over the served OpenAPI document (schemathesis, in process against
the ASGI app, with an admin token): no input makes the API answer a server error (5xx), and
every answer has a status the document declares, in the declared shape. Bounded: a few
examples per operation, the whole run in seconds."""
from __future__ import annotations

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


def test_no_input_is_a_server_error(tmp_path: Path) -> None:
    answered: Counter = Counter()
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

            run()
    assert len(operations) == 36
    assert {name for name, _ in answered} == {f"{o.method.upper()} {o.path}"
                                              for o in operations}
    assert sum(n for (_, kind), n in answered.items() if kind == 2) >= 100, answered
