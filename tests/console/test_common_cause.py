"""Common causes (console/incidents.py ``common_causes``; docs/architecture.md, "Incidents"):
many nodes saying one warning alike, of a rule whose cause they share (A1, T1), are one
incident, not one per node. 2,048 agents that could not read their kernel log after one
deployment made 2,048 node incidents of one title and ``status`` printed 2,072 lines, 2,048 of
them identical rows (a review); a node with a fault of its own besides keeps its incident."""

import io

import msgspec
from rich.console import Console

from fleetdeck.console.incidents import Incident, incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)

LOG = "kernel log: /var/log/syslog: Permission denied"


def _said(*errors: str):
    def apply(t):
        return msgspec.structs.replace(t, agent=msgspec.structs.replace(t.agent, errors=errors))
    return apply


def _fleet(n: int, faults: dict, job=None) -> tuple[ConsoleSession, Clock]:
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(n, clock)
    fleet.birth(session.ingest)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults, job=job)
        session.tick()
    return session, clock


def _kinds(found: list[Incident]) -> list[tuple[str, str]]:
    return [(i.kind, i.key) for i in found]


def test_many_agents_blind_alike_are_one_incident_and_a_real_fault_keeps_its_own():
    faults = dict.fromkeys([f"gpu{i:04d}" for i in range(1, 11)], _said(LOG))
    faults["gpu0003"] = lambda t: port_down()(_said(LOG)(t))
    session, _clock = _fleet(16, faults)
    found = incidents(session.state)
    common = [i for i in found if i.kind == "common"]
    assert len(common) == 1, _kinds(found)
    (inc,) = common
    assert inc.severity == "warn" and inc.nodes == [f"gpu{i:04d}" for i in range(1, 11)]
    assert inc.title.startswith("agents on 10 nodes cannot read their kernel log (the same "
                                "error: /var/log/syslog: Permission denied)"), inc.title
    assert "(gpu[0001-0010])" in inc.title
    assert "do not drain" in inc.action and "fix the agents' access" in inc.action
    # gpu0003's port is down: that is its own, and its own incident says it (failed, drain).
    assert inc.folded == [n for n in inc.nodes if n != "gpu0003"]
    assert [i.key for i in found if i.kind == "node"] == ["node:gpu0003"]
    assert found[0].key == "node:gpu0003" and found[0].severity == "error"
    out = fleet_summary(session.state, session.clock())
    (j,) = [i for i in out["incidents"] if i["kind"] == "common"]
    assert j["folded"] == inc.folded and j["findings"] == 10
    assert all("folded" not in i for i in out["incidents"] if i["kind"] != "common")


def test_figures_and_node_names_are_one_cause_and_another_error_another():
    """The same error but for a node's name or a figure is one cause; another error (the log
    missing, not denied) on as many nodes is another incident."""
    faults = {f"gpu{i:04d}": _said(f"kernel log: /var/log/gpu{i:04d}/kern.log: Permission "
                                   "denied") for i in range(1, 9)}
    faults |= {f"gpu{i:04d}": _said("kernel log: journalctl exited 1: No journal files were "
                                    "found") for i in range(9, 17)}
    session, _clock = _fleet(40, faults)
    found = incidents(session.state)
    common = [i for i in found if i.kind == "common"]
    assert len(common) == 2 and not [i for i in found if i.kind == "node"], _kinds(found)
    assert {len(i.nodes) for i in common} == {8} and len({i.key for i in common}) == 2
    assert any("No journal files were found" in i.title for i in common)


def test_too_few_alike_stay_node_incidents():
    """4 of 40: not 8, nor a quarter of the nodes heard; 3 of 12 is a quarter."""
    from fleetdeck.console.incidents import common_min

    assert common_min(40) == 8 and common_min(12) == 3 and common_min(3) == 3
    assert common_min(16384) == 8
    faults = dict.fromkeys([f"gpu{i:04d}" for i in range(1, 5)], _said(LOG))
    session, _clock = _fleet(40, faults)
    assert [i.kind for i in incidents(session.state)] == ["node"] * 4
    session, _clock = _fleet(12, dict.fromkeys(["gpu0001", "gpu0005", "gpu0009"],
                                                        _said(LOG)))
    assert [i.kind for i in incidents(session.state)] == ["common"]


def test_a_hardware_warning_on_many_nodes_stays_each_nodes():
    """G12 (a throttled GPU) on ten nodes: each node's cooling, each node's step; not a
    common cause (nor a drain-class finding, which keeps its per-node action)."""
    faults = dict.fromkeys([f"gpu{i:04d}" for i in range(1, 11)], throttled())
    session, _clock = _fleet(16, faults)
    found = incidents(session.state)
    assert found and all(i.kind == "node" for i in found), _kinds(found)


def test_a_straggler_on_a_blind_node_is_not_said_on_the_common_cause():
    """A job slowed by a node whose only finding is A1: the agents' blindness does not slow
    it; "agents on 10 nodes cannot read …; slows job 41" blamed them."""
    names = [f"gpu{i:04d}" for i in range(1, 11)]
    session, clock = _fleet(16, dict.fromkeys(names, _said(LOG)),
                                     job=dict.fromkeys(names[:4], "41"))
    publish_job(session.ingest, job_status("41", names[:4], clock, slowest_node="gpu0002"),
                clock)
    session.tick()
    found = incidents(session.state)
    (common,) = [i for i in found if i.kind == "common"]
    assert "slows job" not in common.title, common.title
    assert any(i.key == "job:41" and "straggler" in i.title for i in found), _kinds(found)


def test_status_says_the_alike_rows_in_one_line():
    """``status`` at 120 nodes with 40 blind alike: one incident, and under the table one
    line for the 40 rows instead of 40 identical rows; the node with a port down keeps its
    row; ``--all`` lists every row."""
    from fleetdeck.console.cli.status import render_summary

    names = [f"gpu{i:04d}" for i in range(1, 41)]
    faults = dict.fromkeys(names, _said(LOG))
    faults["gpu0003"] = lambda t: port_down()(_said(LOG)(t))
    session, _clock = _fleet(120, faults)
    summary = fleet_summary(session.state, session.clock())
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400))
    text = out.getvalue()
    assert "incidents (2):" in text, text
    rows = [ln for ln in text.splitlines() if ln.startswith("gpu")]
    assert [r.split()[0] for r in rows] == ["gpu0003"], text
    assert ("… and 39 nodes degraded, in service, with only A1 kernel log of the incident "
            "above (gpu[0001-0002,0004-0040]), not listed (status --all lists every node)"
            in text), text
    every = io.StringIO()
    render_summary(summary, Console(file=every, width=400), every_node=True)
    assert sum(1 for ln in every.getvalue().splitlines() if ln.startswith("gpu")) == 120


def test_the_top_problems_say_them_in_one_row():
    """The overview's top problems: one row for the ten blind alike, after the node whose
    port is down (failed, its own row), not ten rows of one line."""
    from fleetdeck.console.rows import top_problems

    faults = dict.fromkeys([f"gpu{i:04d}" for i in range(1, 11)], _said(LOG))
    faults["gpu0003"] = lambda t: port_down()(_said(LOG)(t))
    session, _clock = _fleet(16, faults)
    problems, total = top_problems(session.state)
    assert total == 10
    assert [(p.node, p.state) for p in problems] == [("gpu0003", "idle"), ("10 nodes", "alike")]
    assert problems[1].text.startswith("agents on 10 nodes cannot read their kernel log")


def test_clocks_off_alike_are_one_incident():
    """T1 on 3 of 8 nodes (a quarter or more), ahead by 8 and 9 s: a time source they share,
    one incident that says so, not three nodes each told to check its own time sync."""
    from tests.console.test_clock_skew import Fleet

    fleet = Fleet()
    fleet.run(3)
    fleet.skew[1] = fleet.skew[4] = 8.0
    fleet.skew[6] = 9.0
    fleet.run(2)
    assert set(fleet.t1()) == {"gpu0002", "gpu0005", "gpu0007"}, fleet.t1()
    (inc,) = incidents(fleet.session.state)
    assert inc.kind == "common" and inc.folded == ["gpu0002", "gpu0005", "gpu0007"]
    assert inc.title.startswith("3 nodes say alike T1 clock 8 s ahead of the fleet's"), inc.title
    assert "a time source they share? (gpu[0002,0005,0007])" in inc.title
    assert inc.action.startswith("check the time source these nodes share")


def test_status_line_of_clocks_off_alike_names_the_rule_alone(monkeypatch):
    """T1's component is '' (a node's clock, no part of it): the line under the table read
    "with only T1  of the incident above", a blank where A1 says its 'kernel log'."""
    from fleetdeck.console.cli.status import render_summary
    from tests.console import test_clock_skew

    monkeypatch.setattr(test_clock_skew, "NODES", 40)
    fleet = test_clock_skew.Fleet()
    fleet.run(3)
    for i in range(12):
        fleet.skew[i] = 8.0
    fleet.run(2)
    (inc,) = [i for i in incidents(fleet.session.state) if i.kind == "common"]
    assert len(inc.folded) == 12, inc
    out = io.StringIO()
    render_summary(fleet_summary(fleet.session.state, fleet.true), Console(file=out, width=400))
    text = out.getvalue()
    assert ("… and 12 nodes degraded, in service, with only T1 of the incident above "
            "(gpu[0001-0012]), not listed" in text), text


def test_a_regroup_sees_a_node_whose_findings_changed_since_the_last():
    """What each node's findings give is kept between regroups (``common_causes``): a blind
    node whose port went down since is its own incident at the next regroup, and folded
    again once the port is back, as a fresh console would group them."""
    names = [f"gpu{i:04d}" for i in range(1, 11)]
    faults = dict.fromkeys(names, _said(LOG))
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, clock)
    fleet.birth(session.ingest)

    def regroup(faults: dict) -> list[Incident]:
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults)
        session.tick()
        return incidents(session.state)

    (common,) = [i for i in regroup(faults) if i.kind == "common"]
    assert common.folded == names
    faults["gpu0004"] = lambda t: port_down()(_said(LOG)(t))
    found = regroup(faults)
    (common,) = [i for i in found if i.kind == "common"]
    assert common.folded == [n for n in names if n != "gpu0004"], common.folded
    assert "node:gpu0004" in [i.key for i in found]
    faults["gpu0004"] = _said(LOG)
    for _ in range(3):
        found = regroup(faults)
    (common,) = [i for i in found if i.kind == "common"]
    assert common.folded == names and "node:gpu0004" not in [i.key for i in found]


def test_a_common_cause_at_its_threshold_holds_while_one_node_flaps():
    """8 of 40 nodes blind alike make one incident; one of them recovering, and failing again,
    kept flipping it between one incident and seven node incidents, and the incidents view's
    selection (kept by key) jumped. Once formed it holds at ``COMMON_HOLD_NODES`` fewer, for
    ``COMMON_HOLD_S`` at most; below that, or past it, its nodes are their own again."""
    from fleetdeck.console.incidents import COMMON_HOLD_S, common_min

    names = [f"gpu{i:04d}" for i in range(1, 9)]
    assert common_min(40) == 8
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(40, clock)
    fleet.birth(session.ingest)

    def regroup(blind: list[str], wait: float = 1.0) -> list[tuple[str, str]]:
        clock.advance(wait)
        fleet.telemetry(session.ingest, faults=dict.fromkeys(blind, _said(LOG)))
        session.tick()
        return _kinds(incidents(session.state))

    regroup(names)
    (key,) = [k for kind, k in regroup(names) if kind == "common"]
    for _ in range(3):
        # gpu0008 recovers (7 say it) and fails again: one incident throughout.
        assert regroup(names[:7]) == [("common", key)]
        assert regroup(names) == [("common", key)]
    # Two more recover (6: still held), then a third (5): each node its own again.
    assert regroup(names[:6]) == [("common", key)]
    assert [kind for kind, _k in regroup(names[:5])] == ["node"] * 5
    # Not formed again below the threshold: 7 are node incidents.
    assert [kind for kind, _k in regroup(names[:7])] == ["node"] * 7
    assert regroup(names) == [("common", key)]
    # Held below it for COMMON_HOLD_S at most.
    assert regroup(names[:7]) == [("common", key)]
    assert regroup(names[:7], COMMON_HOLD_S / 2) == [("common", key)]
    assert [kind for kind, _k in regroup(names[:7], COMMON_HOLD_S / 2)] == ["node"] * 7


def test_agents_that_lost_part_of_their_log_alike_are_told_a_gap_not_blindness():
    """A copytruncate during a flood loses the unread stretch of each agent's log: A1 says a
    gap ("look in the rotated copy"), and folded alike on many nodes the incident said "cannot
    read their kernel log … fix the agents' access", the step of blindness (a review)."""
    lost = ("kernel log: /var/log/syslog: 3.2 MiB lost at a truncation in place (logrotate's "
            "copytruncate while a flood was read late): its Xid lines were never read; look "
            "for them in the rotated copy")
    faults = dict.fromkeys([f"gpu{i:04d}" for i in range(1, 11)], _said(lost))
    session, _clock = _fleet(16, faults)
    (inc,) = [i for i in incidents(session.state) if i.kind == "common"]
    assert inc.title.startswith("agents on 10 nodes lost part of their kernel log"), inc.title
    assert "cannot read" not in inc.title and "access" not in inc.action
    assert inc.action.startswith("look in the rotated copies"), inc.action


def test_status_line_of_ports_blind_alike_names_the_rule_not_a_mangled_port():
    """The line under the table rebuilt its cause from the incident's key, whose component
    (a port's, digits made '#') holds a ':' of its own: "with only A1 mlx#_ib# of the incident
    above" (a review)."""
    from fleetdeck.console.cli.status import render_summary

    counters = ("/sys/class/infiniband/mlx5_ib2/ports/1/counters/symbol_error: not a "
                "counter: ''")
    names = [f"gpu{i:04d}" for i in range(1, 13)]
    session, _clock = _fleet(40, dict.fromkeys(names, _said(counters)))
    out = io.StringIO()
    render_summary(fleet_summary(session.state, session.clock()), Console(file=out, width=400))
    text = out.getvalue()
    assert "with only A1 of the incident above (gpu[0001-0012])" in text, text
    assert "#" not in text, text


def test_the_overview_reads_the_hold_of_a_common_cause_and_never_writes_it():
    """The overview's top problems group their own pool (no node of a failed job, none behind
    a switch): writing the hold and the hostlists as ``incidents()`` does, an overview that
    counted the cause at its threshold reset the hold's clock while the incidents view held it
    below (``COMMON_HOLD_S`` never ran out), one that counted fewer dropped a cause the
    incidents still held, and each threw away the other's hostlists (a review)."""
    from fleetdeck.console.rows import top_problems

    names = [f"gpu{i:04d}" for i in range(1, 9)]
    session, _clock = _fleet(40, dict.fromkeys(names, _said(LOG)))
    incidents(session.state)
    held, hostlists = (session.state.memo["common:held"],
                       session.state.memo["common:hostlists"])
    problems, _total = top_problems(session.state)
    assert any(p.state == "alike" for p in problems), problems
    assert session.state.memo["common:held"] is held
    assert session.state.memo["common:hostlists"] is hostlists


def test_kept_grouping_follows_a_node_that_moved_and_stays_while_only_samples_came():
    """The grouping and the pool are kept while no node's shape moved (``_incident_pool``,
    ``common_causes``; docs/performance.md): samples with the same findings regroup to the
    very same pool, and a node that got a fault of its own since leaves the fold at once."""
    names = [f"gpu{i:04d}" for i in range(1, 11)]
    faults = dict.fromkeys(names, _said(LOG))
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(16, clock)
    fleet.birth(session.ingest)
    state = session.state

    def round_(faults: dict) -> list[Incident]:
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults)
        session.tick()
        return incidents(state)

    round_(faults)
    first = round_(faults)
    pool = state.memo["incidents:pool"][1]
    again = round_(faults)  # samples alike: nothing moved
    assert state.memo["incidents:pool"][1] is pool
    assert [i.as_json() for i in again] == [i.as_json() for i in first]
    (inc,) = [i for i in again if i.kind == "common"]
    assert inc.folded == names
    faults["gpu0004"] = lambda t: port_down()(_said(LOG)(t))
    moved = round_(faults)
    assert state.memo["incidents:pool"][1] is not pool
    (inc,) = [i for i in moved if i.kind == "common"]
    assert inc.nodes == names and inc.folded == [n for n in names if n != "gpu0004"]
    assert "node:gpu0004" in [i.key for i in moved]
    del faults["gpu0001"], faults["gpu0002"]  # their agents read the log again
    healed = round_(faults)
    (inc,) = [i for i in healed if i.kind == "common"]
    assert inc.nodes == names[2:] and inc.title.startswith("agents on 8 nodes")


def test_a_snapshot_put_back_keeps_no_grouping_keyed_by_the_old_objects_addresses():
    """``common_causes`` keys what a node's findings give by the findings' identities (``id``).
    A replay's seek back puts back an unpickled state (``ConsoleSession.restore``): its
    findings are copies at other addresses, while the kept keys were the old objects'
    addresses, which a later finding of another cause may be given (a port-down node read as
    one of the blind). Put back, the state keeps no such key, and regroups as it did."""
    names = [f"gpu{i:04d}" for i in range(1, 11)]
    faults = dict.fromkeys(names, _said(LOG))
    session, _clock = _fleet(16, faults)
    before = [i.as_json() for i in incidents(session.state)]
    snap = session.snapshot()
    session.restore(snap)
    state = session.state
    kept = state.memo.get("common:keys")
    entries = kept[1][0] if kept is not None else {}
    for ids, (found, *_rest) in entries.items():
        assert ids == (id(found[0]) if len(found) == 1 else tuple(map(id, found)))
    assert [i.as_json() for i in incidents(state)] == before


def _braked(gpus: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7)):
    """A power brake: NVML raises HW slowdown (0x8) with it (0x80); no heat."""
    def apply(tel):
        out = [msgspec.structs.replace(g, clock_event_reasons=0x88) if g.index in gpus else g
               for g in tel.gpus]
        return msgspec.structs.replace(tel, gpus=out)
    return apply


def test_a_power_brake_on_many_nodes_is_one_facility_incident_naming_the_racks():
    """G12's power brake is asserted from outside the GPU (the system's power supply): on ten
    nodes at once it is the power they share, one incident naming their racks, not ten "check
    the node's power supplies"; a node also throttled for heat keeps its own (its cooling)."""
    names = [f"gpu{i:04d}" for i in range(1, 11)]
    faults = dict.fromkeys(names, _braked())
    faults["gpu0004"] = lambda t: throttled(gpu=7)(_braked((0, 1))(t))
    session, _clock = _fleet(16, faults)
    found = incidents(session.state)
    (inc,) = [i for i in found if i.kind == "common"]
    assert inc.key.startswith("common:G12:gpu:") and inc.severity == "warn"
    assert inc.nodes == names, inc.nodes
    assert inc.title.startswith("power brake on 10 nodes' GPUs (74 GPUs clock-throttled by "
                                "an external power brake, not heat): facility power? "
                                "(racks r[00-01]: gpu[0001-0010])"), inc.title
    assert "PDUs and power shelves" in inc.action and "do not drain" in inc.action
    assert inc.folded == [n for n in names if n != "gpu0004"]
    assert [i.key for i in found if i.kind == "node"] == ["node:gpu0004"], _kinds(found)
    out = fleet_summary(session.state, session.clock())
    (j,) = [i for i in out["incidents"] if i["kind"] == "common"]
    assert j["folded"] == inc.folded


def test_a_power_brake_on_a_few_nodes_stays_each_nodes_step():
    """Under the threshold a brake is each node's (its supplies, its BMC's power limit)."""
    session, _clock = _fleet(40, dict.fromkeys(["gpu0001", "gpu0002"], _braked((3,))))
    found = incidents(session.state)
    assert [i.kind for i in found] == ["node", "node"], _kinds(found)
    assert "power brake" in found[0].title, found[0].title
