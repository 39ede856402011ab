"""Workers: one task attempt with a crash point at every boundary (``attempt``), the due-work index
and its shared backoff (``due``), the worker pool with its threads and stop rules (``pool``), and
the drain behind ``run_until_idle`` (``drain``). Each step is a ``domain.handoff`` decision; the
worker only loads, asks the destination and saves. Imported by the application; imports the
domain, the store and the projections (the due-work index is the projection's table)."""
