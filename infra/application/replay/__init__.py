"""Replay: re-derive every step of a key's migrations from its history alone (``replayer``) and
show what each decision compared (``explain``; the step's sentence is the one narration,
``projections/narration.py``). Imported by the application and the CLI; imports the domain, the
store and the projections' narration."""
