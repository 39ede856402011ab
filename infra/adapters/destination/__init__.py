"""Destinations: where a schedule goes. ``choose.open_destination(spec, store)`` is the one place a
spec (``sim``, ``sim+STORE_URL``, ``temporal://HOST:PORT/NAMESPACE``) becomes an object implementing
``schedfence.domain.ports.Destination``: the simulator with Temporal's history semantics
(``simulator``, its tables in ``sim_store``, a shared copy in ``shared_sim``), the Temporal adapter
(``temporal.TemporalDestination``, which creates Temporal Schedules: ``temporal_schedule``,
``schedule_proto``) and the sentinel workflow recovery starts (``workflow``).
Imported by the application, the CLI and the demo; imports the domain and the store."""
