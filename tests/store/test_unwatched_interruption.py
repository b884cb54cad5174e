"""A job interrupted while no collector ran: the restarted collector sees it from the run the
store kept (requeues, nodes, checkpoint) against the scheduler's status now. After a
collector's kill -9, a node died and the scheduler requeued its job; ``report`` never listed
that interruption (an SRE drill)."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


async def test_a_requeue_while_no_collector_ran_is_an_interruption(tmp_path):
    db = tmp_path / "c.db"
    clock = Clock()
    fleet = SynthFleet(8, clock, leaves=1)
    run = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]

    # The first collector sees job 41 running on gpu[0001-0004], then stops (no goodbye).
    first = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await first.open_store(db)
    fleet.birth(first.ingest)
    publish_job(first.ingest, job_status("41", run, clock), clock)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(first.ingest)
        first.tick()
    await first.flush()
    await first.store.db.close()  # killed: nothing more written

    # Meanwhile gpu0003 died and the scheduler requeued 41 onto other nodes.
    clock.advance(120.0)
    requeued_at = clock()
    clock.advance(30.0)
    later = job_status("41", ["gpu0005", "gpu0006", "gpu0007", "gpu0008"], clock, requeues=1,
                       started_offset_s=30.0)

    second = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await second.open_store(db)
    fleet.birth(second.ingest)
    dead = fleet.agents["gpu0003"].status(online=False)  # its Last Will, retained
    second.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0003"), codec.encode(dead),
                         clock())
    publish_job(second.ingest, later, clock)
    alive = [n for n in fleet.names if n != "gpu0003"]
    for _ in range(12):
        clock.advance(1.0)
        fleet.telemetry(second.ingest, names=alive)
        second.tick()
    await second.flush()
    rows = await second.store.interruptions(0.0)
    async with second.store.db.execute("SELECT SUM(gpu_seconds) FROM job_minutes") as cur:
        (held_s,) = await cur.fetchone()
    await second.close()

    (it,) = rows
    assert it["job_id"] == "41" and it["cause"] == "host" and it["nodes"] == ["gpu0003"]
    assert abs(it["ts"] - requeued_at) < 1.0  # when the new run started, not the restart
    assert it["detail"] == "R -> R (requeued 1x while no collector ran)"
    assert it["lost_gpu_hours"] > 0
    # The gap's GPU-hours until the requeue count as held (4 nodes x 8 GPUs for 120 s), or its
    # lost hours stood against none held (the report's ratio read 0 %); not the 30 s after.
    assert 4 * 8 * 120 <= held_s < 4 * 8 * 150 + 8 * 8 * 15
    assert later.state is JobState.R


async def test_a_job_unchanged_across_a_restart_is_no_interruption(tmp_path):
    db = tmp_path / "c.db"
    clock = Clock()
    fleet = SynthFleet(4, clock, leaves=1)
    for _ in range(2):
        session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
        await session.open_store(db)
        fleet.birth(session.ingest)
        publish_job(session.ingest, job_status("41", fleet.names, clock), clock)
        for _ in range(12):
            clock.advance(1.0)
            fleet.telemetry(session.ingest)
            session.tick()
        await session.flush()
        rows = await session.store.interruptions(0.0)
        await session.close()
        assert rows == []


def test_a_failure_recorded_before_a_restart_is_not_counted_again_at_its_requeue():
    """NF recorded, the collector restarted, then the requeue (requeues + 1): one
    interruption, as NF then RQ is without a restart (a review of the recall)."""
    from fleetdeck.console.interruptions import InterruptionTracker
    from fleetdeck.console.state import FleetState

    clock = Clock()
    state = FleetState(CLUSTER)
    run = job_status("41", ["gpu0001"], clock)
    failed = job_status("41", ["gpu0001"], clock, state=JobState.NF)
    tracker = InterruptionTracker()
    tracker.recall(run, JobState.NF, 0, ["gpu0001"])
    clock.advance(5.0)
    state.jobs["41"] = job_status("41", ["gpu0002"], clock, requeues=1, started_offset_s=1)
    for _ in range(15):
        clock.advance(1.0)
        tracker.observe(state, clock())
    assert tracker.total == [] and failed.state is JobState.NF


def test_a_running_jobs_run_is_kept_when_it_changes_and_once_a_minute_otherwise():
    from fleetdeck.console.interruptions import InterruptionTracker
    from fleetdeck.console.state import FleetState

    clock = Clock()
    state = FleetState(CLUSTER)
    tracker = InterruptionTracker()
    kept = 0
    for step in range(240):  # a status every step, two a second, for two minutes
        clock.advance(0.5)
        state.jobs["41"] = job_status("41", ["gpu0001"], clock, step=500 + step)
        tracker.observe(state, clock())
        kept += len(tracker.take_runs(clock()))
    assert kept == 2  # the first sight, and a minute later
    state.jobs["41"] = job_status("41", ["gpu0002"], clock, step=800)  # moved: at once
    clock.advance(0.5)
    tracker.observe(state, clock())
    assert [r[3] for r in tracker.take_runs(clock())] == [["gpu0002"]]
