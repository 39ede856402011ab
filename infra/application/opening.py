"""What ``open_service`` (infra/application/service.py) opens before it builds the service:
the store, and the destination chosen for it (``destination`` is required: no silent
simulator); and the worker id a service gets when none is given."""
from __future__ import annotations

import os
import socket
from typing import Callable

from schedfence.domain.errors import InvalidArgument
from schedfence.domain.ports import Destination

from schedfence.infra.adapters.destination.choose import CHOOSE_API, check_spec, open_destination
from schedfence.infra.adapters.store.eventstore import (FenceApplication, open_application,
                                                        parse_store_url)

Opened = tuple[FenceApplication, Destination, Callable[[], None] | None]  # and its close


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def open_store_and_destination(store: str, destination: Destination | str | None) -> Opened:
    """The store's application and the destination (``"sim"``, ``"sim+STORE_URL"``,
    ``"temporal://HOST:PORT/NS"`` or a ``Destination`` object), with what closes the one
    opened here. A bad destination spec is refused before the store is opened (nothing is
    created); a destination that fails to open closes the store."""
    if destination is None:
        raise InvalidArgument(CHOOSE_API)
    url = parse_store_url(store)
    if isinstance(destination, str):
        check_spec(destination)  # refused before the store is opened: nothing is created
    app = open_application(url)
    if not isinstance(destination, str):
        return app, destination, None
    try:
        opened = open_destination(destination, url)
    except BaseException:
        app.close()
        raise
    return app, opened.destination, opened.close
