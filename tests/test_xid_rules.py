"""XIDs as the console judges them: every XID of the last 2 h counts, not only the last one.

Messages come from a real NodeAgent over a simulated node, go through the real codec and ingest,
and are judged by the console's FleetState, as an operator's console would see them.
"""

import json

import pytest
from msgspec.structs import replace
from pydantic import ValidationError

from fleetdeck.console.health import Severity, Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState, NodeState
from fleetdeck.protocol import codec, messages
from fleetdeck.protocol.fast import Telemetry, XidSeen, recent_xids
from fleetdeck.protocol.messages import XIDS_MAX
from fleetdeck.protocol.topics import Kind
from fleetdeck.protocol.xids import ACTION_UNREAD
from tests.helpers import FakeNode

HOUR_MS = 3600 * 1000


class Console:
    """One node seen by a console: birth, status, then whatever telemetry the test sends."""

    def __init__(self) -> None:
        self.node = FakeNode()
        self.ingest = Ingest(self.node.cluster)
        self.state = FleetState(self.node.cluster, self.ingest.malformed)
        self.node.feed(self.ingest, self.node.birth(), Kind.BIRTH)
        self.node.feed(self.ingest, self.node.status(), Kind.STATUS)
        self.send(self.node.telemetry())

    def send(self, t: Telemetry | bytes) -> NodeState:
        if isinstance(t, Telemetry):
            self.node.feed(self.ingest, t, Kind.TELEMETRY)
        else:
            self.ingest.handle(self.node.topic(Kind.TELEMETRY), t, self.node.now)
        self.state.apply(self.ingest.take_batch(), self.node.now)
        return self.state.nodes[self.node.node_id]

    def with_gpu(self, index: int, **fields: object) -> Telemetry:
        t = self.node.telemetry()
        gpus = list(t.gpus)
        gpus[index] = replace(gpus[index], **fields)
        return replace(t, gpus=gpus)


def texts(st: NodeState, rule: str) -> list[str]:
    return [f.text for f in st.findings if f.rule == rule]


def test_drain_xid_followed_by_a_routine_one_still_fails():
    c = Console()
    now = c.node.telemetry().ts
    # XID 119 (GSP RPC timeout), then the driver's clean-up XID 45: xid_last is the 45.
    st = c.send(c.with_gpu(2, xid_last=45, xid_last_ts=now - 2_000,
                           xids=[XidSeen(code=119, ts=now - 3_000),
                                 XidSeen(code=45, ts=now - 2_000)]))
    assert st.verdict is Verdict.FAILED and "G2" in st.reasons
    [g2] = [f for f in st.findings if f.rule == "G2"]
    assert g2.component == "gpu2" and "XID 119" in g2.text and g2.severity is Severity.DRAIN
    # Minutes later the agent still lists the 119: the node stays failed.
    t = c.node.telemetry()
    st = c.send(replace(c.with_gpu(2, xid_last=45, xid_last_ts=now - 2_000,
                                   xids=[XidSeen(code=119, ts=now - 3_000),
                                         XidSeen(code=45, ts=now - 2_000)]),
                        ts=t.ts + 10 * 60_000))
    assert st.verdict is Verdict.FAILED and "XID 119" in texts(st, "G2")[0]


def test_simulated_node_reports_every_xid_of_a_dbe():
    """ecc_dbe logs XID 48 then 63: the 48 is what drains, the 63 only warns."""
    c = Console()
    sim = c.node.sim
    sim.ecc_dbe(4, False, sim._t_own, int(c.node.now * 1000))
    t = c.node.telemetry()
    assert [x.code for x in t.gpus[4].xids] == [48, 63] and t.gpus[4].xid_last == 63
    st = c.send(t)
    assert st.verdict is Verdict.FAILED
    assert texts(st, "G2") == ["XID 48"] and texts(st, "G3") == ["XID 63"]


@pytest.mark.parametrize("codes", [[13], [31], [43], [45], [13, 43, 45], [31, 45]])
def test_application_and_follow_on_xids_alone_are_routine(codes):
    c = Console()
    now = c.node.telemetry().ts
    st = c.send(c.with_gpu(5, xid_last=codes[-1], xid_last_ts=now - 1_000,
                           xids=[XidSeen(code=x, ts=now - 1_000 - 10 * i)
                                 for i, x in enumerate(reversed(codes))]))
    assert st.verdict is Verdict.OK and st.findings == []


def test_warn_xids_are_listed_next_to_a_drain_xid():
    c = Console()
    now = c.node.telemetry().ts
    st = c.send(c.with_gpu(1, xid_last=63, xid_last_ts=now - 100,
                           xids=[XidSeen(code=95, ts=now - 300), XidSeen(code=45, ts=now - 200),
                                 XidSeen(code=63, ts=now - 100)]))
    assert st.verdict is Verdict.FAILED
    assert texts(st, "G2") == ["XID 95"] and texts(st, "G3") == ["XID 63"]


def test_a_drain_xid_counts_for_two_hours_then_ages_out():
    c = Console()
    now = c.node.telemetry().ts
    recent = [XidSeen(code=119, ts=now - 2 * HOUR_MS + 5_000), XidSeen(code=45, ts=now - 1_000)]
    st = c.send(c.with_gpu(0, xid_last=45, xid_last_ts=now - 1_000, xids=recent))
    assert st.verdict is Verdict.FAILED
    old = [XidSeen(code=119, ts=now - 2 * HOUR_MS - 5_000), XidSeen(code=45, ts=now - 1_000)]
    st = c.send(c.with_gpu(0, xid_last=45, xid_last_ts=now - 1_000, xids=old))
    assert st.verdict is Verdict.OK


def test_an_older_agent_without_the_list_is_judged_by_xid_last():
    c = Console()
    t = c.with_gpu(3, xid_last=79, xid_last_ts=c.node.telemetry().ts - 1_000)
    raw = json.loads(codec.encode(t))
    for g in raw["gpus"]:
        g.pop("xids", None)  # what a v1 agent from before the list sends (none here)
    st = c.send(json.dumps(raw).encode())
    assert st.verdict is Verdict.FAILED and texts(st, "G2") == ["XID 79"]
    # And such an agent's last XID, when routine, is no finding at all.
    t = c.with_gpu(3, xid_last=45, xid_last_ts=c.node.telemetry().ts - 1_000)
    raw = json.loads(codec.encode(t))
    for g in raw["gpus"]:
        g.pop("xids", None)
    assert c.send(json.dumps(raw).encode()).verdict is Verdict.OK


def test_xid_list_is_bounded_and_keeps_the_newest_per_code():
    seen = {code: 1_000 + code for code in range(1, 41)}
    seen[13] = 99_000  # logged again lately
    seen[119] = 1  # older than the window
    out = recent_xids(seen, now_ms=2 * HOUR_MS + 10)
    assert len(out) == XIDS_MAX and 119 not in seen
    assert out[-1] == XidSeen(code=13, ts=99_000)
    assert [x.ts for x in out] == sorted(x.ts for x in out)
    assert {x.code for x in out} == set(range(9, 41))  # the 32 newest (13 among them)
    with pytest.raises(ValidationError):
        messages.GpuSample(index=0, xids=[messages.XidSeen(code=13, ts=i)
                                          for i in range(XIDS_MAX + 1)])


def test_row_remap_pending_is_degraded_with_the_reset_action():
    c = Console()
    st = c.send(c.with_gpu(6, row_remap=replace(c.node.telemetry().gpus[6].row_remap,
                                                pending=True)))
    assert st.verdict is Verdict.DEGRADED and st.reasons == ["G6"]
    [g6] = st.findings
    assert g6.severity is Severity.WARN and g6.component == "gpu6"
    assert "reset pending: drain when idle, reset, resume" in g6.text
    # A failed remap still drains (G5).
    st = c.send(c.with_gpu(6, row_remap=replace(c.node.telemetry().gpus[6].row_remap,
                                                pending=True, failure=True)))
    assert st.verdict is Verdict.FAILED and set(st.reasons) == {"G5", "G6"}


def test_the_console_judges_xids_as_the_real_agent_words_them():
    """One classification: the agent's event severity (kernel_log) and the console's G2/G3
    disagreed on aznhc's list (68, 69, 109 warned in events, judged routine by the rules)."""
    from fleetdeck.agents.real.kernel_log import DRAIN_XIDS, WARN_XIDS
    from fleetdeck.console.health import XID_DRAIN, XID_WARN

    assert XID_DRAIN == DRAIN_XIDS
    assert XID_WARN == WARN_XIDS
    assert {68, 69, 109} <= XID_WARN


@pytest.mark.parametrize(("action", "rule", "text", "advice"), [
    (2, "G2", "XID 154 (node reboot required)",
     "reboot the node (the driver's recovery action for gpu3: XID 154)"),
    (4, "G2", "XID 154 (drain and reset)",
     "reset gpu3 once drained (the driver's recovery action: XID 154)"),
    # NVIDIA: the GPU cannot be used until it is reset (a fault audit: it read degraded).
    (1, "G2", "XID 154 (GPU reset required)",
     "reset gpu3 once drained (the driver's recovery action: XID 154)"),
    (6, "G2", "XID 154 (PCIe bus reset required)",
     "reset gpu3 once drained (the driver's recovery action: XID 154)"),
    # The IMEX domain's recovery, not the GPU's reset (a review).
    (5, "G2", "XID 154 (recover the IMEX domain)",
     "recover the IMEX domain gpu3 is in, once drained (the driver's recovery action: XID 154; "
     "a GPU reset alone does not)"),
    (7, "G2", "XID 154 (system reboot required)",
     "reboot the node (the driver's recovery action for gpu3: XID 154)"),
    # An idle node (no job on it) can be drained now: "when idle" of it asked to wait.
    # NVIDIA's Drain P2P: stop the P2P traffic, then the driver states the next action; it
    # said "reset gpu3", a reset the driver had not asked for (a fault audit).
    (3, "G3", "XID 154 (drain P2P)",
     "XID 154 on gpu3 (drain P2P, says the driver): drain it (no job on it); quiesce gpu3's "
     "peer-to-peer traffic: stop the processes on it that use P2P and disable UVM persistence "
     "mode, then follow the recovery action the driver states next (another XID 154); resume "
     "once it states none"),
    # A later driver's action this version does not know: said, not judged by nothing.
    (9, "G3", "XID 154 (action 0x9, unknown to this console)",
     "XID 154 on gpu3 (action 0x9, unknown to this console, says the driver): drain it (no job "
     "on it), reset gpu3, resume"),
    (0, None, "", ""),
])
def test_xid_154_is_as_grave_as_the_recovery_action_it_states(action, rule, text, advice):
    """"GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)" read ok: XID
    154 was judged by nothing (a real-node audit). The agent reads the action off the line and
    the console follows it (docs/domain.md §4)."""
    from fleetdeck.agents.real.kernel_log import KernelLogMonitor
    from fleetdeck.console.health import still_healthy
    from fleetdeck.console.judgements import recommended_action

    names = {0: "None", 1: "GPU Reset Required", 2: "Node Reboot Required", 3: "Drain P2P",
             4: "Drain and Reset", 5: "Recover IMEX Domain", 6: "Bus Reset Required",
             7: "System Reboot Required", 9: "Something New"}
    mon = KernelLogMonitor(gpu_by_pci={"00000000:2B:00.0": 3})
    c = Console()
    now_s = c.node.now
    mon.feed([f"NVRM: Xid (PCI:0000:2b:00): 154, GPU recovery action changed from 0x0 (None) "
              f"to 0x{action:x} ({names[action]})"], now_s)
    (ev,) = mon.take_events()
    assert ev.data["recovery_action"] == action
    assert ev.severity.value == ("error" if rule == "G2" else "warn" if rule else "info")
    listed = mon.xids(3, now_s)
    assert [(x.code, x.action) for x in listed] == [(154, action)]
    # Through the real codec and ingest, as a console gets it.
    t = c.with_gpu(3, xids=listed, xid_last=154, xid_last_ts=listed[0].ts)
    st = c.send(t)
    found = [(f.rule, f.text) for f in st.findings if f.rule in ("G2", "G3")]
    if rule is None:
        assert found == [] and st.verdict is Verdict.OK
        assert still_healthy(c.node.birth(), t, st.history)
        return
    assert found == [(rule, text)]
    assert st.verdict is (Verdict.FAILED if rule == "G2" else Verdict.DEGRADED)
    assert advice in recommended_action(st, c.state)
    assert not still_healthy(c.node.birth(), t, st.history)


def test_a_reboot_xid_154_asks_for_covers_an_earlier_xids_reset():
    """"XID 64, XID 154 (node reboot required)" said "reset gpu5" (a review)."""
    from fleetdeck.console.judgements import recommended_action

    c = Console()
    now = c.node.telemetry().ts
    st = c.send(c.with_gpu(3, xids=[XidSeen(code=64, ts=now - 3_000),
                                    XidSeen(code=154, ts=now - 2_000, action=2)],
                           xid_last=154, xid_last_ts=now - 2_000))
    assert texts(st, "G2") == ["XID 64, XID 154 (node reboot required)"]
    assert "reboot the node" in recommended_action(st, c.state)


@pytest.mark.parametrize("cut", [
    "154, GPU recovery action changed from 0x0 (None) to 0x",
    "154, GPU recovery action changed from 0x0 (None) to 0x2",  # "0x2" may be "0x20" cut
    "154, GPU recovery action changed from 0x0 (No",
    "154, ",
])
def test_an_xid_154_cut_before_its_action_warns_and_says_so(cut):
    """A 154 line cut before its action (a torn read, a truncated log) read as a bare 154,
    judged by nothing, though the driver may have asked for a node reboot. No known action:
    G3 as an action this console does not know, worded as the cut it is."""
    from fleetdeck.agents.real.kernel_log import KernelLogMonitor
    from fleetdeck.console.judgements import recommended_action

    mon = KernelLogMonitor(gpu_by_pci={"00000000:2B:00.0": 3})
    c = Console()
    now_s = c.node.now
    mon.feed([f"[ 812.345678] NVRM: Xid (PCI:0000:2b:00): {cut}"], now_s)
    (ev,) = mon.take_events()
    assert ev.data["recovery_action"] == ACTION_UNREAD
    assert ev.severity.value == "warn"
    assert ev.message.endswith("[its log line cut before the action]")
    listed = mon.xids(3, now_s)
    assert [(x.code, x.action) for x in listed] == [(154, ACTION_UNREAD)]
    st = c.send(c.with_gpu(3, xids=listed, xid_last=154, xid_last_ts=listed[0].ts))
    assert [(f.rule, f.text) for f in st.findings if f.rule in ("G2", "G3")] == [
        ("G3", "XID 154 (its log line cut before the action)")]
    assert st.verdict is Verdict.DEGRADED
    assert ("XID 154 on gpu3 (its log line cut before the action: 'GPU Recovery Action' in "
            "nvidia-smi -q on the node says it): until then drain it (no job on it), reset "
            "gpu3, resume") in recommended_action(st, c.state)


def test_a_cut_xid_154_line_keeps_the_drain_the_last_whole_line_asked_for():
    """A cut line cannot say the reboot was done: a drain stays; a warn does not (reviews)."""
    from fleetdeck.agents.real.kernel_log import KernelLogMonitor

    mon = KernelLogMonitor(gpu_by_pci={"00000000:2B:00.0": 3})
    line = "NVRM: Xid (PCI:0000:2b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2"
    mon.feed([line + " (Node Reboot Required)"], 1000.0)
    assert [x.action for x in mon.xids(3, 1000.0)] == [2]
    mon.feed(["NVRM: Xid (PCI:0000:2b:00): 154, GPU recovery action changed"], 1001.0)
    # Cut: the drain the last whole line asked for stays (only a reset or reboot lowers it).
    assert [x.action for x in mon.xids(3, 1001.0)] == [2]
    assert mon.take_events()[-1].message.endswith(
        "[its log line cut before the action: the earlier 'node reboot required' stands]")
    mon.feed(["NVRM: Xid (PCI:0000:2b:00): 154, GPU recovery action changed from 0x2 "
              "(Node Reboot Required) to 0x0 (None)"], 1001.5)
    assert [x.action for x in mon.xids(3, 1001.5)] == [0]
    mon.feed(["NVRM: Xid (PCI:0000:2b:00): 154, GPU recovery action changed"], 1001.7)
    assert [x.action for x in mon.xids(3, 1001.7)] == [ACTION_UNREAD]  # nothing to keep
    mon.feed([line + " (Node Reboot Required)"], 1002.0)
    assert [x.action for x in mon.xids(3, 1002.0 + 3 * 3600)] == []  # aged out, action too
    assert mon._actions[3] == {}


def test_xid_154_drain_p2p_asks_to_quiesce_p2p_not_to_reset():
    """NVIDIA's Drain P2P (action 3): terminate the processes that do peer-to-peer traffic and
    disable UVM persistence mode, then the driver states the next action. The advice said
    "reset gpu3", of a job's node and of one drained already (a fault audit)."""
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.fast import JobOnNode
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    c = Console()
    now = c.node.telemetry().ts
    t = c.with_gpu(3, xids=[XidSeen(code=154, ts=now - 2_000, action=3)], xid_last=154,
                   xid_last_ts=now - 2_000)
    st = c.send(replace(t, job=JobOnNode(id="train")))
    said = recommended_action(st, c.state)
    assert "quiesce gpu3's peer-to-peer traffic" in said and "requeue its job" in said
    assert "reset gpu3" not in said
    st.drain = DrainInfo(state=DrainState.DRAINED, reason="xid 154")
    said = recommended_action(st, c.state)
    assert said.startswith("drained: quiesce gpu3's peer-to-peer traffic") and "reset" not in said


def test_a_fault_back_after_the_node_cleared_is_said_to_recur():
    """The same XID 48 30 s after a `repair` read as a first failure, "reset gpu0 or reboot",
    the repair that had not held (a fault audit). A different fault after it is no recurrence."""
    from fleetdeck.console.judgements import recommended_action

    def dbe(c: Console, gpu: int) -> NodeState:
        now = c.node.telemetry().ts
        return c.send(c.with_gpu(gpu, xids=[XidSeen(code=48, ts=now - 1_000)], xid_last=48,
                                 xid_last_ts=now - 1_000))

    c = Console()
    st = dbe(c, 0)
    assert st.verdict is Verdict.FAILED and "came back" not in recommended_action(st)
    for _ in range(3):
        st = c.send(c.node.telemetry())  # repaired: its XIDs gone with the reboot
    assert st.verdict is Verdict.OK
    for _ in range(30):
        c.node.telemetry()  # 30 s on
    st = dbe(c, 0)
    said = recommended_action(st)
    assert st.verdict is Verdict.FAILED
    assert said.startswith("drain"), said
    assert "; the same fault (G2 gpu0) came back 3" in said and "replace gpu0 (RMA a GPU)" in said
    for _ in range(3):
        st = c.send(c.node.telemetry())
    st = dbe(c, 5)  # another GPU: not the same fault
    assert st.verdict is Verdict.FAILED and "came back" not in recommended_action(st)


def test_a_fault_back_after_its_repair_is_told_the_replacement_not_the_repair_again():
    """An XID 48 back 30 s after `repair` read "drain (no job on it), then reset gpu0 or reboot
    (double-bit ECC); the same fault … came back …: replace gpu0 (RMA a GPU) rather than repeat
    the repair", both the repair and its replacement, and drained "drained: reset gpu0 or
    reboot …, then resume; … replace gpu0" (a fault audit; an XID 79 back read "reboot the node
    (…; RMA it if it does again)" beside "it came back"). The step is the replacement, once."""
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    c = Console()
    _dbe(c, 0)
    for _ in range(3):
        c.send(c.node.telemetry())
    for _ in range(30):
        c.node.telemetry()
    st = _dbe(c, 0)
    said = recommended_action(st)
    assert said.startswith("drain (no job on it), then replace gpu0 (RMA a GPU); the same "
                           "fault (G2 gpu0) came back 3"), said
    assert said.endswith(": its repair did not hold"), said
    assert "reset gpu0" not in said and said.count("replace gpu0") == 1, said
    st.drain = DrainInfo(state=DrainState.DRAINED, reason="dbe")
    said = recommended_action(st)
    assert said.startswith("drained: replace gpu0 (RMA a GPU), then resume; the same fault"), said
    assert "reset gpu0" not in said, said


def test_a_port_fault_back_and_held_for_the_hour_is_still_told_the_replacement(monkeypatch):
    """A link that dropped again after its cable was reseated, up again and held failed by
    N2's hour, read "its links are up again, failed for the hour by N2: drain it (finish),
    check the link, then resume it …; the same fault … came back …: its repair did not hold":
    the replacement was said nowhere, its step not ``repair_step``'s (a review)."""
    from fleetdeck.console import judgements
    from fleetdeck.console.health import Finding, Severity, Verdict

    st = NodeState("gpu0001")
    st.verdict = Verdict.FAILED
    st.findings = [Finding("N2", Severity.DRAIN, "mlx5_ib3", "link_downed +1")]
    st.recurred = (1000.0, ("N2 mlx5_ib3",))
    st.changed_at = 1600.0
    monkeypatch.setattr(judgements, "held_only_since", lambda st: 0.0)
    said = judgements.recommended_action(st)
    assert said.startswith("its links are up again, failed for the hour by N2"), said
    assert said.endswith("the same fault (N2 mlx5_ib3) came back 10 min after it cleared at "
                         "00:16:40: replace mlx5_ib3's cable/transceiver or HCA rather than "
                         "repeat the repair"), said
    monkeypatch.undo()
    said = judgements.recommended_action(st)
    assert said.count("replace mlx5_ib3's") == 1 and said.endswith("did not hold"), said


def test_a_recurrence_is_in_status_json_as_a_field_beside_the_action():
    """``recurrence`` in a node's summary: a script read "the same fault came back" only in the
    action's words (a JSON audit, docs/protocol.md "status --json"); null for a first
    failure."""
    from fleetdeck.console.summary import node_summary

    c = Console()
    st = _dbe(c, 0)
    first = node_summary(st, st.last_rx or 0.0, c.state)
    assert first["recurrence"] is None and first["reconnect_loop"] is False
    for _ in range(3):
        st = c.send(c.node.telemetry())
    for _ in range(30):
        c.node.telemetry()
    st = _dbe(c, 0)
    out = node_summary(st, st.last_rx or 0.0, c.state)
    assert "came back" in out["action"]
    rec = out["recurrence"]
    assert rec is not None and rec["findings"] == ["G2 gpu0"], rec
    assert 30 <= rec["after_s"] <= 40 and isinstance(rec["cleared_at"], float), rec


def _dbe(c: Console, gpu: int) -> NodeState:
    now = c.node.telemetry().ts
    return c.send(c.with_gpu(gpu, xids=[XidSeen(code=48, ts=now - 1_000)], xid_last=48,
                             xid_last_ts=now - 1_000))


def test_a_fault_of_the_new_gpu_in_a_replaced_slot_is_no_recurrence():
    """gpu0 RMA'd and the node resumed: its new birth gives another uuid at index 0. A DBE of
    the new GPU read "the same fault (G2 gpu0) came back: replace gpu0" of a GPU an hour old
    (a review). The same uuid again is the same GPU: that recurs."""
    from fleetdeck.console.judgements import recommended_action

    c = Console()
    assert _dbe(c, 0).verdict is Verdict.FAILED
    for _ in range(3):
        st = c.send(c.node.telemetry())
    assert st.verdict is Verdict.OK
    birth = c.node.birth()
    swapped = birth.model_copy(update={"bdSeq": birth.bdSeq + 1, "gpus": [
        g.model_copy(update={"uuid": "GPU-00000000-0000-0000-0000-0000000000aa"})
        if g.index == 0 else g for g in birth.gpus]})
    c.node.agent.bd_seq = swapped.bdSeq
    c.node.feed(c.ingest, swapped, Kind.BIRTH)
    c.node.feed(c.ingest, c.node.status(), Kind.STATUS)
    for _ in range(3):
        st = c.send(c.node.telemetry())
    st = _dbe(c, 0)
    assert st.verdict is Verdict.FAILED
    assert "came back" not in recommended_action(st), recommended_action(st)
    for _ in range(3):
        st = c.send(c.node.telemetry())
    st = _dbe(c, 0)  # the new GPU again: its own fault back
    assert "the same fault (G2 gpu0) came back" in recommended_action(st)


def test_a_port_fault_back_names_its_cable_or_hca_not_a_gpu():
    from fleetdeck.console.judgements import recurrence_text

    c = Console()
    st = _dbe(c, 0)
    st.recurred = (st.changed_at - 30, ("G2 gpu0", "N5 mlx5_0:1"))
    said = recurrence_text(st)
    assert "replace gpu0 (RMA a GPU) and mlx5_0:1's cable/transceiver or HCA" in said, said


def test_a_missing_hca_back_names_the_hca_not_a_port_called_ib():
    """N1 "7/8 IB ports found (an HCA missing?)" is on component ``ib``, no port: back after
    its repair it read "replace ib's cable/transceiver or HCA" (a review)."""
    from fleetdeck.console import judgements
    from fleetdeck.console.health import Finding, Severity, Verdict

    st = NodeState("gpu0001")
    st.verdict = Verdict.FAILED
    st.findings = [Finding("N1", Severity.DRAIN, "ib", "7/8 IB ports found (an HCA missing?)")]
    st.recurred = (1000.0, ("N1 ib",))
    st.changed_at = 1030.0
    said = judgements.recurrence_text(st)
    assert said.endswith(": replace the missing HCA rather than repeat the repair"), said
    assert "ib's" not in judgements.recommended_action(st)
    st.recurred = (1000.0, ("N1 ib", "N5 mlx5_ib3:1"))
    said = judgements.recurrence_text(st)
    assert "replace mlx5_ib3:1's cable/transceiver or HCA and the missing HCA" in said, said


def test_a_driver_that_fails_to_load_again_is_no_gpu_to_rma():
    """G1 "0/8 GPUs visible; the agent's GPU reader says: NVML: init failed" again after a
    fix read "replace gpu0, …, gpu7 (RMA a GPU)" (a review): no part of its own named."""
    from fleetdeck.console.health import GPU_READER_SAYS, Finding

    st = NodeState(node_id="n1")
    g1 = Finding("G1", Severity.DRAIN, "gpu0,gpu1", f"0/2 GPUs visible; {GPU_READER_SAYS} NVML")
    for t, verdict, found in ((0.0, Verdict.FAILED, [g1]), (10.0, Verdict.OK, []),
                              (40.0, Verdict.FAILED, [g1])):
        st.findings = found
        st._note_recurrence(verdict, t)
    assert st.recurred is None


def test_a_fault_back_after_clearing_to_degraded_is_said_to_recur():
    """XID 48 on gpu0, reset, the node left degraded by a warning of another GPU (gpu3 hot),
    then the same DBE: "cleared" was failed -> ok only, so it read as a first failure, "reset
    gpu0 or reboot", the repair that had not held (a review). Cleared is the drain finding
    gone, whatever the verdict."""
    from fleetdeck.console.judgements import recommended_action

    def sample(dbe: bool) -> NodeState:
        t = c.node.telemetry()
        gpus = list(t.gpus)
        gpus[3] = replace(gpus[3], temp_c=95.0)  # G13, a warning: degraded, never ok
        if dbe:
            gpus[0] = replace(gpus[0], xids=[XidSeen(code=48, ts=t.ts - 1_000)], xid_last=48,
                              xid_last_ts=t.ts - 1_000)
        return c.send(replace(t, gpus=gpus))

    c = Console()
    st = sample(dbe=True)
    assert st.verdict is Verdict.FAILED
    for _ in range(3):
        st = sample(dbe=False)  # reset: its XIDs gone
    assert st.verdict is Verdict.DEGRADED, st.findings
    for _ in range(30):
        st = sample(dbe=False)
    st = sample(dbe=True)
    assert st.verdict is Verdict.FAILED
    assert "the same fault (G2 gpu0) came back" in recommended_action(st), recommended_action(st)


def test_a_failed_node_judged_again_builds_nothing_for_its_recurrence():
    """Each judgement of a failed node (a sample whose findings' text moved: counts, degrees)
    built the set of its drain findings and a new ``failing``, per sample on the hot path
    (bench/apply_cost.py). The same parts: the same ``failing`` object, nothing built."""
    from fleetdeck.console.health import Finding

    st = NodeState(node_id="n1")
    g2 = Finding("G2", Severity.DRAIN, "gpu0", "XID 48")
    st.findings = [g2, Finding("G4", Severity.DRAIN, "gpu0", "1 volatile DBE")]
    st._note_recurrence(Verdict.FAILED, 0.0)
    failing = st.failing
    assert failing == {"G2 gpu0", "G4 gpu0"}
    for t in range(1, 4):
        st.findings = [g2, Finding("G4", Severity.DRAIN, "gpu0", f"{t + 1} volatile DBE")]
        st._note_recurrence(Verdict.FAILED, float(t))
        assert st.failing is failing
    st.findings = [g2, Finding("N3", Severity.DRAIN, "mlx5_0:1", "symbol errors")]
    st._note_recurrence(Verdict.FAILED, 5.0)
    assert st.failing == {"G2 gpu0", "G4 gpu0", "N3 mlx5_0:1"}  # a part more: noted


def test_a_failure_naming_no_part_after_a_recurrence_cleared_is_no_recurrence():
    """A DBE back (a recurrence), repaired, then the driver failing to load (G1, no part of its
    own named): ``recurred`` outlived its fault, and the action and ``status --json`` said "the
    same fault (G2 gpu0) came back …: replace gpu0" of the driver's failure (a review)."""
    from fleetdeck.console.health import GPU_READER_SAYS, Finding
    from fleetdeck.console.judgements import recurrence

    st = NodeState(node_id="n1")
    g2 = Finding("G2", Severity.DRAIN, "gpu0", "XID 48")
    g1 = Finding("G1", Severity.DRAIN, "gpu0,gpu1", f"0/2 GPUs visible; {GPU_READER_SAYS} NVML")
    for t, verdict, found in ((0.0, Verdict.FAILED, [g2]), (10.0, Verdict.OK, []),
                              (40.0, Verdict.FAILED, [g2])):
        st.findings = found
        st._note_recurrence(verdict, t)
        st.verdict = verdict
    assert recurrence(st) is not None  # the DBE back: a recurrence
    for t, verdict, found in ((50.0, Verdict.OK, []), (100.0, Verdict.FAILED, [g1])):
        st.findings = found
        st._note_recurrence(verdict, t)
        st.verdict = verdict
    assert recurrence(st) is None, st.recurred


def test_a_fault_back_while_another_part_fails_is_said_to_recur():
    """XID 48 on gpu0, reset, then a port at half rate (N1) failed the node, and the same DBE
    came back beside it: a recurrence was judged only as a node went failed, so it read as a
    first failure, "reset gpu0 or reboot" (a review). The port is no recurrence."""
    from fleetdeck.console.judgements import recommended_action, recurrence

    def sample(dbe: bool, slow_port: bool) -> NodeState:
        t = c.node.telemetry()
        if dbe:
            gpus = list(t.gpus)
            gpus[0] = replace(gpus[0], xids=[XidSeen(code=48, ts=t.ts - 1_000)], xid_last=48,
                              xid_last_ts=t.ts - 1_000)
            t = replace(t, gpus=gpus)
        if slow_port:
            ports = list(t.ib_ports)
            ports[6] = replace(ports[6], rate_gbps=200.0)
            t = replace(t, ib_ports=ports)
        return c.send(t)

    c = Console()
    assert sample(dbe=True, slow_port=False).verdict is Verdict.FAILED
    for _ in range(3):
        st = sample(dbe=False, slow_port=False)
    assert st.verdict is Verdict.OK
    for _ in range(20):
        c.node.telemetry()
    st = sample(dbe=False, slow_port=True)
    assert st.verdict is Verdict.FAILED and recurrence(st) is None
    for _ in range(10):
        st = sample(dbe=False, slow_port=True)
    st = sample(dbe=True, slow_port=True)
    rec = recurrence(st)
    assert rec is not None and rec["findings"] == ["G2 gpu0"], (rec, st.findings)
    assert "the same fault (G2 gpu0) came back" in recommended_action(st)
    # Back 30 s after it cleared (20 s on, then 11 samples), not when the port failed the
    # node: "came back 23 s after", dated by the node's change to failed (a review).
    assert rec["after_s"] >= 30, rec


def test_a_port_fault_back_while_n2_holds_the_node_is_said_to_recur():
    """A link down, up again (N2 holds the node failed for the hour), then down again: the
    fault had cleared when the link came up, but with N2 still failing the node nothing was
    counted as cleared, and it read as a first failure, "reseat or replace its cable", the
    repair that had not held (a fault audit). Up for less than a minute, it is a flapping
    link, not a repair that failed: no recurrence."""
    from fleetdeck.console.judgements import recommended_action, recurrence

    def run(down_again_after_s: int) -> NodeState:
        c = Console()
        sim = c.node.sim

        def samples(n: int) -> NodeState:
            for _ in range(n):
                st = c.send(c.node.telemetry())
            return st

        samples(2)
        sim.link_down(3, "Polling", sim._t_own, int(c.node.now * 1000))
        st = samples(3)
        assert st.reasons == ["N1", "N2"] and recurrence(st) is None
        sim.link_restore(3, sim._t_own, int(c.node.now * 1000))
        st = samples(down_again_after_s)
        assert st.reasons == ["N2"], st.findings
        sim.link_down(3, "Polling", sim._t_own, int(c.node.now * 1000))
        return samples(3)

    st = run(90)
    assert st.verdict is Verdict.FAILED and st.reasons == ["N1", "N2"]
    rec = recurrence(st)
    assert rec is not None and rec["findings"] == ["N1 mlx5_ib3:1", "N2 mlx5_ib3:1"], rec
    assert 90 <= rec["after_s"] <= 93, rec
    said = recommended_action(st)
    assert said.startswith(
        "drain (no job on it), then replace mlx5_ib3:1's cable/transceiver or HCA; the same "
        "fault (N1 mlx5_ib3:1, N2 mlx5_ib3:1) came back 9"), said
    assert "reseat" not in said, said
    st = run(30)  # a flap: up for 30 s
    assert recurrence(st) is None and "reseat or replace" in recommended_action(st)
