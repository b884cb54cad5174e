"""The scheduler's retained birth and Last Will (``sched/status``): a console says when the job
states it shows are a dead scheduler's last word (docs/protocol.md, "Scheduler status")."""

from fleetdeck.console.commands import job_blast_radius
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.rows import job_row
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState, SchedulerStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job

TOPIC = topic_for(CLUSTER, Kind.SCHED_STATUS)


def sched(online: bool, started: float, clock: Clock) -> bytes:
    return codec.encode(SchedulerStatus(online=online, started=int(started * 1000),
                                        name="slurm-bridge", ts=int(clock() * 1000)))


def world() -> tuple[Clock, Ingest, ConsoleSession]:
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(ingest)
    fleet.telemetry(ingest)
    publish_job(ingest, job_status("41", fleet.names[:2], clock), clock)
    publish_job(ingest, job_status("42", fleet.names[2:], clock, state=JobState.CD), clock)
    session.tick()
    return clock, ingest, session


def test_a_scheduler_never_heard_is_unknown_not_gone():
    clock, _ingest, session = world()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"] is None
    assert not [i for i in out["incidents"] if i["kind"] == "scheduler"]


def test_its_will_makes_the_running_jobs_as_of_its_death():
    clock, ingest, session = world()
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["online"] is True and out["scheduler"]["name"] == "slurm-bridge"
    assert "scheduler" not in {i["kind"] for i in out["incidents"]}
    clock.advance(30.0)
    ingest.handle(TOPIC, sched(False, started, clock), clock())  # the broker sends its will
    session.tick()
    out = fleet_summary(session.state, clock())
    gone = out["scheduler"]
    assert gone["online"] is False and gone["since"] == clock()
    assert gone["jobs_running"] == ["41"]  # 42 is done: nothing to say of it
    assert gone["jobs_as_of"] == started  # the last job status it left
    (inc,) = [i for i in out["incidents"] if i["kind"] == "scheduler"]
    assert inc["severity"] == "error" and inc["jobs"] == ["41"]
    assert "scheduler slurm-bridge offline (its Last Will, heard " in inc["title"]
    row = job_row(session.state.jobs["41"], session.state, clock())
    assert row.held_up.startswith("scheduler offline: as of ")
    assert "scheduler offline" not in job_row(session.state.jobs["42"], session.state,
                                              clock()).held_up
    radius = job_blast_radius(session.state, "41", clock())
    assert any("is offline: nothing answers a restart" in n for n in radius.notes)


def test_a_late_will_of_an_older_process_loses_to_a_newer_birth():
    clock, ingest, session = world()
    ingest.handle(TOPIC, sched(True, clock() + 5, clock), clock())
    session.tick()
    ingest.handle(TOPIC, sched(False, clock(), clock), clock())  # the old process's will
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is True


def test_a_malformed_scheduler_status_is_counted_with_its_topic():
    clock, ingest, session = world()
    ingest.handle(TOPIC, b'{"v": 1, "online": "yes"}', clock())
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"] is None
    assert out["totals"]["malformed"] == 1
    assert out["malformed"][0]["topic"] == TOPIC
