"""Findings grouped into incidents, one root-cause line each (console/incidents.py), as
``status --json`` carries them: a switch failure is one incident, not a row per node."""

import contextlib
import sqlite3

import msgspec

from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)


def run(fleet_size: int, faults, jobs=(), silent=(), ticks: int = 2, stopped: bool = False):
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(fleet_size, clock, leaves=1)
    fleet.birth(ingest)
    for job in jobs:
        publish_job(ingest, job(clock), clock)
    for _ in range(ticks):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    for name in silent:
        st = fleet.agents[name].status(online=False, stopped=stopped)
        ingest.handle(topic_for(CLUSTER, Kind.STATUS, name), codec.encode(st), clock())
    clock.advance(1.0)
    fleet.telemetry(ingest, names=[n for n in fleet.names if n not in silent], faults=faults)
    session.tick()
    return session


def test_a_switch_failure_is_one_incident_with_its_nodes_and_jobs():
    down = port_down("mlx5_ib2")
    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    session = run(8, {n: down for n in behind},
                  jobs=[lambda c: job_status("4103", [*behind[:2], "gpu0005"], c)])
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.kind == "switch" and inc.key == "switch:leaf00-r2"
    assert inc.nodes == behind
    assert inc.jobs == ["4103"]
    assert inc.severity == "error"
    assert inc.title.startswith("leaf00-r2 suspect: 4 ports (4 down) on 4 nodes")
    assert "job 4103" in inc.title
    assert "do not drain" in inc.action


def test_a_node_behind_the_switch_with_its_own_fault_keeps_its_own_incident():
    down = port_down("mlx5_ib2")
    faults = {n: down for n in ("gpu0001", "gpu0002", "gpu0003")}
    faults["gpu0004"] = lambda t: throttled(3)(down(t))
    session = run(8, faults)
    found = {i.key: i for i in incidents(session.state)}
    assert set(found) == {"switch:leaf00-r2", "node:gpu0004"}
    assert found["switch:leaf00-r2"].nodes == ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    assert "gpu3" in found["node:gpu0004"].title


def test_unrelated_cables_are_separate_node_incidents():
    session = run(8, {"gpu0001": port_down("mlx5_ib1"), "gpu0004": port_down("mlx5_ib3"),
                      "gpu0006": port_down("mlx5_ib5")})
    found = incidents(session.state)
    assert [i.key for i in found] == ["node:gpu0001", "node:gpu0004", "node:gpu0006"]
    assert all(i.kind == "node" and i.severity == "error" for i in found)
    assert "mlx5_ib1" in found[0].title


def test_only_incidents_with_a_job_on_them_are_losing_work():
    # "6 incidents  5 losing work now", two of them with a job: an idle failed node loses
    # capacity, not work (an operator's walkthrough).
    session = run(8, {"gpu0001": port_down("mlx5_ib1"), "gpu0004": port_down("mlx5_ib3")},
                  jobs=[lambda c: job_status("41", ["gpu0001", "gpu0002"], c)])
    found = {i.key: i for i in incidents(session.state)}
    assert found["node:gpu0001"].losing_work and found["node:gpu0001"].jobs == ["41"]
    assert not found["node:gpu0004"].losing_work and found["node:gpu0004"].severity == "error"


def test_nodes_of_one_rack_falling_silent_together_are_one_rack_incident():
    # SynthFleet puts 8 nodes in a rack: gpu0009..gpu0016 are rack r01.
    rack = ["gpu0009", "gpu0010", "gpu0011", "gpu0012"]
    session = run(16, {}, silent=[*rack, "gpu0002"])
    found = {i.key: i for i in incidents(session.state)}
    assert set(found) == {"rack:r01", "node:gpu0002"}, found
    assert found["rack:r01"].nodes == rack
    assert found["rack:r01"].severity == "error"
    assert "power" in found["rack:r01"].title
    assert found["node:gpu0002"].title.startswith("gpu0002 offline")


def test_a_straggler_is_named_on_its_nodes_incident():
    session = run(8, {"gpu0003": throttled(3)},
                  jobs=[lambda c: job_status("41", ["gpu0002", "gpu0003"], c,
                                             slowest_node="gpu0003")])
    (inc,) = incidents(session.state)
    assert inc.key == "node:gpu0003"
    assert "slows job 41 by 50% (rank 11)" in inc.title
    assert inc.jobs == ["41"]


def test_status_json_carries_incidents_with_their_timeline():
    down = port_down("mlx5_ib2")
    session = run(8, {n: down for n in ("gpu0001", "gpu0002", "gpu0003")})
    session.note("drain requested on gpu0002", nodes=("gpu0002",))
    session.note("unrelated", nodes=("gpu0007",))
    out = fleet_summary(session.state, session.clock(), log=session.log.lines())
    (inc,) = out["incidents"]
    assert inc["key"] == "switch:leaf00-r2"
    assert [e["text"] for e in inc["timeline"]] == ["drain requested on gpu0002"]
    assert fleet_summary(run(4, {}).state, 0.0)["incidents"] == []


def gpu_lost(gpu: int):
    def apply(tel):
        gpus = [msgspec.structs.replace(g, present=False) if g.index == gpu else g
                for g in tel.gpus]
        return msgspec.structs.replace(tel, gpus=gpus)
    return apply


def test_an_interruption_is_blamed_on_the_node_the_scheduler_names():
    """A leftover network finding on another node of the run must not take the blame for a
    rank that died on a GPU fault (the scheduler's reason names that rank's node)."""
    from fleetdeck.protocol.messages import JobState

    nodes = ["gpu0001", "gpu0002"]
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(4, clock, leaves=1)
    fleet.birth(ingest)
    publish_job(ingest, job_status("77", nodes, clock), clock)
    faults = {"gpu0001": port_down("mlx5_ib1")}
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    failed = job_status("77", nodes, clock, state=JobState.NF).model_copy(
        update={"reason": "rank 11 on gpu0002 exited (CUDA error)"})
    publish_job(ingest, failed, clock)
    faults["gpu0002"] = throttled(3)  # no drain-class finding yet: wait for one
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    assert session.interruptions.total == []
    faults["gpu0002"] = gpu_lost(3)
    clock.advance(1.0)
    fleet.telemetry(ingest, faults=faults)
    session.tick()
    (it,) = session.interruptions.total
    assert it.cause == "gpu" and it.nodes == ("gpu0002",), it


def test_racks_falling_silent_together_are_one_fleet_incident():
    """A dead simulator (or the network to the broker) read as one incident per rack."""
    silent = [f"gpu{i:04d}" for i in range(1, 25)]  # racks r00, r01, r02 (8 nodes each)
    session = run(32, {}, silent=silent)
    found = {i.key: i for i in incidents(session.state)}
    assert set(found) == {"fleet:silent"}, found
    fleet = found["fleet:silent"]
    assert fleet.nodes == silent and fleet.kind == "fleet"
    assert "3 racks fell silent" in fleet.title and "not each rack" in fleet.title
    # The overview's top problems lead with it too: they listed 24 rows of "agent offline"
    # and the cause only in the incidents view (a 3 a.m. drive).
    from fleetdeck.console.rows import top_problems

    problems, total = top_problems(session.state)
    assert [(p.node, p.state, p.text) for p in problems] == [("fleet", "silent", fleet.title)]
    assert total == 24


def test_agents_stopped_cleanly_are_not_a_network_fault():
    """A SIGTERM of every agent (their goodbye) read "agent offline (Last Will)" and "check
    the network path from the nodes to the broker" (a drill)."""
    from fleetdeck.console.judgements import recommended_action

    silent = [f"gpu{i:04d}" for i in range(1, 25)]
    session = run(32, {}, silent=silent, stopped=True)
    found = {i.key: i for i in incidents(session.state)}
    fleet = found["fleet:silent"]
    assert "agents stopped cleanly" in fleet.title and "not the network" in fleet.title
    assert fleet.severity == "warn" and fleet.action.startswith("start the agents again")
    st = session.state.nodes["gpu0001"]
    assert st.verdict.value == "offline"
    assert [f.text for f in st.liveness] == ["agent stopped (its clean goodbye)"]
    assert recommended_action(st).startswith("its agent was stopped cleanly: start it again")
    # A will is a death as before.
    died = run(32, {}, silent=silent)
    assert "not each rack" in {i.key: i for i in incidents(died.state)}["fleet:silent"].title
    assert [f.text for f in died.state.nodes["gpu0001"].liveness] == [
        "agent offline (Last Will)"]


def test_a_fleet_silence_of_warn_comes_before_a_nodes_error_everywhere():
    """Every agent stopped cleanly is only a warning, yet it comes first, above a lost GPU on a
    node still heard: while the fleet is silent every other verdict is as of then. One order
    in the incidents, `status --json` and the overview's top problems."""
    from fleetdeck.console.rows import top_problems

    silent = [f"gpu{i:04d}" for i in range(1, 25)]
    session = run(32, {"gpu0030": gpu_lost(2)}, silent=silent, stopped=True)
    found = incidents(session.state)
    assert [(i.key, i.severity) for i in found] == [
        ("fleet:silent", "warn"), ("node:gpu0030", "error")], found
    said = fleet_summary(session.state, session.clock())["incidents"]
    assert [i["key"] for i in said] == ["fleet:silent", "node:gpu0030"]
    problems, _ = top_problems(session.state)
    assert [p.node for p in problems] == ["fleet", "gpu0030"], problems


def test_one_rack_falling_silent_is_one_top_problem_above_its_nodes():
    from fleetdeck.console.rows import top_problems

    silent = [f"gpu{i:04d}" for i in range(9, 17)]  # rack r01
    session = run(32, {"gpu0030": port_down()}, silent=silent)
    problems, total = top_problems(session.state)
    assert [p.node for p in problems] == ["r01", "gpu0030"], problems
    assert problems[0].state == "silent"
    assert problems[0].text.startswith("rack r01: 8 nodes fell silent within ")
    assert total == 9
    # Asked again: the same (kept until the fleet changes), and a copy the caller may change.
    again, _ = top_problems(session.state)
    assert again == problems
    from fleetdeck.console.incidents import silences

    silences(session.state)[0].timeline.append("x")  # type: ignore[arg-type]
    assert silences(session.state)[0].timeline == []
    # The incidents view's (with jobs) and the top problems' are kept apart: one slot was
    # made again by each in turn (16,384 silent nodes: ~110 ms a refresh).
    kept = session.state.memo["silences"]
    silences(session.state, {})
    assert session.state.memo["silences"] is kept
    # Every node of the rack drained (powered off for maintenance): in hand, not a lead row.
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    for node in silent:
        session.state.nodes[node].drain = DrainInfo(state=DrainState.DRAINED, reason="pdu")
    problems, _ = top_problems(session.state)
    assert problems[0].node == "gpu0030" and "r01" not in [p.node for p in problems]


def test_rail_switches_of_one_leaf_failing_together_are_one_incident():
    """A whole leaf group down (every rail switch at once) read as 8 incidents of the same
    nodes; rails failing together share a cause: one incident naming the rails."""
    def all_down(t):
        for dev in ("mlx5_ib2", "mlx5_ib5"):
            t = port_down(dev)(t)
        return t

    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    session = run(8, {n: all_down for n in behind},
                  jobs=[lambda c: job_status("4103", behind[:2], c)])
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.kind == "switch" and inc.key == "switch:leaf00"
    assert inc.nodes == behind and inc.jobs == ["4103"] and inc.findings == 8
    assert inc.title.startswith("leaf00: 2 rail switches suspect (r2, r5): 8 ports (8 down) "
                                "on 4 nodes behind them (gpu[0001-0004]); job 4103 on them")
    assert inc.action.startswith("check leaf group leaf00") and "do not drain" in inc.action
    assert inc.severity == "error"
    # Each switch is still its own judgement, as the fabric view and --json show them.
    out = fleet_summary(session.state, session.clock())
    assert [s["switch"] for s in out["suspect_switches"]] == ["leaf00-r2", "leaf00-r5"]
    # The overview's top problems say it once too (each rail switch was a row of its own).
    from fleetdeck.console.rows import top_problems

    problems, _total = top_problems(session.state)
    switches = [p for p in problems if p.state in ("switch", "leaf")]
    assert [(p.node, p.state) for p in switches] == [("leaf00", "leaf")]
    assert switches[0].text.startswith("2 rail switches suspect (r2, r5): 8 ports (8 down)")
    # And the overview's fabric panel: one row for the group, each switch still in the summary.
    from fleetdeck.console.fabric_map import leaf_grouped, switch_health

    health = switch_health(session.state)
    assert [r.switch for r in health.rows] == ["leaf00-r2", "leaf00-r5"]
    (row,) = leaf_grouped(health)
    assert (row.switch, row.rails, row.down, row.nodes) == ("leaf00-r*", 2, 8, tuple(behind))
    assert row.failing


def test_worst_first_puts_lost_work_first_and_drained_nodes_last():
    """An idle failed node that was drained came above the node stopping a job (a 3 a.m.
    drive: "2 losing work now" were the last rows under "worst first")."""
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    session = run(8, {"gpu0001": port_down("mlx5_ib1"), "gpu0006": port_down("mlx5_ib3"),
                      "gpu0007": port_down("mlx5_ib5")},
                  jobs=[lambda c: job_status("41", ["gpu0001", "gpu0002"], c)])
    session.state.nodes["gpu0006"].drain = DrainInfo(state=DrainState.DRAINED)
    keys = [i.key for i in incidents(session.state)]
    assert keys == ["node:gpu0001", "node:gpu0007", "node:gpu0006"], keys


def _lost_in_job(session_clock_fleet, struck, job_nodes, moved_to, spread_s=1.0, gaps=None,
                 session=None, gpus=None, also=None):
    """A job on ``job_nodes``; the GPU falls off the bus on each of ``struck``, ``spread_s``
    apart (or ``gaps[i]`` before the i-th); the scheduler then runs the job on ``moved_to``
    (its requeue) and the struck nodes' telemetry names no job (the simulator's XID 79).
    ``session``: one of the caller's (its ingest and clock), e.g. with a store open.
    ``gpus``: the GPU lost on each struck node (default gpu0 on every one); ``also``: a
    further fault of a struck node (node -> the fault's function)."""
    if session is None:
        session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER),
                                 follow_up=False)
    clock, ingest = session.clock, session.ingest
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(ingest)
    publish_job(ingest, job_status("4104", job_nodes, clock), clock)
    on = {n: "4104" for n in job_nodes}
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, job=on)
        session.tick()
    faults: dict = {}
    for i, n in enumerate(struck):
        lost = gpu_lost(0 if gpus is None else gpus[i])
        extra = (also or {}).get(n)
        faults[n] = lost if extra is None else (lambda tel, lost=lost, extra=extra:
                                                extra(lost(tel)))
        clock.advance(spread_s if gaps is None else gaps[i])
        fleet.telemetry(ingest, job=on, faults=faults)
        session.tick()
    publish_job(ingest, job_status("4104", moved_to, clock, requeues=1, started_offset_s=0),
                clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, job={n: "4104" for n in moved_to}, faults=faults)
        session.tick()
    return session


def test_nodes_of_one_job_failing_together_are_one_incident_naming_the_job():
    """XID 79 on three nodes of job 4104 read as three incidents of idle nodes, "no job on
    it", once the scheduler had requeued the job elsewhere (an SRE drill): the job's blast
    radius is one incident naming the job and its nodes."""
    job_nodes = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    struck = ["gpu0001", "gpu0002", "gpu0004"]
    session = _lost_in_job(None, struck, job_nodes, ["gpu0003", "gpu0009", "gpu0010",
                                                      "gpu0011"])
    found = incidents(session.state, session.log.lines())
    (inc,) = found
    assert inc.key == "job:4104:failed" and inc.kind == "job" and inc.severity == "error"
    assert inc.nodes == struck and inc.jobs == ["4104"]
    assert inc.title.startswith("job 4104: 3 of its nodes failed within 2 s (gpu[0001-0002,0004])")
    assert "): the same on each, G1 gpu0: 7/8 GPUs visible; job 4104 runs again on other nodes" \
        " (gpu[0003,0009-0011], requeues 1)" in inc.title, inc.title
    # Requeued elsewhere: the work is lost already, none on these nodes now.
    assert inc.job_left and not inc.losing_work
    assert inc.action.startswith("on each of gpu[0001-0002,0004]: drain")
    # Each node's own line says the job too, in status --json and the nodes' timeline.
    out = fleet_summary(session.state, session.clock(), log=session.log.lines())
    (j,) = out["incidents"]
    assert j["key"] == "job:4104:failed" and j["job_left"] is True
    assert {e["source"] for e in j["timeline"]} >= set(struck)


async def test_a_console_restarted_after_a_jobs_nodes_failed_still_names_the_job(tmp_path):
    """The three nodes XID 79 took out of job 4104, requeued elsewhere, read as three idle
    nodes ("drain (no job on it)") once the console restarted: the job they left was known
    only in its memory, and their samples name none now (a drill). The store keeps it."""
    db = tmp_path / "history.db"
    job_nodes = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    struck = ["gpu0001", "gpu0002", "gpu0004"]
    moved = ["gpu0003", "gpu0009", "gpu0010", "gpu0011"]
    clock = Clock()
    first = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await first.open_store(db)
    _lost_in_job(None, struck, job_nodes, moved, session=first)
    before = incidents(first.state, first.log.lines())
    assert [i.key for i in before] == ["job:4104:failed"]
    await first.close()

    clock.advance(30.0)
    again = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await again.open_store(db)
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(again.ingest)
    publish_job(again.ingest, job_status("4104", moved, clock, requeues=1,
                                         started_offset_s=30), clock)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(again.ingest, job={n: "4104" for n in moved},
                        faults={n: gpu_lost(0) for n in struck})
        again.tick()
    found = incidents(again.state, again.log.lines())
    assert [i.key for i in found] == ["job:4104:failed"], [(i.key, i.title) for i in found]
    (inc,) = found
    assert inc.nodes == struck and inc.jobs == ["4104"] and inc.job_left
    assert inc.title == before[0].title
    assert inc.since == before[0].since  # dated at the failure, as before the restart
    out = fleet_summary(again.state, clock(), log=again.log.lines())
    assert [(j["key"], j["nodes"]) for j in out["incidents"]] == [("job:4104:failed", struck)]
    await again.close()


def test_failed_nodes_of_one_job_far_apart_or_of_other_jobs_stay_node_incidents():
    # Minutes apart, the second is its own fault, not the same blow to the job.
    session = _lost_in_job(None, ["gpu0001", "gpu0002"], ["gpu0001", "gpu0002", "gpu0003"],
                           ["gpu0003", "gpu0009", "gpu0010"], spread_s=90.0)
    keys = sorted(i.key for i in incidents(session.state))
    assert keys == ["node:gpu0001", "node:gpu0002"], keys


def test_two_nodes_of_a_job_failing_together_after_an_earlier_one_are_one_incident():
    """One node of the job failed early; two more failed together 90 s later: the grouping
    took only the window of the first node, and the two read as node incidents (a review)."""
    session = _lost_in_job(None, ["gpu0001", "gpu0002", "gpu0004"],
                           ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"], gaps=[1.0, 90.0, 1.0])
    found = {i.key: i for i in incidents(session.state)}
    assert sorted(found) == ["job:4104:failed", "node:gpu0001"], sorted(found)
    assert found["job:4104:failed"].nodes == ["gpu0002", "gpu0004"]


def test_the_incidents_and_the_top_problems_put_what_no_one_acted_on_first_alike():
    """A drained failed node came above a degraded node no one had touched in the incidents
    (6, status), below it in the overview's top problems: two "worst first" orders of the
    same nodes (a drill). One rule: what is in hand goes last, in both."""
    from fleetdeck.console.rows import top_problems
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    session = run(8, {"gpu0006": port_down("mlx5_ib3"), "gpu0003": throttled(3)})
    session.state.nodes["gpu0006"].drain = DrainInfo(state=DrainState.DRAINED)
    found = incidents(session.state)
    assert [(i.key, i.severity) for i in found] == [("node:gpu0003", "warn"),
                                                    ("node:gpu0006", "error")]
    problems, _total = top_problems(session.state)
    assert [p.node for p in problems] == [i.nodes[0] for i in found]


def test_nodes_found_failed_when_first_heard_are_not_said_to_fail_at_once():
    """A one-shot ``status`` hears a job whose nodes failed minutes apart before it started:
    each node's verdict dates from the watch's first second, and the incident said "3 of its
    nodes failed at once" (a fault drill: a symbol storm at 09:39, a flap and an NVLink error
    at 09:42). The console cannot know when they failed; it says so."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    clock, ingest = session.clock, session.ingest
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(ingest)
    job_nodes = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    struck = ["gpu0001", "gpu0002", "gpu0004"]
    publish_job(ingest, job_status("4104", job_nodes, clock), clock)
    on = {n: "4104" for n in job_nodes}
    faults = {n: gpu_lost(0) for n in struck}
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(ingest, job=on, faults=faults)
        session.tick()
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.key == "job:4104:failed" and inc.nodes == struck
    assert inc.title.startswith("job 4104: 3 of its nodes had already failed when first "
                                "heard (gpu[0001-0002,0004])"), inc.title
    out = fleet_summary(session.state, session.clock(), log=session.log.lines())
    assert "at once" not in out["incidents"][0]["title"]
    assert out["incidents"][0]["unseen"] == 3


JOB_NODES = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
STRUCK = ["gpu0001", "gpu0002", "gpu0004"]


def _heard(session, fleet, faults, ticks: int = 3, names=None) -> None:
    """``ticks`` seconds of job 4104's fleet, each node with its fault of ``faults``."""
    on = {n: "4104" for n in JOB_NODES}
    for _ in range(ticks):
        session.clock.advance(1.0)
        fleet.telemetry(session.ingest, names=names, job=on, faults=faults)
        session.tick()


@contextlib.asynccontextmanager
async def _console(db, clock, faults):
    """A console with its store on ``db`` that has heard job 4104's fleet (``faults``) for 3 s;
    stopped on leaving."""
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await session.open_store(db)
    try:
        fleet = SynthFleet(16, clock, leaves=1)
        fleet.birth(session.ingest)
        publish_job(session.ingest, job_status("4104", JOB_NODES, clock), clock)
        _heard(session, fleet, faults)
        yield session, fleet
    finally:
        await session.close()


async def _watch(db, clock, faults):
    """A console with its store on ``db`` hears job 4104's fleet (``faults``) for 3 s and
    stops; returns its incidents and their JSON."""
    async with _console(db, clock, faults) as (session, _fleet):
        found = incidents(session.state, session.log.lines())
        return found, fleet_summary(session.state, clock(), log=session.log.lines())["incidents"]


async def _restarted(db, clock, first_faults, then_faults):
    """A console on ``db`` hears job 4104's fleet (``first_faults``); five minutes later (no
    console ran) another on the same store hears it again (``then_faults``). Returns the
    second one's job incident and its JSON."""
    await _watch(db, clock, first_faults)
    clock.advance(300.0)
    (inc,), (j,) = await _watch(db, clock, then_faults)
    return inc, j


async def test_nodes_restored_ok_and_first_heard_failed_did_not_fail_at_once(tmp_path):
    """Three nodes of job 4104 the store had ok failed while no console ran; the console
    started on that store heard them failed and said "3 of its nodes failed at once", dated
    to its own first second (a review): a verdict recalled from the store was taken for one
    it had seen, so ok -> failed read as a change it watched."""
    faults = {n: gpu_lost(0) for n in STRUCK}
    clock = Clock()
    inc, j = await _restarted(tmp_path / "history.db", clock, {}, faults)
    assert inc.key == "job:4104:failed" and inc.nodes == STRUCK
    assert inc.title.startswith("job 4104: 3 of its nodes had already failed when first "
                                "heard (gpu[0001-0002,0004])"), inc.title
    assert j["unseen"] == 3 and "at once" not in j["title"]
    # Restarted again: the store's "ok -> failed" rows were not changes a console saw.
    clock.advance(60.0)
    (again,), (j,) = await _watch(tmp_path / "history.db", clock, faults)
    assert again.title == inc.title and again.since == inc.since and j["unseen"] == 3


async def test_nodes_first_heard_failed_stay_so_after_a_restart_on_the_same_store(tmp_path):
    """A console first heard three nodes of job 4104 already failed, and said so; restarted on
    the same store, it said "3 of its nodes failed at once" (a review): the store's row of a
    first verdict (no ``old``) was recalled as a change seen. A node the console saw fail
    keeps its time across the restart (the restart test above: "within 2 s", its ``since``)."""
    db = tmp_path / "history.db"
    faults = {n: gpu_lost(0) for n in STRUCK}
    inc, j = await _restarted(db, Clock(), faults, faults)
    assert inc.title.startswith("job 4104: 3 of its nodes had already failed when first "
                                "heard (gpu[0001-0002,0004])"), inc.title
    assert j["unseen"] == 3
    # The rows say which changes a console saw: first verdicts and first heard, none seen.
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT node, old, new, seen FROM transitions "
                           "WHERE node IN ('gpu0001', 'gpu0003') ORDER BY node, id").fetchall()
    assert rows == [("gpu0001", None, "failed", 0), ("gpu0003", None, "ok", 0)]


async def test_a_store_of_schema_3_gains_the_seen_column_and_reads_its_rows_as_before(tmp_path):
    """A store written before ``transitions.seen`` (schema 3): opened, it gains the column;
    its rows with an ``old`` were changes a console saw, those without were first verdicts."""
    from fleetdeck.console.health import Verdict
    from fleetdeck.console.state import FleetState
    from fleetdeck.console.store import Store

    db = tmp_path / "old.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        con.execute("INSERT INTO meta VALUES ('schema_version', '3')")
        con.execute("CREATE TABLE transitions (id INTEGER PRIMARY KEY, ts REAL NOT NULL, "
                    "node TEXT NOT NULL, old TEXT, new TEXT NOT NULL, reasons TEXT NOT NULL)")
        con.executemany("INSERT INTO transitions (ts, node, old, new, reasons) "
                        "VALUES (?, ?, ?, ?, ?)",
                        [(100.0, "gpu0001", None, "failed", "G1"),
                         (100.0, "gpu0002", None, "ok", ""),
                         (160.0, "gpu0002", "ok", "failed", "G1")])
    store = await Store.open(db)
    try:
        state = FleetState(CLUSTER)
        await store.restore(state, now=200.0)
    finally:
        await store.close()
    one, two = state.nodes["gpu0001"], state.nodes["gpu0002"]
    assert (one.reported, one.changed_at, one.change_seen) == (Verdict.FAILED, 100.0, False)
    assert (two.reported, two.changed_at, two.change_seen) == (Verdict.FAILED, 160.0, True)
    with sqlite3.connect(db) as con:
        assert "seen" in {r[1] for r in con.execute("PRAGMA table_info(transitions)")}
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                           ).fetchone() == ("6",)


def test_nodes_back_failed_from_an_agent_restart_did_not_fail_at_once():
    """A rollout restarted the agents of three failed nodes (a clean goodbye, a new birth):
    offline -> failed read as a change seen, and "3 of its nodes failed at once" dated them
    to the second they rejoined (a review). Offline says nothing of when they failed."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    clock, ingest = session.clock, session.ingest
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(ingest)
    publish_job(ingest, job_status("4104", JOB_NODES, clock), clock)
    faults = {n: gpu_lost(0) for n in STRUCK}
    _heard(session, fleet, faults)
    for n in STRUCK:
        a = fleet.agents[n]
        ingest.handle(topic_for(CLUSTER, Kind.STATUS, n),
                      codec.encode(a.status(online=False, stopped=True)), clock())
    _heard(session, fleet, faults, ticks=2, names=[n for n in fleet.names if n not in STRUCK])
    assert {session.state.nodes[n].verdict.value for n in STRUCK} == {"offline"}
    for n in STRUCK:
        a = fleet.agents[n]
        a.bd_seq += 1
        a.seq = 0
    fleet.birth(ingest, STRUCK)
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes had already failed when first "
                                "heard (gpu[0001-0002,0004])"), inc.title
    assert inc.as_json()["unseen"] == 3


def test_nodes_of_one_job_failing_on_different_gpus_are_not_the_same_on_each():
    """gpu0013's mlx5_ib3 and gpu0015's mlx5_ib1 went down under job 4104, and the job's
    incident read "the same on each, N1 mlx5_ib1:1: DOWN/Polling" (a fault audit): the same
    rail on every node says "suspect that rail's switch", so the first node's words may stand
    for all only when they are each node's words."""
    struck = ["gpu0001", "gpu0002", "gpu0004"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"], gpus=[0, 3, 5])
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.key == "job:4104:failed"
    assert "the same on each" not in inc.title, inc.title
    assert ("(gpu[0001-0002,0004]): gpu0001: G1 gpu0: 7/8 GPUs visible; gpu0002: G1 gpu3: "
            "7/8 GPUs visible; gpu0004: G1 gpu5: 7/8 GPUs visible; job 4104") in inc.title, \
        inc.title


def test_nodes_of_one_job_alike_in_their_first_finding_only_are_not_the_same_on_each():
    """gpu0001 lost gpu0 and its mlx5_ib1, gpu0002 gpu0 and its mlx5_ib3: the title read "the
    same on each, G1 gpu0: 7/8 GPUs visible (+1 more)", the "+1 more" hiding two rails (a
    review of the fix above)."""
    struck = ["gpu0001", "gpu0002"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"],
                           also={"gpu0001": port_down("mlx5_ib1"),
                                 "gpu0002": port_down("mlx5_ib3")})
    (inc,) = incidents(session.state, session.log.lines())
    assert "the same on each" not in inc.title, inc.title
    assert "gpu0001: G1 gpu0: 7/8 GPUs visible; gpu0002: G1 gpu0" in inc.title, inc.title


def xid_on(gpu: int, code: int, action: int | None = None):
    def apply(tel):
        from fleetdeck.protocol.fast import XidSeen
        seen = [XidSeen(code=code, ts=tel.ts - 500, action=action)]
        gpus = [msgspec.structs.replace(g, xids=seen) if g.index == gpu else g
                for g in tel.gpus]
        return msgspec.structs.replace(tel, gpus=gpus)
    return apply


def test_nodes_of_one_job_with_different_xids_on_one_gpu_are_not_the_same_on_each():
    """XID 154 on gpu1 of three nodes of job 4109, the driver asking a drain and reset of one,
    the IMEX domain's recovery of another and a PCIe bus reset of the third: the overview's row
    read "the same on each, G2 gpu1: XID 154 (drain and reset)" (scenario run scen39, live on
    `sim --nodes 64`), the first node's repair said of all three. Rule and part alike, the
    findings differ in what is not a figure: each node in its own words."""
    struck = ["gpu0001", "gpu0002"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"],
                           also={"gpu0001": xid_on(1, 154, action=4),
                                 "gpu0002": xid_on(1, 154, action=5)})
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.key == "job:4104:failed"
    assert "the same on each" not in inc.title, inc.title
    assert "): gpu0001: G1 gpu0: 7/8 GPUs visible; gpu0002: G1 gpu0" in inc.title, inc.title


def test_nodes_of_one_job_alike_but_for_figures_are_the_same_on_each():
    """The same XID on the same GPU of each, their other findings alike: one fault, said once
    (the figures of a text, a count or a temperature, may differ; an XID's code may not)."""
    struck = ["gpu0001", "gpu0002"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"],
                           also={n: xid_on(1, 154, action=4) for n in struck})
    (inc,) = incidents(session.state, session.log.lines())
    assert "): the same on each, G1 gpu0: 7/8 GPUs visible (+1 more)" in inc.title, inc.title


def test_nodes_of_one_job_with_xids_alike_in_their_first_digit_are_not_the_same_on_each():
    """XID 74 (NVLink) on gpu1 of one node, XID 79 (off the bus) on gpu1 of another: a figure
    was any digit not right after "XID ", so the codes' later digits were figures and both
    read "XID 7#", "the same on each" in the first one's words (a review)."""
    struck = ["gpu0001", "gpu0002"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"],
                           also={"gpu0001": xid_on(1, 74), "gpu0002": xid_on(1, 79)})
    (inc,) = incidents(session.state, session.log.lines())
    assert "the same on each" not in inc.title, inc.title


def test_a_jobs_nodes_with_actions_of_their_own_point_each_front_end_at_its_own():
    """`status` said "each of gpu[…] as its own finding says (its line in the nodes view)", a
    view the CLI does not have (a newcomer's run): JSON and `status` point at what they have,
    the console's views at the nodes view. `replay --summary` prints the same words: pointed at
    `status` alone, its reader was sent to the live fleet, not the recording."""
    struck = ["gpu0001", "gpu0002"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"],
                           also={"gpu0001": port_down("mlx5_ib1")})
    (inc,) = incidents(session.state, session.log.lines())
    each = "each of gpu[0001-0002] as its own finding says"
    assert inc.action == (f"{each} (its reasons in the node table, its action per node in "
                          "status --json or replay --summary-json)"), inc.action
    assert inc.action_for(views=False) == inc.action
    assert inc.action_for(views=True) == f"{each} (its line in the nodes view)"
    out = fleet_summary(session.state, session.clock(), log=session.log.lines())
    assert out["incidents"][0]["action"] == inc.action


def test_a_job_s_nodes_failed_some_seen_some_not_says_which_plainly():
    """Two nodes of job 4104 first heard failed, a third seen failing 20 s later: the title
    read "3 of its nodes failed (of them 2 before this console heard them)" (a review)."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, session.clock, leaves=1)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("4104", JOB_NODES, session.clock), session.clock)
    faults = {"gpu0001": gpu_lost(0), "gpu0002": gpu_lost(0)}
    _heard(session, fleet, faults, ticks=20)
    faults["gpu0004"] = gpu_lost(0)
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith(
        "job 4104: 3 of its nodes failed: 1 while this console watched, 2 already failed when "
        "first heard (gpu[0001-0002,0004]): the same on each"), inc.title
    (j,) = fleet_summary(session.state, session.clock(), log=session.log.lines())["incidents"]
    assert j["unseen"] == 2 and j["title"] == inc.title


def test_nodes_first_heard_failed_in_a_new_agent_session_did_not_fail_at_once():
    """The agents of three nodes heard ok restarted at once (a new birth, no goodbye: a
    reboot), and their new sessions' first samples said failed: the verdict before came from
    the last session, so when they failed is not known, only that it was before this console
    heard the new one (a review). Later in the session a change is seen again."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, session.clock, leaves=1)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("4104", JOB_NODES, session.clock), session.clock)
    _heard(session, fleet, {})
    for n in STRUCK:
        a = fleet.agents[n]
        a.bd_seq += 1
        a.seq = 0
    fleet.birth(session.ingest, STRUCK)
    faults = {n: gpu_lost(0) for n in STRUCK}
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes had already failed when first "
                                "heard (gpu[0001-0002,0004])"), inc.title
    # Repaired, restarted again, heard ok in the new session, then failed together: seen,
    # though the new session's first samples read as the last session's did.
    _heard(session, fleet, {}, ticks=70)
    for n in STRUCK:
        a = fleet.agents[n]
        a.bd_seq += 1
        a.seq = 0
    fleet.birth(session.ingest, STRUCK)
    _heard(session, fleet, {})
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes failed at once (gpu"), inc.title


def test_nodes_handed_off_and_taken_back_keep_whether_their_failure_was_seen():
    """A sharded collector handed three nodes it had first heard failed to another and took
    them back (``forget``, then their births): recalled, their first verdict read as a change
    seen, and "3 of its nodes failed at once" (a review). They keep what the collector knew."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, session.clock, leaves=1)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("4104", JOB_NODES, session.clock), session.clock)
    faults = {n: gpu_lost(0) for n in STRUCK}
    _heard(session, fleet, faults)
    before = incidents(session.state, session.log.lines())[0].title
    assert "had already failed when first heard" in before, before
    session.forget_nodes(STRUCK)
    _heard(session, fleet, faults, ticks=2, names=[n for n in fleet.names if n not in STRUCK])
    fleet.birth(session.ingest, STRUCK)
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title == before, inc.title


async def test_a_change_this_console_did_not_see_says_so_where_the_operator_reads_it(tmp_path):
    """The events view and ``fleetdeck events`` read "ok -> failed (G1, G2)" of a node that
    failed while no console ran, dated when a restarted console first heard it, as though it
    failed then (a failure drill). The store keeps whether the change was seen (``seen``) and
    the line says so."""
    from fleetdeck.console.health import UNSEEN_CHANGE
    from fleetdeck.console.store import Store

    db = tmp_path / "history.db"
    faults = {n: gpu_lost(0) for n in STRUCK}
    clock = Clock()
    await _watch(db, clock, {})
    clock.advance(300.0)
    async with _console(db, clock, faults) as (session, fleet):
        lines = [ln for ln in session.log.lines() if ln.kind == "verdict"]
        assert {ln.nodes[0] for ln in lines if UNSEEN_CHANGE in ln.text} == set(STRUCK)
        # A change it saw happen reads as before.
        _heard(session, fleet, {**faults, "gpu0003": gpu_lost(0)})
        (seen,) = [ln for ln in session.log.lines()
                   if ln.kind == "verdict" and ln.nodes == ("gpu0003",)]
        assert seen.text.startswith("ok -> failed") and UNSEEN_CHANGE not in seen.text
    store = await Store.open(db)
    try:
        rows = [r for r in await store.transitions(0.0) if r["old"] == "ok"]
    finally:
        await store.close()
    assert {r["node"]: r["seen"] for r in rows} == {**dict.fromkeys(STRUCK, False),
                                                   "gpu0003": True}


def test_nodes_that_failed_while_this_console_was_cut_off_did_not_fail_at_once():
    """This console lost its broker for five minutes; three nodes of job 4104 heard ok before
    came back failed: "3 of its nodes failed at once", dated to the reconnect (a review). The
    verdict before the outage rests on no sample of the outage, so the change is not seen;
    once heard again, a change is seen as ever."""
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, session.clock, leaves=1)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("4104", JOB_NODES, session.clock), session.clock)
    _heard(session, fleet, {})
    session.state.lose_sight(session.clock())
    for _ in range(300):
        session.clock.advance(1.0)
        session.tick()
    session.state.regain_sight(session.clock())
    faults = {n: gpu_lost(0) for n in STRUCK}
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes had already failed when first "
                                "heard (gpu[0001-0002,0004])"), inc.title
    assert inc.as_json()["unseen"] == 3
    _heard(session, fleet, {}, ticks=70)
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes failed at once (gpu"), inc.title


def test_a_node_heard_unchanged_after_an_outage_then_failing_failed_where_it_was_seen():
    """A replay of a recording with a 1 s damaged part (a gap, as a broker outage live):
    gpu0006 heard ok for three seconds after it, then throttled, read "ok -> degraded (G12);
    first heard so: it changed while this console did not hear the node" (a replay UX run).
    Its samples after the outage left its verdict as it was, so it was never judged again
    and its verdict stayed one from before the outage; the first sample after one is judged."""
    from fleetdeck.console.health import UNSEEN_CHANGE

    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, session.clock, leaves=1)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("4104", JOB_NODES, session.clock), session.clock)
    _heard(session, fleet, {})
    session.state.lose_sight(session.clock())
    session.clock.advance(1.0)
    session.tick()
    session.state.regain_sight(session.clock())
    _heard(session, fleet, {})  # heard ok again, as before the outage
    _heard(session, fleet, {n: gpu_lost(0) for n in STRUCK})
    assert {session.state.nodes[n].change_seen for n in STRUCK} == {True}
    lines = [ln for ln in session.log.lines() if ln.kind == "verdict"]
    assert lines and not [ln.text for ln in lines if UNSEEN_CHANGE in ln.text]
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes failed at once (gpu"), inc.title


def _seen_failing(clock=None, session=None):
    """A console that watched three nodes of job 4104 fail together; returns it, its fleet,
    the faults and the incident it then showed."""
    if session is None:
        session = ConsoleSession(CLUSTER, clock=clock or Clock(), ingest=Ingest(CLUSTER),
                                 follow_up=False)
    fleet = SynthFleet(16, session.clock, leaves=1)
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("4104", JOB_NODES, session.clock), session.clock)
    _heard(session, fleet, {})
    faults = {n: gpu_lost(0) for n in STRUCK}
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title.startswith("job 4104: 3 of its nodes failed at once (gpu"), inc.title
    _heard(session, fleet, faults, ticks=20)
    return session, fleet, faults, inc


def _goodbye(session, fleet, faults) -> None:
    """The agents of the struck nodes stop cleanly (a goodbye) and are offline for 2 s."""
    for n in STRUCK:
        a = fleet.agents[n]
        session.ingest.handle(topic_for(CLUSTER, Kind.STATUS, n),
                              codec.encode(a.status(online=False, stopped=True)),
                              session.clock())
    _heard(session, fleet, faults, ticks=2, names=[n for n in fleet.names if n not in STRUCK])
    assert {session.state.nodes[n].verdict.value for n in STRUCK} == {"offline"}


def _back(session, fleet, faults) -> None:
    """The struck nodes' agents start again (a new birth) and are heard for 3 s."""
    for n in STRUCK:
        a = fleet.agents[n]
        a.bd_seq += 1
        a.seq = 0
    fleet.birth(session.ingest, STRUCK)
    _heard(session, fleet, faults)


def test_nodes_watched_failing_stay_seen_after_a_clean_agent_restart():
    """A console watched three nodes of job 4104 fail at once; a rollout restarted their
    agents cleanly (goodbye, offline 2 s, a new birth, still failed): "3 of its nodes failed
    before this console heard them", dated to the rejoin (a review), where an agent restart
    without a goodbye kept "failed at once". Offline says nothing of their health: back as
    they were, their failure is the one this console watched."""
    session, fleet, faults, seen = _seen_failing()
    _goodbye(session, fleet, faults)
    _back(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title == seen.title and inc.since == seen.since
    assert inc.as_json()["unseen"] == 0


def test_nodes_watched_failing_stay_seen_after_a_silence():
    """The same after 20 s of silence (stale, then heard again in the same session): "failed
    before this console heard them", dated to when they were heard again (a review)."""
    session, fleet, faults, seen = _seen_failing()
    _heard(session, fleet, faults, ticks=20, names=[n for n in fleet.names if n not in STRUCK])
    assert {session.state.nodes[n].verdict.value for n in STRUCK} == {"stale"}
    _heard(session, fleet, faults)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.title == seen.title and inc.since == seen.since
    # Back from a silence to another verdict than before it, the change is not seen.
    _heard(session, fleet, faults, ticks=20, names=[n for n in fleet.names if n not in STRUCK])
    _heard(session, fleet, {}, ticks=3)
    assert {session.state.nodes[n].change_seen for n in STRUCK} == {False}


async def test_a_restarted_console_dates_nodes_back_from_a_clean_agent_restart_as_it_was(
        tmp_path):
    """What the store keeps of the same: a console restarted on it after the agents' clean
    restart, or during it (the nodes offline), says what the live one said, "failed at once"
    at the time they failed, not since they rejoined (a review)."""
    clock = Clock()
    for restart_while_offline in (False, True):
        db = tmp_path / f"store{int(restart_while_offline)}.db"
        session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
        await session.open_store(db)
        session, fleet, faults, seen = _seen_failing(session=session)
        _goodbye(session, fleet, faults)
        if not restart_while_offline:
            _back(session, fleet, faults)
        await session.close()
        clock.advance(60.0)
        again = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
        await again.open_store(db)
        try:
            fleet.birth(again.ingest)
            publish_job(again.ingest, job_status("4104", JOB_NODES, clock), clock)
            if restart_while_offline:
                _heard(again, fleet, faults, names=[n for n in fleet.names if n not in STRUCK])
                _back(again, fleet, faults)
            else:
                _heard(again, fleet, faults)
            (inc,) = incidents(again.state, again.log.lines())
            assert inc.title == seen.title, (restart_while_offline, inc.title)
            assert inc.since == seen.since, restart_while_offline
        finally:
            await again.close()


def test_a_failed_node_under_a_running_job_leads_the_top_problems_as_its_incident_does():
    """A failed idle node with more findings came above a failed node that stops a running
    job, while the incidents view put the job's node first ("what loses work now", one rule
    for both: docs/architecture.md "Worst first"; a newcomer's run)."""
    from fleetdeck.console.rows import top_problems

    def two_down(t):
        return port_down("mlx5_ib5")(port_down("mlx5_ib2")(t))

    session = run(8, {"gpu0001": two_down, "gpu0006": port_down("mlx5_ib3")},
                  jobs=[lambda c: job_status("41", ["gpu0006", "gpu0007"], c)])
    assert len(session.state.nodes["gpu0001"].all_findings) > len(
        session.state.nodes["gpu0006"].all_findings)
    order = [i.nodes[0] for i in incidents(session.state)]
    assert order == ["gpu0006", "gpu0001"], order
    problems, _ = top_problems(session.state)
    assert [p.node for p in problems] == order, problems


def test_nodes_of_one_job_alike_but_one_are_said_once_by_hostlist():
    """2 of 3 failed nodes alike, the third on another GPU: the title named every node with
    its finding ("gpu0001: G1 gpu0: …; gpu0002: G1 gpu0: …; gpu0004: G1 gpu5: …"), and 64
    nodes of which one differed made a title of 64 findings: the alike ones are one hostlist."""
    struck = ["gpu0001", "gpu0002", "gpu0004"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"], gpus=[0, 0, 5])
    (inc,) = incidents(session.state, session.log.lines())
    assert "the same on each" not in inc.title, inc.title
    assert ("(gpu[0001-0002,0004]): gpu[0001-0002]: G1 gpu0: 7/8 GPUs visible; gpu0004: G1 "
            "gpu5: 7/8 GPUs visible; job 4104") in inc.title, inc.title


def test_a_job_incident_of_many_unlike_nodes_names_a_few_and_counts_the_rest():
    """Nodes each failed on a GPU of its own: the title names TITLE_PARTS of them, then how
    many more; each node's finding is in the node table."""
    from fleetdeck.console.incidents import TITLE_PARTS

    struck = ["gpu0001", "gpu0002", "gpu0004", "gpu0005", "gpu0006"]
    session = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004",
                                          "gpu0005", "gpu0006"],
                           ["gpu0003", "gpu0009", "gpu0010", "gpu0011"], gpus=[0, 1, 2, 3, 4])
    (inc,) = incidents(session.state, session.log.lines())
    assert TITLE_PARTS == 3
    assert ("gpu0001: G1 gpu0: 7/8 GPUs visible; gpu0002: G1 gpu1: 7/8 GPUs visible; gpu0004: "
            "G1 gpu2: 7/8 GPUs visible; 2 more nodes, each as its own finding says; "
            "job 4104") in inc.title, inc.title


def test_groups_scattered_through_a_large_job_are_counted_not_listed_node_by_node():
    """2,048 failed nodes of one job, XID 79 on GPU i % 8 of each: every group is every
    eighth node, and its hostlist named each of them: a 4 KB title of three hostlists. A
    group's long hostlist is its count (the title's head names every node); one node more
    is not "each"."""
    from types import SimpleNamespace

    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.incidents import _alike_parts

    members = [SimpleNamespace(node_id=f"gpu{i:04d}") for i in range(1, 2049)]
    found = [[Finding("G1", Severity.DRAIN, f"gpu{i % 8}", "7/8 GPUs visible")]
             for i in range(2048)]
    what = _alike_parts(members, found)  # type: ignore[arg-type]
    assert what == ("256 nodes: G1 gpu0: 7/8 GPUs visible; 256 nodes: G1 gpu1: 7/8 GPUs "
                    "visible; 256 nodes: G1 gpu2: 7/8 GPUs visible; 1280 more nodes, each as "
                    "its own finding says"), what
    what = _alike_parts(members[:4], found[:4])  # type: ignore[arg-type]
    assert what.endswith("; 1 more node, as its own finding says"), what


def _dropped(*devs: str, up: tuple[str, ...] = ()):
    """Ports ``devs`` down, their ``link_downed`` moved once as they went (what a switch's
    drop does: N2 dates it); ``up``: of those, the ones whose link is back."""
    from msgspec.structs import replace

    def apply(t):
        ports = [replace(p, link_downed=(p.link_downed or 0) + 1,
                         **({} if p.dev in up else {"state": "DOWN", "phys_state": "Polling"}))
                 if p.dev in devs else p for p in t.ib_ports]
        return replace(t, ib_ports=ports)
    return apply


BEHIND = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]


def _leaf_drops(first: tuple[str, ...], later: tuple[str, ...], gap_s: float):
    """Rails ``first`` of leaf00 drop on its 4 nodes, then rails ``later`` ``gap_s`` after."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    for faults in ({}, {n: _dropped(*first) for n in BEHIND}):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    clock.advance(gap_s)
    for _ in range(2):
        fleet.telemetry(ingest, faults={n: _dropped(*first, *later) for n in BEHIND})
        session.tick()
        clock.advance(1.0)
    return session, fleet


def test_rail_switches_of_one_leaf_that_dropped_minutes_apart_are_two_faults():
    """leaf02-r3, then leaf02-r0 20 min later, read "leaf02: 2 rail switches suspect …;
    check leaf group leaf02 (… 2 rails fail together)" (a fault drill): a common cause of a
    leaf group is believable only of rails that dropped together (``LEAF_WINDOW_S``)."""
    from fleetdeck.console.fabric_map import leaf_grouped, switch_health
    from fleetdeck.console.rows import fabric, top_problems

    session, fleet = _leaf_drops(("mlx5_ib2",), ("mlx5_ib5",), 20 * 60)
    found = {i.key: i for i in incidents(session.state, session.log.lines())}
    assert set(found) == {"switch:leaf00-r2", "switch:leaf00-r5"}, list(found)
    assert all("leaf group" not in i.action and "together" not in i.action
               for i in found.values()), [i.action for i in found.values()]
    out = fleet_summary(session.state, session.clock())
    assert [i["key"] for i in out["incidents"]] == ["switch:leaf00-r2", "switch:leaf00-r5"]
    problems, _ = top_problems(session.state)
    assert [(p.node, p.state) for p in problems if p.state in ("switch", "leaf")] == [
        ("leaf00-r2", "switch"), ("leaf00-r5", "switch")]
    assert [r.switch for r in leaf_grouped(switch_health(session.state))] == [
        "leaf00-r2", "leaf00-r5"]
    (leaf,), _ports = fabric(session.state)
    assert leaf.hint.count("suspect leaf switch") == 2 and "rail switches" not in leaf.hint

    # Back up, both: two switches that came back, not a group that "came back together".
    for _ in range(2):
        session.clock.advance(1.0)
        fleet.telemetry(session.ingest, faults={n: _dropped(
            "mlx5_ib2", "mlx5_ib5", up=("mlx5_ib2", "mlx5_ib5")) for n in BEHIND})
        session.tick()
    found = {i.key: i for i in incidents(session.state, session.log.lines())}
    assert set(found) == {"switch:leaf00-r2", "switch:leaf00-r5"}, list(found)
    assert all("recovered" in i.title and "together" not in i.action
               for i in found.values()), [(i.title, i.action) for i in found.values()]

    # Within the window (the second rail 20 s after the first): one cause, as before.
    session, _fleet = _leaf_drops(("mlx5_ib2",), ("mlx5_ib5",), 20)
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.key == "switch:leaf00" and "2 rails fail together" in inc.action, inc.action


def test_a_rail_that_dropped_apart_from_its_leaf_groups_is_told_on_its_own():
    """Rails 2 and 5 down together, rail 7 20 min later: the group is rails 2 and 5 (one
    incident, one row, one hint), rail 7 a switch of its own in each, not hidden under the
    group nor counted in it."""
    from fleetdeck.console.fabric_map import leaf_grouped, switch_health
    from fleetdeck.console.rows import fabric, top_problems

    session, _fleet = _leaf_drops(("mlx5_ib2", "mlx5_ib5"), ("mlx5_ib7",), 20 * 60)
    found = {i.key: i for i in incidents(session.state, session.log.lines())}
    assert set(found) == {"switch:leaf00", "switch:leaf00-r7"}, list(found)
    assert "(r2, r5)" in found["switch:leaf00"].title, found["switch:leaf00"].title
    assert "2 rails fail together" in found["switch:leaf00"].action
    problems, _ = top_problems(session.state)
    assert [(p.node, p.state) for p in problems if p.state in ("switch", "leaf")] == [
        ("leaf00", "leaf"), ("leaf00-r7", "switch")]
    rows = leaf_grouped(switch_health(session.state))
    assert [(r.switch, r.rails) for r in rows] == [("leaf00-r*", 2), ("leaf00-r7", 1)]
    (leaf,), _ports = fabric(session.state)
    assert leaf.hint.startswith("leaf00: 2 rail switches suspect (r2, r5)"), leaf.hint
    assert "suspect leaf switch leaf00-r7" in leaf.hint, leaf.hint


def test_one_port_that_moves_again_does_not_date_a_rail_of_a_group_found_down():
    """A console started while a whole leaf group was down saw none of its drops: its rails
    are one cause, undated. One node's port on rail 2 then moves ``link_downed`` again (a
    cable reseated during the outage): one port of the rail's 4 dated it alone, and rail 2
    left its group as a switch incident of its own ("leaf00: 7 rail switches" beside
    "leaf00-r2"), though its other ports say nothing of when it dropped."""
    from fleetdeck.console.judgements import leaf_groups, suspect_switches

    rails = tuple(f"mlx5_ib{i}" for i in range(8))
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=1)
    fleet.birth(ingest)
    # The first sample already down: the counters' baseline, no move seen.
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={n: _dropped(*rails) for n in BEHIND})
        session.tick()
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.key == "switch:leaf00" and "8 rails fail together" in inc.action, inc.action

    clock.advance(600.0)
    faults = {n: _dropped(*rails) for n in BEHIND}
    once = faults["gpu0001"]
    faults["gpu0001"] = lambda t: _dropped("mlx5_ib2")(once(t))
    for _ in range(2):
        fleet.telemetry(ingest, faults=faults)
        session.tick()
        clock.advance(1.0)
    switches = suspect_switches(session.state)
    assert len(leaf_groups(switches)["leaf00"].switches) == 8
    (inc,) = incidents(session.state, session.log.lines())
    assert inc.key == "switch:leaf00" and "8 rails fail together" in inc.action, inc.action
