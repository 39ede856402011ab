"""``Through``: a method of the application service that is one of its parts' methods.

``create_schedule = Through("_schedules", ScheduleCommands.create_schedule)`` in the service's
class makes ``service.create_schedule(...)`` the part's own bound method: the same signature
(mypy checks each call against it), the same docstring, one line instead of a copy of the
signature. Replaced like a method (``monkeypatch.setattr`` on the class or the instance).
"""
from __future__ import annotations

from typing import Any, Callable, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")


class Through(Generic[P, R]):
    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.part, self.name = part, method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Through[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        method: Callable[P, R] = getattr(getattr(obj, self.part), self.name)
        return method
