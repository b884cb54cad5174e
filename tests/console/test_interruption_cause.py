"""A node drained by a command is the operator's interruption only when nothing else is wrong
with it: draining a node whose link flaps is the network's lost time, carried out by the
operator (a newcomer's ``report`` booked it as "operator")."""

from fleetdeck.console.health import Finding, Severity
from fleetdeck.console.interruptions import node_cause
from fleetdeck.console.state import NodeState
from fleetdeck.protocol.messages import DrainInfo, DrainState

FLAP = Finding("N2", Severity.DRAIN, "mlx5_ib3:1", "link_downed increased")
XID79 = Finding("G2", Severity.DRAIN, "gpu3", "XID 79: fell off the bus")
HOT = Finding("G13", Severity.WARN, "gpu1", "90 °C at or above slowdown (89 °C)")


def node(*findings: Finding, drained_by_command: bool = True) -> NodeState:
    st = NodeState("gpu0035", online=True)
    st.findings = list(findings)
    if drained_by_command:
        st.drain = DrainInfo(state=DrainState.DRAINING, cmd_id="c-1", reason="flapping")
    return st


def job_41_on_four():
    """A console session watching job 41 on a four-node fleet: (clock, fleet, run, session)."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job

    clock = Clock()
    fleet = SynthFleet(4, clock, leaves=1)
    run = fleet.names[:4]
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("41", run, clock), clock)
    return clock, fleet, run, session


def test_the_drain_of_a_failed_node_is_its_faults_interruption():
    assert node(FLAP).all_findings == [FLAP]
    assert node(FLAP).drain.state is DrainState.DRAINING  # drained, by a command
    assert node_cause(node(FLAP)) == "network"
    assert node_cause(node(XID79)) == "gpu"


def test_the_drain_of_a_sound_or_merely_warm_node_is_the_operators():
    assert node_cause(node()) == "operator"
    assert node_cause(node(HOT)) == "operator"


def test_a_sound_node_no_one_drained_is_no_cause():
    assert node_cause(node(drained_by_command=False)) is None
    assert node_cause(node(FLAP, drained_by_command=False)) == "network"


async def test_an_operators_restart_of_a_job_stepping_past_an_old_flap_is_the_operators():
    """A link of the job's node flapped and came back (N2 holds the node failed for the hour)
    while the job stepped on at full speed; the on-call restarted the job. `report` booked it
    as the network's (a 3 a.m. drive); a live fault (the port still down) stays the network's."""
    from tests.tui.fleet import job_status, port_down, publish_job

    async def restarted(still_down: bool) -> str:
        clock, fleet, run, session = job_41_on_four()
        faults = {run[1]: port_down("mlx5_ib3")} if still_down else None
        # The flap a minute and more before the restart: a link up for less is still
        # flapping as far as anyone can tell (judgements.HELD_STEADY_S).
        for s in range(70):
            if s == 2:
                fleet.src(run[1]).ports[3].bump("link_downed", 1)
            clock.advance(1.0)
            fleet.telemetry(session.ingest, faults=faults if s >= 2 else None)
            session.tick()
        assert session.state.nodes[run[1]].verdict.value == "failed"
        again = job_status("41", run, clock, requeues=1).model_copy(
            update={"reason": "restart by alice@ops"})
        publish_job(session.ingest, again, clock)
        for _ in range(15):
            clock.advance(1.0)
            fleet.telemetry(session.ingest, faults=faults)
            session.tick()
        [it] = session.interruptions.total
        return it.cause

    assert await restarted(still_down=False) == "operator"
    assert await restarted(still_down=True) == "network"


async def test_a_drain_that_requeued_the_job_is_the_operators_over_faults_it_ran_with():
    """A broker blip hid the requeue's reason (which names the drained node): the operator's
    `drain --now` of a sound node was booked to the network of two other nodes of the run,
    failed for an hour under the job (an SRE drill)."""
    from fleetdeck.protocol.messages import JobState
    from tests.tui.fleet import job_status, port_down, publish_job

    clock, fleet, run, session = job_41_on_four()
    faults = {run[1]: port_down("mlx5_ib3")}
    for _ in range(5):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults)
        session.tick()
    assert session.state.nodes[run[1]].verdict.value == "failed"
    fleet.status(session.ingest, run[3], DrainState.DRAINED, "d7-op", "alice", "c-7")
    clock.advance(1.0)
    session.tick()
    # What the collector saw next: pending for resources, the requeue's reason lost.
    publish_job(session.ingest, job_status("41", [], clock, state=JobState.PD, requeues=1)
                .model_copy(update={"reason": "Resources"}), clock)
    for _ in range(15):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults)
        session.tick()
    [it] = session.interruptions.total
    assert (it.cause, it.nodes) == ("operator", (run[3],))


async def test_a_restart_off_a_node_whose_agent_died_is_not_the_hosts():
    """The agent of one of the job's nodes died while the job stepped on ("the agent died,
    not the node"); the on-call restarted the job to move it off. `report` booked it "host on
    gpu0002" (a 3 a.m. drive). A node that died under the job (the job stopped with it) stays
    the host's."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.messages import JobState
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER, job_status, publish_job

    async def interrupted(job_kept_stepping: bool, reason: str) -> tuple[str, tuple[str, ...]]:
        clock, fleet, run, session = job_41_on_four()
        for step in range(3):
            clock.advance(1.0)
            fleet.telemetry(session.ingest)
            publish_job(session.ingest, job_status("41", run, clock, step=500 + step), clock)
            session.tick()
        dead = run[1]
        session.ingest.handle(topic_for(CLUSTER, Kind.STATUS, dead),
                              codec.encode(fleet.agents[dead].status(online=False)), clock())
        alive = [n for n in fleet.names if n != dead]
        for step in range(3, 8 if job_kept_stepping else 3):
            clock.advance(1.0)
            fleet.telemetry(session.ingest, names=alive)
            publish_job(session.ingest, job_status("41", run, clock, step=500 + step), clock)
            session.tick()
        if job_kept_stepping:
            assert session.state.nodes[dead].job_stepping == "41"
        publish_job(session.ingest, job_status("41", [], clock, state=JobState.PD, requeues=1)
                    .model_copy(update={"reason": reason}), clock)
        for _ in range(15):
            clock.advance(1.0)
            fleet.telemetry(session.ingest, names=alive)
            session.tick()
        [it] = session.interruptions.total
        return it.cause, it.nodes

    assert (await interrupted(True, "restart by alice@ops"))[0] == "operator"
    assert (await interrupted(False, f"NodeFail {'gpu0002'}")) == ("host", ("gpu0002",))


def test_a_rank_killed_by_an_xid_48_on_a_node_whose_link_flaps_too_is_the_hbm_s():
    """ECC DBE and a link flap on one node at once (a fault drill): the flap's N1 showed a
    sample before the XID 48 did, and the job failed "rank 3 on gpu0002 gpu3: … (Xid 48)" was
    booked to the network. The reason says what killed the rank: its class wins on the node it
    names once it shows there (within the classifying window), whatever showed first."""
    from fleetdeck.protocol.messages import JobState
    from tests.console.test_failed_jobs import REASON_48
    from tests.console.test_judgements import xid
    from tests.tui.fleet import job_status, port_down, publish_job

    clock, fleet, run, session = job_41_on_four()
    run = run[:2]  # the reason's gpu0002 among them
    flap = port_down("mlx5_ib1")

    def both(tel):
        return xid(3, 48)(flap(tel))

    for t in range(3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("41", run, clock, step=100 + t), clock)
        fleet.telemetry(session.ingest, faults={"gpu0002": flap} if t == 2 else None)
        session.tick()
    publish_job(session.ingest, job_status("41", [], clock, step=102, state=JobState.F)
                .model_copy(update={"reason": REASON_48, "eta_s": None}), clock)
    for t in range(12):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults={"gpu0002": flap if t == 0 else both})
        session.tick()
    [it] = session.interruptions.total
    assert (it.cause, it.nodes) == ("hbm_ecc", ("gpu0002",)), it


def test_prose_names_a_cause_as_the_readme_does_and_json_keeps_the_key():
    """"job 4101 interrupted: gpu on gpu0020", "hbm_ecc on gpu0059": keys in sentences, where
    the README says "GPU", "HBM/ECC" (a newcomer's run)."""
    from fleetdeck.console.interruptions import Interruption, interruption_text
    from fleetdeck.console.rows import interruption_text as report_line

    assert interruption_text("4101", "gpu", ["gpu0020"], 12.0) == (
        "job 4101 interrupted: GPU on gpu0020, 12.0 GPU-h of work lost")
    assert interruption_text("4102", "hbm_ecc", ["gpu0059"], 1.0).startswith(
        "job 4102 interrupted: HBM/ECC on gpu0059")
    assert interruption_text("4103", "network", [], 0.0).startswith(
        "job 4103 interrupted: network,")
    it = Interruption("4102", 0.0, "hbm_ecc", ("gpu0059",), 8, 1.0, "R -> F (F)")
    assert it.as_json()["cause"] == "hbm_ecc"
    rep = {"interruptions": 2, "by_cause": {"gpu": {"count": 1}, "hbm_ecc": {"count": 1},
                                            "host": {"count": 0}},
           "effective_training_time_ratio": 0.9}
    assert "2 job interruptions (this session): GPU 1, HBM/ECC 1; ETTR 90.0%" in report_line(rep)
