"""An interrupted job that runs again says so in the timeline, with where and how long after:
a restart was "done" at the requeue ("now PD (Resources)") and nothing said when the job ran
again (a jobs audit)."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol.messages import JobState
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


def session_with_job() -> ConsoleSession:
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    SynthFleet(8, clock).birth(session.ingest)
    return session


def seconds(session: ConsoleSession, n: int, **job) -> None:
    """``n`` seconds of the fleet with job 41 reported as ``job`` says, a tick each."""
    clock = session.clock
    for _ in range(n):
        clock.advance(1.0)  # type: ignore[attr-defined]
        nodes = job.get("nodes", ["gpu0001", "gpu0002"])
        publish_job(session.ingest, job_status(
            "41", nodes, clock, state=job.get("state", JobState.R), step=job.get("step", 500),
            requeues=job.get("requeues", 0), started_offset_s=job.get("started", 3600)),
            clock)
        session.tick()


def job_lines(session: ConsoleSession) -> list[str]:
    return [ln.text for ln in session.log.lines() if ln.kind == "job"]


def test_a_requeued_job_that_waits_then_runs_is_said_to_run_again():
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 40, state=JobState.PD, requeues=1, nodes=[])
    assert job_lines(session) == []  # waiting for nodes: nothing to say yet
    seconds(session, 3, requeues=1, nodes=["gpu0003", "gpu0004"], step=400, started=0)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 1) from step 400 on gpu[0003-0004], ")
    assert line.endswith("after its run ended")
    assert "41s after" in line or "42s after" in line or "40s after" in line, line


def test_an_interrupted_job_that_fails_instead_is_let_go():
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 60, state=JobState.F, requeues=1)
    assert job_lines(session) == []
    assert session._rerun == {}
