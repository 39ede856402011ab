"""The application: ``service.MigrationService`` (the front door) composes the use cases
(``schedules``, ``forward``, ``bulk``, ``recovery``, ``jobs``), the guards they share
(``guards``), the read views (``views``, ``log_reads``, ``display``) and replay. A use case
loads, calls one domain decision, asks a port and saves once through the unit of work
(infra/engines/unit_of_work.py); none imports the service (``ports.Commands`` types it where a
job drives it)."""
