"""The ``schedfence`` command line: one click group (``commands``, where every command is
registered, in one list, beside the helpers every command shares: state, error contract,
``--json``), the output formats (``output``) and the command families (``admin``, ``reads``,
``recovery``, ``replay``, ``replicate``, ``projections``, ``temporal``). Nothing imports the CLI;
it imports the application and the rooms. ``python -m schedfence.infra.cli`` and the
``schedfence`` console script both run ``commands.main``.
"""
from schedfence.infra.cli.commands import cli, main

__all__ = ["cli", "main"]
