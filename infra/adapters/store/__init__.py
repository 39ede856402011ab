"""The event store: store URLs, eventsourcing's SQLite and PostgreSQL persistence opened from them
(``eventstore``; its fold of a stored history in ``fold``, its recorder's guard against
timeouts and lost commits in ``recorder_guard``), PostgreSQL connection settings, timeouts and
schema creation (``pg``), the pydantic codec with schema versions and upcasting on read
(``codec``), loading the aggregates a decision needs (``aggregates``), a key's events in log
order (``history``) and the SQLAlchemy engine on the store's database that the read models are
handed (``sql``). Imported by the application and the other rooms; imports only the domain."""
