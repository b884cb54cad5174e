"""The simulated scheduler's outbox under a backlog (agents/fleet.py ``_put_retained``).

A job status waiting to go out is replaced by a newer one of its job while the job stays in
the same state: the backlog stays bounded. A change of state is queued behind it, never merged
into it: a console books an interruption and its cause from what it saw (R -> NF names the
rank's node and XID, PD says "Resources"; console/interruptions.py), and its timeline, the
store's events and a recording keep each change."""

import json

from fleetdeck.agents.fleet import Fleet, FleetOptions
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState, JobStatus
from fleetdeck.protocol.topics import Kind, topic_for

URL = BrokerURL("127.0.0.1", 1)


def queued(fleet: Fleet, topic: str) -> list[bytes]:
    """What the scheduler's client would send on ``topic``, in order (the sender's reading)."""
    out = []
    while not fleet._outbox.empty():
        t, payload, _ = fleet._outbox.get_nowait()
        if not isinstance(payload, bytes):
            if fleet._latest.get(t) is payload:
                del fleet._latest[t]
            payload = payload.payload
        if t == topic:
            out.append(payload)
    return out


def running_fleet() -> tuple[Fleet, str]:
    fleet = Fleet(URL, FleetOptions(cluster="ob", nodes=4, seed=3, jobs=1))
    for _ in range(5):
        fleet.tick()
    [job] = fleet.world.scheduler.jobs.values()
    assert job.state is JobState.R and job.requeue
    return fleet, job.job_id


def test_a_backlog_keeps_every_state_a_job_went_through():
    fleet, job_id = running_fleet()
    topic = topic_for("ob", Kind.JOB, job_id)
    queued(fleet, topic)  # sent: the backlog starts now
    node = fleet.world.scheduler.jobs[job_id].nodes[0].node_id
    for _ in range(3):
        fleet.tick()  # steps: one waiting status, the newest
    fleet._on_inject(json.dumps({"fault": "xid79", "node": node, "gpu": 2}).encode())
    for _ in range(10):
        fleet.tick()
    seen = [codec.decode(JobStatus, p) for p in queued(fleet, topic)]
    states = [st.state for st in seen]
    # Unmended: [R]: NF, RQ, PD and the new run merged into one status, "R -> R", and the
    # reason naming the rank's node and XID 79 never went out.
    assert states[:4] == [JobState.R, JobState.NF, JobState.RQ, JobState.PD], states
    assert "Xid 79" in seen[1].reason and node in seen[1].reason
    assert len(states) <= 5  # and running again, at most one status of it


def test_steps_of_a_running_job_wait_as_one_status():
    fleet, job_id = running_fleet()
    topic = topic_for("ob", Kind.JOB, job_id)
    queued(fleet, topic)
    for _ in range(50):
        fleet.tick()
    [only] = queued(fleet, topic)
    assert codec.decode(JobStatus, only).step == fleet.world.scheduler.jobs[job_id].step


def test_a_clear_and_a_status_of_a_reused_id_both_go_out_in_order():
    fleet, _ = running_fleet()
    topic = topic_for("ob", Kind.JOB, "77")
    fleet._clear_foreign_job(topic, "77")
    fleet._put_retained(topic, b"new", ("R", 0))
    assert queued(fleet, topic) == [b"", b"new"]
    assert fleet._latest == {}
