"""Nodes report running jobs and no job status was heard: the broker's ACL may keep
``job/+/status`` from this user, but right after a broker restart the scheduler may simply not
be back yet, and a scheduler whose own status says it went is away. A 2026-12-07 drill: right
after a Mosquitto restart, ``status --digests`` said "the broker may not deliver job/+/status to
this user (its ACL)" of a scheduler that had not reconnected yet."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import BROKER_YOUNG, SCHEDULER_OFFLINE, jobs_unheard_text
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import SchedulerStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet


def running_unheard() -> ConsoleSession:
    """gpu0001 and gpu0002 report job 4101; no job status has come."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(session.ingest)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, job={"gpu0001": "4101", "gpu0002": "4101"})
        session.tick()
    return session


def scheduler_says(session: ConsoleSession, online: bool) -> None:
    now = session.clock()
    session.ingest.handle(topic_for(CLUSTER, Kind.SCHED_STATUS), codec.encode(SchedulerStatus(
        online=online, started=int(now * 1000) - 60_000, name="slurm-bridge",
        ts=int(now * 1000))), now)
    session.tick()


def why(session: ConsoleSession) -> str | None:
    out = fleet_summary(session.state, session.clock())
    assert out["jobs_unheard"] == ["4101"]
    return out["jobs_unheard_why"]


def test_no_scheduler_heard_on_an_old_broker_names_the_acl():
    session = running_unheard()
    assert why(session) is None
    assert "(its ACL)" in jobs_unheard_text(["4101"], None)


def test_a_young_broker_says_the_scheduler_may_not_be_back_not_the_acl():
    session = running_unheard()
    now = session.clock()
    # As status reads it: started 12-2 s ago (its uptime is as of its last $SYS refresh).
    session.state.broker_restarted(now - 12, latest=now - 2)
    session.tick()
    assert why(session) == BROKER_YOUNG
    said = jobs_unheard_text(["4101"], BROKER_YOUNG)
    assert "ACL" not in said and "may still be reconnecting" in said, said
    # Up to the grace after the latest start the broker may have had, not the earliest.
    session.clock.advance(25)
    assert why(session) == BROKER_YOUNG
    session.clock.advance(5)
    assert why(session) is None


def test_a_scheduler_heard_online_on_a_young_broker_keeps_the_acl():
    """It is connected and publishing: its job statuses not coming is the broker's doing."""
    session = running_unheard()
    now = session.clock()
    session.state.broker_restarted(now - 12, latest=now - 2)
    scheduler_says(session, online=True)
    assert why(session) is None


def test_a_scheduler_that_said_it_went_is_away_not_an_acl():
    session = running_unheard()
    scheduler_says(session, online=False)
    assert why(session) == SCHEDULER_OFFLINE
    said = jobs_unheard_text(["4101"], SCHEDULER_OFFLINE)
    assert "ACL" not in said and "scheduler is offline" in said, said
