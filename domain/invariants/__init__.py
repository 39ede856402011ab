"""The invariant checker: docs/protocol.md's safety properties over a whole event log
(``checker``, each migration step's rules in ``migration_steps``, the source's actions in
``actions``, forward migrations in ``forward``, exactly once across the handoff in
``exactly_once`` and ``exactly_once_log``); each finding is a ``violation.Violation``."""
