"""schedule-fence: a fenced, event-sourced handoff of schedule ownership.

One import package. Its three subpackages live at the top of the repository (the design card's layout)
and are mapped here by setuptools' package-dir:

- ``schedfence.domain``: aggregates, events, pure decisions and the ports (no I/O).
- ``schedfence.projections``: operator views fed by the event log, exactly once.
- ``schedfence.infra``: stores, destinations, workers, CLI, replication.

The embedding entry point is ``schedfence.infra.service.open_service``.
"""
