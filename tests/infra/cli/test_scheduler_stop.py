"""``schedfence scheduler`` stops on SIGINT as on SIGTERM: the signal sets the loop's stop
event and the pass in hand finishes. A KeyboardInterrupt raised wherever the main thread was
could land in a finalizer or a library's catch-all and be lost: a benchmark's SIGINT left a
scheduler running until its 60 s wait ran out (1 run in about 20)."""
from __future__ import annotations

import os
import signal

from schedfence.infra.cli import scheduler as command
from tests.infra.cli.cli_runs import run


def test_sigint_asks_the_loop_to_stop_instead_of_raising(tmp_path, monkeypatch) -> None:
    seen: dict[str, bool] = {}

    def loop(one_pass, stop, poll_interval, on_busy, worker_id="") -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C during a pass
        seen["stopped"] = stop.wait(5)

    monkeypatch.setattr(command, "run_until_stopped", loop)
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = run(f"sqlite:///{tmp_path / 'store.db'}", "scheduler", "--json")
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)
    assert seen == {"stopped": True}, result.output
    assert result.exit_code == 0 and '"stopped"' in result.output
