"""Slurm's placeholder reasons ("None", "(null)") are no reason: the interruption report words
an interruption without them, by the rule the jobs view uses (``judgements.job_reason``)."""

import pytest

from fleetdeck.console.interruptions import CLASSIFY_WITHIN_S, InterruptionTracker
from fleetdeck.console.judgements import job_reason
from fleetdeck.console.rows import job_row
from fleetdeck.console.state import FleetState
from fleetdeck.protocol.messages import JobState
from tests.tui.fleet import Clock, job_status


@pytest.mark.parametrize("placeholder", ["None", "(null)", " (None) "])
def test_an_interruption_with_a_placeholder_reason_names_the_state(placeholder):
    clock = Clock()
    state = FleetState("c")
    job = job_status("41", ["gpu0001", "gpu0002"], clock)
    state.jobs["41"] = job
    tracker = InterruptionTracker()
    tracker.observe(state, clock())
    clock.advance(1.0)
    state.jobs["41"] = job.model_copy(update={"state": JobState.F, "reason": placeholder})
    tracker.observe(state, clock())
    clock.advance(CLASSIFY_WITHIN_S + 1)
    tracker.observe(state, clock())
    [it] = tracker.total
    assert it.detail == "R -> F (F)"
    assert job_reason(state.jobs["41"]) == ""
    assert job_row(state.jobs["41"], state, clock()).reason == ""


def test_a_real_reason_stays_in_the_words():
    clock = Clock()
    state = FleetState("c")
    job = job_status("41", ["gpu0001"], clock)
    state.jobs["41"] = job
    tracker = InterruptionTracker()
    tracker.observe(state, clock())
    state.jobs["41"] = job.model_copy(update={"state": JobState.NF, "reason": "NodeFail"})
    clock.advance(CLASSIFY_WITHIN_S + 1)
    tracker.observe(state, clock())
    tracker.observe(state, clock())
    [it] = tracker.total
    assert it.detail == "R -> NF (NodeFail)"
