"""T1: a node whose clock is off the fleet's (console/clock.py, docs/architecture.md).

2026-12-07 drill: an agent 5 min behind showed its events 5 min in the past, one more than 60 s
ahead refused every command as expired, and nothing in ``status``, ``--json`` or the TUI said a
clock was why. The console reads each sample's receive time against the agent's ``ts``."""

import random
from pathlib import Path

import pytest

from fleetdeck.console.clock import CLOCK_BUCKET_S, CLOCK_RULE, ClockWatch
from fleetdeck.console.digest import apply_digest, make_digest
from fleetdeck.console.health import Severity, Verdict
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import recommended_action
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import run_headless
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

T0 = 1_000_000.0
OFF = "(most nodes agree: this node's is off)"
NODES = 8


class Fleet:
    """``NODES`` simulated agents, each with its own clock (``skew``: seconds ahead of true
    time), feeding one console session whose receive times run ``backlog`` late."""

    def __init__(self) -> None:
        self.true = T0
        self.skew = [0.0] * NODES
        self.backlog = 0.0
        self.nodes = [FakeNode(f"gpu{i + 1:04d}", t0=T0) for i in range(NODES)]
        self.ingest = Ingest("test")
        self.session = ConsoleSession("test", ingest=self.ingest, follow_up=False,
                                      clock=lambda: self.true)
        for n in self.nodes:
            n.feed(self.ingest, n.birth(), Kind.BIRTH, rx=T0)
            n.feed(self.ingest, n.status(), Kind.STATUS, rx=T0)
        self.rng = random.Random(7)

    def run(self, seconds: int) -> None:
        for _ in range(seconds):
            self.true += 1.0
            for i, n in enumerate(self.nodes):
                n.now = self.true + self.skew[i]
                # The network and broker add 1-300 ms, the console's own backlog more.
                rx = self.true + self.backlog + self.rng.uniform(0.001, 0.3)
                n.feed(self.ingest, n.agent.telemetry(), Kind.TELEMETRY, rx=rx)
            self.session.tick(self.true + self.backlog)

    def t1(self) -> dict[str, str]:
        return {n: f.text for n, st in self.session.state.nodes.items()
                for f in st.findings if f.rule == CLOCK_RULE}


def test_the_offset_is_the_lowest_lag_of_the_window_and_forgets_a_fixed_clock():
    watch = ClockWatch()
    rng = random.Random(3)
    t = T0
    for _ in range(60):  # 30 s ahead: rx - ts = -30 s plus 5-900 ms of delay
        t += 1
        watch.note("n", t + rng.uniform(0.005, 0.9), int((t + 30) * 1000))
    off = watch.offset("n", t)
    assert off is not None and -30 < off < -29.9
    for _ in range(int(2 * CLOCK_BUCKET_S) + 1):  # fixed: back in sync
        t += 1
        watch.note("n", t + rng.uniform(0.005, 0.9), int(t * 1000))
    off = watch.offset("n", t)
    assert off is not None and 0 < off < 0.1
    assert watch.offset("n", t + 2 * CLOCK_BUCKET_S) is None  # nothing heard in the window


def test_a_console_lagging_under_load_does_not_flag_the_fleet():
    fleet = Fleet()
    fleet.run(10)
    fleet.backlog = 20.0  # the console falls 20 s behind and stays there
    fleet.run(120)
    assert fleet.t1() == {}
    state = fleet.session.state
    assert {st.verdict for st in state.nodes.values()} == {Verdict.OK}
    # Most of the fleet agrees: the console is the odd one out, and says so once.
    clock = fleet_summary(state, fleet.true)["clock"]
    assert clock["reference"] == "fleet" and clock["agree"] == NODES
    assert "behind this console" in clock["console_off"]
    assert "backlog" in clock["console_off"]


def test_one_node_8_s_ahead_is_flagged_and_clears_when_its_clock_is_back():
    fleet = Fleet()
    fleet.backlog = 3.0  # a console a little behind under load changes nothing of it
    fleet.run(3)
    fleet.skew[2] = 8.0  # its clock jumps ahead (within a command's 10 s: not refused)
    fleet.run(2)
    assert fleet.t1() == {"gpu0003": f"clock 8 s ahead of the fleet's {OFF}"}
    state = fleet.session.state
    st = state.nodes["gpu0003"]
    assert st.verdict is Verdict.DEGRADED
    f = next(f for f in st.findings if f.rule == CLOCK_RULE)
    assert f.severity is Severity.WARN
    action = recommended_action(st, state)
    assert action.startswith("check the node's time sync (chronyc tracking)")
    assert "do not drain" in action and "refuses" not in action
    out = fleet_summary(state, fleet.true)
    node = next(n for n in out["nodes"] if n["id"] == "gpu0003")
    assert node["verdict"] == "degraded"
    assert node["findings"] == [f"T1 clock 8 s ahead of the fleet's {OFF}"]
    assert out["clock"]["console_off"] is None
    found = [inc for inc in incidents(state, [], dated=False) if "gpu0003" in inc.nodes]
    assert found and "chronyc tracking" in found[0].action
    # Samples between two judgements keep it: the rules re-run on every sample of a node with
    # a finding, and T1 stays beside what they find.
    fleet.run(3)
    assert "gpu0003" in fleet.t1()
    assert [line.text for _s, line in fleet.session.log
            if line.kind == "verdict" and line.source == "gpu0003"][-1] == "ok -> degraded (T1)"

    fleet.skew[2] = 0.0  # chrony stepped it back
    fleet.run(int(2 * CLOCK_BUCKET_S) + 2)
    assert fleet.t1() == {}
    assert state.nodes["gpu0003"].verdict is Verdict.OK


def test_a_node_over_10_s_ahead_is_said_to_refuse_commands_and_one_behind_to_date_events_late():
    fleet = Fleet()
    fleet.skew[0] = 300.0
    fleet.skew[1] = -300.0
    fleet.run(4)
    found = fleet.t1()
    assert found["gpu0001"] == (f"clock 300 s ahead of the fleet's {OFF}; over 10 s ahead of "
                                "this console, it refuses as expired the commands of a console "
                                "that has not heard its samples")
    assert found["gpu0002"] == (f"clock 300 s behind the fleet's {OFF}; its events read that "
                                "much in the past")
    state = fleet.session.state
    assert "until it is fixed a console on digests cannot drain it" in recommended_action(
        state.nodes["gpu0001"], state)


def test_a_fleet_too_small_to_outvote_the_console_is_judged_by_the_console_clock():
    fleet = Fleet()
    for n in fleet.nodes[2:]:
        fleet.session.state.retire(n.node_id)
    fleet.nodes = fleet.nodes[:2]
    fleet.skew[1] = 8.0
    fleet.run(3)
    assert fleet.t1() == {
        "gpu0002": "clock 8 s ahead of this console's (too few nodes agree to tell which is off)"}


def test_a_console_on_digests_gets_t1_from_the_collectors_digest():
    fleet = Fleet()
    fleet.skew[4] = 8.0
    fleet.run(4)
    collector = fleet.session.state
    digest = make_digest(collector.nodes["gpu0005"], "c1", fleet.true)
    viewer = FleetState("test")
    viewer.digest_mode = True
    st = viewer.node("gpu0005")
    apply_digest(st, digest, fleet.true, "test")
    viewer.judge_fleet(fleet.true)
    assert [str(f) for f in st.findings] == [
        f"T1 clock 8 s ahead of the fleet's {OFF}"]
    assert st.verdict is Verdict.DEGRADED
    assert "chronyc tracking" in recommended_action(st, viewer)


def _record_skew(path: Path) -> None:
    """Four nodes for 150 s, one a second; gpu0002's clock 30 s ahead from 20 s to 80 s."""
    nodes = [FakeNode(f"gpu{i + 1:04d}", cluster="rec", t0=T0) for i in range(4)]
    w = RecordingWriter(path, "rec", source="test", started=T0)
    for n in nodes:
        w.write(T0, n.topic(Kind.BIRTH), codec.encode(n.birth()), 1, True)
        w.write(T0, n.topic(Kind.STATUS), codec.encode(n.status()), 1, True)
    for i in range(1, 151):
        for k, n in enumerate(nodes):
            n.now = T0 + i + (30.0 if k == 1 and 20 <= i < 80 else 0.0)
            w.write(T0 + i + 0.01 * (k + 1), n.topic(Kind.TELEMETRY),
                    codec.encode(n.agent.telemetry()))
    w.close()


@pytest.mark.parametrize("every_sample", [True, False])
def test_a_replay_judges_the_clock_as_the_live_console_did(tmp_path, every_sample):
    path = tmp_path / "skew.jsonl"
    _record_skew(path)
    changes: list[tuple[str, float, str, tuple[str, ...]]] = []

    def on_tick(report: TickReport) -> None:
        changes.extend((t.node, t.ts, t.new.value, t.reasons) for t in report.verdicts
                       if t.old is not None)

    run = run_headless(path, every_sample=every_sample, on_tick=on_tick)
    assert [(n, v, r) for n, _ts, v, r in changes] == [
        ("gpu0002", "degraded", ("T1",)), ("gpu0002", "ok", ())]
    degraded, ok = changes[0][1], changes[1][1]
    assert T0 + 20 <= degraded <= T0 + 22
    assert T0 + 80 <= ok <= T0 + 80 + 2 * CLOCK_BUCKET_S + 1
    assert run.session.state.nodes["gpu0002"].verdict is Verdict.OK


def test_a_node_refuses_commands_past_a_tui_commands_lifetime_ahead():
    """T1's "refuses commands" threshold is a TUI command's lifetime: an agent allows nothing
    past a command's expiry (agents/guard.py)."""
    from fleetdeck.agents.guard import EXPIRY_SKEW_MS
    from fleetdeck.console.clock import CLOCK_REFUSED_S
    from fleetdeck.console.commands import ACK_TIMEOUT_S

    assert CLOCK_REFUSED_S == ACK_TIMEOUT_S + EXPIRY_SKEW_MS / 1000


def _cmd(now: float, life_s: float = 10.0) -> Command:
    return Command(cmd_id="r1.0", op=CommandOp.DRAIN, target="n",
                   args=CommandArgs(reason="clock"), issued_by="alice",
                   issued_at=int(now * 1000), expires_at=int((now + life_s) * 1000))


def test_a_command_is_stamped_in_its_node_clock_never_past_the_console_wait():
    """``ClockWatch.on_node_clock``: a node 30 s ahead gets a command that expires when the
    console's wait ends by its clock (it refused every one before), one 30 s behind one it
    refuses once that wait is over (it acted on it 30 s later before); the shift never
    overstates how far ahead (the lowest ``rx - ts``: delays only add), a node in sync or not
    heard gets the command as before, and what is signed is the shifted command."""
    from fleetdeck.agents.guard import expired
    from fleetdeck.console.clock import CLOCK_SHIFT_S
    from fleetdeck.protocol import signing

    watch = ClockWatch()
    rng = random.Random(5)
    t = T0
    skews = {"ahead": 30.0, "behind": -30.0, "sync": 0.0, "near": CLOCK_SHIFT_S / 2}
    for _ in range(20):
        t += 1
        for node, skew in skews.items():
            watch.note(node, t + rng.uniform(0.005, 0.3), int((t + skew) * 1000))
    cmd = _cmd(t)
    deadline_ms = cmd.expires_at
    for node, skew in skews.items():
        sent = watch.on_node_clock(cmd, node, t)
        assert sent.expires_at - sent.issued_at == cmd.expires_at - cmd.issued_at  # lifetime
        true_ms = int(skew * 1000)
        # By the node's clock at the console's deadline (deadline + its true offset), the
        # command has expired or expires then: never valid after the console's wait.
        assert sent.expires_at <= deadline_ms + true_ms, node
        if abs(skew) > CLOCK_SHIFT_S:
            # Within what the delay added (at most 300 ms here): still valid until then.
            assert sent.expires_at > deadline_ms + true_ms - 300, node
            assert expired(sent, int((t + 1 + skew) * 1000)) == "", node  # 1 s in: valid
            assert expired(sent, deadline_ms + true_ms + 1) != "", node
        else:
            assert sent == cmd, node
    assert watch.on_node_clock(cmd, "unheard", t) == cmd
    # Before: the same command reached the node 30 s ahead already expired.
    assert "expired before it arrived" in expired(cmd, int((t + 1 + 30) * 1000))
    # Signed after the shift, the command verifies on the node ahead, by its clock.
    key = b"k" * 32
    signed = signing.sign(watch.on_node_clock(cmd, "ahead", t), key)
    assert signing.check(signed, key, int((t + 1 + 30) * 1000)) == ""
    assert signing.check(signed.model_copy(update={"expires_at": cmd.expires_at}), key,
                         int((t + 1 + 30) * 1000)).startswith("bad signature")


def test_a_node_whose_clock_was_set_back_gets_commands_stamped_by_its_clock_now():
    """T1 asks the operator to fix a node's time sync: a node 30 s ahead set right keeps its
    window's lowest ``rx - ts`` (T1's offset) for up to a minute, and a command stamped by it
    stayed valid on the node 30 s past the console's wait (a review). The latest sample says
    how far ahead it is now."""
    from fleetdeck.agents.guard import expired

    watch = ClockWatch()
    t = T0
    for _ in range(10):  # 30 s ahead
        t += 1
        watch.note("n1", t + 0.01, int((t + 30) * 1000))
    for _ in range(2):  # set right (chronyc makestep)
        t += 1
        watch.note("n1", t + 0.01, int(t * 1000))
    assert watch.offset("n1", t) < -29  # T1 still reads it ahead, for its window
    cmd = _cmd(t)
    sent = watch.on_node_clock(cmd, "n1", t)
    assert sent == cmd
    assert expired(sent, cmd.expires_at + 1) != ""  # expires with the console's wait


class _Sent:
    """What a session publishes, decoded."""

    def __init__(self) -> None:
        self.cmds: list[Command] = []

    async def __call__(self, kind, subject, payload) -> None:
        self.cmds.append(codec.decode(Command, payload))


def _on_the_wire(true: list[float]) -> tuple[ConsoleSession, _Sent]:
    sent = _Sent()
    return ConsoleSession("test", clock=lambda: true[0], publisher=sent, operator="t"), sent


def _hear(session: ConsoleSession, n: FakeNode, true: float, skew: float, kind: Kind,
          msg_of) -> None:
    n.now = true + skew
    n.feed(session.ingest, msg_of(), kind, rx=true + 0.05)


async def _drain_sent(session: ConsoleSession, sent: _Sent) -> Command:
    req = session.drain(["gpu0001"], "clock")
    session.tick()
    await session.flush()
    (cmd,) = [c for c in sent.cmds if c.op is CommandOp.DRAIN]
    assert cmd.cmd_id == req.targets[0].cmd.cmd_id
    return cmd


@pytest.mark.parametrize("new_skew", [0.0, -30.0])
async def test_a_node_back_as_another_process_is_not_stamped_by_the_old_ones_clock(new_skew):
    """A node 30 s ahead (T1) rebooted with its clock set right (or 30 s behind), or its id
    moved to a replacement machine: a command sent between the new process's birth and its
    first sample was stamped by the old process's ``rx - ts``, 30 s into the new one's future,
    and stayed valid there 30-60 s past the console's wait (a review). Until the new
    process's first sample, commands are stamped by its birth's ``rx - ts``."""
    from fleetdeck.agents.guard import expired

    true = [T0]
    session, sent = _on_the_wire(true)
    n = FakeNode("gpu0001", t0=T0)
    _hear(session, n, true[0], 30.0, Kind.BIRTH, n.birth)
    _hear(session, n, true[0], 30.0, Kind.STATUS, n.status)
    for _ in range(5):
        true[0] += 1
        _hear(session, n, true[0], 30.0, Kind.TELEMETRY, n.agent.telemetry)
        session.tick()
    true[0] += 5  # rebooted: the new process's clock is another
    n.now = true[0] + new_skew
    n.agent.started_ms = int(n.now * 1000)
    n.agent.bd_seq = max(n.agent.bd_seq + 1, n.agent._next_bd_seq())
    _hear(session, n, true[0], new_skew, Kind.BIRTH, n.birth)
    _hear(session, n, true[0], new_skew, Kind.STATUS, n.status)
    session.tick()
    cmd = await _drain_sent(session, sent)
    # The console's wait, by the node's (new) clock.
    deadline_ms = int((true[0] + new_skew + 10) * 1000)
    assert cmd.expires_at <= deadline_ms + 1, (cmd.expires_at - deadline_ms)
    assert expired(cmd, deadline_ms + 1) != ""
    # Its samples stamp by its clock as before; the same process's retained birth heard
    # again (a resubscription: its age adds to rx - ts) moves nothing.
    for _ in range(2):
        true[0] += 1
        _hear(session, n, true[0], new_skew, Kind.TELEMETRY, n.agent.telemetry)
        session.tick()
    last = session.state.clocks.last["gpu0001"]
    assert abs(last - 0.05 + new_skew) < 0.01, last
    n.feed(session.ingest, n.birth(), Kind.BIRTH, rx=true[0] + 20)
    session.tick()
    assert session.state.clocks.last["gpu0001"] == last


async def test_a_duplicate_node_id_never_gets_a_command_stamped_later_than_the_console_clock():
    """H3: two machines publish as one node, one 30 s ahead, one in sync. The latest sample
    was the one ahead: a drain stamped 30 s into its future reached the synced one (either
    may hold the session when it lands) and was valid there 30 s past the console's wait (a
    review). Under H3 the stamps only ever move earlier."""
    true = [T0]
    session, sent = _on_the_wire(true)
    a = FakeNode("gpu0001", t0=T0)
    b = FakeNode("gpu0001", t0=T0)
    b.agent.started_ms += 12345
    for who, skew in ((a, 30.0), (b, 0.0), (a, 30.0)):
        who.agent.bd_seq = max(a.agent.bd_seq, b.agent.bd_seq) + 1
        _hear(session, who, true[0], skew, Kind.BIRTH, who.birth)
        _hear(session, who, true[0], skew, Kind.STATUS, who.status)
        for _ in range(3):
            true[0] += 1
            _hear(session, who, true[0], skew, Kind.TELEMETRY, who.agent.telemetry)
            session.tick()
    st = session.state.nodes["gpu0001"]
    assert "H3" in st.reasons, st.all_findings
    cmd = await _drain_sent(session, sent)
    assert cmd.expires_at <= int((true[0] + 10) * 1000) + 1, cmd


async def test_a_resend_never_expires_later_on_the_node_than_what_was_sent_before():
    """Each send of a command is stamped by the estimate then: a drain first sent while the
    console read the node's samples 2 s late (its backlog), re-sent once it caught up, went
    out with an expiry 2 s later by the node's clock. The agent remembers an executed
    cmd_id only until the expiry of the copy it acted on (agents/guard.py), so a re-send (or a
    captured signed copy of it) landing after that ran the command again (a review). A
    cmd_id's expiry only ever moves earlier."""
    from fleetdeck.agents.guard import CommandGuard

    true = [T0]
    session, sent = _on_the_wire(true)
    n = FakeNode("gpu0001", t0=T0)

    def sample(delay: float) -> None:
        true[0] += 1
        n.now = true[0] + 30.0
        n.feed(session.ingest, n.agent.telemetry(), Kind.TELEMETRY, rx=true[0] + delay)
        session.tick()

    _hear(session, n, true[0], 30.0, Kind.BIRTH, n.birth)
    _hear(session, n, true[0], 30.0, Kind.STATUS, n.status)
    for _ in range(3):
        sample(2.0)
    session.drain(["gpu0001"], "clock")
    session.tick()
    await session.flush()
    for _ in range(5):  # caught up, and no ack: re-sent every 3 s
        sample(0.05)
        await session.flush()
    drains = [c for c in sent.cmds if c.op is CommandOp.DRAIN]
    assert len(drains) >= 2, drains
    first = drains[0]
    assert all(c.expires_at <= first.expires_at for c in drains), [c.expires_at for c in drains]
    # The agent acted on the first; once it expired there, no copy acts again.
    node_ms = [0]
    guard = CommandGuard("gpu0001", None, lambda: node_ms[0])
    node_ms[0] = first.issued_at + 1000
    assert guard.check(first) == ""
    guard.executing(first)
    node_ms[0] = first.expires_at + 1
    guard.prune()
    assert all(guard.check(c) != "" for c in drains)


def test_a_console_clock_stepped_back_keeps_reading_the_nodes_clocks_after_the_step():
    """After this console's clock was stepped back 2 min (``ClockWatch.stepped``), the samples
    it left out were those received before the step only: left out by every received time past
    the old clock's edge, each node's samples were dropped from 2 min after the step on, for as
    long as the console ran, and T1 was never said again (nor a command stamped by a node's
    clock)."""
    fleet = Fleet()
    fleet.run(10)
    fleet.backlog = -120.0  # the console's clock reads 2 min earlier from here: rx and ticks
    fleet.session.sight.clock_stepped(fleet.session.state, fleet.session.ingest,
                                      fleet.true + fleet.backlog, -120.0)
    fleet.run(int(120 + 2 * CLOCK_BUCKET_S))
    assert fleet.t1() == {}
    clocks = fleet.session.state.clocks
    now = fleet.true + fleet.backlog
    assert all(clocks.offset(n.node_id, now) is not None for n in fleet.nodes)
    fleet.skew[2] = 300.0
    fleet.run(4)
    assert fleet.t1()["gpu0003"].startswith("clock 300 s ahead of the fleet's")
