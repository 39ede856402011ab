"""Who asks, when a command names no one: the person at the keyboard, not the process.

``SCHEDFENCE_ACTOR`` names them once for every command (checked as ``--actor`` is: a refusal
names the variable); without it, the OS user at this host, ``user@host``. The worker id
(``host:pid``) stays what it is: the identity of a process that claims work, never of who asked.
"""
from __future__ import annotations

import getpass
import os
import socket

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.text import validate_actor

ACTOR_ENV = "SCHEDFENCE_ACTOR"


def default_actor() -> str:
    """``SCHEDFENCE_ACTOR`` if set, else ``user@host`` (``uid<N>@host`` with no user name)."""
    named = os.environ.get(ACTOR_ENV)
    if named is not None:
        try:
            return validate_actor(named)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{ACTOR_ENV}: {exc}") from None
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no name for this uid (a container's)
        user = f"uid{os.getuid()}"
    return validate_actor(f"{user}@{socket.gethostname()}"[:200])


def actor_or_default(actor: str) -> str:
    """``actor`` as given (checked by its caller), or who asks by default."""
    return actor or default_actor()
