"""A job the scheduler ended failed (F: a rank crashed, an XID 48 on its node) waits for an
operator's ``restart-job``: nothing requeues it. It was in no incident and on no line of
`status` (only `--json`'s jobs and the TUI's jobs view had it: a fault audit). The operator is
told which job failed where and why, to drain the node, and to restart the job from its
checkpoint; it clears once the job is restarted (or cancelled)."""

import io

from rich.console import Console

from fleetdeck.console.cli.status import render_held_up_jobs
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol.messages import JobState
from tests.console.test_judgements import xid
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job

NODES = ["gpu0001", "gpu0002"]
GRACE_S = 10
"""``judgements.REQUEUE_GRACE_S``: how long an NF waits for its requeue."""
REASON_48 = "rank 3 on gpu0002 gpu3: CUDA error: uncorrectable ECC error encountered (Xid 48)"
REASON_13 = "rank 11 on gpu0002 gpu3: CUDA error: an illegal memory access was encountered (Xid 13)"


def session_with_failed(reason: str, faults=None, state: JobState = JobState.F,
                        seconds: int = 5):
    """Job 41 ran on NODES and ended ``state`` with ``reason``; job 42 steps on gpu0005 (the
    scheduler is heard)."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    for t in range(3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("41", NODES, clock, step=100 + t), clock)
        fleet.telemetry(session.ingest, job={n: "41" for n in NODES})
        session.tick()
    ended = job_status("41", [], clock, step=102, state=state).model_copy(
        update={"reason": reason, "eta_s": None})
    publish_job(session.ingest, ended, clock)
    for t in range(seconds):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("42", ["gpu0005"], clock, step=200 + t), clock)
        fleet.telemetry(session.ingest, faults=faults or {})
        session.tick()
    session.fleet = fleet  # type: ignore[attr-defined]
    return session


def test_a_failed_job_is_said_on_its_nodes_incident_with_the_drain_and_the_restart():
    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    state, now = session.state, session.clock()
    found = incidents(state)
    (inc,) = [i for i in found if "41" in i.jobs]
    assert inc.key == "node:gpu0002" and inc.severity == "error"
    assert inc.title.startswith("gpu0002 failed: G2 gpu3: XID 48")
    assert inc.title.endswith(f"; job 41 failed on gpu0002 ({REASON_48})")
    # The node first (drain, repair), then the job from its checkpoint.
    assert inc.action.startswith("drain")
    assert inc.action.endswith("; then restart-job 41 from its checkpoint at step 400")
    assert not [i for i in found if i.kind == "job"]  # one line for the node and the job
    # status --json carries the judgement on the job, and the text lists it with the action.
    out = fleet_summary(state, now)
    (job,) = [j for j in out["jobs"] if j["job_id"] == "41"]
    assert job["failed"] == {
        "state": "F", "reason": REASON_48, "nodes": ["gpu0002"],
        "text": f"job 41 failed on gpu0002 ({REASON_48})",
        "action": "drain gpu0002, then restart-job 41 from its checkpoint at step 400"}
    assert next(i for i in out["incidents"] if i["key"] == "node:gpu0002")["jobs"] == ["41"]
    text = io.StringIO()
    render_held_up_jobs(out["jobs"], Console(file=text, width=300))
    assert text.getvalue().splitlines() == [
        "jobs held up (1 of 2):",
        f"  41 llama-70b: failed on gpu0002 ({REASON_48}); drain gpu0002, then restart-job 41 "
        "from its checkpoint at step 400"]


def test_a_failed_job_on_healthy_nodes_is_an_incident_of_its_own():
    """XID 13 is the application's: the node reads ok, and the job's failure was said nowhere."""
    session = session_with_failed(REASON_13, {"gpu0002": xid(3, 13)})
    state = session.state
    assert state.nodes["gpu0002"].verdict.value == "ok"
    (inc,) = [i for i in incidents(state) if "41" in i.jobs]
    assert inc.key == "job:41" and inc.kind == "job" and inc.severity == "error"
    assert inc.title == (f"job 41 failed on gpu0002 ({REASON_13}); gpu0002 reads healthy: the "
                         "application's fault, most likely")
    assert inc.action.startswith("restart-job 41 from its checkpoint at step 400")


def test_it_clears_once_the_job_is_restarted_or_cancelled():
    for after in (JobState.RQ, JobState.PD, JobState.R, JobState.CA):
        session = session_with_failed(REASON_13)
        clock = session.clock
        publish_job(session.ingest, job_status("41", NODES if after is JobState.R else [],
                                               clock, step=400, state=after), clock)
        clock.advance(1.0)
        session.tick()
        state = session.state
        assert not [i for i in incidents(state) if "41" in i.jobs], after
        (job,) = [j for j in fleet_summary(state, clock())["jobs"] if j["job_id"] == "41"]
        assert job["failed"] is None


def test_a_node_fail_is_failed_only_once_no_requeue_came():
    """NF is requeued a moment later when the job asked for it (RQ): not an incident for that
    moment; one left at NF waits for an operator as a failed one does."""
    reason = "NCCL watchdog: collective stalled 30 s (gpu0002 not responding)"
    soon = session_with_failed(reason, state=JobState.NF, seconds=int(GRACE_S) - 3)
    assert not [i for i in incidents(soon.state) if "41" in i.jobs]
    late = session_with_failed(reason, state=JobState.NF, seconds=int(GRACE_S) + 3)
    (inc,) = [i for i in incidents(late.state) if "41" in i.jobs]
    assert "job 41 ended by a node failure, not requeued on gpu0002" in inc.title
    assert "restart-job 41" in inc.action


def test_a_drained_node_under_a_failed_job_is_not_in_hand_until_the_restart():
    """Its node drained, the incident still asks for the restart: it stays above what is in
    hand (``acted_on``)."""
    from fleetdeck.console.incidents import acted_on
    from fleetdeck.protocol.messages import DrainState

    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    fleet, clock = session.fleet, session.clock  # type: ignore[attr-defined]
    fleet.status(session.ingest, "gpu0002", DrainState.DRAINED, reason="xid 48", by="root")
    clock.advance(1.0)
    session.tick()
    (inc,) = [i for i in incidents(session.state) if i.key == "node:gpu0002"]
    assert not acted_on(session.state, inc)
    assert inc.action.endswith("then restart-job 41 from its checkpoint at step 400")
