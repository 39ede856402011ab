"""Shared by the HTTP API's tests: a world on a store with the API over it (FastAPI's test
client), a token of each role, and the calls every test makes."""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from fastapi.testclient import TestClient

from schedfence.infra.http.app import create_app
from schedfence.infra.http.auth import Tokens
from tests.helpers import World, new_world

SECRETS = {"reader": "reader-secret-0123456789", "operator": "operator-secret-0123456789",
           "admin": "admin-secret-0123456789", "metrics": "metrics-secret-0123456789"}
NAMES = {"reader": "rita", "operator": "otto", "admin": "ada", "metrics": "prometheus"}
TOKEN_LINES = "".join(f"{NAMES[r]} {r} {s}\n" for r, s in SECRETS.items())


def tokens() -> Tokens:
    return Tokens([(NAMES[r], r, s) for r, s in SECRETS.items()])


def bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[role]}"}


@dataclass
class Api:
    world: World
    client: TestClient

    @property
    def service(self) -> Any:
        return self.world.service

    def get(self, path: str, role: str = "reader", **params: Any) -> Any:
        return self.client.get(path, params=params, headers=bearer(role))

    def post(self, path: str, body: dict | None = None, role: str = "admin",
             headers: dict[str, str] | None = None) -> Any:
        return self.client.post(path, json=body if body is not None else {},
                                headers={**bearer(role), **(headers or {})})

    def ok(self, path: str, body: dict | None = None, role: str = "admin", **kw: Any) -> Any:
        answer = self.post(path, body, role, **kw)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def read(self, path: str, role: str = "reader", **params: Any) -> Any:
        answer = self.get(path, role, **params)
        assert answer.status_code == 200, answer.text
        return answer.json()


def open_api(store: str, **options: Any) -> Api:
    """The API over a new world on ``store`` (a SQLite file, or a PostgreSQL schema)."""
    world = new_world(store)
    options.setdefault("rate", 0)
    app = create_app(world.service, tokens(), destination_label="sim", **options)
    return Api(world, TestClient(app, raise_server_exceptions=False))


@contextmanager
def api_on(store: str, **options: Any) -> Iterator[Api]:
    api = open_api(store, **options)
    try:
        yield api
    finally:
        api.client.close()
        api.world.service.close()


def assert_error(answer: Any, status: int, code: str) -> dict[str, Any]:
    """The one error shape, with ``code``, at ``status``."""
    assert answer.status_code == status, answer.text
    doc = answer.json()
    assert set(doc) == {"error"} and set(doc["error"]) == {"code", "message"}, doc
    assert doc["error"]["code"] == code, doc
    return doc["error"]


@contextmanager
def nothing_written(api: Api) -> Iterator[None]:
    before = api.service.event_count()
    yield
    assert api.service.event_count() == before, "events were written"
