"""A1: what the agent says it cannot read, that a rule needs (docs/architecture.md, "Health
rules"). A port whose counters read garbage or EACCES left N2-N4 blind on it, an unreadable
kernel log left the node blind to XIDs, and both read plain ``ok`` in ``status`` (text and
``--json``): the agent's errors were quoted only inside G1 (a real-node drill)."""

from pathlib import Path

import msgspec

from fleetdeck.console.health import (
    NodeHistory,
    Verdict,
    blind_findings,
    combine,
    evaluate,
    still_healthy,
    still_quiet,
)
from tests.helpers import FakeNode

PORT = "/sys/class/infiniband/mlx5_ib2/ports/1"
LOG = "kernel log: /var/log/syslog: Permission denied"


def _said(t, *errors: str):
    return msgspec.structs.replace(t, agent=msgspec.structs.replace(t.agent, errors=errors))


def test_what_the_agent_cannot_see_degrades_the_node_and_says_so():
    node = FakeNode()
    birth = node.birth()
    hist = NodeHistory()
    t = node.telemetry()
    hist.update(t)
    assert evaluate(birth, t, hist) == [] and still_healthy(birth, t, hist) and still_quiet(t)
    t = _said(node.telemetry(), LOG, f"{PORT}/counters/symbol_error: not a counter: ''",
              f"{PORT}/counters/link_downed: not a counter: 'garbage'",
              "/sys/class/infiniband/mlx5_ib5/ports/1/counters: Permission denied",
              # garbage in a counter no rule reads costs a rate, not a rule
              "/sys/class/infiniband/mlx5_ib6/ports/1/counters/port_xmit_data: not a counter: ''")
    hist.update(t)
    assert not still_quiet(t) and not still_healthy(birth, t, hist)
    found = evaluate(birth, t, hist)
    assert [(f.rule, f.severity.value, f.component) for f in found] == [
        ("A1", "warn", "kernel log"), ("A1", "warn", "mlx5_ib2:1"), ("A1", "warn", "mlx5_ib5:1")]
    assert combine(found) is Verdict.DEGRADED
    assert "blind to XIDs on this node" in found[0].text and "Permission denied" in found[0].text
    assert "symbol_error, link_downed: blind to this port's error counters, N2-N4" in found[1].text
    assert "counters/" in found[2].text and "Permission denied" in found[2].text


def test_other_agent_errors_are_not_blindness():
    t = _said(FakeNode().telemetry(), "host: /proc/meminfo: Permission denied",
              f"{PORT}/lid: not hex: 'x'", "mlx4_0:1: counter saturated: port_xmit_data …")
    assert blind_findings(t.agent.errors) == () and still_quiet(t)


def test_the_real_readers_errors_are_read(tmp_path: Path):
    """The words agents/real/sysfs_ib.py writes for a counter file that holds nothing."""
    from fleetdeck.agents.real.sysfs_ib import read_port

    port = tmp_path / "infiniband" / "mlx5_ib3" / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    for name, text in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"),
                       ("rate", "400 Gb/sec (4X NDR)"), ("link_layer", "InfiniBand")):
        (port / name).write_text(text + "\n")
    (port / "counters" / "symbol_error").write_text("")
    (port / "counters" / "link_downed").write_text("0\n")
    read = read_port("mlx5_ib3", port)
    (finding,) = blind_findings(tuple(read.errors))
    assert finding.component == "mlx5_ib3:1" and "symbol_error" in finding.text


def test_status_json_and_the_action_say_it():
    """One node whose agent cannot read its kernel log: degraded (not ok), its finding in
    ``status --json`` and an action that says what to do, not "watch; drain when idle"."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(3, clock)
    fleet.birth(session.ingest)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults={"gpu0002": lambda t: _said(t, LOG)})
        session.tick()
    state = session.state
    st = state.nodes["gpu0002"]
    assert st.verdict is Verdict.DEGRADED and [f.rule for f in st.findings] == ["A1"]
    action = recommended_action(st, state)
    assert action.startswith("fix the agent's access: it is blind to XIDs on this node"), action
    (row,) = [n for n in fleet_summary(state, clock())["nodes"] if n["id"] == "gpu0002"]
    assert row["verdict"] == "degraded" and row["action"] == action
    assert any(f.startswith("A1 kernel log: the agent cannot read its kernel log")
               for f in row["findings"]), row["findings"]


def test_a_log_read_late_is_not_a_blind_one(tmp_path: Path):
    """A flood the agent's log follower reads a MiB a sample (agents/real/kernel_log.py) says
    so in a 'kernel log: …' error too; it skips no line, so its XIDs come late, not never: no
    A1 "blind to XIDs" (and no degraded node) for it. A log it cannot read beside it still is."""
    from fleetdeck.agents.real.kernel_log import FileFollower

    log = tmp_path / "syslog"
    log.write_text("")
    f = FileFollower(log, max_bytes=1 << 10)
    assert f.poll() == []
    with log.open("a") as fh:
        fh.write("Aug 17 06:18:01 vm kernel: audit: noise\n" * 1000)
    f.poll()
    assert f.error is not None
    late = f"kernel log: {f.error}"
    f.close()
    t = _said(FakeNode().telemetry(), late)
    assert blind_findings(t.agent.errors) == () and still_quiet(t)
    (finding,) = blind_findings((late, LOG))
    assert finding.component == "kernel log" and "Permission denied" in finding.text


def test_a_log_lost_at_a_truncation_is_a_gap_not_blindness(tmp_path: Path):
    """logrotate's copytruncate while the follower read a flood late took the unread rest
    with it: the agent says so (agents/real/kernel_log.py), and A1 says a gap, not "cannot
    read", with the step to look in the rotated copy, not to fix the agent's access; beside
    a flood still read late as well."""
    from fleetdeck.agents.real.kernel_log import FileFollower
    from fleetdeck.console.health import blind_step

    log = tmp_path / "syslog"
    log.write_text("")
    f = FileFollower(log, max_bytes=1 << 10)
    assert f.poll() == []
    with log.open("a") as fh:
        fh.write("Aug 17 06:18:01 vm kernel: audit: noise\n" * 1000)
    f.poll()
    with log.open("r+") as fh:
        fh.truncate(0)
    with log.open("a") as fh:
        fh.write("Aug 17 06:18:01 vm kernel: audit: noise\n" * 100)
    f.poll()
    assert f.error is not None and "unread behind its end" in f.error
    f.close()
    (finding,) = blind_findings((f"kernel log: {f.error}",))
    assert (finding.rule, finding.severity.value, finding.component) == (
        "A1", "warn", "kernel log")
    assert finding.text.startswith("the agent lost part of its kernel log: XIDs logged in it "
                                   "were never read, a gap in what it saw (it says: ")
    assert "0.0 MiB lost at a truncation in place" in finding.text
    assert blind_step([finding]) == ("look in the rotated copy of its kernel log for the Xid "
                                     "lines the agent lost")
    ports = blind_findings((f"kernel log: {f.error}",
                            f"{PORT}/counters/symbol_error: not a counter: ''"))
    assert blind_step(ports) == (
        "fix the agent's access: it is blind to the error counters of mlx5_ib2:1 (N2-N4); "
        "look in the rotated copy of its kernel log for the Xid lines the agent lost")
