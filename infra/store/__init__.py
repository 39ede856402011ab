"""The event store: store URLs, eventsourcing's SQLite and PostgreSQL persistence opened from them
(``eventstore``), PostgreSQL connection settings, timeouts and schema creation (``pg``), and the
pydantic codec with schema versions and upcasting on read (``codec``). Imported by the application
and the other rooms; imports only the domain."""
