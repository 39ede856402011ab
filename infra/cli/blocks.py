"""The key-value blocks of the CLI's text output, and the two ``status`` prints (a schedule,
its migration). Light (display.py's ``show`` and nothing of the service), so ``status``
formats without loading the domain's models; ``output`` re-exports them."""
from __future__ import annotations

from typing import Any, Sequence

from schedfence.infra.application.display import show


def kv_block(title: str, pairs: Sequence[tuple[str, object]], indent: str = "  ") -> list[str]:
    width = max((len(k) for k, _ in pairs), default=0)
    return [title] + [f"{indent}{k.ljust(width)}  {show(v)}" for k, v in pairs]


def schedule_lines(view: dict[str, Any]) -> list[str]:
    pairs = [("incarnation", view["incarnation"]), ("paused", view["paused"]),
             ("notes", view["notes"]), ("closed", view["closed"]),
             ("close reason", view["close_reason"]),
             ("migration pending", view["migration_pending"]),
             ("migration id", view["migration_id"]),
             ("conflict token", view.get("conflict_token"))]
    return kv_block(f"schedule {view['namespace']}/{view['schedule_id']}", pairs)


def migration_lines(view: dict[str, Any] | None) -> list[str]:
    if view is None:
        return ["migration: none"]
    answer = view.get("last_answer") or {}
    pairs = [("state", view["state"]), ("request id", view["request_id"]),
             ("request id origin", view["request_id_origin"]),
             ("park reason", view["park_reason"]), ("park detail", view["park_detail"]),
             ("destination first run", view["destination_first_run_id"]),
             ("claim armed", view["claim_armed"]), ("starts issued", view["starts_issued"]),
             ("attempts", view["attempts"]), ("last answer", answer.get("kind")),
             ("destination", view.get("destination") or None),
             ("version", view["version"])]
    return kv_block(f"migration {view['migration_id']}", pairs)
