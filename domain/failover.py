"""Failovers of the store: an epoch that fences every claim a lost tail may have used.

Replication to a standby is asynchronous, so the standby may lack the tail of the active's
log: a claim consumed there, a start, a receipt, a close. A migration the standby sees as
``pending`` may therefore already own a destination chain, which may since have continued as
new, ended or been deleted. Starting it again could make a second chain.

Promotion records ``FailoverRecorded`` on the store's one ``StoreEpoch`` aggregate. Every
migration accepted in an earlier epoch must reconcile against the destination before anything
else (``decisions.decide_failover_reconcile``): the chain head's create id is the only proof
it accepts; anything else parks the migration for an operator.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, ClassVar
from uuid import UUID, uuid5

from schedfence.domain.errors import StandbyNotPromoted
from schedfence.domain.ids import SCHEDFENCE_NAMESPACE
from schedfence.domain.model import EvolvingAggregate

STORE_EPOCH_ID: UUID = uuid5(SCHEDFENCE_NAMESPACE, "store-epoch")


@dataclass(frozen=True)
class EpochState:
    epoch: int = 0
    last_actor: str = ""
    last_reason: str = ""
    replicated: dict[str, int] | None = None  # follower name -> source position at promotion


class StoreEpoch(EvolvingAggregate):
    TOPIC = "schedfence.StoreEpoch"

    class Created(EvolvingAggregate.Created):
        TOPIC: ClassVar[str] = "schedfence.store_epoch.Created"

    class FailoverRecorded(EvolvingAggregate.Event):
        """This store was promoted to be the active one; ``epoch`` counts promotions.
        ``replicated`` holds each follower's last copied source position at that moment."""

        TOPIC: ClassVar[str] = "schedfence.store_epoch.FailoverRecorded"
        epoch: int
        actor: str
        reason: str
        replicated: dict[str, int] = {}

    if TYPE_CHECKING:  # folded by evolve; an annotation here would make a dataclass field
        state: EpochState

    @staticmethod
    def evolve(state: EpochState | None, event: object) -> EpochState:
        return evolve_epoch(state, event)

    @classmethod
    def start(cls) -> StoreEpoch:
        return cls._create(cls.Created, id=STORE_EPOCH_ID)

    def record_failover(self, actor: str, reason: str, replicated: dict[str, int]) -> int:
        epoch = self.state.epoch + 1
        self.trigger_event(self.FailoverRecorded, epoch=epoch, actor=actor, reason=reason,
                           replicated=dict(replicated))
        return epoch


def evolve_epoch(state: EpochState | None, event: object) -> EpochState:
    if isinstance(event, StoreEpoch.Created):
        return EpochState()
    if state is None:
        raise ValueError(f"{type(event).__name__} before the store epoch was started")
    if isinstance(event, StoreEpoch.FailoverRecorded):
        if event.epoch != state.epoch + 1:
            raise ValueError(f"failover epoch {event.epoch} does not follow {state.epoch}")
        return replace(state, epoch=event.epoch, last_actor=event.actor,
                       last_reason=event.reason, replicated=dict(event.replicated))
    raise TypeError(f"unknown store epoch event {type(event).__name__}")


def check_active(copied: dict[str, int], promoted: EpochState | None,
                 shown: Callable[[str], str] = str) -> None:
    """A replication standby may not act until it is promoted since its last copy: its claims
    may have been used on the active already. ``copied``: each follower's last copied source
    position in this store (empty for a store that was never a standby); ``promoted``: the
    store's epoch state (what was copied when it was last promoted); ``shown``: how a
    follower's name reads in the refusal."""
    if copied and (promoted.replicated if promoted is not None else None) != copied:
        where = ", ".join(f"{shown(name)}@{position}" for name, position in copied.items())
        raise StandbyNotPromoted(f"this store is a replication standby (copied up to {where}) "
                                 "and has not been promoted since: run `schedfence promote` "
                                 "on it first")
