"""A leaf switch that dies and comes back, replayed: while its ports are down the overview's
fabric panel and the fabric matrix both mark it suspect; once they are up again (its nodes'
N2 holds for an hour) both say it recovered, from one judgement (``SuspectSwitch.recovered``).

Found in an operator-UX audit: after leaf04-r5 of the demo came back, the overview still drew
it as a reversed ✖ (a failing switch, the matrix's glyph for down) under "suspect: 16
erroring", while the matrix drew its ports ▲ (erroring): one switch, two stories."""

import json
from pathlib import Path

import pytest

from fleetdeck.console.fabric_map import fabric_map, switch_health
from fleetdeck.console.incidents import incidents
from fleetdeck.console.judgements import RECOVERED, recommended_action, suspect_switches
from fleetdeck.console.replay import run_headless
from fleetdeck.console.rows import fabric
from fleetdeck.console.tui.replay_app import ReplayApp
from fleetdeck.console.tui.screens.fabric import FabricScreen, _leaf_style
from fleetdeck.console.tui.screens.overview import OverviewScreen
from tests.conftest import run_cli
from tests.tui.test_fabric_matrix import line_of


def switch_scenario(name: str, *outages: tuple[str, int, str]) -> str:
    """A 16-node fleet (8 per leaf) whose leaf02 rail switches die: ``(at, rail, duration)``
    each, duration "" for one that stays down."""
    faults = "".join(
        f'[[fault]]\nat = "{at}"\nfault = "leaf_switch"\nleaf = "leaf02"\nrail = {rail}\n'
        + (f'duration = "{duration}"\n' if duration else "") for at, rail, duration in outages)
    return f'name = "{name}"\n[fleet]\nnodes = 16\nnodes_per_leaf = 8\n{faults}'


def recorded(where: Path, name: str, scenario: str, duration: str = "2m") -> Path:
    """``scenario`` run in virtual time (``fleetdeck sim --out``) into ``where/name.jsonl.gz``."""
    path = where / f"{name}.toml"
    path.write_text(scenario)
    out = where / f"{name}.jsonl.gz"
    res = run_cli("sim", "--scenario", str(path), "--out", str(out), "--duration", duration)
    assert res.returncode == 0, res.stderr
    return out


SCENARIO = switch_scenario("switch_back", ("20s", 5, "30s"))
"""leaf02's rail-5 switch dies at 20 s and comes back 30 s later."""
SWITCH = "leaf02-r5"
DURING, AFTER = 35.0, 58.0
"""Seconds into the recording: the switch down; its ports up again (N2 still held)."""


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording in virtual time (``fleetdeck sim --out``): ~40 KB, made in a second."""
    return recorded(tmp_path_factory.mktemp("switch_back"), "switch_back", SCENARIO)


def test_a_switch_whose_ports_came_back_is_judged_recovered(recording):
    state = run_headless(recording, until=DURING).session.state
    (sw,) = suspect_switches(state)
    assert sw.switch == SWITCH and not sw.recovered and "fail together" in sw.text
    (row,) = [r for r in switch_health(state).rows if r.switch == SWITCH]
    assert row.failing and row.down == 8
    assert fabric_map(state).recovered == frozenset()

    state = run_headless(recording, until=AFTER).session.state
    (sw,) = suspect_switches(state)
    # Its 8 nodes still carry N2 (the hour's window), but every port is up.
    assert sw.recovered and sw.by_status == {"erroring": 8}
    assert RECOVERED in sw.text and "fail together" not in sw.text
    assert sw.as_json()["recovered"] is True
    (row,) = [r for r in switch_health(state).rows if r.switch == SWITCH]
    assert row.recovered and not row.failing and row.erroring == 8
    fm = fabric_map(state)
    assert fm.recovered == {SWITCH} and fm.suspects[SWITCH] == row.suspect == sw.text


def test_the_fabric_views_leaf_hint_says_recovered_not_failing(recording):
    """The fabric view's hint line under the tables: red ⚠ while the switch is down, a plain
    ✓ line once it came back (it drew every hint as a red warning)."""
    for at, recovered in ((DURING, False), (AFTER, True)):
        state = run_headless(recording, until=at).session.state
        (leaf,) = [r for r in fabric(state)[0] if r.hint]
        assert leaf.leaf == "leaf02" and leaf.recovered is recovered
        assert (RECOVERED in leaf.hint) is recovered
        # Its row in the leaf table in the banner's colour: red while down, a warning once
        # back (it stayed red beside the banner's ✓ recovered, a review).
        assert _leaf_style(leaf) == ("degraded" if recovered else "failed")


def test_nodes_and_incident_behind_a_recovered_switch_say_so(recording):
    """The node's F1, its recommended action and the switch incident follow the same
    judgement: while down "check the switch"; once up again, nothing to do on the nodes (a
    UX audit read "behind suspect switch: check the switch" for an hour after it came back)."""
    def judged(at: float):
        state = run_headless(recording, until=at).session.state
        (inc,) = [i for i in incidents(state) if i.kind == "switch"]
        node = state.nodes[inc.nodes[0]]
        (f1,) = [f for f in node.all_findings if f.rule == "F1"]
        return inc, f1.text, recommended_action(node)

    inc, f1, action = judged(DURING)
    assert inc.severity == "error" and f"{SWITCH} suspect" in inc.title
    assert f1 == f"behind suspect switch {SWITCH}: check the switch, do not drain"
    assert action == f"check switch {SWITCH}; do not drain"

    inc, f1, action = judged(AFTER)
    assert inc.severity == "warn" and f"{SWITCH} {RECOVERED}" in inc.title
    assert "suspect" not in inc.title and "nothing to do on the nodes" in inc.action
    assert f1 == (f"behind switch {SWITCH}, which recovered: its link errors were the "
                  "switch's, nothing to do on the node")
    assert action == f"none on the node: switch {SWITCH} recovered; do not drain"


async def _both(app: ReplayApp, pilot, at: float) -> tuple[str, str, str, str]:
    """(the overview's fabric panel, its leaf02 line, the matrix's rail-5 line, the matrix's
    status line on leaf02-r5's worst port) at ``at`` seconds into the recording."""
    app.seek_to(f"{at:g}")
    await pilot.pause()
    await pilot.press("1")
    await pilot.pause()
    app.refresh_view()
    await pilot.pause()
    overview = app.screen
    assert isinstance(overview, OverviewScreen)
    panel = overview.query_one("#fabric-panel")
    text = panel.render().plain
    (leaf_line,) = [ln for ln in text.splitlines() if "leaf02 r0-7" in ln]
    title = str(panel.border_title)
    await pilot.press("4")
    await pilot.pause()
    app.refresh_view()
    await pilot.pause()
    fabric = app.screen
    assert isinstance(fabric, FabricScreen)
    matrix = fabric.matrix
    lines = [line_of(matrix, y) for y in range(matrix.plan.lines)]
    (rail5,) = [ln for ln in lines if ln.startswith("r5")]
    await pilot.press("w")
    await pilot.pause()
    status = fabric.query_one("#matrix-status").render().plain
    assert SWITCH in status
    return title + "\n" + text, leaf_line, rail5, status


async def test_overview_panel_and_matrix_agree_before_during_and_after(recording):
    app = ReplayApp(recording, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        panel, leaf, rail5, status = await _both(app, pilot, DURING)
        assert "1 suspect" in panel and f"▶ {SWITCH}" in panel
        assert "suspect: 8 of 8 ports down" in panel
        assert leaf.startswith("▶") and leaf.split()[3] == "■■■■■✖■■"
        assert "▶" in rail5 and rail5.count("✖") == 8
        assert "suspected switch" in status

        panel, leaf, rail5, status = await _both(app, pilot, AFTER)
        # Both: not a failing switch, its ports erroring (▲), recovered in the same words.
        assert "suspect" not in panel and "1 recovered" in panel
        assert f"{SWITCH}   {RECOVERED}: 8 of 8 ports" in panel
        assert not leaf.startswith("▶") and leaf.split()[2] == "■■■■■▲■■"
        assert "▶" not in rail5 and rail5.count("▲") == 8
        assert "suspected switch" not in status and f"switch {RECOVERED}" in status
        assert "erroring: link_downed increased" in status


TWICE = switch_scenario("switch_twice", ("20s", 5, "20s"), ("100s", 5, "20s"))
"""leaf02's rail-5 switch dies at 20 s and at 100 s, 20 s each time."""


def test_a_switch_that_died_twice_in_the_hour_reads_recovered_once_back(tmp_path):
    """Its ports went down twice in the hour: they read flapping (their agents' hour), and
    the switch stayed "suspect: 8 ports (8 flapping)" for the hour, a job stepping at full
    speed held up by "F1 behind suspect switch" (a review)."""
    out = recorded(tmp_path, "twice", TWICE, "4m")
    state = run_headless(out, until=110.0).session.state
    (sw,) = suspect_switches(state)
    assert not sw.recovered  # down again
    state = run_headless(out, until=200.0).session.state
    (sw,) = suspect_switches(state)
    assert sw.by_status == {"flapping": 8}, sw.by_status
    assert sw.recovered and RECOVERED in sw.text


def test_a_node_behind_a_recovered_and_a_failing_switch_names_the_failing_one(tmp_path):
    """leaf02-r6 died and came back, then leaf02-r1 died: its nodes read "behind suspect
    switch leaf02-r[1,6]" (and `drain --dry-run` too) while the incidents said r6 recovered
    (an SRE drill): they name the switch that fails now."""
    out = recorded(tmp_path, "two", switch_scenario("two_rails", ("20s", 6, "20s"),
                                                     ("70s", 1, "")))
    state = run_headless(out, until=100.0).session.state
    behind = [st for st in state.nodes.values() if st.behind_switch]
    assert len(behind) == 8
    assert {st.behind_switch for st in behind} == {"leaf02-r1"}
    assert not any(st.behind_recovered for st in behind)
    assert all(len(st.behind_ports) == 2 for st in behind)  # r6's held ports still handed over


def test_a_recovered_switch_comes_after_the_failed_nodes_in_top_problems(tmp_path):
    """A recovered switch needs nothing done: it held the overview's first row for the hour,
    above a node whose GPU fell off the bus (a 3 a.m. drive)."""
    from fleetdeck.console.rows import top_problems

    scenario = switch_scenario("back_and_xid", ("20s", 5, "30s")) + (
        '[[fault]]\nat = "40s"\nfault = "xid79"\nnode = "gpu0002"\n')
    out = recorded(tmp_path, "back_and_xid", scenario)
    state = run_headless(out, until=AFTER).session.state
    problems, count = top_problems(state)
    order = [(p.node, p.verdict.value) for p in problems]
    assert order[0] == ("gpu0002", "failed"), order
    assert order.index((SWITCH, "degraded")) == 1, order
    # Its nodes with nothing of their own are the switch's row, not fifteen rows of "nothing
    # to do on the node" that hid a throttled straggler, nor "17 nodes need attention" (a
    # 3 a.m. drive).
    behind = [n for n, st in state.nodes.items() if st.behind_switch]
    assert behind and not {p.node for p in problems} & set(behind), order
    assert count == 1, count  # gpu0002
    # An offline node (it sorts above the failed ones) put it first again (a review).
    from fleetdeck.console.health import Verdict

    state.nodes["gpu0003"].verdict = Verdict.OFFLINE
    state.not_ok.add("gpu0003")
    order = [(p.node, p.verdict.value) for p in top_problems(state)[0]]
    assert order[:3] == [("gpu0003", "offline"), ("gpu0002", "failed"), (SWITCH, "degraded")]


def test_the_drain_dialog_says_a_recovered_switch_recovered(recording):
    """The drain dialog of a node behind the switch said "behind suspect switch … check the
    switch" after the overview had called it recovered (a 3 a.m. drive)."""
    from fleetdeck.console.commands import blast_radius
    from fleetdeck.protocol.messages import CommandOp

    for at, words in ((DURING, f"behind suspect switch {SWITCH}, with no fault of their own"),
                      (AFTER, f"behind switch {SWITCH}, which recovered, with no fault of "
                              "their own")):
        state = run_headless(recording, until=at).session.state
        (sw,) = [s for s in suspect_switches(state) if s.switch == SWITCH]
        radius = blast_radius(state, CommandOp.DRAIN, [sw.nodes[0]], state.judged_at)
        assert any(n.startswith(words) for n in radius.notes), (at, radius.notes)


def test_a_nodes_own_symbol_errors_stay_its_own_behind_a_switch_that_dropped(tmp_path):
    """A node's symbol-error storm on the rail of a switch that then dropped its links was
    handed to the switch with them: the node read degraded "(switch)", and the switch stayed
    "suspect: 16 erroring" for the hour after it came back (an SRE drill). The storm is the
    node's own (failed, N3); the switch reads recovered."""
    scenario = switch_scenario("storm_then_switch", ("20s", 5, "30s")) + (
        '[[fault]]\nat = "5s"\nfault = "symbol_storm"\nnode = "gpu0010"\n'
        'port = 5\nduration = "10s"\n')
    out = recorded(tmp_path, "storm_then_switch", scenario)
    for at in (DURING, AFTER):
        state = run_headless(out, until=at).session.state
        (sw,) = [s for s in suspect_switches(state) if s.switch == SWITCH]
        assert sw.link_only and "gpu0010" in sw.nodes
        assert sw.recovered is (at == AFTER), (at, sw.text)
        node = state.nodes["gpu0010"]
        assert node.verdict.value == "failed", (at, node.all_findings)
        n3 = [f for f in node.all_findings if f.rule == "N3"]
        assert n3 and not any("(switch)" in f.text for f in n3), n3
        assert "clean or replace mlx5_ib5:1's cable" in recommended_action(node)


def test_behind_a_recovered_switch_a_nodes_own_fault_gets_its_own_advice_and_cause(tmp_path):
    """An XID 94 on a node behind a recovered switch read "none on the node: switch …
    recovered; do not drain", and a node there that died was booked "network" for the hour
    (an SRE drill)."""
    from fleetdeck.console.interruptions import node_cause

    scenario = switch_scenario("back_then_xid94", ("20s", 5, "30s")) + (
        '[[fault]]\nat = "54s"\nfault = "xid"\nnode = "gpu0010"\ngpu = 2\n'
        'code = 94\n')
    out = recorded(tmp_path, "back_then_xid94", scenario)
    state = run_headless(out, until=AFTER + 2).session.state
    node, other = state.nodes["gpu0010"], state.nodes["gpu0011"]
    assert node.behind_recovered and node.verdict.value == "degraded"
    assert recommended_action(node).startswith("XID 94 (contained ECC error)")
    assert recommended_action(other) == f"none on the node: switch {SWITCH} recovered; do not drain"
    assert node_cause(other) is None and node_cause(node) is None


def test_a_switch_outage_interruption_names_the_switch_and_all_its_nodes_in_the_run(tmp_path):
    """A dead rail switch requeued the job on its 8 nodes: the interruption read "network on
    gpu0017", the node the scheduler's reason happened to name (a 3 a.m. drive)."""
    scenario = (
        'name = "switch_kills_job"\n[fleet]\nnodes = 16\nnodes_per_leaf = 8\n'
        'hang_timeout = "10s"\n'
        '[[job]]\nname = "big"\nnodes = 16\nsteps = 100000\n'
        '[[fault]]\nat = "30s"\nfault = "leaf_switch"\nleaf = "leaf02"\nrail = 5\n')
    out = recorded(tmp_path, "switch_kills_job", scenario)
    session = run_headless(out, until=110.0).session
    stops = [it for it in session.interruptions.total if it.cause == "network"]
    assert stops, [(it.cause, it.nodes, it.detail) for it in session.interruptions.total]
    it = stops[0]
    behind = {n for n, st in session.state.nodes.items() if st.behind_switch == SWITCH}
    assert len(behind) == 8 and set(it.nodes) == behind, (it.nodes, behind)
    assert f"switch {SWITCH}" in it.detail, it.detail


def test_a_drained_node_behind_the_switch_is_told_to_resume_not_left_out(recording):
    """A node drained for its own fault, repaired, and behind a switch that recovered read
    "none on the node: … do not drain" while drained: its 8 GPUs stayed out of service with
    nothing saying to resume it (a fault audit)."""
    from fleetdeck.console.state import NodeState
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    def drained(at: float) -> tuple[NodeState, str]:
        state = run_headless(recording, until=at).session.state
        (sw,) = [s for s in suspect_switches(state) if s.switch == SWITCH]
        node = state.nodes[sw.nodes[0]]
        node.drain = DrainInfo(state=DrainState.DRAINED, reason="xid 79")
        return node, recommended_action(node)

    _, action = drained(DURING)
    # Why it was taken out is named: `status` cannot see every cause (a throttle's rate).
    assert action == (f"check switch {SWITCH}; drained (reason: xid 79), nothing found on the "
                      "node: resume it once the switch is fixed")
    _, action = drained(AFTER)
    assert action.startswith(f"drained (reason: xid 79), nothing found on the node (switch "
                             f"{SWITCH} recovered): resume it once its repair or maintenance "
                             "is done")


def test_a_job_held_up_by_the_switch_names_the_switch_not_a_nodes_warning(recording):
    """A node behind a failing switch holds its job up by the switch's port: the jobs view
    named the node's own warning (a PCIe replay rate, an XID 94) as what held the job up,
    while the scheduler's reason named the switch's link (a fault audit)."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import sick_nodes
    from tests.tui.fleet import Clock, job_status

    state = run_headless(recording, until=DURING).session.state
    (sw,) = [s for s in suspect_switches(state) if s.switch == SWITCH]
    node = state.nodes[sw.nodes[0]]
    node.findings = [*node.findings, Finding("G11", Severity.WARN, "gpu4", "PCIe replay 120/min")]
    clock = Clock()
    clock.t = state.judged_at
    # Two nodes, one of them sound: a one-node job reduces over NVLink, no switch in it.
    other = next(n for n, st in state.nodes.items() if not st.behind_switch)
    (sick,) = sick_nodes(job_status("77", [node.node_id, other], clock), state)
    assert sick.finding.startswith("F1 ") and SWITCH in sick.finding, sick.finding


WHOLE_LEAF = switch_scenario("leaf_back", *[("20s", rail, "30s") for rail in range(8)])
"""Every rail switch of leaf02 dies at 20 s and comes back 30 s later."""


@pytest.fixture(scope="module")
def whole_leaf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded(tmp_path_factory.mktemp("leaf_back"), "leaf_back", WHOLE_LEAF)


def test_a_whole_leaf_group_is_one_hint_down_and_one_back(whole_leaf):
    """Eight rail switches of one leaf group down at once said "16 ports … fail together:
    suspect leaf switch leaf02-r0 …" eight times in the fabric view's hint, cut off after the
    third line (a replay drill), where the overview and the incidents said it once."""
    path = whole_leaf
    for at, recovered, start in ((DURING, False, "leaf02: 8 rail switches suspect (r0, r1"),
                                 (AFTER, True, f"leaf02: 8 rail switches {RECOVERED} (r0, r1")):
        state = run_headless(path, until=at).session.state
        (leaf,) = [r for r in fabric(state)[0] if r.hint]
        assert leaf.recovered is recovered
        assert leaf.hint.startswith(start), leaf.hint
        assert "; " not in leaf.hint.replace("; their link", ""), leaf.hint
        assert "leaf02-r0" not in leaf.hint, leaf.hint


def test_a_whole_leaf_group_back_is_one_incident_one_problem_and_one_row(whole_leaf):
    """Once leaf02's 8 rail switches came back, the incidents view, ``status`` and the
    overview's top problems and switch panel listed eight "leaf02-rN recovered" entries of the
    same 8 nodes (a drill), where while down they said "leaf02: 8 rail switches suspect" once.
    Back, they are one entry, with every node, under the key the group had while down."""
    from fleetdeck.console.fabric_map import leaf_grouped
    from fleetdeck.console.rows import top_problems

    nodes = [f"gpu{n:04d}" for n in range(9, 17)]
    for at, start in ((DURING, "leaf02: 8 rail switches suspect (r0, r1"),
                      (AFTER, f"leaf02: 8 rail switches {RECOVERED} (r0, r1")):
        state = run_headless(whole_leaf, until=at).session.state
        (inc,) = [i for i in incidents(state) if i.kind == "switch"]
        assert inc.key == "switch:leaf02" and inc.nodes == nodes, inc
        assert inc.title.startswith(start) and inc.findings == 8 * 8, inc.title
        (problem,) = [p for p in top_problems(state)[0] if p.state in ("switch", "leaf")]
        assert problem.node == "leaf02" and problem.state == "leaf", problem
        (row,) = leaf_grouped(switch_health(state))
        assert row.rails == 8 and row.nodes == tuple(nodes), row
    assert row.recovered and inc.severity == "warn", (row, inc)
    assert "watch leaf group leaf02" in inc.action, inc.action
    assert "nothing to do on the nodes" in inc.action, inc.action

    # Headless, as status --json and replay --summary-json give it.
    res = run_cli("replay", str(whole_leaf), "--headless", "--summary-json",
                  "--until", str(AFTER))
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)["incidents"]
    (back,) = [i for i in found if i["kind"] == "switch"]
    assert back["title"].startswith(f"leaf02: 8 rail switches {RECOVERED}"), back
    assert back["nodes"] == nodes and back["key"] == "switch:leaf02", back


PART_BACK = switch_scenario("part_back", *[("20s", rail, "30s" if rail < 4 else "")
                                           for rail in range(8)])
"""Every rail switch of leaf02 dies at 20 s; r0-r3 come back 30 s later, r4-r7 stay down."""


def test_a_leaf_group_half_back_is_one_incident_back_and_one_still_down(tmp_path):
    """Rails of one leaf group back and rails still down are two causes' worth of lines, not
    eight, and two keys (a view keeps its selection by key)."""
    path = recorded(tmp_path, "part_back", PART_BACK)
    state = run_headless(path, until=AFTER).session.state
    found = {i.key: i for i in incidents(state) if i.kind == "switch"}
    assert sorted(found) == ["switch:leaf02", "switch:leaf02:recovered"], found
    assert found["switch:leaf02"].title.startswith("leaf02: 4 rail switches suspect (r4, r5")
    assert found["switch:leaf02:recovered"].title.startswith(
        f"leaf02: 4 rail switches {RECOVERED} (r0, r1, r2, r3)")
    (hint,) = [r.hint for r in fabric(state)[0] if r.hint]
    assert hint.count("leaf02: 4 rail switches") == 2, hint
