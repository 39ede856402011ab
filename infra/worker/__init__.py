"""Workers: one task attempt with a crash point at every boundary (``attempt``), the due-work index
and its shared backoff (``due``), the worker pool with its threads and stop rules (``pool``), and
the drain behind ``run_until_idle`` (``drain``). Imported by the application; imports the domain
and the store."""
