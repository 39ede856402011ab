"""The forward migration: a Temporal Schedule handed back to the source. ``aggregate`` holds
``ForwardMigration`` (events, state, evolve), ``steps`` its decisions on the shared step
vocabulary (``domain/process.py``), ``boundary`` the last time the Temporal side owned."""
