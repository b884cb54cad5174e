"""Fleet-wide judgements live in the domain (console/judgements.py) and reach the JSON."""

import pytest

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import suspect_switches
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)


def session_with(faults, leaves: int = 1, jobs=()) -> ConsoleSession:
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=leaves)
    fleet.birth(ingest)
    for job in jobs:
        publish_job(ingest, job(clock), clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    return session


def test_one_rail_failing_on_three_nodes_names_that_switch():
    down = port_down("mlx5_ib2")
    session = session_with({"gpu0001": down, "gpu0004": down, "gpu0006": down})
    (sw,) = suspect_switches(session.state)
    assert sw.switch == "leaf00-r2"
    assert sw.nodes == ["gpu0001", "gpu0004", "gpu0006"]
    assert sw.ports == ["gpu0001:mlx5_ib2:1", "gpu0004:mlx5_ib2:1", "gpu0006:mlx5_ib2:1"]


def test_three_unrelated_cables_on_three_rails_blame_no_switch():
    session = session_with({"gpu0001": port_down("mlx5_ib1"), "gpu0004": port_down("mlx5_ib3"),
                            "gpu0006": port_down("mlx5_ib5")})
    assert suspect_switches(session.state) == []
    out = fleet_summary(session.state, session.clock())
    assert out["suspect_switches"] == []
    assert {n["id"] for n in out["nodes"] if n["verdict"] == "failed"} == {
        "gpu0001", "gpu0004", "gpu0006"}


def test_status_json_carries_switches_jobs_and_stragglers():
    down = port_down("mlx5_ib2")
    session = session_with(
        {"gpu0001": down, "gpu0004": down, "gpu0006": down, "gpu0003": throttled(3)},
        jobs=[lambda c: job_status("41", ["gpu0002", "gpu0003"], c, slowest_node="gpu0003")])
    out = fleet_summary(session.state, session.clock())
    assert [s["switch"] for s in out["suspect_switches"]] == ["leaf00-r2"]
    (job,) = out["jobs"]
    assert job["job_id"] == "41" and job["progress"] == 0.5
    assert job["straggler"]["node"] == "gpu0003"
    assert job["straggler"]["slower_pct"] == 50.0
    assert job["straggler"]["cause"].startswith("throttled GPU")


def test_a_switch_failure_makes_the_switch_the_problem_not_the_nodes_behind_it():
    down = port_down("mlx5_ib2")
    session = session_with({n: down for n in ("gpu0001", "gpu0002", "gpu0003", "gpu0004")})
    out = fleet_summary(session.state, session.clock())
    behind = {n["id"]: n for n in out["nodes"] if n["behind_switch"]}
    assert set(behind) == {"gpu0001", "gpu0002", "gpu0003", "gpu0004"}
    for node in behind.values():
        assert node["verdict"] == "degraded", node  # not a drain candidate
        assert "F1" in node["reasons"]
        assert node["action"] == "check switch leaf00-r2; do not drain"
    assert out["suspect_switches"][0]["switch"] == "leaf00-r2"
    # A node behind the switch with a fault of its own is still judged on that fault.
    session2 = session_with({"gpu0001": down, "gpu0002": down,
                             "gpu0003": lambda t: port_down("mlx5_ib5")(down(t))})
    st = session2.state.nodes["gpu0003"]
    assert st.behind_switch == "leaf00-r2" and st.verdict.value == "failed"
    # Its advice does not contradict itself: its own fault first, no "do not drain" anywhere.
    node = {n["id"]: n for n in fleet_summary(session2.state, session2.clock())["nodes"]}[
        "gpu0003"]
    assert not node["findings"][0].startswith("F1")
    assert not any("do not drain" in f for f in node["findings"]), node["findings"]
    assert node["action"].startswith("drain")


def with_job(fault, job_id: str):
    """A fault on a node that runs a job (its samples name the job)."""
    from msgspec.structs import replace

    from fleetdeck.protocol.fast import JobOnNode

    return lambda tel: replace(fault(tel), job=JobOnNode(id=job_id))


def test_a_failed_node_still_draining_is_not_told_to_be_repaired_yet():
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    session = session_with({"gpu0003": port_down("mlx5_ib5")})
    st = session.state.nodes["gpu0003"]
    assert st.verdict.value == "failed"
    # Idle: no "requeue its jobs" that sent the on-call looking for jobs that are not there.
    fix = "check mlx5_ib5:1: reseat or replace its cable/transceiver, or the switch port"
    assert recommended_action(st) == f"drain (no job on it), then {fix}"
    session = session_with({"gpu0003": with_job(port_down("mlx5_ib5"), "41")})
    st = session.state.nodes["gpu0003"]
    assert st.verdict.value == "failed"
    # The mode by the word the command line takes: "drain (requeue ...)" typed as `fleetdeck
    # drain gpu0003 --reason …` drained in finish mode, the job left running over the failed
    # node (a fault drill).
    assert recommended_action(st).startswith("drain --now (requeue its jobs from their checkpoint)")
    st.drain = DrainInfo(state=DrainState.DRAINING)
    assert recommended_action(st).startswith("draining: once its jobs have finished")
    assert recommended_action(st).endswith(f"now), {fix}, then resume")
    st.drain = DrainInfo(state=DrainState.DRAINED)
    assert recommended_action(st) == f"drained: {fix}, then resume"


def _job_with(slowest, median=1000.0):
    from fleetdeck.protocol.messages import RankTime

    def make(c):
        job = job_status("7", ["gpu0002", "gpu0003", "gpu0004"], c)
        return job.model_copy(update={"median_step_time_ms": median, "slowest": [
            RankTime(rank=r, node=n, step_time_ms=ms) for r, n, ms in slowest]})
    return make


def test_a_rank_12_percent_slower_with_a_throttled_gpu_is_the_straggler():
    session = session_with({"gpu0003": throttled(3)}, jobs=[_job_with(
        [(19, "gpu0003", 1120.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    assert job["straggler"]["node"] == "gpu0003" and job["straggler"]["slower_pct"] == 12.0


def test_healthy_spread_names_no_straggler():
    session = session_with({}, jobs=[_job_with(
        [(19, "gpu0003", 1015.0), (8, "gpu0002", 1013.0), (30, "gpu0004", 1011.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    assert job["straggler"] is None


def test_a_clear_outlier_without_a_finding_is_still_named():
    session = session_with({}, jobs=[_job_with(
        [(19, "gpu0003", 1080.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    assert job["straggler"]["node"] == "gpu0003"


def bare_session(n: int) -> tuple[Clock, Ingest, ConsoleSession, SynthFleet]:
    """A session that heard the births of ``n`` nodes and nothing else yet."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(n, clock)
    fleet.birth(ingest)
    return clock, ingest, session, fleet


def test_an_offline_agent_whose_job_keeps_stepping_is_not_a_dead_node():
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    clock, ingest, session, fleet = bare_session(4)
    nodes = ["gpu0001", "gpu0002"]
    for step in range(3):
        clock.advance(1.0)
        fleet.telemetry(ingest)
        publish_job(ingest, job_status("9", nodes, clock, step=500 + step), clock)
        session.tick()
    agent = fleet.agents["gpu0001"]
    ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0001"),
                  codec.encode(agent.status(online=False)), clock())  # its Last Will
    for step in range(3, 6):
        clock.advance(1.0)
        fleet.telemetry(ingest, names=["gpu0002", "gpu0003", "gpu0004"])
        publish_job(ingest, job_status("9", nodes, clock, step=500 + step), clock)
        session.tick()
    out = {n["id"]: n for n in fleet_summary(session.state, clock())["nodes"]}
    node = out["gpu0001"]
    assert node["verdict"] == "offline"
    assert node["job_still_stepping"] == "9"
    assert node["job"] == "9"  # its JOB read empty while its ranks ran on (an SRE drill)
    assert "still stepping" in node["findings"][0] and "do not drain" in node["findings"][0]
    assert node["action"].startswith("restart the agent")
    # Allocated and not responding, its GPUs in use: not "down*" and 8 GPUs "out".
    assert node["state"] == "alloc*"
    totals = fleet_summary(session.state, clock())["totals"]
    assert totals["gpus_out"] == 0, totals
    assert session.state.nodes["gpu0001"].gpu_use().in_use == 8
    (incident,) = [i for i in fleet_summary(session.state, clock())["incidents"]
                   if "gpu0001" in i["nodes"]]
    assert incident["title"].count("job 9") == 1, incident["title"]  # said once, not twice
    # The job stops stepping too: now it is the node.
    clock.advance(60.0)
    session.tick()
    out = {n["id"]: n for n in fleet_summary(session.state, clock())["nodes"]}
    assert out["gpu0001"]["job_still_stepping"] is None
    assert out["gpu0001"]["action"].startswith("check the node")


def test_a_running_job_on_a_failed_node_names_that_node_worst_first():
    # A job synchronises every rank at each allreduce: one failed node stops it, however
    # fast the others step (no straggler is named: step times say nothing yet).
    session = session_with({"gpu0003": port_down("mlx5_ib5"), "gpu0002": throttled(3)},
                           jobs=[lambda c: job_status("41", ["gpu0002", "gpu0003"], c),
                                 lambda c: job_status("42", ["gpu0005", "gpu0006"], c)])
    jobs = {j["job_id"]: j for j in fleet_summary(session.state, session.clock())["jobs"]}
    assert jobs["41"]["straggler"] is None
    sick = jobs["41"]["sick_nodes"]
    assert [s["node"] for s in sick] == ["gpu0003"]  # the throttled one is degraded, not sick
    assert sick[0]["verdict"] == "failed"
    assert sick[0]["finding"].startswith("N1 mlx5_ib5:1")
    assert sick[0]["text"].startswith("gpu0003 failed: N1 mlx5_ib5:1")
    assert jobs["42"]["sick_nodes"] == []


def test_a_job_behind_a_failing_switch_is_held_up_though_its_nodes_are_only_degraded():
    down = port_down("mlx5_ib2")
    session = session_with({n: down for n in ("gpu0001", "gpu0002", "gpu0003")},
                           jobs=[lambda c: job_status("41", ["gpu0003", "gpu0004"], c)])
    assert session.state.nodes["gpu0003"].verdict.value == "degraded"
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    (sick,) = job["sick_nodes"]
    assert sick["node"] == "gpu0003" and sick["verdict"] == "degraded"
    assert "behind suspect switch leaf00-r2" in sick["finding"]


def test_a_one_node_job_behind_a_failing_switch_is_not_held_up_by_it():
    # A job on one node reduces over NVLink, no IB port in its collectives (docs/scenarios.md,
    # the simulator's scheduler keeps it stepping): a fault drill's leaf-switch outage listed
    # a one-node job "held up: suspect switch leaf02-r4" while it stepped on, ETA and all.
    down = port_down("mlx5_ib2")
    session = session_with({n: down for n in ("gpu0001", "gpu0002", "gpu0003")},
                           jobs=[lambda c: job_status("41", ["gpu0003"], c),
                                 lambda c: job_status("42", ["gpu0002", "gpu0004"], c)])
    assert session.state.nodes["gpu0003"].behind_switch == "leaf00-r2"
    jobs = {j["job_id"]: j for j in fleet_summary(session.state, session.clock())["jobs"]}
    assert jobs["41"]["sick_nodes"] == []
    assert [s["node"] for s in jobs["42"]["sick_nodes"]] == ["gpu0002"]


def test_a_one_node_job_is_not_held_up_by_its_nodes_own_port_faults():
    # Its node's port down fails the node (drain it), but the job's ranks reduce over NVLink
    # and step on (the simulator's scheduler): a drill read a one-node job "held up: gpu0028
    # failed: N1 mlx5_ib2:1: DOWN/Polling" with its step moving and its ETA shown.
    session = session_with({"gpu0003": port_down("mlx5_ib5"), "gpu0005": port_down("mlx5_ib1")},
                           jobs=[lambda c: job_status("41", ["gpu0003"], c),
                                 lambda c: job_status("42", ["gpu0005", "gpu0004"], c)])
    assert session.state.nodes["gpu0003"].verdict.value == "failed"
    jobs = {j["job_id"]: j for j in fleet_summary(session.state, session.clock())["jobs"]}
    assert jobs["41"]["sick_nodes"] == []
    assert [s["node"] for s in jobs["42"]["sick_nodes"]] == ["gpu0005"]


def test_a_pending_job_and_an_agent_that_died_under_a_stepping_job_hold_nothing_up():
    from fleetdeck.console.judgements import sick_nodes
    from fleetdeck.protocol.messages import JobState

    session = session_with({"gpu0003": port_down("mlx5_ib5")}, jobs=[
        lambda c: job_status("43", ["gpu0003"], c, state=JobState.PD)])
    (job,) = session.state.jobs.values()
    assert sick_nodes(job, session.state) == []
    st = session.state.nodes["gpu0003"]
    st.verdict, st.job_stepping = st.verdict.OFFLINE, "43"
    job = job.model_copy(update={"state": JobState.R})
    assert sick_nodes(job, session.state) == []
    st.job_stepping = ""
    assert [s.node for s in sick_nodes(job, session.state)] == ["gpu0003"]


def test_status_text_lists_the_jobs_held_up_with_the_node_that_stops_them_first():
    import io

    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary

    session = session_with(
        {"gpu0002": port_down("mlx5_ib5"), "gpu0003": throttled(3)},
        jobs=[lambda c: job_status("41", ["gpu0001", "gpu0002"], c),
              lambda c: job_status("42", ["gpu0003", "gpu0004"], c, slowest_node="gpu0003"),
              lambda c: job_status("43", ["gpu0005"], c)])
    out = io.StringIO()
    render_summary(fleet_summary(session.state, session.clock()), Console(file=out, width=200))
    lines = out.getvalue().splitlines()
    start = lines.index("jobs held up (2 of 3):")
    assert lines[start + 1].startswith("  41 ")
    assert "gpu0002 failed: N1 mlx5_ib5:1" in lines[start + 1]
    assert lines[start + 2].startswith("  42 ")
    assert "straggler rank 3 gpu0003 +50%" in lines[start + 2]
    assert not any(line.startswith("  43 ") for line in lines)


def test_a_saturated_counter_alone_says_to_clear_it_not_to_drain():
    """N6 alone: the port may be fine or still storming; only a cleared counter can tell."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import recommended_action

    def saturated(tel):
        return replace(tel, ib_ports=[replace(p, symbol_error=0xFFFF) if p.dev == "mlx5_ib5"
                                      else p for p in tel.ib_ports])

    st = session_with({"gpu0003": saturated}).state.nodes["gpu0003"]
    assert st.verdict.value == "degraded"
    assert [f.rule for f in st.findings] == ["N6"]
    assert recommended_action(st).startswith("clear the port's counters (perfquery -R)")


def test_a_repaired_node_still_drained_is_told_to_be_resumed():
    """A drained node healthy again said action "none": its 8 GPUs stayed out of service unless
    someone spotted the drain (SRE drill)."""
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    session = session_with({})
    st = session.state.nodes["gpu0003"]
    assert st.verdict.value == "ok" and recommended_action(st) == "none"
    st.drain = DrainInfo(state=DrainState.DRAINED)
    assert recommended_action(st).startswith("healthy and drained: resume it")
    st.drain = DrainInfo(state=DrainState.DRAINED, reason="hot gpu2 thermal")
    assert recommended_action(st).startswith(
        "healthy and drained (reason: hot gpu2 thermal): resume it")


def test_a_drained_failed_node_is_told_its_warnings_repairs_too():
    """A drained node failed by its cable with a row remap pending on a GPU was told only to
    fix the cable: the GPU reset that applies the remap, cheap while the node is idle anyway,
    was dropped (a fault audit). Not drained, the drain's own steps stay first and alone."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.fast import RowRemap
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    def remap_pending(tel):
        return replace(tel, gpus=[replace(g, row_remap=RowRemap(pending=True))
                                  if g.index == 0 else g for g in tel.gpus])

    session = session_with({"gpu0003": lambda t: remap_pending(port_down("mlx5_ib6")(t))})
    st = session.state.nodes["gpu0003"]
    assert st.verdict.value == "failed" and {"N1", "G6"} <= set(st.reasons), st.reasons
    assert "reset gpu0" not in recommended_action(st)
    st.drain = DrainInfo(state=DrainState.DRAINED)
    action = recommended_action(st)
    assert action.startswith("drained: check mlx5_ib6:1"), action
    assert "reset gpu0 (a row remap is pending)" in action, action


def test_a_port_with_a_drain_step_gets_no_second_step_for_its_warning():
    """N2 and N4 on one port of a drained node said "check mlx5_ib3:1: reseat or replace its
    cable/transceiver; clean or replace mlx5_ib3:1's cable/transceiver" (a review)."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import repair_step

    st = session_with({}).state.nodes["gpu0003"]
    st.findings = [Finding("N2", Severity.DRAIN, "mlx5_ib3:1", "link_downed increased"),
                   Finding("N4", Severity.WARN, "mlx5_ib3:1", "LER 9/min"),
                   Finding("G6", Severity.WARN, "gpu2", "row remap pending")]
    assert repair_step(st, warn=True) == ("check mlx5_ib3:1: reseat or replace its "
                                          "cable/transceiver; reset gpu2 (a row remap is "
                                          "pending)")  # no "(+1 more)": the port's twice


def test_a_job_past_its_total_steps_reads_at_most_done():
    """total_steps may be a scheduler's estimate the job outruns: step 500 of 10 read
    "progress 50" in status --json, documented 0-1 (SRE drill)."""
    from fleetdeck.console.summary import job_summary

    session = session_with({}, jobs=[lambda c: job_status("7", ["gpu0002"], c).model_copy(
        update={"step": 500, "total_steps": 10})])
    job = session.state.jobs["7"]
    assert job_summary(job, session.state, 0.0)["progress"] == 1.0


def _will(ingest, fleet, name: str, clock) -> None:
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    ingest.handle(topic_for(CLUSTER, Kind.STATUS, name),
                  codec.encode(fleet.agents[name].status(online=False)), clock())


def test_nodes_behind_a_switch_that_come_back_one_by_one_write_one_transition_each():
    # A restarted simulator (or agents reconnecting with jitter): the first node back read
    # "offline -> stale", then "failed (N2)" while the others behind its switch were still
    # silent, then "degraded (F1)" once three were back (an SRE drill's events log).
    down = port_down("mlx5_ib2")
    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    faults = dict.fromkeys(behind, down)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    state = session.state
    assert state.nodes["gpu0001"].verdict.value == "degraded"
    for name in behind:
        _will(ingest, fleet, name, clock)
    for _ in range(20):  # their last samples old, within the agents' reconnect grace
        clock.advance(1.0)
        fleet.telemetry(ingest, names=fleet.names[4:])
        session.tick()
    moves = []
    for back in range(1, 5):  # new agent processes, a new session each, one after another
        name = behind[back - 1]
        fleet.agents[name].bd_seq = 2
        fleet.birth(ingest, names=[name])
        clock.advance(0.5)
        moves += session.tick().verdicts
        st = state.nodes[name]
        assert st.verdict_shown == "waiting" and not st.stale
        assert fleet_summary(state, clock())["totals"]["by_verdict"]["waiting"] == 1
        clock.advance(0.5)
        fleet.telemetry(ingest, names=behind[:back] + fleet.names[4:], faults=faults)
        moves += session.tick().verdicts
        assert state.nodes["gpu0001"].verdict.value == "degraded", back
        assert state.nodes["gpu0001"].behind_switch == "leaf00-r2"
    said = sorted((t.node, t.old and t.old.value, t.new.value) for t in moves)
    assert said == [(n, "offline", "degraded") for n in behind], said


def test_a_silent_node_s_last_sample_makes_no_new_suspect_switch():
    # Two nodes' own cables on one rail, and a node silent for long whose last sample had
    # that rail down on its own: no switch to blame, the two are drain candidates.
    down = port_down("mlx5_ib3")
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    clock.advance(1.0)
    fleet.telemetry(ingest, faults={"gpu0008": down})
    session.tick()
    _will(ingest, fleet, "gpu0008", clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, names=fleet.names[:7], faults={"gpu0001": down, "gpu0002": down})
        session.tick()
    assert suspect_switches(session.state) == []
    assert {n: session.state.nodes[n].verdict.value for n in ("gpu0001", "gpu0002")} == {
        "gpu0001": "failed", "gpu0002": "failed"}


def one_node(each_second=None):
    """A FakeNode heard by a FleetState: (node, ingest, state, run), ``run(seconds)`` feeding a
    sample a second and judging; ``each_second(s, node)`` before each sample."""
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    node = FakeNode(t0=1_800_000_000.0)
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)

    def run(seconds: int) -> None:
        for s in range(seconds):
            if each_second is not None:
                each_second(s, node)
            node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
            state.apply(ingest.take_batch(), node.now)
            state.judge_fleet(node.now)

    return node, ingest, state, run


def test_a_node_up_again_and_failed_only_by_the_hour_is_told_to_drain_and_resume():
    # N2 holds a node failed for the hour after link_downed moved. Once its links are up
    # (repaired), "drain (no job on it), then repair" sent the on-call to repair it again.
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.topics import Kind

    node, ingest, state, run = one_node()
    run(3)
    node.sim.ports[3].bump("link_downed", 1)  # a flap: down and straight back up
    run(3)
    st = state.nodes["gpu0001"]
    assert st.verdict.value == "failed" and st.reasons == ["N2"]
    # Up for seconds only, it may be flapping still: the fault's own advice, steady (it swung
    # with each drop of a flapping link, against the drain dialog's mode: a newcomer's run).
    assert recommended_action(st).startswith("drain (no job on it), then check mlx5_ib3:1")
    run(60)
    action = recommended_action(st)
    assert action.startswith("its links are up again, failed for the hour by N2"), action
    assert "then resume" in action
    node.feed(ingest, node.agent._event(EventDraft("repair", "node repaired")), Kind.EVENT)
    run(2)
    assert recommended_action(st).startswith("repaired at "), recommended_action(st)
    # Drained as told, it is told to resume, not "drained: repair, then resume" (a review).
    from fleetdeck.console.commands import blast_radius, suggested_drain_mode
    from fleetdeck.protocol.messages import CommandOp, DrainMode, DrainState

    assert suggested_drain_mode(state, ["gpu0001"]) is DrainMode.FINISH
    node.agent.drain = node.agent.drain.model_copy(update={"state": DrainState.DRAINED})
    node.feed(ingest, node.status(), Kind.STATUS)
    run(1)
    action = recommended_action(st)
    assert "check the link, then resume it" in action and "repair" not in action.split(":")[1]
    radius = blast_radius(state, CommandOp.RESUME, ["gpu0001"], node.now)
    # One node: "its", not "their" (a review).
    assert any("failed only by the hour of its port errors" in n for n in radius.notes), \
        radius.notes
    assert not any("repair first" in n for n in radius.notes), radius.notes


def test_nodes_silent_behind_a_switch_for_long_are_not_kept_under_it():
    # Counted for their switch for ever, three dead nodes kept it suspect, and a rack that
    # lost power read only "switch suspect: do not drain" (a review of this change).
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import SILENT_KEEP_S

    down = port_down("mlx5_ib2")
    behind = ["gpu0001", "gpu0002", "gpu0003"]
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=dict.fromkeys(behind, down))
        session.tick()
    for name in behind:
        _will(ingest, fleet, name, clock)
    clock.advance(1.0)
    fleet.telemetry(ingest, names=fleet.names[3:])
    session.tick()
    state = session.state
    assert [sw.switch for sw in suspect_switches(state)] == ["leaf00-r2"]  # just gone
    kinds = {i.kind for i in incidents(state)}
    assert kinds & {"rack", "node", "fleet"}, kinds  # their silence has its own incident
    for _ in range(int(SILENT_KEEP_S) + 2):
        clock.advance(1.0)
        fleet.telemetry(ingest, names=fleet.names[3:])
        session.tick()
    assert suspect_switches(state) == []
    assert "switch" not in {i.kind for i in incidents(state)}


def xid(gpu: int, *codes: int):
    """The node's GPU ``gpu`` reports these XIDs (a second ago)."""
    from msgspec.structs import replace

    from fleetdeck.protocol.fast import XidSeen

    def apply(tel):
        now_ms = int(tel.ts)
        seen = [XidSeen(code=c, ts=now_ms - 1000) for c in codes]
        gpus = [replace(g, xids=seen, xid_last=codes[-1], xid_last_ts=now_ms - 1000)
                if g.index == gpu else g for g in tel.gpus]
        return replace(tel, gpus=gpus)
    return apply


def test_a_failed_node_is_told_the_repair_its_fault_needs():
    """"then repair" left the on-call to look each fault up: NVIDIA's Xid catalog says reboot
    for 79, reset for 95, reset or reboot for 48; a link fault is its cable (a fault audit)."""
    from fleetdeck.console.judgements import recommended_action, repair_step

    session = session_with({"gpu0001": xid(3, 79), "gpu0002": xid(5, 95),
                            "gpu0003": xid(1, 48), "gpu0004": port_down("mlx5_ib2"),
                            "gpu0005": xid(2, 13)})
    nodes = session.state.nodes
    assert [nodes[n].verdict.value for n in ("gpu0001", "gpu0002", "gpu0003", "gpu0004")] \
        == ["failed"] * 4
    assert recommended_action(nodes["gpu0001"]) == (
        "drain (no job on it), then reboot the node (gpu3 fell off the bus; RMA it if it "
        "does again)")
    assert repair_step(nodes["gpu0002"]) == "reset gpu5 (XID 95)"
    assert repair_step(nodes["gpu0003"]).startswith("reset gpu1 or reboot (double-bit ECC)")
    # Down (N1) and its link_downed moved (N2): one step for the port, not the same twice.
    assert repair_step(nodes["gpu0004"]) == (
        "check mlx5_ib2:1: reseat or replace its cable/transceiver, or the switch port")
    assert nodes["gpu0005"].verdict.value == "ok"  # XID 13 is the application's
    assert repair_step(nodes["gpu0005"]) == "repair"


def test_a_contained_ecc_error_says_restart_the_job_and_reset_when_convenient():
    from fleetdeck.console.judgements import recommended_action

    session = session_with({"gpu0006": xid(4, 94), "gpu0007": xid(2, 92)})
    nodes = session.state.nodes
    assert nodes["gpu0006"].verdict.value == nodes["gpu0007"].verdict.value == "degraded"
    # The application is killed, not requeued: its job is restarted by an operator if it
    # failed ("its job restarts" of a job left F: a fault audit).
    assert recommended_action(nodes["gpu0006"]).startswith(
        "XID 94 (contained ECC error): the application on gpu4 was killed (restart its "
        "job from its checkpoint if it failed); reset gpu4 when convenient")
    assert recommended_action(nodes["gpu0007"]).startswith("watch the single-bit ECC rate")


def test_a_pending_row_remap_names_the_gpu_to_reset_and_keeps_the_xid_94_advice():
    """`inject xid code=94 then=63` (the docs' typical contained error and its remap) read
    "drain when idle, reset the GPU, resume": which of eight GPUs, and not a word that the
    application on it was killed (a fault audit)."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.fast import RowRemap

    def remap_pending(gpu, then):
        def apply(tel):
            tel = then(tel)
            return replace(tel, gpus=[replace(g, row_remap=RowRemap(pending=True))
                                      if g.index == gpu else g for g in tel.gpus])
        return apply

    session = session_with({"gpu0006": remap_pending(1, xid(1, 94, 63)),
                            "gpu0007": remap_pending(5, xid(5, 63))})
    nodes = session.state.nodes
    assert nodes["gpu0006"].verdict.value == nodes["gpu0007"].verdict.value == "degraded"
    assert recommended_action(nodes["gpu0006"]) == (
        "XID 94 (contained ECC error): the application on gpu1 was killed (restart its job "
        "from its checkpoint if it failed); reset gpu1 when convenient (drain it (no job on "
        "it), reset, resume)")
    assert recommended_action(nodes["gpu0007"]) == (
        "drain it (no job on it), reset gpu5 (a row remap is pending), resume")
    # XID 94 on two GPUs and a remap pending on a third: each named, once (a review).
    session = session_with({"gpu0008": remap_pending(5, lambda tel: xid(3, 94)(xid(1, 94)(tel)))})
    assert recommended_action(session.state.nodes["gpu0008"]) == (
        "XID 94 (contained ECC error): the applications on gpu1 and gpu3 were killed "
        "(restart its job from its checkpoint if it failed); reset gpu1, gpu3 and gpu5 when "
        "convenient (drain it (no job on it), reset, resume)")


def test_a_node_is_not_in_a_job_the_scheduler_has_moved_elsewhere():
    """A dead node's last sample names job 41; the scheduler requeued 41 onto other nodes.
    The incident said "in job 41" and the node list showed 41 on it (an SRE drill). The
    scheduler's status of the job decides; a job it has not told of stays the node's word."""
    from fleetdeck.console.commands import jobs_by_node
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import own_job
    from fleetdeck.console.summary import fleet_summary

    moved = lambda clock: job_status("41", ["gpu0005", "gpu0006"], clock)  # noqa: E731
    session = session_with({"gpu0003": with_job(port_down("mlx5_ib5"), "41"),
                            "gpu0004": with_job(port_down("mlx5_ib6"), "77")}, jobs=[moved])
    state = session.state
    st = state.nodes["gpu0003"]
    assert st.job_id == "41" and st.verdict.value == "failed"
    assert own_job(st, state) is None
    assert own_job(state.nodes["gpu0004"], state) == "77"  # no word from the scheduler
    assert "gpu0003" not in jobs_by_node(state) and jobs_by_node(state)["gpu0004"] == ["77"]
    (inc,) = [i for i in incidents(state) if "gpu0003" in i.nodes]
    assert "41" not in inc.title and inc.jobs == []
    nodes = {n["id"]: n for n in fleet_summary(state, session.clock())["nodes"]}
    assert nodes["gpu0003"]["job"] is None and nodes["gpu0004"]["job"] == "77"


def test_the_jobs_view_and_the_overview_put_a_job_a_node_stops_above_a_slowed_one():
    from fleetdeck.console.rows import job_row, jobs_to_act_on_first, sorted_jobs

    slowed = lambda clock: job_status("41", ["gpu0001", "gpu0002"], clock,  # noqa: E731
                                      slowest_node="gpu0002")
    stopped = lambda clock: job_status("77", ["gpu0003", "gpu0004"], clock)  # noqa: E731
    session = session_with({"gpu0002": throttled(3), "gpu0003": port_down("mlx5_ib5")},
                           jobs=[slowed, stopped])
    state = session.state
    rows = [job_row(j, state, session.clock()) for j in sorted_jobs(state)]
    assert [r.job_id for r in rows] == ["41", "77"]
    assert rows[0].straggler and not rows[0].sick and rows[1].sick
    assert [r.job_id for r in jobs_to_act_on_first(rows)] == ["77", "41"]


def test_top_problems_put_nodes_no_one_has_acted_on_before_drained_ones():
    from fleetdeck.console.rows import top_problems
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    session = session_with({"gpu0001": port_down("mlx5_ib5"), "gpu0002": throttled(3)})
    nodes = session.state.nodes
    assert (nodes["gpu0001"].verdict.value, nodes["gpu0002"].verdict.value) == (
        "failed", "degraded")
    assert [p.node for p in top_problems(session.state)[0]] == ["gpu0001", "gpu0002"]
    nodes["gpu0001"].drain = DrainInfo(state=DrainState.DRAINED, reason="N1", cmd_id="c-1")
    problems, count = top_problems(session.state)
    assert [p.node for p in problems] == ["gpu0002", "gpu0001"] and count == 2


def test_a_straggler_with_a_hot_gpu_and_a_storming_port_is_said_to_have_both():
    from msgspec.structs import replace

    from fleetdeck.console.judgements import likely_cause

    def storm(tel):
        ports = [replace(p, state="DOWN", phys_state="Polling") if p.dev == "mlx5_ib3" else p
                 for p in tel.ib_ports]
        return replace(throttled(3)(tel), ib_ports=ports)

    session = session_with({"gpu0002": storm, "gpu0003": throttled(1)})
    both = likely_cause(session.state, "gpu0002")
    assert both.startswith("throttled GPU (gpu3 ") and " + degraded port (mlx5_ib3:1 " in both
    assert " + " not in likely_cause(session.state, "gpu0003")


def test_a_gpu_off_the_bus_is_one_reboot_not_one_for_its_g1_and_one_for_its_xid():
    from msgspec.structs import replace

    from fleetdeck.console.judgements import repair_step

    def off_the_bus(tel):
        tel = xid(3, 79)(tel)
        return replace(tel, gpus=[replace(g, present=False) if g.index == 3 else g
                                  for g in tel.gpus])

    session = session_with({"gpu0001": off_the_bus})
    st = session.state.nodes["gpu0001"]
    assert {f.rule for f in st.findings} >= {"G1", "G2"}
    assert repair_step(st) == "reboot the node (gpu3 fell off the bus; RMA it if it does again)"


def test_a_resume_of_a_node_that_still_fails_gives_nothing_back_and_says_so_once():
    """Resuming an XID 79 node (drained, 7 of 8 GPUs) said "8 GPUs given back to the scheduler"
    beside "still failing health checks", and a node not drained got its note twice (a 3 a.m.
    drive)."""
    from fleetdeck.console.commands import blast_radius
    from fleetdeck.protocol.messages import CommandOp, DrainInfo, DrainState

    session = session_with({"gpu0003": xid(2, 79)})
    state = session.state
    state.nodes["gpu0003"].drain = DrainInfo(state=DrainState.DRAINED)
    assert state.nodes["gpu0003"].verdict.value == "failed"
    r = blast_radius(state, CommandOp.RESUME, ["gpu0003"], session.clock())
    assert r.gpus == 0
    assert r.summary() == ("1 node, nothing given back to the scheduler while it fails its "
                           "health checks")
    assert ("still failing health checks: gpu0003 (the scheduler places no work there until "
            "it passes: repair first)") in r.notes, r.notes
    state.nodes["gpu0004"].drain = DrainInfo(state=DrainState.DRAINED)
    r = blast_radius(state, CommandOp.RESUME, ["gpu0003", "gpu0004", "gpu0005"], session.clock())
    assert r.summary() == "3 nodes, 8 GPUs given back to the scheduler"
    assert [n for n in r.notes if n.startswith("not drained")] == [
        "not drained: gpu0005 (in service already: the resume changes nothing there; the "
        "agent answers 'was not drained')"]


def test_a_node_failed_only_by_the_hour_after_a_flap_holds_no_job_up():
    """Its link back, the job stepping at full speed: "held up by gpu0002 failed: N2" for the
    rest of the hour sent the on-call after a job that was fine (a 3 a.m. drive). A port still
    down holds it up."""
    from fleetdeck.console.judgements import sick_nodes

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    job = job_status("41", ["gpu0001", "gpu0002"], clock)
    publish_job(ingest, job, clock)
    for s in range(64):
        if s == 1:
            fleet.src("gpu0002").ports[3].bump("link_downed", 1)
        clock.advance(1.0)
        fleet.telemetry(ingest)
        session.tick()
        state = session.state
        if s == 3:
            # Seconds after its drop the link may still be flapping: it holds the job up.
            assert [n.node for n in sick_nodes(state.jobs["41"], state)] == ["gpu0002"]
    assert state.nodes["gpu0002"].verdict.value == "failed"
    assert sick_nodes(state.jobs["41"], state) == []
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={"gpu0002": port_down("mlx5_ib3")})
        session.tick()
    assert [s.node for s in sick_nodes(state.jobs["41"], state)] == ["gpu0002"]


def test_a_node_failed_by_a_days_carrier_losses_holds_no_job_up_while_its_links_are_still():
    """N5 (five carrier losses in 24 h) kept "held up by gpu0002" for a day after the flaps
    stopped, the job stepping at full speed (a review); the node stays failed (drain it, then
    replace the cable) and a port down again holds the job up."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import sick_nodes

    def flapped(tel):
        return replace(tel, ib_ports=[replace(p, carrier_losses_24h=6) if p.dev == "mlx5_ib3"
                                      else p for p in tel.ib_ports])

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    publish_job(ingest, job_status("41", ["gpu0001", "gpu0002"], clock), clock)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={"gpu0002": flapped})
        session.tick()
    state = session.state
    st = state.nodes["gpu0002"]
    assert st.verdict.value == "failed" and [f.rule for f in st.findings] == ["N5"]
    assert sick_nodes(state.jobs["41"], state) == []
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={"gpu0002": lambda t: port_down("mlx5_ib3")(flapped(t))})
        session.tick()
    assert [s.node for s in sick_nodes(state.jobs["41"], state)] == ["gpu0002"]


def test_a_port_that_keeps_losing_carrier_gets_one_step():
    """N2 and N5 of one port read "check mlx5_ib3:1: reseat or replace its cable/transceiver;
    replace mlx5_ib3:1's cable/transceiver (it keeps losing carrier)" (a newcomer's run)."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import repair_step

    session = session_with({})
    st = session.state.nodes["gpu0003"]
    st.findings = [Finding("N2", Severity.DRAIN, "mlx5_ib3:1", "link_downed increased"),
                   Finding("N5", Severity.DRAIN, "mlx5_ib3:1", "5 carrier losses/24h (≥ 5)"),
                   Finding("N2", Severity.DRAIN, "mlx5_ib6:1", "link_downed increased")]
    assert repair_step(st) == ("check mlx5_ib6:1: reseat or replace its cable/transceiver; "
                               "replace mlx5_ib3:1's cable/transceiver (it keeps losing "
                               "carrier)")


def hot(gpu: int, temp_c: float = 91.0):
    """The node's GPU ``gpu`` reads ``temp_c`` (G13)."""
    from msgspec.structs import replace

    def apply(tel):
        return replace(tel, gpus=[replace(g, temp_c=temp_c) if g.index == gpu else g
                                  for g in tel.gpus])
    return apply


def test_a_degraded_node_taken_out_of_service_is_told_its_repair_not_to_drain():
    """A hot GPU's node drained by an operator still said "watch; drain when idle if it
    persists", drained and after the repair (a 3 a.m. drive)."""
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    st = session_with({"gpu0003": hot(2)}).state.nodes["gpu0003"]
    assert st.verdict.value == "degraded" and "G13" in st.reasons
    assert recommended_action(st) == "watch; drain it if it persists (no job on it)"
    fix = "check gpu2's cooling (fans, airflow, inlet temperature)"
    st.drain = DrainInfo(state=DrainState.DRAINING)
    assert recommended_action(st) == f"draining: once its jobs have finished, {fix}, then resume"
    st.drain = DrainInfo(state=DrainState.DRAINED)
    assert recommended_action(st) == f"drained: {fix}, then resume"


def test_one_gpu_gets_one_repair_step():
    """An XID 48 and the double-bit ECC error it reports said "reset gpu6 or reboot
    (double-bit ECC); reset gpu6 (uncorrectable ECC)" (a 3 a.m. drive)."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import repair_step
    from fleetdeck.protocol.fast import Ecc

    def dbe(tel):
        tel = xid(6, 48)(tel)
        return replace(tel, gpus=[replace(g, ecc=Ecc(dbe_vol=1)) if g.index == 6 else g
                                  for g in tel.gpus])

    st = session_with({"gpu0003": dbe}).state.nodes["gpu0003"]
    assert {"G2", "G4"} <= set(st.reasons), st.reasons
    assert repair_step(st) == "reset gpu6 or reboot (double-bit ECC)"

    # And the most final repair: a failed row remap's RMA came after the reset and was cut
    # off behind "(+1 more)" (an SRE drill).
    from fleetdeck.protocol.fast import RowRemap

    def remap_failed(tel):
        tel = dbe(tel)
        return replace(tel, gpus=[replace(g, row_remap=RowRemap(failure=True))
                                  if g.index == 6 else g for g in tel.gpus])

    st = session_with({"gpu0003": remap_failed}).state.nodes["gpu0003"]
    assert {"G2", "G4", "G5"} <= set(st.reasons), st.reasons
    assert repair_step(st) == "RMA gpu6 (row remapping failed)"


def test_the_node_the_schedulers_reason_names_is_first_among_those_holding_a_job_up():
    """"held up by gpu0001 failed: …; +1 more node" named a node with an older fault where the
    scheduler's reason said "gpu0004 mlx5_ib6 link down" (an SRE drill)."""
    from fleetdeck.console.judgements import sick_nodes

    session = session_with({"gpu0001": port_down("mlx5_ib2"), "gpu0004": port_down("mlx5_ib6")},
                           jobs=[lambda c: job_status("41", ["gpu0001", "gpu0004"], c)])
    job = session.state.jobs["41"]
    assert [s.node for s in sick_nodes(job, session.state)] == ["gpu0001", "gpu0004"]
    job = job.model_copy(update={"reason": "NCCL watchdog: gpu0004 mlx5_ib6 link down"})
    assert [s.node for s in sick_nodes(job, session.state)] == ["gpu0004", "gpu0001"]
    # Slurm compresses host lists in its reasons: "gpu[0003-0004]" names gpu0004 too.
    job = job.model_copy(update={"reason": "NodeFail gpu[0003-0004],gpu0009"})
    assert [s.node for s in sick_nodes(job, session.state)] == ["gpu0004", "gpu0001"]


def test_reason_words_expand_a_compressed_host_list_but_not_a_huge_one():
    from fleetdeck.console.state import reason_words

    assert {"gpu0011", "gpu0012", "gpu0013", "gpu0020"} <= reason_words(
        "NodeFail gpu[0011-0013,0020] (Xid 79).")
    assert "gpu0011" in reason_words("rank 8 on gpu0011.")
    # A typo'd range is a word, not a million names.
    assert reason_words("down gpu[0-99999999]") == {"down", "gpu[0-99999999]"}
    # A backwards range counted negative and let a million names through (a review).
    assert reason_words("x gpu[0-999999,999999-0]") == {"x", "gpu[0-999999,999999-0]"}


def test_the_text_table_says_how_many_findings_it_leaves_out():
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.rows import reasons_text

    st = session_with({}).state.nodes["gpu0003"]
    st.findings = [Finding(f"G{i}", Severity.WARN, "gpu1", "x") for i in range(3, 8)]
    assert reasons_text(st).endswith("G5 gpu1: x (+2 more)")


@pytest.mark.parametrize("trickle", [False, True], ids=["storm-over", "trickle"])
def test_symbol_errors_that_stopped_hold_the_node_but_not_its_job(trickle):
    """After a symbol-error storm ended (a reseated cable), N3 held the node failed for the
    hour, rightly, but said "drain (requeue its jobs)" of a node whose job stepped at full
    speed. Quiet for SYMBOL_QUIET_S, it says drain it (finish) and fix the cable; a trickle
    that keeps N3 above 120/h never reads quiet."""
    from fleetdeck.console.judgements import SYMBOL_QUIET_S, recommended_action

    node, _ingest, state, run = one_node(
        (lambda s, n: n.sim.ports[3].bump("symbol_error", 1) if s % 20 == 0 else None)
        if trickle else None)
    run(3)
    node.sim.ports[3].bump("symbol_error", 500)
    run(3)
    st = state.nodes["gpu0001"]
    assert st.verdict.value == "failed" and st.reasons == ["N3"]
    assert recommended_action(st).startswith("drain (no job on it), then clean or replace")
    run(SYMBOL_QUIET_S + 5)
    assert st.verdict.value == "failed"  # the hour holds
    action = recommended_action(st)
    if trickle:
        assert action.startswith("drain (no job on it), then clean or replace"), action
    else:
        assert action.startswith("its port has had no symbol error for 5 min, failed for "
                                 "the hour by N3: drain it (finish), clean or replace the "
                                 "cable, then resume it"), action


def test_a_repaired_symbol_storm_is_held_for_the_hour_but_not_told_to_requeue():
    """After a symbol-error storm and its repair the node read "drain (requeue its jobs from
    their checkpoint), then clean or replace the cable" for SYMBOL_QUIET_S, held its job up
    though it stepped at full speed, then asked to replace the cable just repaired (a fault
    audit). Once its agent said it was repaired and a sample after that showed no new
    error, it is held for the hour only: drain it (finish), check the link, resume."""
    from fleetdeck.agents.source import EventDraft
    from fleetdeck.console.judgements import held_only_since, recommended_action
    from fleetdeck.protocol.topics import Kind

    node, ingest, state, run = one_node()
    run(3)
    node.sim.ports[3].bump("symbol_error", 500)
    run(3)
    st = state.nodes["gpu0001"]
    assert st.verdict.value == "failed" and st.reasons == ["N3"]
    assert held_only_since(st) is None
    node.feed(ingest, node.agent._event(EventDraft("repair", "node repaired")), Kind.EVENT)
    run(2)
    assert st.verdict.value == "failed"  # the hour holds
    assert held_only_since(st)  # the repair's time: it does its part now
    action = recommended_action(st)
    assert action.startswith("repaired at "), action
    assert "failed for the hour by N3: drain it (finish), check the link, then resume" in action
    # A storm going on after the repair is not repaired.
    node.sim.ports[3].bump("symbol_error", 500)
    run(2)
    assert held_only_since(st) is None


@pytest.mark.parametrize("steps_on", [False, True], ids=["broker-hung", "agent-died"])
def test_a_job_step_heard_with_the_nodes_last_sample_is_no_sign_the_agent_died(steps_on):
    """A broker hung under SIGSTOP delivers nothing more: its last job status came a few ms
    after the node's last sample, and every node of the job read "job 41 still stepping —
    the agent died, not the node: restart the agent, do not drain" (a drill). A step heard
    later than that is (the job's other nodes go on while one agent is dead)."""
    clock, ingest, session, fleet = bare_session(8)
    nodes = ["gpu0001", "gpu0002"]
    step = 100
    for _ in range(3):
        clock.advance(1.0)
        step += 1
        fleet.telemetry(ingest, job={n: "41" for n in nodes})
        clock.advance(0.01)
        publish_job(ingest, job_status("41", nodes, clock, step=step), clock)
        session.tick()
    for _ in range(8):  # gpu0001 silent from here: stale after 3 intervals
        clock.advance(1.0)
        if steps_on:
            step += 1
            fleet.telemetry(ingest, names=fleet.names[1:], job={"gpu0002": "41"})
            publish_job(ingest, job_status("41", nodes, clock, step=step), clock)
        session.tick()
    st = session.state.nodes["gpu0001"]
    assert st.stale
    assert st.job_stepping == ("41" if steps_on else "")


def test_a_switch_with_ports_down_and_one_erroring_is_suspect_by_all_three():
    """Two nodes' ports down and a third node's erroring on the same rail: suspect by the
    three, as before symbol errors could be a node's own behind a switch (a review)."""
    from msgspec.structs import replace

    def storm(tel):
        return replace(tel, ib_ports=[replace(p, symbol_error=int(tel.ts // 1000) % 10**6 * 500)
                                      if p.dev == "mlx5_ib2" else p for p in tel.ib_ports])

    down = port_down("mlx5_ib2")
    session = session_with({"gpu0001": down, "gpu0002": down, "gpu0003": storm})
    assert "N3" in session.state.nodes["gpu0003"].reasons
    (sw,) = suspect_switches(session.state)
    assert sw.switch == "leaf00-r2" and sw.nodes == ["gpu0001", "gpu0002", "gpu0003"]
    assert not sw.link_only


def test_a_one_shot_watch_waits_for_a_dead_agents_job_to_step_before_judging_it():
    """A `status` started after gpu0003's agent died has only its retained will and its job's
    retained status: a 3.5 s watch over a job stepping every 3 s saw no step in 2 of 6 runs,
    and then read "job": null and "check the node (power, BMC…)" for an agent death (an SRE
    drill). The node is in its job from the scheduler's word, the watch waits for a step while
    one is due, and a step seen makes it an agent death."""
    from fleetdeck.console.judgements import undecided_silent
    from fleetdeck.protocol.topics import Kind, topic_for

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(ingest)
    dead = fleet.agents["gpu0003"]
    ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0003"),
                  codec.encode(dead.status(online=False)), clock())
    job = job_status("41", ["gpu0002", "gpu0003"], clock, step=500)
    job = job.model_copy(update={"step_time_ms": 3000.0})
    publish_job(ingest, job, clock)
    started = clock()
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(ingest, names=["gpu0001", "gpu0002", "gpu0004"])
        session.tick()
    node = next(n for n in fleet_summary(session.state, clock())["nodes"] if n["id"] == "gpu0003")
    assert node["job"] == "41" and node["job_still_stepping"] is None
    assert undecided_silent(session.state, clock() - started) == ["gpu0003"]
    # Past two step times and a second without a step: decided, not stepping.
    assert undecided_silent(session.state, 7.5) == []
    # A job whose last status is older than the scheduler's newest word by three steps
    # stopped before the watch: nothing to wait for (a hung job made `status` wait 15 s).
    state = session.state
    newest = state.sched_newest_ts
    state.sched_newest_ts = job.ts + 10_000
    assert undecided_silent(state, clock() - started) == []
    state.sched_newest_ts = newest

    publish_job(ingest, job.model_copy(update={"step": 501, "ts": int(clock() * 1000)}), clock)
    clock.advance(0.5)
    session.tick()
    assert undecided_silent(session.state, clock() - started) == []
    node = next(n for n in fleet_summary(session.state, clock())["nodes"] if n["id"] == "gpu0003")
    assert (node["job"], node["job_still_stepping"]) == ("41", "41")
    assert node["action"] == "restart the agent; do not drain (its job is still stepping)"


def test_a_job_with_two_slow_nodes_names_both(capsys):
    """A throttled GPU on gpu0003 and a degraded port on gpu0005 both slowed job 4103; the
    console named only the slower of them, and gpu0003's incident lost its "slows job"
    (a fault audit): draining the one named recovers half the slowdown."""
    from fleetdeck.console.judgements import straggler
    from fleetdeck.protocol.messages import RankTime

    def slowed(c):
        job = job_status("41", ["gpu0002", "gpu0003", "gpu0004", "gpu0005"], c)
        return job.model_copy(update={"step_time_ms": 1500.0, "slowest": [
            RankTime(rank=35, node="gpu0005", step_time_ms=1250.0),
            RankTime(rank=36, node="gpu0005", step_time_ms=1245.0),
            RankTime(rank=19, node="gpu0003", step_time_ms=1230.0),
            RankTime(rank=2, node="gpu0002", step_time_ms=1004.0)]})

    session = session_with({"gpu0003": throttled(3), "gpu0005": port_down("mlx5_ib5")},
                           jobs=[slowed])
    found = straggler(session.state.jobs["41"], session.state)
    assert found is not None and found.nodes == ["gpu0005", "gpu0003"]
    assert found.text.startswith("rank 35 gpu0005 +25%: degraded port (")
    assert "; also rank 19 gpu0003 +23%: throttled GPU (" in found.text
    out = fleet_summary(session.state, session.clock())
    [job] = out["jobs"]
    assert [a["node"] for a in job["straggler"]["also"]] == ["gpu0003"]
    assert job["straggler"]["causes"] == ["degraded_port"]
    assert job["straggler"]["also"][0]["causes"] == ["throttled_gpu"]
    assert job["straggler"]["power_limit"] is None
    titles = {i["key"]: i["title"] for i in out["incidents"]}
    assert titles["node:gpu0003"].endswith("; slows job 41 by 23% (rank 19)")
    assert titles["node:gpu0005"].endswith("; slows job 41 by 25% (rank 35)")


def test_a_straggler_s_node_is_told_to_drain_after_the_next_checkpoint_not_to_wait_for_idle():
    """A throttled GPU slowing a 160-GPU job by 23 % read "watch; drain when idle if it
    persists": a node under a job is never idle while the job runs (a fault audit). A job
    near its end is let finish: a drain --now put one 20 min from its end behind an hour-long
    pending job (a 3 a.m. drive); right after a checkpoint, it says now is the moment."""
    def job(**update):
        def make(c):
            return job_status("41", ["gpu0002", "gpu0003"], c,
                              slowest_node="gpu0003").model_copy(update=update)
        return make

    def action(**update):
        session = session_with({"gpu0003": throttled(3)}, jobs=[job(**update)])
        out = fleet_summary(session.state, session.clock())
        [node] = [n for n in out["nodes"] if n["id"] == "gpu0003"]
        [inc] = [i for i in out["incidents"] if i["key"] == "node:gpu0003"]
        assert node["verdict"] == "degraded" and inc["action"] == node["action"]
        return node["action"]

    assert action(eta_s=7200.0).startswith(
        "it slows job 41 by 50% (rank 11): drain it --now right after the job's next "
        "checkpoint (every 100 steps; the last at step 400, at step 500 now), so the job "
        "requeues without it, then check gpu3's cooling")
    assert action(eta_s=7200.0, step=401).startswith(
        "it slows job 41 by 50% (rank 11): drain it --now now (the job checkpointed at step 400 "
        "a step ago: little is lost)")
    from fleetdeck.protocol.messages import JobState

    queued = session_with({"gpu0003": throttled(3)}, jobs=[
        job(eta_s=7200.0), lambda c: job_status("42", [], c, state=JobState.PD)])
    [node] = [n for n in fleet_summary(queued.state, queued.clock())["nodes"]
              if n["id"] == "gpu0003"]
    assert "so the job requeues without it (a job pending may take the freed nodes first)" \
        in node["action"]
    assert action(eta_s=500.0) == (
        "it slows job 41 by 50% (rank 11), which ends in 8 min at its pace: drain it (finish) "
        "so nothing new lands there, let the job end, then check gpu3's cooling (fans, "
        "airflow, inlet temperature)")


def test_two_stragglers_of_one_job_are_told_to_drain_together_once():
    """Two throttled GPUs on two nodes of one job (a live sim, a jobs audit): each node read
    "drain it --now right after the job's next checkpoint, so the job requeues without it",
    and drained one at a time, the job requeued twice, the first requeue gaining nothing while
    the other node still held it back. Each node's action now names the other; a power-capped
    fellow (its limit restored live) and a drained one are not named."""
    from fleetdeck.protocol.messages import JobState, RankTime

    def slowed(c):
        job = job_status("41", ["gpu0002", "gpu0003", "gpu0005"], c)
        return job.model_copy(update={"step_time_ms": 1300.0, "eta_s": 7200.0, "slowest": [
            RankTime(rank=11, node="gpu0003", step_time_ms=1250.0),
            RankTime(rank=35, node="gpu0005", step_time_ms=1240.0),
            RankTime(rank=2, node="gpu0002", step_time_ms=1004.0)]})

    # A 40-node job on this 8-node cluster never starts: it takes no freed node either.
    never = lambda c: job_status("42", [], c, state=JobState.PD).model_copy(  # noqa: E731
        update={"nodes_wanted": 40})
    session = session_with({"gpu0003": throttled(3), "gpu0005": throttled(1)},
                           jobs=[slowed, never])
    out = fleet_summary(session.state, session.clock())
    act = {n["id"]: n["action"] for n in out["nodes"]}
    assert act["gpu0003"].startswith(
        "it slows job 41 by 25% (rank 11): drain it --now with gpu0005 (it slows the job too: "
        "drained together, the job requeues once, not 2 times) right after the job's next "
        "checkpoint (every 100 steps; the last at step 400, at step 500 now), so the job "
        "requeues without them, then check gpu3's cooling"), act["gpu0003"]
    assert "drain it --now with gpu0003 (it slows the job too" in act["gpu0005"]
    assert "a job pending may take the freed nodes first" not in act["gpu0003"]
    incs = {i["key"]: i["action"] for i in out["incidents"]}
    assert incs["node:gpu0003"] == act["gpu0003"]


def test_a_straggler_told_not_to_drain_is_no_fellow_to_drain_with():
    """A review: a straggler's line read "drain it --now with gpu0005" while gpu0005's own
    read "restart the agent; do not drain (its job is still stepping)" (its agent died under
    the job), or "check switch leaf00-r2; do not drain" (its slow port the switch's). A
    fellow is named only where its own action is a drain too."""
    from fleetdeck.protocol.messages import RankTime
    from fleetdeck.protocol.topics import Kind, topic_for

    def slowed(clock, nodes, step=500):
        job = job_status("41", nodes, clock, step=step)
        return job.model_copy(update={"step_time_ms": 1300.0, "eta_s": 7200.0, "slowest": [
            RankTime(rank=11, node=nodes[0], step_time_ms=1250.0),
            RankTime(rank=35, node=nodes[1], step_time_ms=1240.0),
            RankTime(rank=2, node=nodes[2], step_time_ms=1004.0)]})

    clock, ingest, session, fleet = bare_session(8)
    nodes = ["gpu0003", "gpu0005", "gpu0002"]
    faults = {"gpu0003": throttled(3), "gpu0005": throttled(1)}
    for step in range(3):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        publish_job(ingest, slowed(clock, nodes, 500 + step), clock)
        session.tick()
    ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0005"),
                  codec.encode(fleet.agents["gpu0005"].status(online=False)), clock())
    for step in range(3, 6):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults, names=[n for n in fleet.agents if n != "gpu0005"])
        publish_job(ingest, slowed(clock, nodes, 500 + step), clock)
        session.tick()
    act = {n["id"]: n["action"] for n in fleet_summary(session.state, clock())["nodes"]}
    assert act["gpu0005"].startswith("restart the agent; do not drain"), act["gpu0005"]
    assert "drain it --now right after" in act["gpu0003"], act["gpu0003"]
    assert "gpu0005" not in act["gpu0003"]

    down = port_down("mlx5_ib2")
    session = session_with({"gpu0001": down, "gpu0002": down, "gpu0003": down,
                            "gpu0005": throttled(3)},
                           jobs=[lambda c: slowed(c, ["gpu0005", "gpu0003", "gpu0006"])])
    act = {n["id"]: n["action"] for n in fleet_summary(session.state, session.clock())["nodes"]}
    assert act["gpu0003"] == "check switch leaf00-r2; do not drain"
    assert "drain it --now right after" in act["gpu0005"], act["gpu0005"]
    assert "gpu0003" not in act["gpu0005"]


def test_a_whole_slow_node_of_a_two_node_job_is_measured_against_the_other_node():
    """An NVLink fault slowed every rank of one node of a 2-node job (a live sim, a jobs
    audit): half the ranks were the slow node's, the scheduler's median lay between the two
    nodes, and the job slowed by 37 % read "slows job 4105 by 17%". The other node's own
    step time (its sample's ``job.step_time_ms``) is the baseline there; a bigger job's median
    is a healthy rank's and stays it."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import straggler
    from fleetdeck.protocol.fast import JobOnNode
    from fleetdeck.protocol.messages import RankTime

    def slowed(nodes):
        def make(c):
            job = job_status("41", nodes, c)
            return job.model_copy(update={"step_time_ms": 1385.0, "median_step_time_ms": 1185.0,
                                          "slowest": [RankTime(rank=8 + i, node="gpu0003",
                                                               step_time_ms=1384.0 - i)
                                                      for i in range(8)]})
        return make

    def on_job(ms):
        def apply(tel):
            return replace(throttled(3)(tel) if ms > 1100 else tel,
                           job=JobOnNode(id="41", step_time_ms=ms))
        return apply

    session = session_with({"gpu0002": on_job(1010.0), "gpu0003": on_job(1384.0)},
                           jobs=[slowed(["gpu0002", "gpu0003"])])
    found = straggler(session.state.jobs["41"], session.state)
    assert found is not None and found.node == "gpu0003"
    assert round(found.slower_pct) == 37, found.text
    # Of three nodes the scheduler's median is kept (a healthy rank's there).
    three = session_with({"gpu0002": on_job(1010.0), "gpu0003": on_job(1384.0)},
                         jobs=[slowed(["gpu0002", "gpu0003", "gpu0004"])])
    found = straggler(three.state.jobs["41"], three.state)
    assert found is not None and round(found.slower_pct) == 17


@pytest.mark.parametrize("gone", ["stale", "offline"])
def test_a_two_node_jobs_other_node_is_no_baseline_once_its_sample_is_not_fresh(gone):
    """``_other_node_time`` read the other node's last sample whatever its age: a node gone
    stale or offline kept its step time of then as the job's baseline (a review). Only a fresh
    sample is; else the scheduler's median, as before."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import straggler
    from fleetdeck.protocol.fast import JobOnNode
    from fleetdeck.protocol.messages import RankTime
    from fleetdeck.protocol.topics import Kind, topic_for

    def slowed(c):
        job = job_status("41", ["gpu0002", "gpu0003"], c)
        return job.model_copy(update={"step_time_ms": 1385.0, "median_step_time_ms": 1185.0,
                                      "slowest": [RankTime(rank=8 + i, node="gpu0003",
                                                           step_time_ms=1384.0 - i)
                                                  for i in range(8)]})

    def on_job(ms):
        def apply(tel):
            return replace(throttled(3)(tel) if ms > 1100 else tel,
                           job=JobOnNode(id="41", step_time_ms=ms))
        return apply

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    publish_job(ingest, slowed(clock), clock)
    faults = {"gpu0002": on_job(1010.0), "gpu0003": on_job(1384.0)}
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    found = straggler(session.state.jobs["41"], session.state)
    assert found is not None and round(found.slower_pct) == 37, found
    if gone == "offline":
        ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0002"),
                      codec.encode(fleet.agents["gpu0002"].status(online=False)), clock())
    rest = [n for n in fleet.names if n != "gpu0002"]
    for _ in range(6):
        clock.advance(1.0)
        fleet.telemetry(ingest, names=rest, faults=faults)
        session.tick()
    st = session.state.nodes["gpu0002"]
    assert (st.stale if gone == "stale" else st.online is False), (st.stale, st.online)
    found = straggler(session.state.jobs["41"], session.state)
    assert found is not None and round(found.slower_pct) == 17, found


def test_a_node_behind_a_failing_switch_with_a_warning_of_its_own_is_told_of_both():
    """gpu0018, with an XID 68 of its own behind a dead rail switch, was told "watch; drain
    when idle if it persists" while its neighbours read "check switch leaf02-r4; do not
    drain" (a fault audit)."""
    down = port_down("mlx5_ib2")
    session = session_with({"gpu0001": down, "gpu0002": down,
                            "gpu0003": lambda t: throttled(3)(down(t))})
    out = {n["id"]: n for n in fleet_summary(session.state, session.clock())["nodes"]}
    node = out["gpu0003"]
    assert node["verdict"] == "degraded" and node["behind_switch"] == "leaf00-r2"
    assert node["action"].startswith(
        "check switch leaf00-r2 (its link faults are the switch's: do not drain for them); for "
        "its own warnings: "), node["action"]
    assert out["gpu0001"]["action"] == "check switch leaf00-r2; do not drain"


def test_status_names_the_suspect_switch_that_holds_a_job_up_as_the_console_does():
    """`status` read "4105 llama3-70b-005: gpu0017 degraded: F1 behind suspect switch leaf02-r5
    …" of a switch outage, a sound node first, where the console names the switch (a 3 a.m.
    drive): `sick_nodes` says which switch holds each one up, and the text leads with it."""
    import io

    from rich.console import Console

    from fleetdeck.console.cli.status import render_held_up_jobs

    down = port_down("mlx5_ib2")
    session = session_with({n: down for n in ("gpu0001", "gpu0002", "gpu0003")},
                           jobs=[lambda c: job_status("41", ["gpu0002", "gpu0003", "gpu0004"],
                                                      c)])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    assert [s["switch"] for s in job["sick_nodes"]] == ["leaf00-r2", "leaf00-r2"]
    out = io.StringIO()
    render_held_up_jobs([job], Console(file=out, width=200))
    assert out.getvalue().splitlines()[1] == (
        "  41 llama-70b: suspect switch leaf00-r2: check it, do not drain (gpu[0002-0003] "
        "behind it)")


def test_a_job_with_a_failed_node_of_its_own_is_not_held_up_by_the_switch_alone():
    """The scheduler's reason named gpu0017, behind suspect switch leaf02-r5, and gpu0035 of
    the same job had failed by an XID 79: ``sick_nodes`` puts the named node first, and the
    jobs view, the overview and `status` read "suspect switch leaf02-r5: check it, do not drain
    (gpu0017 behind it); +1 node", counted under "held up by a switch" (a review). The node
    with a fault of its own (here a port no other node lost) leads; the switch follows it."""
    import io

    from rich.console import Console

    from fleetdeck.console.cli.status import render_held_up_jobs
    from fleetdeck.console.judgements import held_up_text, sick_nodes
    from fleetdeck.console.rows import job_row

    down = port_down("mlx5_ib2")
    faults = {n: down for n in ("gpu0001", "gpu0002", "gpu0003")}
    faults["gpu0004"] = port_down("mlx5_ib5")  # its own: no other node lost rail 5

    def job(c):
        return job_status("41", ["gpu0003", "gpu0004"], c).model_copy(
            update={"reason": "gpu0003 mlx5_ib2 link down"})

    session = session_with(faults, jobs=[job])
    state = session.state
    (js,) = state.jobs.values()
    sick = sick_nodes(js, state)
    assert [(s.node, s.switch) for s in sick] == [("gpu0003", "leaf00-r2"), ("gpu0004", "")]
    want = (f"{sick[1].text}; suspect switch leaf00-r2: check it, do not drain (gpu0003 "
            "behind it)")
    assert sick[1].text.startswith("gpu0004 failed: N1 mlx5_ib5:1")
    assert held_up_text(sick) == want
    row = job_row(js, state, session.clock())
    assert (row.sick, row.held_up, row.sick_switch, row.sick_count) == (want, want, "", 2)
    (summary,) = fleet_summary(state, session.clock())["jobs"]
    out = io.StringIO()
    render_held_up_jobs([summary], Console(file=out, width=300))
    assert out.getvalue().splitlines()[1] == f"  41 llama-70b: {want}"
    # Every node only behind the switch: the switch alone, counted as the switch's.
    state.nodes["gpu0004"].verdict = state.nodes["gpu0004"].verdict.OK
    state.not_ok.discard("gpu0004")
    row = job_row(js, state, session.clock())
    assert row.sick_switch == "leaf00-r2"
    assert row.sick == "suspect switch leaf00-r2: check it, do not drain (gpu0003 behind it)"


def test_a_straggler_figure_of_a_silent_fleet_is_said_as_last_heard():
    """A killed simulator's fleet-silent incident still ended "slows job 4103 by 25% (rank 2)"
    (a fault audit): the figure is the job's last step before the silence, no news."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import utc_hms

    def slowed(c):
        return job_status("41", ["gpu0002", "gpu0003"], c, slowest_node="gpu0003")

    session = session_with({"gpu0003": throttled(3)}, jobs=[slowed])
    (home,) = [i for i in incidents(session.state) if "gpu0003" in i.nodes]
    assert home.title.endswith("; slows job 41 by 50% (rank 11)")  # current while heard
    clock = session.clock
    for _ in range(30):  # every agent silent, the job's status as it last was
        clock.advance(1.0)
        session.tick()
    (home,) = [i for i in incidents(session.state) if "gpu0003" in i.nodes]
    assert home.kind in ("rack", "fleet", "node") and "fell silent" in home.title, home.title
    assert "slows job" not in home.title
    as_of = utc_hms(session.state.jobs["41"].ts / 1000)
    assert home.title.endswith(f"; slowed job 41 by 50% (rank 11) when last heard ({as_of})")


def test_a_straggler_whose_agent_died_while_its_job_steps_on_is_said_as_current():
    """Only the agent died: the job steps on, so the scheduler's figure for the straggler is
    news, not "when last heard" (``_silent_under``: silent and its job does not step on)."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.protocol.topics import Kind, topic_for

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(ingest)
    run = ["gpu0002", "gpu0003"]
    faults = {"gpu0003": throttled(3)}

    def tick(step: int, names=None) -> None:
        clock.advance(1.0)
        fleet.telemetry(ingest, names=names, faults=faults)
        publish_job(ingest, job_status("41", run, clock, step=step, slowest_node="gpu0003"),
                    clock)
        session.tick()

    for step in range(500, 503):
        tick(step)
    ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0003"),
                  codec.encode(fleet.agents["gpu0003"].status(online=False)), clock())
    alive = [n for n in fleet.names if n != "gpu0003"]
    for step in range(503, 515):
        tick(step, names=alive)
    assert session.state.nodes["gpu0003"].job_stepping == "41"
    (home,) = [i for i in incidents(session.state) if "gpu0003" in i.nodes]
    assert home.title.endswith("; slows job 41 by 50% (rank 11)"), home.title


def test_a_straggler_of_its_own_under_a_gone_scheduler_is_said_as_last_heard():
    """A straggler on a node with nothing of its own is a job incident of its own: with its
    scheduler gone the figure is the job's last status, no news (a review of the fix above)."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import utc_hms
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.messages import SchedulerStatus
    from fleetdeck.protocol.topics import Kind, topic_for

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(ingest)
    topic = topic_for(CLUSTER, Kind.SCHED_STATUS)

    def sched(online: bool) -> bytes:
        return codec.encode(SchedulerStatus(online=online, started=1_000, name="slurm-bridge",
                                            ts=int(clock() * 1000)))

    def run(seconds: int) -> list:
        for _ in range(seconds):
            clock.advance(1.0)
            fleet.telemetry(ingest)
            session.tick()
        return [i for i in incidents(session.state) if i.kind == "job"]

    ingest.handle(topic, sched(True), clock())
    publish_job(ingest, job_status("41", ["gpu0002", "gpu0003"], clock,
                                   slowest_node="gpu0003"), clock)
    (job,) = run(2)
    assert job.title.startswith("job 41: straggler rank 11 gpu0003 +50%"), job.title
    ingest.handle(topic, sched(False), clock())
    (job,) = run(5)  # past the burst of wills a broker's own shutdown sends
    as_of = utc_hms(session.state.jobs["41"].ts / 1000)
    assert job.title.startswith(f"job 41: straggler when last heard ({as_of}) rank 11 "
                                "gpu0003 +50%"), job.title


def test_a_job_behind_two_suspect_switches_names_both():
    """Job nodes behind leaf00-r2 and leaf01-r2 read "suspect switch leaf00-r2: check it, do
    not drain (gpu[0002-0003] behind it); +1 node": the second switch was never named, and its
    node was counted as one more sick node (a helper's audit). Each switch is named with the
    nodes behind it, the advice before the host lists; the count is of the nodes not said."""
    from fleetdeck.console.judgements import SickNode, held_up_text

    f1 = "F1 behind suspect switch"
    a2, a3 = (SickNode(n, "degraded", f1, "leaf00-r2") for n in ("gpu0002", "gpu0003"))
    b9 = SickNode("gpu0009", "degraded", f1, "leaf01-r2")
    assert held_up_text([a2, b9, a3]) == (
        "suspect switches leaf00-r2, leaf01-r2: check them, do not drain (gpu[0002-0003] "
        "behind leaf00-r2, gpu0009 behind leaf01-r2)")
    # A node with a fault of its own leads; one more is counted, not the switches' nodes.
    own = SickNode("gpu0004", "failed", "G2 gpu3: XID 79")
    other = SickNode("gpu0005", "failed", "G2 gpu1: XID 48")
    assert held_up_text([own, a2, b9, other]) == (
        "gpu0004 failed: G2 gpu3: XID 79; suspect switches leaf00-r2, leaf01-r2: check them, "
        "do not drain (gpu0002 behind leaf00-r2, gpu0009 behind leaf01-r2); +1 node")
    # One switch reads as before.
    assert held_up_text([a2, a3]) == (
        "suspect switch leaf00-r2: check it, do not drain (gpu[0002-0003] behind it)")


def test_a_gpu_with_several_xids_is_told_the_strongest_repair_they_need():
    """"XID 48, XID 79" on gpu3 said "reset gpu3 or reboot (double-bit ECC)": the first known
    XID's step, where XID 79 (fell off the bus) needs the node rebooted (NVIDIA's Xid catalog,
    docs/domain.md §4). A reboot over an RMA's reset, that over a reset or reboot."""
    from fleetdeck.console.judgements import recommended_action, repair_step

    reboot3 = "reboot the node (gpu3 fell off the bus; RMA it if it does again)"
    st = session_with({"gpu0001": xid(3, 48, 79)}).state.nodes["gpu0001"]
    assert [f.text for f in st.findings if f.rule == "G2"] == ["XID 48, XID 79"]
    assert repair_step(st) == reboot3
    assert recommended_action(st) == f"drain (no job on it), then {reboot3}"
    st = session_with({"gpu0001": xid(3, 48, 64)}).state.nodes["gpu0001"]
    assert repair_step(st) == "reset gpu3; RMA it if it recurs (row remap failed)"


def test_a_node_whose_gpus_need_a_reset_and_a_reboot_is_told_the_reboot_first():
    """gpu1's XID 48 and gpu3's XID 79 on one node said "reset gpu1 or reboot (double-bit
    ECC); reboot the node (gpu3 fell off the bus …)": a reset the reboot does anyway, first.
    The reboot leads and covers the other GPUs' resets; an RMA to watch for stays said."""
    from fleetdeck.console.judgements import repair_step

    def both(*faults):
        def apply(tel):
            for f in faults:
                tel = f(tel)
            return tel
        return apply

    reboot3 = "reboot the node (gpu3 fell off the bus; RMA it if it does again)"
    st = session_with({"gpu0001": both(xid(1, 48), xid(3, 79))}).state.nodes["gpu0001"]
    assert [(f.component, f.text) for f in st.findings if f.rule == "G2"] == [
        ("gpu1", "XID 48"), ("gpu3", "XID 79")]
    assert repair_step(st) == reboot3
    st = session_with({"gpu0001": both(xid(1, 64), xid(3, 79))}).state.nodes["gpu0001"]
    assert repair_step(st) == f"{reboot3}; reset gpu1; RMA it if it recurs (row remap failed)"
    st = session_with({"gpu0001": both(xid(1, 48), xid(3, 95))}).state.nodes["gpu0001"]
    assert repair_step(st) == "reset gpu1 or reboot (double-bit ECC); reset gpu3 (XID 95)"


def test_gpus_that_need_the_same_step_are_named_in_one():
    """Both ends of an NVLink may log XID 74 (NVIDIA's Xid catalog): "reset gpu6 or reboot (NVLink
    error); reset gpu7 or reboot (NVLink error)" said the step twice, and a third GPU's step
    went behind "(+1 more)" (a review). One step names both; a step that says "it" of its GPU
    stays one a GPU."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import repair_step
    from fleetdeck.console.state import NodeState

    st = NodeState("gpu0001")
    st.findings = [Finding("G2", Severity.DRAIN, "gpu6", "XID 74"),
                   Finding("G2", Severity.DRAIN, "gpu7", "XID 74"),
                   Finding("G4", Severity.DRAIN, "gpu2", "1 volatile DBE")]
    assert repair_step(st) == ("reset gpu6 and gpu7 or reboot (NVLink error); reset gpu2 "
                               "(uncorrectable ECC)")
    st.findings = [Finding("G2", Severity.DRAIN, "gpu1", "XID 64"),
                   Finding("G2", Severity.DRAIN, "gpu2", "XID 64")]
    assert repair_step(st) == ("reset gpu1; RMA it if it recurs (row remap failed); reset gpu2; "
                               "RMA it if it recurs (row remap failed)")


def test_the_tui_and_status_list_a_nodes_findings_in_one_order_worst_first():
    """The nodes view's REASONS and the top problems listed a node's findings as found,
    status by ``finding_rank``: gpu0059 read "G2 XID 48; G3 XID 63; G4 DBE (+1 more)" in the
    TUI, "G2; G4; G3 (+1 more)" in status, and the drain finding cut at three could be the
    one hidden (a newcomer's run). One order now (``findings_worst_first``), most severe first."""
    from fleetdeck.console.health import Finding, Severity, Verdict
    from fleetdeck.console.judgements import findings_worst_first
    from fleetdeck.console.rows import reasons_text, top_problems

    session = session_with({})
    st = session.state.nodes["gpu0005"]
    st.findings = [Finding("G3", Severity.WARN, "gpu2", "XID 63"),
                   Finding("G9", Severity.WARN, "gpu1", "throttled"),
                   Finding("N4", Severity.WARN, "mlx5_ib2:1", "receive errors increasing"),
                   Finding("G4", Severity.DRAIN, "gpu4", "DBE")]
    st.verdict = Verdict.FAILED
    session.state.not_ok.add(st.node_id)  # as the judgement pass would have it
    worst = [str(f) for f in findings_worst_first(st)]
    assert worst[0] == "G4 gpu4: DBE", worst
    node = next(n for n in fleet_summary(session.state, session.clock())["nodes"]
                if n["id"] == "gpu0005")
    assert node["findings"] == worst
    assert reasons_text(st).startswith("G4 gpu4: DBE; G3 gpu2: XID 63; ")
    assert reasons_text(st).endswith("(+1 more)")
    problems, _total = top_problems(session.state)
    (row,) = [p for p in problems if p.node == "gpu0005"]
    assert row.text.startswith("G4 gpu4: DBE; G3 gpu2: XID 63; "), row.text


def test_a_node_behind_a_suspect_switch_reads_its_own_fault_first_in_the_tui_and_status():
    """Behind a suspect leaf, a node with a warning of its own started with it in the TUI and
    with the switch's F1 in status (a newcomer's run): of one severity, its own first in both,
    as ``NodeState.effective_findings`` means it ("that is what the on-call acts on")."""
    from fleetdeck.console.rows import reasons_text

    down = port_down("mlx5_ib2")
    session = session_with({"gpu0001": down, "gpu0002": down,
                            "gpu0003": lambda t: throttled(3)(down(t))})
    st = session.state.nodes["gpu0003"]
    assert st.behind_switch == "leaf00-r2"
    node = next(n for n in fleet_summary(session.state, session.clock())["nodes"]
                if n["id"] == "gpu0003")
    assert not node["findings"][0].startswith("F1"), node["findings"]
    assert reasons_text(st).startswith(node["findings"][0]), (reasons_text(st), node)
    # Its own, then the switch's line, then the port the switch owns.
    rules = [f.split()[0] for f in node["findings"]]
    assert rules[-2:] == ["F1", "N1"] and "F1" not in rules[:-2], rules


@pytest.mark.parametrize(("bits", "said", "step"), [
    (0x80, "power brake", "check the node's power supplies and its BMC's power limit (gpu3 was "
                          "power-braked"),
    (0x8, "hw slowdown", "check gpu3's cooling and the node's power supplies (HW slowdown"),
    (0x20, "sw thermal", "check gpu3's cooling (fans, airflow, inlet temperature)"),
])
def test_a_throttled_straggler_is_told_the_repair_its_throttle_needs(bits, said, step):
    # NVML's HW power brake is asserted from outside the GPU (the system's power supply): a
    # power-braked straggler was told to check its GPU's cooling (a fault drill).
    from msgspec.structs import replace

    def braked(tel):
        return replace(tel, gpus=[replace(g, clock_event_reasons=bits, sm_clock_mhz=1400.0)
                                  if g.index == 3 else g for g in tel.gpus])

    session = session_with({"gpu0003": braked}, jobs=[
        lambda c: job_status("41", ["gpu0003", "gpu0004"], c, slowest_node="gpu0003")])
    out = fleet_summary(session.state, session.clock())
    (node,) = [n for n in out["nodes"] if n["id"] == "gpu0003"]
    assert node["findings"] == [f"G12 gpu3: clock throttled ({said})"]
    assert node["action"].startswith("it slows job 41 by 50% (rank 3)")
    assert step in node["action"], node["action"]
    assert ("cooling" in node["action"]) is (bits != 0x80)


def test_a_failed_node_under_a_one_node_job_it_does_not_hold_up_is_drained_in_finish_mode():
    # Its port down holds up no one-node job (its ranks reduce over NVLink), so "drain
    # (requeue its jobs from their checkpoint)" threw away the work of a job the jobs view
    # showed stepping with its ETA (a review); a two-node job's node still asks for the requeue.
    from fleetdeck.console.judgements import recommended_action

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(ingest)
    for t in range(3):
        clock.advance(1.0)
        publish_job(ingest, job_status("41", ["gpu0003"], clock, step=100 + t), clock)
        publish_job(ingest, job_status("42", ["gpu0005", "gpu0006"], clock, step=100 + t), clock)
        faults = {"gpu0003": port_down("mlx5_ib5"), "gpu0005": port_down("mlx5_ib1")}
        fleet.telemetry(ingest, faults=faults if t else {},
                        job={"gpu0003": "41", "gpu0005": "42", "gpu0006": "42"})
        session.tick()
    state = session.state
    one = recommended_action(state.nodes["gpu0003"], state)
    assert one.startswith("drain it (finish: job 41, on this node alone")
    assert "requeue" not in one and "once it has finished, check mlx5_ib5:1" in one
    two = recommended_action(state.nodes["gpu0005"], state)
    assert two.startswith("drain --now (requeue its jobs from their checkpoint), then check "
                          "mlx5_ib1")
    # The drain dialog opens on the mode each action names: it opened on now for the one-node
    # job's node told "drain it (finish: …)", a requeue of a job stepping at full speed.
    from fleetdeck.console.commands import suggested_drain_mode
    from fleetdeck.protocol.messages import DrainMode

    assert suggested_drain_mode(state, ["gpu0003"]) is DrainMode.FINISH
    assert suggested_drain_mode(state, ["gpu0005"]) is DrainMode.NOW


def test_a_failed_node_whose_job_already_failed_is_not_told_to_requeue_it():
    """The node's sample still names job 41, which the scheduler says failed (F): "drain --now
    (requeue its jobs from their checkpoint)" beside ``"job": null`` in the same node's JSON,
    and the drain dialog opened on now, for a job nothing can requeue by a drain (a review)."""
    from fleetdeck.console.commands import suggested_drain_mode
    from fleetdeck.protocol.messages import DrainMode, JobState

    session = session_with(
        {"gpu0003": with_job(port_down("mlx5_ib5"), "41")},
        jobs=[lambda c: job_status("41", ["gpu0003", "gpu0004"], c, state=JobState.F)])
    state = session.state
    [node] = [n for n in fleet_summary(state, session.clock())["nodes"] if n["id"] == "gpu0003"]
    assert node["verdict"] == "failed" and node["job"] is None
    assert node["action"].startswith("drain (no job on it), then check mlx5_ib5:1"), node
    assert suggested_drain_mode(state, ["gpu0003"]) is DrainMode.FINISH
    # Running, the same node is told to requeue it, and the dialog opens on now.
    session = session_with(
        {"gpu0003": with_job(port_down("mlx5_ib5"), "41")},
        jobs=[lambda c: job_status("41", ["gpu0003", "gpu0004"], c)])
    [node] = [n for n in fleet_summary(session.state, session.clock())["nodes"]
              if n["id"] == "gpu0003"]
    assert node["job"] == "41" and node["action"].startswith("drain --now (requeue"), node
    assert suggested_drain_mode(session.state, ["gpu0003"]) is DrainMode.NOW


def test_a_straggler_power_capped_by_software_is_said_to_be_and_told_to_check_the_limit():
    """Clock-event bit 0x4 (SW power cap, docs/domain.md §3) judges no rule, but of a slow
    rank it is why: its straggler read "no finding on that node" and "look at the node" (a
    fault audit)."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import recommended_action

    def capped(tel):
        gpus = [replace(g, clock_event_reasons=0x4, sm_clock_mhz=1350.0,
                        sm_clock_max_mhz=1980.0, power_limit_w=450.0)
                if g.index == 5 else g for g in tel.gpus]
        return replace(tel, gpus=gpus)

    session = session_with({"gpu0003": capped}, jobs=[_job_with(
        [(19, "gpu0003", 1120.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    assert job["straggler"]["node"] == "gpu0003"
    assert job["straggler"]["cause"] == ("GPU power-capped by software (gpu5 sw power cap: "
                                         "1350 of 1980 MHz, limit 450 W, below its job's "
                                         "other nodes' 700 W)")
    # For scripts, beside the words (a JSON audit): the cause and the limit as codes.
    assert job["straggler"]["causes"] == ["power_capped"]
    assert job["straggler"]["power_limit"] == "lowered"
    assert (job["straggler"]["power_limit_w"], job["straggler"]["peer_limit_w"]) == (450, 700)
    said = recommended_action(session.state.nodes["gpu0003"], session.state)
    assert said.startswith("it slows job 7 by 12% (rank 19), GPU power-capped by software")
    assert "check gpu5's power limit (nvidia-smi -q -d POWER" in said and "drain" not in said
    from fleetdeck.console.incidents import incidents

    (inc,) = [i for i in incidents(session.state) if i.kind == "job"]
    assert "GPU power-capped by software (gpu5" in inc.title
    assert inc.action.startswith("check the power limit of gpu0003's capped GPU")


def test_a_straggler_capped_at_its_peers_power_limit_is_not_told_to_restore_it():
    """Bit 0x4 at the stock limit is the GPU working as set (docs/domain.md §3): "restore the
    power limit" of a limit nobody lowered sent the on-call after nothing (a review)."""
    from msgspec.structs import replace

    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import recommended_action

    def capped(tel):
        gpus = [replace(g, clock_event_reasons=0x4, sm_clock_mhz=1350.0,
                        sm_clock_max_mhz=1980.0) if g.index == 5 else g for g in tel.gpus]
        return replace(tel, gpus=gpus)

    session = session_with({"gpu0003": capped}, jobs=[_job_with(
        [(19, "gpu0003", 1120.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    assert job["straggler"]["cause"].endswith("limit 700 W, as its job's other nodes')")
    assert job["straggler"]["power_limit"] == "as_peers"
    assert (job["straggler"]["power_limit_w"], job["straggler"]["peer_limit_w"]) == (700, 700)
    said = recommended_action(session.state.nodes["gpu0003"], session.state)
    assert "at its peers' limit" in said and "restore" not in said, said
    assert "drain when idle if it persists" in said
    (inc,) = [i for i in incidents(session.state) if i.kind == "job"]
    assert "restore" not in inc.action and inc.action.startswith("gpu0003's capped GPU runs")


def test_a_straggler_s_cause_codes_are_as_judged_not_read_back_from_its_words():
    """A straggler's ``causes`` and ``power_limit`` were found again in its cause's words: G1
    quotes the agent's GPU reader (its own text, anything), and a reader's error with " + " or
    a power cap's words in it read as two causes, one "other", and a power limit "unknown" of
    a node with no GPU power-capped."""
    from msgspec.structs import replace

    said = "nvidia-smi: GPU power-capped by software + NVML_ERROR_TIMEOUT (driver hung?)"

    def unread(tel):
        return replace(tel, gpus=[], agent=replace(tel.agent, errors=[said]))

    session = session_with({"gpu0003": unread}, jobs=[_job_with(
        [(19, "gpu0003", 1120.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    slow = job["straggler"]
    assert slow["node"] == "gpu0003" and slow["cause"].endswith(said + ")"), slow["cause"]
    assert slow["causes"] == ["gpu_fault"]
    assert (slow["power_limit"], slow["power_limit_w"], slow["peer_limit_w"]) == (None,) * 3


def test_the_console_s_own_problems_are_in_status_json():
    """The TUI's header says "EVENTS STOPPED" (events never reached this console) or "FEED
    STOPPED"; ``status --json`` and replay summaries had no word of it (a JSON audit):
    ``console_problems``, empty when none (docs/protocol.md)."""
    from fleetdeck.brokerurl import parse_broker_url
    from fleetdeck.console.cli.status import _summary

    session = session_with({})
    url = parse_broker_url("mqtt://127.0.0.1:1")
    assert _summary(session, url, 1.0)["console_problems"] == []
    session.worker_failed("events", "no event reached this console")
    [problem] = _summary(session, url, 1.0)["console_problems"]
    assert problem["what"] == "events" and "no event reached" in problem["text"], problem
    assert isinstance(problem["since"], float)


def test_a_gpu_capped_5_percent_below_its_peers_limit_was_lowered():
    """docs/architecture.md: a limit lower than its peers' by 5 % or more is lowered, to be
    restored; 665 W of 700 W, exactly 5 %, read ``as_peers`` (the test was ``<``)."""
    from msgspec.structs import replace

    def capped(tel):
        gpus = [replace(g, clock_event_reasons=0x4, power_limit_w=665.0)
                if g.index == 5 else g for g in tel.gpus]
        return replace(tel, gpus=gpus)

    session = session_with({"gpu0003": capped}, jobs=[_job_with(
        [(19, "gpu0003", 1120.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    (job,) = fleet_summary(session.state, session.clock())["jobs"]
    slow = job["straggler"]
    assert (slow["power_limit"], slow["power_limit_w"], slow["peer_limit_w"]) == (
        "lowered", 665, 700), slow


def test_a_power_capped_straggler_behind_a_recovered_switch_is_the_caps_not_the_switchs():
    """A rail switch flapped under a job one of whose GPUs was power-capped (`inject
    leaf_switch rail=3 duration=12s` over `power_cap limit=400`): the switch's incident read
    "leaf02-r3 recovered …; slows job 4103 by 47% (rank 1)", its step "nothing to do on the
    nodes", the job's own incident with "check the power limit" was gone, the cause read
    "degraded port (… link_downed increased) + GPU power-capped", and the node "none on the
    node: switch recovered; do not drain" (a fault audit). A recovered switch's ports, up at
    full rate, slow no rank."""
    from msgspec.structs import replace

    from fleetdeck.console.incidents import incidents
    from fleetdeck.protocol.messages import RankTime

    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]

    def rail2(state: str):
        def apply(tel):
            ports = [replace(p, state=state, link_downed=1,
                             phys_state="LinkUp" if state == "ACTIVE" else "Polling")
                     if p.dev == "mlx5_ib2" else p for p in tel.ib_ports]
            return replace(tel, ib_ports=ports)
        return apply

    def capped(tel):
        gpus = [replace(g, clock_event_reasons=0x4, sm_clock_mhz=1350.0,
                        sm_clock_max_mhz=1980.0, power_limit_w=400.0)
                if g.index == 5 else g for g in tel.gpus]
        return replace(tel, gpus=gpus)

    def job(c):
        return job_status("7", ["gpu0003", "gpu0004", "gpu0005"], c).model_copy(update={
            "median_step_time_ms": 1000.0, "slowest": [
                RankTime(rank=5, node="gpu0003", step_time_ms=1460.0),
                RankTime(rank=8, node="gpu0004", step_time_ms=1012.0)]})

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    up = {n: rail2("ACTIVE") for n in behind}
    up["gpu0003"] = lambda t: capped(rail2("ACTIVE")(t))
    for faults in [{}, {}, *[{n: rail2("DOWN") for n in behind}] * 3, up, up, up]:
        clock.advance(1.0)
        publish_job(ingest, job(clock), clock)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    state = session.state
    assert [(s.switch, s.recovered) for s in suspect_switches(state)] == [("leaf00-r2", True)]
    (js,) = fleet_summary(state, clock())["jobs"]
    assert js["straggler"]["causes"] == ["power_capped"], js["straggler"]["cause"]
    found = {i.kind: i for i in incidents(state)}
    assert "slows job" not in found["switch"].title
    assert found["job"].title.startswith("job 7: straggler rank 5 gpu0003 +46%: GPU power-capped")
    assert found["job"].action.startswith("check the power limit of gpu0003's capped GPU")
    node = {n["id"]: n for n in fleet_summary(state, clock())["nodes"]}["gpu0003"]
    assert node["action"].startswith("it slows job 7 by 46% (rank 5), GPU power-capped"), node
    assert "check gpu5's power limit" in node["action"] and "drain" not in node["action"]
    assert node["action"].endswith(
        "its link errors were switch leaf00-r2's (recovered): nothing to do for them")
