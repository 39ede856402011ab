"""The batch job aggregate (domain/job.py): given events, when a command, then events."""
from __future__ import annotations

import pytest

from schedfence.domain import job as j
from schedfence.domain.errors import (AlreadyExists, Closed, DomainError, InvalidArgument,
                                      PhaseBlocked, RecoveryRefused, SentinelBlocked)
from schedfence.domain.model import Facts

JOB = "j1"
JID = j.job_aggregate_id(JOB)
SEL = j.make_selection("ns", "workflow", None, "s*")


def fold(events: list) -> j.JobState | None:
    state = None
    for e in events:
        state = j.evolve_job(state, e)
    return state


class Given:
    """A job's events, and its state folded by ``evolve_job``."""

    def __init__(self, selection: j.Selection = SEL) -> None:
        self.events = [j.Job.Defined(originator_id=JID, originator_version=1,
                                     originator_topic="schedfence.Job", job_id=JOB,
                                     **_defined(selection))]

    @property
    def state(self) -> j.JobState:
        return fold(self.events)  # type: ignore[return-value]  # events hold a Created: never None

    def then(self, facts: Facts) -> Given:
        for cls, fields in facts:
            self.events.append(cls(originator_id=JID, originator_version=len(self.events) + 1,
                                   **fields))
        return self


def _defined(sel: j.Selection) -> dict:
    return {"namespace": sel.namespace, "direction": sel.direction,
            "schedule_ids": sel.schedule_ids, "match": sel.match, "actor": "alice"}


def req(sid: str, outcome: str = "accepted") -> dict:
    return j.requested(sid, j.job_request_id(JOB, "workflow", sid), outcome)


def page(given: Given, ids: list[str], after: str | None, exhausted: bool = False) -> Facts:
    return j.decide_page(given.state, given.state.cursor, after, exhausted,
                         [req(s) for s in ids])


# -- identity ------------------------------------------------------------------------------------
def test_request_ids_are_derived_from_job_direction_and_schedule():
    rid = j.job_request_id(JOB, "workflow", "s1")
    assert rid == j.job_request_id(JOB, "workflow", "s1")
    assert len({rid, j.job_request_id(JOB, "source", "s1"), j.job_request_id("j2", "workflow",
                "s1"), j.job_request_id(JOB, "workflow", "s2")}) == 4
    # Lengths are part of the key: no two (job, schedule) splits of one string collide.
    assert j.job_request_id("a/b", "workflow", "c") != j.job_request_id("a", "workflow", "b/c")


def test_a_selection_is_canonical_and_checked():
    a = j.make_selection("ns", "workflow", ["b", "a", "b"], None)
    assert a.schedule_ids == ["a", "b"] and a == j.make_selection("ns", "workflow", ["a", "b"])
    assert j.make_selection("ns", "source", [], "").schedule_ids is None
    with pytest.raises(InvalidArgument, match="direction"):
        j.make_selection("ns", "sideways")
    with pytest.raises(InvalidArgument):
        j.make_selection("ns", "workflow", ["ok", "bad\x00id"])
    assert SEL.matches("s1") and not SEL.matches("x1")


# -- definition ----------------------------------------------------------------------------------
def test_given_a_job_when_rerun_with_its_definition_then_it_resumes():
    j.check_definition(Given().state, j.make_selection("ns", "workflow", None, "s*"))


@pytest.mark.parametrize("other", [j.make_selection("ns", "source", None, "s*"),
                                   j.make_selection("ns", "workflow", None, None),
                                   j.make_selection("ns", "workflow", ["s1"], "s*"),
                                   j.make_selection("other", "workflow", None, "s*")])
def test_given_a_job_when_rerun_with_another_definition_then_already_exists(other):
    with pytest.raises(AlreadyExists, match="another definition"):
        j.check_definition(Given().state, other)


# -- pages ---------------------------------------------------------------------------------------
def test_given_a_new_job_when_a_page_is_decided_then_cursor_and_counts_move():
    g = Given()
    facts = page(g, ["s1", "s2"], "7")
    assert [f.event for f in facts] == [j.Job.PageDecided]
    assert facts[0].fields["page"] == 1 and facts[0].fields["cursor_before"] is None
    g.then(facts)
    st = g.state
    assert (st.cursor, st.pages, st.phase) == ("7", 1, "selecting")
    assert st.counts == {"requested": 2, "skipped": 0, "blocked": 0}
    assert st.decided["s1"]["request_id"] == j.job_request_id(JOB, "workflow", "s1")


def test_given_a_decided_page_when_it_is_decided_again_then_nothing_is_recorded():
    g = Given()
    before = g.state
    g.then(page(g, ["s1"], "3"))
    # A runner that read the page from the old cursor (another run recorded it meanwhile).
    assert j.decide_page(g.state, before.cursor, "3", False, [req("s1")]) == []


def test_given_decided_schedules_when_a_page_repeats_them_then_each_counts_once():
    g = Given().then(page(Given(), ["s1"], "1"))
    facts = j.decide_page(g.state, "1", "2", True,
                          [req("s1", "already_pending"), req("s2"), req("s2")])
    assert [d["schedule_id"] for d in facts[0].fields["decisions"]] == ["s2"]
    g.then(facts)
    assert g.state.counts["requested"] == 2 and g.state.phase == "selected"


def test_given_an_exhausted_job_when_a_page_is_decided_then_nothing_is_recorded():
    g = Given()
    g.then(page(g, ["s1"], None, exhausted=True))
    assert not g.state.accepts_requests
    assert j.decide_page(g.state, None, None, True, [req("s9")]) == []


def test_refusals_are_blocked_when_they_may_clear_and_skipped_otherwise():
    blocked = j.refused("s1", "r", SentinelBlocked("a sentinel runs"))
    skipped = j.refused("s2", "r", Closed("closed"))
    assert (blocked["decision"], blocked["reason"]) == ("blocked", "sentinel_blocked")
    assert (skipped["decision"], skipped["reason"], skipped["detail"]) == \
        ("skipped", "closed", "closed")
    g = Given()
    g.then(j.decide_page(g.state, None, "1", False, [blocked, skipped]))
    assert g.state.counts == {"requested": 0, "skipped": 1, "blocked": 1}
    with pytest.raises(ValueError):
        j.requested("s1", "r", "refused")


# -- cancel --------------------------------------------------------------------------------------
def test_given_a_running_job_when_cancelled_then_it_accepts_no_more_requests():
    g = Given()
    g.then(j.decide_cancel(g.state, "bob", "wrong namespace"))
    assert g.state.phase == "cancelled" and not g.state.accepts_requests
    assert g.state.cancel_reason == "wrong namespace"
    assert j.decide_cancel(g.state, "bob", "again") == []  # idempotent


def test_given_a_cancelled_job_when_its_interrupted_page_is_recorded_then_the_cursor_stays():
    g = Given()
    g.then(j.decide_cancel(g.state, "bob", ""))
    facts = j.decide_page(g.state, None, "9", False, [req("s1")])
    g.then(facts)
    assert (g.state.cursor, g.state.counts["requested"], g.state.phase) == \
        (None, 1, "cancelled")
    assert j.decide_page(g.state, None, "9", False, []) == []


def test_given_a_job_that_decided_everything_when_cancelled_then_refused():
    g = Given()
    g.then(page(g, ["s1"], None, exhausted=True))
    with pytest.raises(RecoveryRefused):
        j.decide_cancel(g.state, "bob", "")


def test_given_a_decided_job_with_blocked_schedules_when_cancelled_then_its_rounds_stop():
    g = Given()
    g.then(j.decide_page(g.state, None, None, True, [req("s1"), blocked("s2")]))
    g.then(j.decide_cancel(g.state, "bob", "leave s2"))
    assert g.state.phase == "cancelled" and g.state.blocked == ["s2"]
    assert j.decide_cancel(g.state, "bob", "again") == []  # idempotent


def test_events_before_the_definition_and_unknown_events_are_refused():
    with pytest.raises(ValueError):
        j.evolve_job(None, j.Job.CancelRequested(originator_id=JID, originator_version=2,
                                                 actor="bob"))
    with pytest.raises(TypeError):
        j.evolve_job(Given().state, object())


# -- rounds: the blocked schedules asked again ---------------------------------------------------
def blocked(sid: str, error: DomainError | None = None) -> dict:
    return j.refused(sid, j.job_request_id(JOB, "workflow", sid),
                     error or PhaseBlocked("a start is in flight"))


def decided_with_blocked() -> Given:
    """A job that decided its whole selection: s1 requested, s2 and s3 blocked, s4 skipped."""
    g = Given()
    return g.then(j.decide_page(g.state, None, None, True, [
        req("s1"), blocked("s2"), blocked("s3", SentinelBlocked("a sentinel runs")),
        j.refused("s4", "r", Closed("closed"))]))


def test_given_blocked_schedules_when_a_round_asks_them_then_decisions_and_counts_move():
    g = decided_with_blocked()
    assert g.state.blocked == ["s2", "s3"] and g.state.blocked_rounds == 0
    facts = j.decide_blocked_round(g.state, 1, [req("s2"), blocked("s3")])
    assert [f.event for f in facts] == [j.Job.BlockedAsked]
    assert facts[0].fields["round"] == 1
    g.then(facts)
    st = g.state
    assert st.counts == {"requested": 2, "skipped": 1, "blocked": 1}
    assert st.blocked_rounds == 1 and st.blocked == ["s3"]
    assert st.decided["s2"]["decision"] == "requested"
    assert st.decided["s2"]["request_id"] == j.job_request_id(JOB, "workflow", "s2")
    # still blocked: the reason of now replaces the first one
    assert (st.decided["s3"]["reason"], st.decided["s3"]["detail"]) == \
        ("phase_blocked", "a start is in flight")
    assert len(st.decided) == 4 and sum(st.counts.values()) == 4


def test_a_round_records_only_schedules_still_blocked():
    g = decided_with_blocked()
    facts = j.decide_blocked_round(g.state, 1, [
        req("s1", "already_completed"), j.refused("s4", "r", Closed("x")), req("ghost"),
        req("s2"), blocked("s2")])  # requested, skipped or unknown: ignored; first of a repeat
    assert [d["schedule_id"] for d in facts[0].fields["decisions"]] == ["s2"]
    g.then(facts)
    assert g.state.counts == {"requested": 2, "skipped": 1, "blocked": 1}
    assert g.state.decided["s1"]["outcome"] == "accepted"  # never decided again
    # Nothing fresh (none of them is blocked): nothing recorded, no round counted.
    assert j.decide_blocked_round(g.state, 2, [req("s1"), req("s2")]) == []


def test_a_round_that_is_not_the_next_one_records_nothing():
    g = decided_with_blocked()
    assert j.decide_blocked_round(g.state, 2, [req("s2")]) == []  # round 1 first
    assert j.decide_blocked_round(g.state, 0, [req("s2")]) == []
    g.then(j.decide_blocked_round(g.state, 1, [blocked("s2"), blocked("s3")]))
    # Another runner read the job before round 1 was recorded: its round 1 is stale.
    assert j.decide_blocked_round(g.state, 1, [req("s2"), req("s3")]) == []
    assert g.state.blocked == ["s2", "s3"] and g.state.blocked_rounds == 1
    g.then(j.decide_blocked_round(g.state, 2, [req("s2"), req("s3")]))
    assert g.state.blocked_rounds == 2 and g.state.blocked == []


def test_no_round_before_the_selection_is_decided():
    g = Given()
    g.then(j.decide_page(g.state, None, "1", False, [blocked("s2")]))
    assert g.state.blocked == ["s2"] and g.state.phase == "selecting"
    assert j.decide_blocked_round(g.state, 1, [req("s2")]) == []


def test_given_a_cancelled_job_a_round_records_only_what_it_requested():
    g = decided_with_blocked()
    g.then(j.decide_cancel(g.state, "bob", "stop asking"))  # blocked ones left: it may
    assert g.state.phase == "cancelled"
    assert j.decide_blocked_round(g.state, 1, [blocked("s2"), blocked("s3")]) == []
    # Asked before the cancel was seen (or by a round a crash cut): it counts.
    facts = j.decide_blocked_round(g.state, 1, [req("s2"), blocked("s3")])
    assert [d["schedule_id"] for d in facts[0].fields["decisions"]] == ["s2"]
    g.then(facts)
    assert g.state.counts == {"requested": 2, "skipped": 1, "blocked": 1}


def test_a_round_of_an_unknown_decision_is_refused():
    g = decided_with_blocked()
    with pytest.raises(ValueError):
        j.decide_blocked_round(g.state, 1, [dict(req("s2"), decision="maybe")])


def test_the_report_says_how_many_rounds_asked_again():
    g = decided_with_blocked()
    g.then(j.decide_blocked_round(g.state, 1, [req("s2"), blocked("s3")]))
    report = j.report(g.state, {"s1": ("completed", None), "s2": ("completed", None)})
    assert report["blocked_rounds"] == 1
    assert report["counts"]["completed"] == 2 and report["counts"]["blocked"] == 1
    assert report["reasons"]["blocked"] == {"phase_blocked": 1}


# -- the report ----------------------------------------------------------------------------------
def test_the_report_counts_each_schedule_once_by_where_it_stands():
    g = Given()
    g.then(j.decide_page(g.state, None, None, True, [
        req("s1"), req("s2"), req("s3", "already_completed"), req("s4"),
        j.refused("s5", "r", SentinelBlocked("x")), j.refused("s6", "r", Closed("x"))]))
    report = j.report(g.state, {"s1": ("completed", None), "s2": ("parked", "head_missing"),
                                "s3": ("completed", None), "s4": ("claimed", None)})
    assert report["counts"] == {"completed": 2, "parked": 1, "aborted": 0, "in_progress": 1,
                                "blocked": 1, "skipped": 1}
    assert report["reasons"] == {"parked": {"head_missing": 1},
                                 "blocked": {"sentinel_blocked": 1}, "skipped": {"closed": 1}}
    assert report["requested"] == 4 and report["decided"] == 6
    assert [(x["schedule_id"], x["outcome"], x["reason"]) for x in report["unfinished"]] == [
        ("s2", "parked", "head_missing"), ("s4", "in_progress", ""),
        ("s5", "blocked", "sentinel_blocked"), ("s6", "skipped", "closed")]
