"""Everything with I/O, by role (docs/architecture.md):

- ``application/``: the front door (``service.MigrationService``, ``open_service``) composed
  of use cases (``schedules``, ``forward``, ``bulk``, ``recovery``, ``jobs``) that load, call
  one domain decision, ask a port and save through the one unit of work; the read views
  (``views``, ``log_reads``) and replay.
- ``engines/``: what drives due work: the unit of work every save goes through
  (``unit_of_work``), the one drive (``drive``) over the rollback and forward engines
  (``attempt``, ``batch``, ``forward``), the drain, pool, due index and leases, and the source
  scheduler's loop (``scheduler``).
- ``adapters/``: the store, the destinations (simulator, Temporal), replication and
  observability.
- entry points that nothing imports: ``cli``, ``http``, ``web``, ``demo``.

``pacing.py`` is the one token bucket and retry helper every room uses."""
