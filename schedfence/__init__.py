"""schedule-fence: a fenced, event-sourced handoff of schedule ownership.

One import package. Its three subpackages live at the top of the repository (the design card's layout)
and are mapped here by setuptools' package-dir:

- ``schedfence.domain``: aggregates, events, pure decisions and the ports (no I/O).
- ``schedfence.projections``: operator views fed by the event log, exactly once.
- ``schedfence.infra``: stores, destinations, workers, CLI, replication.

The public API for embedding is importable from here (README, "Embedding")::

    from schedfence import open_service, make_spec, make_action, make_policies
    from schedfence import DomainError, InvalidArgument, NotFound  # what the API raises

Each name is a re-export of the module that defines it (``schedfence.infra.application.service.open_service``,
``schedfence.domain.source.spec.make_spec``, ...), and those paths keep working. The names are imported
on first use (module ``__getattr__``), so ``import schedfence``, which every ``schedfence``
command does first, stays as cheap as before: the service alone costs ~0.7 s of imports.
"""
from __future__ import annotations

from importlib import import_module

# Not typing.TYPE_CHECKING: importing typing would cost this import more than it now takes.
# Type checkers treat any constant of this name as true and see the real imports below.
TYPE_CHECKING = False
if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on first use
    from schedfence.domain.source.action import make_action as make_action
    from schedfence.domain.source.action import make_policies as make_policies
    from schedfence.domain.ports import Destination as Destination
    from schedfence.domain.source.spec import make_spec as make_spec
    from schedfence.infra.application.service import MigrationService as MigrationService
    from schedfence.infra.application.service import open_service as open_service
    from schedfence.domain.errors import AlreadyExists as AlreadyExists
    from schedfence.domain.errors import Closed as Closed
    from schedfence.domain.errors import ConflictTokenMismatch as ConflictTokenMismatch
    from schedfence.domain.errors import DomainError as DomainError
    from schedfence.domain.errors import InvalidArgument as InvalidArgument
    from schedfence.domain.errors import MigrationPending as MigrationPending
    from schedfence.domain.errors import NotFound as NotFound
    from schedfence.domain.errors import PhaseBlocked as PhaseBlocked
    from schedfence.domain.errors import RecoveryRefused as RecoveryRefused
    from schedfence.domain.errors import SentinelBlocked as SentinelBlocked
    from schedfence.domain.errors import StandbyNotPromoted as StandbyNotPromoted
    from schedfence.domain.errors import Unavailable as Unavailable
    from schedfence.domain.errors import UndecodableEvent as UndecodableEvent
    from schedfence.domain.ports import AlreadyStarted as AlreadyStarted
    from schedfence.domain.ports import DestinationError as DestinationError
    from schedfence.domain.ports import DestinationNotFound as DestinationNotFound
    from schedfence.domain.ports import DestinationNotReached as DestinationNotReached
    from schedfence.domain.ports import DestinationUnavailable as DestinationUnavailable

# Public name -> the module that defines it.
_EXPORTS = {
    "open_service": "schedfence.infra.application.service",
    "MigrationService": "schedfence.infra.application.service",
    "make_spec": "schedfence.domain.source.spec",
    "make_action": "schedfence.domain.source.action",
    "make_policies": "schedfence.domain.source.action",
    "Destination": "schedfence.domain.ports",
    # What the API raises: every refusal is a DomainError (its ``code`` names it), and what a
    # Destination of your own raises (README, "Embedding").
    **dict.fromkeys(("DomainError", "InvalidArgument", "NotFound", "Closed", "SentinelBlocked",
                     "PhaseBlocked", "AlreadyExists", "MigrationPending", "Unavailable",
                     "RecoveryRefused", "ConflictTokenMismatch", "StandbyNotPromoted",
                     "UndecodableEvent"), "schedfence.domain.errors"),
    **dict.fromkeys(("DestinationError", "AlreadyStarted", "DestinationUnavailable",
                     "DestinationNotReached", "DestinationNotFound"), "schedfence.domain.ports"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'schedfence' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
