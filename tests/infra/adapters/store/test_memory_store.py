"""``sqlite:///:memory:``: a private store whose connections wait for each other's locks.

It used to be SQLite's shared-cache memory database. There a writer on a second connection
fails at once ("database table is locked": shared-cache locks ignore the busy timeout), so
a worker pool's append failed whenever the views' engine was writing, and eventsourcing's
connection was left inside its failed transaction ("cannot start a transaction within a
transaction"): tests/infra/application/test_jobs.py's pool test failed about one run in a hundred.
"""
from __future__ import annotations

import os
import threading
import time

from schedfence.infra.adapters.store.sql import writing
from tests.helpers import MEMORY, new_world


def test_an_append_waits_for_another_connections_write():
    world = new_world(MEMORY)
    service = world.service
    appended: list[object] = []

    def append() -> None:
        try:
            service.create_schedule("default", "waits")
            appended.append("ok")
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            appended.append(exc)

    try:
        with writing(service.views.engine) as conn:  # the views' engine holds the write lock
            conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS held (x INTEGER)")
            thread = threading.Thread(target=append)
            thread.start()
            time.sleep(0.5)  # the append is waiting now, not failed
            assert appended == [], appended
        thread.join(30)
        assert appended == ["ok"], appended
        assert service.schedule("default", "waits").schedule_id == "waits"
    finally:
        service.close()


def test_a_memory_store_leaves_nothing_behind():
    world = new_world(MEMORY)
    path = world.service.app.env.get("SQLITE_DBNAME")
    world.service.create_schedule("default", "gone")
    assert os.path.exists(path)
    world.service.close()
    assert not os.path.exists(os.path.dirname(path))
