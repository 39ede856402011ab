"""The ``schedfence`` command line: one click group (``commands``), its output formats (``output``) and
the command families registered on it (recovery, replay, replication, projections, Temporal).
Nothing imports the CLI; it imports the application and the rooms. ``python -m schedfence.infra.cli``
and the ``schedfence`` console script both run ``commands.main``.
"""
from schedfence.infra.cli.commands import cli, main

__all__ = ["cli", "main"]
