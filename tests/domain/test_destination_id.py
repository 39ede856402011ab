"""The destination a migration was accepted against, and the one rule every step obeys
(domain/destination_id.py; issue 45, item 1)."""
from __future__ import annotations

import pytest

from schedfence.domain.destination_id import (DestinationId, DestinationMismatch,
                                              DestinationUnknown, check_bind, describe_binding,
                                              destination_gate, mismatch, needs_cluster_id)
from schedfence.domain.errors import RecoveryRefused

SIM = DestinationId("sim", "store")
TEMPORAL = DestinationId("temporal", "127.0.0.1:7233", ("default",), "c-1")
WHAT = "migration default/pin1"


def test_the_same_destination_passes_and_another_is_refused_naming_both() -> None:
    destination_gate(WHAT, SIM.binding("default"), SIM)
    destination_gate(WHAT, TEMPORAL.binding("default"), TEMPORAL)
    with pytest.raises(DestinationMismatch) as refused:
        destination_gate(WHAT, SIM.binding("default"), TEMPORAL)
    assert refused.value.code == "destination_mismatch"
    assert refused.value.message.startswith(
        "migration default/pin1 was accepted against sim; this process serves "
        "temporal://127.0.0.1:7233/default (cluster c-1)")
    with pytest.raises(DestinationMismatch, match="accepted against temporal://127.0.0.1:7233"
                                                  "/default .cluster c-1.; this process "
                                                  "serves sim "):
        destination_gate(WHAT, TEMPORAL.binding("default"), SIM)


@pytest.mark.parametrize("serving, why", [
    (DestinationId("temporal", "127.0.0.1:7233", ("payments",), "c-1"),
     "namespace default is not served here"),
    (DestinationId("temporal", "127.0.0.1:7233", ("default",), "c-2"), "another cluster"),
    (DestinationId("temporal", "10.0.0.1:7233", ("default",), ""), "another address"),
    (DestinationId("sim", "sim+postgresql://h/db"), "another kind of destination"),
])
def test_what_makes_another_destination(serving: DestinationId, why: str) -> None:
    assert mismatch(TEMPORAL.binding("default"), serving) == why


def test_a_cluster_id_on_both_sides_decides_over_the_address() -> None:
    other_address = DestinationId("temporal", "temporal.internal:7233", ("*",), "c-1")
    assert mismatch(TEMPORAL.binding("default"), other_address) == ""
    no_cluster = DestinationId("temporal", "127.0.0.1:7233", ("default",), "")
    assert mismatch(TEMPORAL.binding("default"), no_cluster) == ""  # the address decides
    shared = DestinationId("sim", "sim+postgresql://h/a")
    assert mismatch(shared.binding("ns"), DestinationId("sim", "sim+postgresql://h/b"))


def test_the_cluster_id_is_read_only_when_the_decision_needs_it() -> None:
    unread = DestinationId("temporal", "127.0.0.1:7233", ("default",), None)
    assert needs_cluster_id(TEMPORAL.binding("default"), unread)
    assert not needs_cluster_id(SIM.binding("default"), unread)  # another kind: refused
    assert not needs_cluster_id(TEMPORAL.binding("payments"), unread)  # not served: refused
    assert not needs_cluster_id(None, unread)
    assert not needs_cluster_id(TEMPORAL.binding("default"), TEMPORAL)  # read already


def test_an_unknown_binding_is_never_guessed() -> None:
    with pytest.raises(DestinationUnknown) as refused:
        destination_gate(WHAT, None, SIM, "bind it")
    assert refused.value.code == "destination_unknown"
    assert "recorded no destination; this process serves sim" in refused.value.message
    assert refused.value.message.endswith(": bind it")
    assert describe_binding(None).startswith("unknown")


def test_only_an_unknown_binding_is_bound() -> None:
    check_bind(WHAT, None)
    for bound in (SIM.binding("default"), TEMPORAL.binding("default")):
        with pytest.raises(RecoveryRefused, match="is never replaced"):
            check_bind(WHAT, bound)
