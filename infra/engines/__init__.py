"""Engines: what drives due work. Every save goes through the unit of work
(``unit_of_work``: one append per decision, crash points, logs, retry on conflict); the one
drive (``drive``) runs the pool and the drain with parameters; the rollback engine
(``attempt``, batched starts in ``batch``) and the forward engine (``forward``) dispatch on the
one step vocabulary of ``domain/process.py``; the due-work index and leases (``due``,
``lease``); the source scheduler and its loop (``scheduler``). Imported by the application;
imports the domain, the adapters and the projections."""
