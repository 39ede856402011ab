"""Adapters: the event store (``store``), the destinations (``destination``: the simulator
and Temporal), the standby's replication (``replication``) and observability (logs, metrics,
call latency). Imported by the engines and the application; they import the domain and the
store."""
