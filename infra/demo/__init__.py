"""The demo: every rollback failure mode played against the simulator on a fresh store (``run``,
with its scenario kit in ``kit``), and the raw v1 records an older release stored (``legacy``),
which the demo and the tests plant to exercise the real upcast path. Imported by the CLI only."""
