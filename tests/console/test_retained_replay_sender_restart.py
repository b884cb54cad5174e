"""A retained message older than what was heard from its sender is a broker's older saved state
and is left out (``Ingest._replayed``, docs/reliability.md). "Older" is by the sender's word
heard last, not the largest ever: a scheduler whose clock went back, or a simulator restarted
(its job ids start again at 4101 and its clock at its epoch), says so live first, and what it
keeps retained after that is its own state, not a replay."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol.messages import JobState
from tests.tui.fleet import CLUSTER, Clock, job_status, publish_job


def retained(ingest: Ingest, job, clock: Clock) -> None:
    """As ``LiveFeed.hand`` hands what the broker sent retained (on a subscribe)."""
    ingest.retained = True
    try:
        publish_job(ingest, job, clock)
    finally:
        ingest.retained = False


def test_a_restarted_schedulers_retained_status_is_not_taken_for_a_replay():
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    ahead = Clock(clock() + 3600)  # the first scheduler's clock ran an hour ahead
    publish_job(session.ingest, job_status("4101", ["gpu0001"], ahead, step=900), clock)
    session.tick()
    # Restarted, its clock right: job 4101 again, heard live at the (earlier) ts it now stamps.
    clock.advance(1.0)
    publish_job(session.ingest, job_status("4101", ["gpu0001"], clock, step=10), clock)
    session.tick()
    assert session.state.jobs["4101"].step == 10
    # The console reconnects; meanwhile the job completed, and the broker keeps that retained.
    clock.advance(5.0)
    retained(session.ingest, job_status("4101", [], clock, step=1000, state=JobState.CD), clock)
    session.tick()
    assert session.ingest.replayed == 0
    assert session.state.jobs["4101"].state is JobState.CD


def test_a_retained_status_older_than_the_one_heard_last_is_still_left_out():
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    old = job_status("41", ["gpu0001"], clock, step=100)
    clock.advance(30.0)
    publish_job(session.ingest, job_status("41", ["gpu0001"], clock, step=150), clock)
    session.tick()
    retained(session.ingest, old, clock)
    session.tick()
    assert session.ingest.replayed == 1
    assert session.state.jobs["41"].step == 150


def test_births_and_wills_of_made_up_nodes_are_not_kept_for_good(monkeypatch):
    """The nodes' births and ended sessions the check remembers are keyed by topics the
    network names: a publisher making up node names grew them for the life of the process,
    where every other table the ingest keys by topic is bounded (a last review). The oldest
    are forgotten past REPLAY_MEMORY, as retired nodes and jobs are."""
    import fleetdeck.console.ingest as ingest_mod
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import SynthFleet

    monkeypatch.setattr(ingest_mod, "REPLAY_MEMORY", 8)
    clock = Clock()
    fleet = SynthFleet(20, clock)
    ingest = Ingest(CLUSTER)
    fleet.birth(ingest)
    for name in fleet.names:  # each agent's Last Will: its session ended
        ingest.handle(topic_for(CLUSTER, Kind.STATUS, name),
                      codec.encode(fleet.agents[name].status(online=False)), clock())
    assert len(ingest._born) == 8 and len(ingest._ended) == 8
    assert list(ingest._born) == fleet.names[-8:]  # the newest kept
