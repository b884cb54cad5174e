"""A node retired (``fleetdeck retire``: its retained birth, status and digest cleared, empty
retained payloads) leaves a running console: its state, views, counts and incidents. Before,
an empty retained birth was malformed, and the node stayed offline with an incident for ever
(a drill: a 24-node simulator replacing a 32-node one)."""

from pathlib import Path

from fleetdeck.console.commands import retire_refusal
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


def _fleet_with_dead_nodes(session: ConsoleSession | None = None
                           ) -> tuple[ConsoleSession, SynthFleet]:
    """Four nodes heard; gpu0003 and gpu0004 then died (their wills came)."""
    if session is None:
        session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER),
                                 follow_up=False)
    clock = session.clock
    fleet = SynthFleet(4, clock)
    fleet.birth(session.ingest)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(session.ingest)
        session.tick()
    for name in ("gpu0003", "gpu0004"):
        will = fleet.agents[name].status(online=False)
        session.ingest.handle(topic_for(CLUSTER, Kind.STATUS, name), codec.encode(will),
                              clock())
    for _ in range(5):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, names=["gpu0001", "gpu0002"])
        session.tick()
    return session, fleet


def clear_retained(session: ConsoleSession, names: list[str]) -> None:
    """As ``fleetdeck retire`` clears them: birth first, then status and digest."""
    for name in names:
        for kind in (Kind.BIRTH, Kind.STATUS, Kind.DIGEST):
            session.ingest.handle(topic_for(CLUSTER, kind, name), b"", session.clock())


def test_a_cleared_retained_birth_retires_the_node_from_a_running_console():
    session, fleet = _fleet_with_dead_nodes()
    state = session.state
    assert {i for inc in incidents(state) for i in inc.nodes} >= {"gpu0003", "gpu0004"}
    malformed = state.malformed.total
    clear_retained(session, ["gpu0003", "gpu0004"])
    session.clock.advance(1.0)
    fleet.telemetry(session.ingest, names=["gpu0001", "gpu0002"])
    session.tick()
    assert sorted(state.nodes) == ["gpu0001", "gpu0002"]
    assert state.totals().nodes == 2
    assert not [inc for inc in incidents(state)
                if {"gpu0003", "gpu0004"} & set(inc.nodes)]
    assert state.malformed.total == malformed  # an empty birth or status is not garbage
    assert not session.ingest.rebirth_wanted
    assert [ln.text for ln in session.log.lines() if ln.kind == "retire"] == [
        "gpu[0003-0004] retired: their retained birth was cleared (fleetdeck retire), so they "
        "leave the views, counts and incidents; the store keeps the history"]
    # What a view still showing gpu0003 says of it (a node detail left open on it).
    assert session.retired_text("gpu0003") == (
        "gpu0003 was retired at 00:00:09: its retained birth was cleared (fleetdeck retire), "
        "so it left the views, counts and incidents; who retired it, and why, is in the audit "
        "log of that retire (what: retire); the store keeps its history")
    assert session.retired_text("gpu0001") == session.retired_text("gpu0099") == ""


def test_a_node_born_again_under_a_retired_name_starts_afresh():
    session, fleet = _fleet_with_dead_nodes()
    ingest, clock = session.ingest, session.clock
    # Cleared and born again within one tick: forgotten first, then the new birth.
    ingest.handle(topic_for(CLUSTER, Kind.BIRTH, "gpu0003"), b"", clock())
    fleet.agents["gpu0003"].bd_seq = 2
    fleet.birth(ingest, names=["gpu0003"])
    clock.advance(1.0)
    fleet.telemetry(ingest, names=["gpu0001", "gpu0002", "gpu0003"])
    session.tick()
    assert session.state.nodes["gpu0003"].online
    assert "gpu0004" in session.state.nodes


def test_an_empty_status_alone_changes_nothing():
    session, _fleet = _fleet_with_dead_nodes()
    malformed = session.state.malformed.total
    session.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0003"), b"", session.clock())
    session.tick()
    assert "gpu0003" in session.state.nodes
    assert session.state.malformed.total == malformed


async def _restarted(db: Path, clock: Clock, fleet: SynthFleet, names: list[str]
                     ) -> ConsoleSession:
    again = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await again.open_store(db)
    fleet.birth(again.ingest, names=names)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(again.ingest, names=names)
        again.tick()
    return again


async def _retired_on_a_store(db: Path, clock: Clock) -> tuple[ConsoleSession, SynthFleet]:
    """A console on the store ``db`` that heard gpu0003-0004 die, then retired."""
    first = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await first.open_store(db)
    _session, fleet = _fleet_with_dead_nodes(first)
    clear_retained(first, ["gpu0003", "gpu0004"])
    clock.advance(1.0)
    first.tick()
    return first, fleet


async def test_a_console_restarted_on_its_store_does_not_bring_retired_nodes_back(tmp_path):
    """The store's latest verdict rows (and events) put gpu0003-0004 back offline, with an
    incident each, for ever, once the console restarted: as before they were retired."""
    db, clock = tmp_path / "history.db", Clock()
    first, fleet = await _retired_on_a_store(db, clock)
    await first.close()

    clock.advance(30.0)
    again = await _restarted(db, clock, fleet, ["gpu0001", "gpu0002"])
    assert sorted(again.state.nodes) == ["gpu0001", "gpu0002"]
    assert not incidents(again.state, again.log.lines())
    await again.close()


async def test_a_node_born_again_after_its_retirement_is_restored(tmp_path):
    db, clock = tmp_path / "history.db", Clock()
    first, fleet = await _retired_on_a_store(db, clock)
    fleet.agents["gpu0003"].bd_seq = 2
    fleet.birth(first.ingest, names=["gpu0003"])
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(first.ingest, names=["gpu0001", "gpu0002", "gpu0003"])
        first.tick()
    await first.close()

    clock.advance(30.0)
    again = await _restarted(db, clock, fleet, ["gpu0001", "gpu0002"])
    assert sorted(again.state.nodes) == ["gpu0001", "gpu0002", "gpu0003"]
    await again.close()


def test_retire_refuses_a_dead_node_a_running_job_still_holds():
    """Retired, gpu0003 left every view and job 4101's 'offline, in job 4101' incident went
    with it, while the scheduler still ran the job on it: the job read healthy (a review)."""
    session, fleet = _fleet_with_dead_nodes()
    clock = session.clock
    publish_job(session.ingest, job_status("4101", ["gpu0001", "gpu0003"], clock), clock)
    clock.advance(1.0)
    fleet.telemetry(session.ingest, names=["gpu0001", "gpu0002"], job={"gpu0001": "4101"})
    session.tick()
    assert retire_refusal(session.state, ["gpu0003", "gpu0004"]) == (
        "gpu0003 is held by job 4101 (the scheduler says so): retired, it would leave every "
        "view while the job still runs on it; requeue or end the job first, or --force")
    assert retire_refusal(session.state, ["gpu0004"]) == ""


def test_retire_help_says_both_ways_a_birth_outlives_the_clear():
    """Exit 3 is an agent that published its birth again or a broker that dropped the clear (an
    ACL: ``run_retire``'s "this broker user may not publish the nodes' retained topics"); the
    help said only the first, and ``retire --help`` said no exit status at all."""
    import argparse

    from fleetdeck import cli

    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    said = ("3 a birth still there after the clear: an agent published it again, or the "
            "broker dropped the clear (an ACL)")
    assert said in " ".join(sub.choices["retire"].format_help().split())
    assert said in " ".join(parser.format_help().split())


def test_retire_refuses_a_node_heard_talking_whose_keyframe_it_lacks():
    """The shipped ACL's ``admin``, the user docs/security.md gives ``retire``, may not ask for
    keyframes: a running agent's node it hears only as deltas had no sample, read as not
    heard, and was retired without --force whenever no periodic keyframe fell in the wait (a
    newcomer's run of the production set-up, one retire in three at --interval 10)."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    clock = session.clock
    fleet = SynthFleet(2, clock)
    for agent in fleet.agents.values():
        agent.telemetry_payload()  # the keyframe sent before this reader came; the next in 30 s
    fleet.birth(session.ingest)
    for _ in range(3):
        clock.advance(1.0)
        for name in fleet.names:
            session.ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, name),
                                  fleet.agents[name].telemetry_payload(), clock())
        session.tick()
    assert all(st.sample is None for st in session.state.nodes.values())
    assert retire_refusal(session.state, ["gpu0002"], clock()).startswith(
        "gpu0002 is online now (telemetry heard): its agent would publish its birth again")
    # Its deltas stopped (its agent stopped, no will yet): past the stale window it is not.
    clock.advance(10.0)
    session.tick()
    assert retire_refusal(session.state, ["gpu0002"], clock()) == ""
