"""``python -m schedfence.infra.cli``: the same entry point as the ``schedfence`` script."""
from schedfence.infra.cli.commands import main

main()
