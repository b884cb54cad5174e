"""A v2 delta that moves only columns no rule reads skips the rules, and judges exactly as they do.

``FleetState`` skips the health rules and the counter history of a healthy node whose new sample
rests, like its previous one, on one keyframe and moved only ``BENIGN_*`` / ``QUIET_CHECKED``
columns (console/health.py, docs/protocol.md). Checked three ways: each benign column set to
hostile values leaves the rules silent; two fleet states fed the same v2 stream through the real
``Ingest`` — one with the fast paths, one running every rule on every sample — agree on every
node at every tick over every fault the simulator injects; and the fast path is taken.
"""

from typing import Any

import msgspec
import pytest

from fleetdeck.console.health import (
    BENIGN_GPU_COLUMNS,
    BENIGN_PORT_COLUMNS,
    QUIET_CHECKED_GPU_COLUMNS,
    NodeHistory,
    evaluate,
)
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec, fast, wire2
from fleetdeck.protocol.topics import Kind, topic_for
from tests.console.test_apply_precheck import SCENARIO, THERMAL
from tests.helpers import FakeNode
from tests.sim.harness import Harness, job

U64_MAX = 2**64 - 1


def _hostile(default: Any, field_type: Any) -> list[Any]:
    text = repr(field_type)
    if "dict" in text:
        return [{"port_xmit_wait": U64_MAX, "anything": 0}]
    if "str" in text:
        return ["", "P8"]
    if "float" in text:
        return [0.0, 1e9, None]
    return [0, U64_MAX if "U64" in text or "int" in text else 1, None]


def _with(row: msgspec.Struct, wire: str, value: Any) -> msgspec.Struct:
    if "." in wire:
        group, sub = wire.split(".")
        return msgspec.structs.replace(
            row, **{group: msgspec.structs.replace(getattr(row, group), **{sub: value})})
    return msgspec.structs.replace(row, **{wire: value})


def _healthy_pair() -> tuple[Any, fast.Telemetry, fast.Telemetry]:
    node = FakeNode()
    birth = node.birth()
    first, second = (codec.decode_telemetry(codec.encode(node.telemetry())) for _ in range(2))
    return birth, first, second


@pytest.mark.parametrize("side,wire", sorted(
    [("gpus", w) for w in BENIGN_GPU_COLUMNS] + [("ib_ports", w) for w in BENIGN_PORT_COLUMNS]))
def test_no_rule_reads_a_benign_column(side: str, wire: str) -> None:
    birth, first, second = _healthy_pair()
    hist = NodeHistory()
    hist.update(first)
    assert evaluate(birth, first, hist) == []
    cls = fast.GpuSample if side == "gpus" else fast.IbPortSample
    field = next(f for f in msgspec.structs.fields(cls) if f.name == wire.split(".", maxsplit=1)[0])
    ftype = field.type
    if "." in wire:
        nested = msgspec.structs.fields(type(getattr(getattr(second, side)[0], field.name)))
        ftype = next(f.type for f in nested if f.name == wire.split(".")[1])
    for value in _hostile(None, ftype):
        rows = [_with(r, wire, value) for r in getattr(second, side)]
        t = msgspec.structs.replace(second, **{side: rows})
        h = NodeHistory()
        h.update(first)
        h.update(t)
        assert evaluate(birth, t, h) == [], (wire, value)
        assert h.settled, (wire, value)  # no rate, no window: "advance" may stand in


def test_benign_and_checked_columns_are_real_columns() -> None:
    gpu = {c.wire for c in wire2.GPU_COLUMNS}
    port = {c.wire for c in wire2.PORT_COLUMNS}
    assert gpu >= BENIGN_GPU_COLUMNS | QUIET_CHECKED_GPU_COLUMNS
    assert port >= BENIGN_PORT_COLUMNS
    # What the rules read stays out: a mistake here would hide faults.
    assert not {"present", "xids", "ecc.dbe_vol", "nvlink.links_up", "pcie_replay_total",
                "thermal_violation_ns"} & BENIGN_GPU_COLUMNS
    assert not {"state", "phys_state", "rate_gbps", "symbol_error", "link_downed",
                "rcv_errors", "carrier_losses_24h"} & BENIGN_PORT_COLUMNS


class _V2Feed:
    """The harness's samples as agents send them (wire 2: keyframes and deltas), through one
    Ingest per fleet state."""

    def __init__(self, h: Harness, states: list[FleetState],
                 lazy: list[bool] | None = None) -> None:
        self.h = h
        self.states = states
        self.ingests = [Ingest("t", lazy=lz) for lz in (lazy or [True] * len(states))]
        self.encoders: dict[str, wire2.TelemetryEncoder] = {}
        for name, birth in h.births.items():
            self._handle(topic_for("t", Kind.BIRTH, name), codec.encode(birth))
        self._apply()

    def _handle(self, topic: str, payload: bytes) -> None:
        for ing in self.ingests:
            ing.handle(topic, payload, self.h.now)

    def _apply(self) -> None:
        for ing, state in zip(self.ingests, self.states, strict=True):
            state.apply(ing.take_batch(), self.h.now)

    def tick(self) -> None:
        for name, t in self.h.tick().items():
            tel = codec.decode_telemetry(codec.encode(t))
            enc = self.encoders.setdefault(name, wire2.TelemetryEncoder(keyframe_every_s=30))
            self._handle(topic_for("t", Kind.TELEMETRY, name), enc.encode(tel, self.h.now))
        self._apply()


# SCENARIO puts a fault on 15 of its 16 nodes (few quiet samples); THERMAL on 2.
@pytest.mark.parametrize("actions,ticks,quiet", [(SCENARIO, 130, 60), (THERMAL, 100, 900)],
                         ids=["every-fault", "thermal"])
def test_quiet_deltas_judge_exactly_as_the_full_rules(actions: list[Any], ticks: int,
                                                      quiet: int) -> None:
    h = Harness(nodes=16, actions=actions)
    quick, full = FleetState("t"), FleetState("t")
    full.precheck = False
    # The quick state takes quiet samples unbuilt (wire2.Pending); the full one builds every
    # sample's rows and runs every rule on it.
    feed = _V2Feed(h, [quick, full], lazy=[True, False])
    rules: set[str] = set()
    unbuilt = 0
    for _ in range(ticks):
        feed.tick()
        for name, a in quick.nodes.items():
            b = full.nodes[name]
            if type(a.sample) is wire2.Pending and not a.sample.built:
                unbuilt += 1
            # What a view reads of the sample is the sample the eager path built.
            assert a.telemetry == b.telemetry, (name, h.now)
            assert (a.verdict, a.findings, a.liveness, a.shape, a.shape_rev) == (
                b.verdict, b.findings, b.liveness, b.shape, b.shape_rev), (name, h.now)
            # Counts carried over a quiet sample equal counting it.
            assert (a.gpus_present, a.ib_ports_up) == (b.gpus_present, b.ib_ports_up), name
            rules |= {f.rule for f in b.findings}
        assert quick.take_transitions() == full.take_transitions()
    assert full.quiet_applied == 0
    # Not vacuous: faults fired, and most healthy samples skipped the rules.
    assert len(rules) >= (8 if actions is SCENARIO else 2), rules
    assert quick.quiet_applied > quiet, quick.quiet_applied
    assert unbuilt > quiet // 2, unbuilt  # the rules and the state built no rows for these


def test_a_healthy_training_fleet_skips_the_rules_between_keyframes() -> None:
    h = Harness(nodes=8, actions=[job("t", nodes=8, steps=100_000)])
    state = FleetState("t")
    feed = _V2Feed(h, [state])
    for _ in range(40):
        feed.tick()
    # 8 nodes x 40 s: the first sample, and each keyframe and the delta after it, run the rules.
    assert state.quiet_applied >= 8 * 40 - 8 * 6, state.quiet_applied
    assert all(st.findings == [] for st in state.nodes.values())


def test_a_new_birth_runs_the_rules_again() -> None:
    h = Harness(nodes=2, actions=[])
    state = FleetState("t")
    feed = _V2Feed(h, [state])
    for _ in range(3):
        feed.tick()
    quiet = state.quiet_applied
    name = next(iter(h.births))
    assert state.nodes[name].basis is not None
    feed._handle(topic_for("t", Kind.BIRTH, name), codec.encode(h.births[name]))
    feed._apply()
    assert state.nodes[name].basis is None
    feed.tick()
    assert state.quiet_applied == quiet + 1  # only the other node's delta


@pytest.mark.parametrize("wire,value,rule", [
    ("temp_c", 95.0, "G13"),             # crosses the warning threshold on a quiet delta
    ("temp_c", 87.0, "G13"),             # exactly at it (still_quiet's columns in C: >=)
    ("clock_event_reasons", 0x1 | 0x8, "G12"),  # an idle bit beside HW slowdown
    ("clock_event_reasons", 0x40, "G12"),  # HW thermal slowdown bit
])
def test_a_checked_column_crossing_its_threshold_is_found(wire: str, value: Any,
                                                          rule: str) -> None:
    node = FakeNode()
    ing, state = Ingest("test"), FleetState("test")
    node.feed(ing, node.birth(), Kind.BIRTH)
    enc = wire2.TelemetryEncoder(keyframe_every_s=30)
    for k in range(4):
        tel = codec.decode_telemetry(codec.encode(node.telemetry()))
        if k == 3:
            gpus = list(tel.gpus)
            gpus[2] = _with(gpus[2], wire, value)  # type: ignore[assignment]
            tel = msgspec.structs.replace(tel, gpus=gpus)
        payload = enc.encode(tel, node.now)
        assert k == 0 or not wire2.decode(payload).keyframe
        ing.handle(node.topic(Kind.TELEMETRY), payload, node.now)
        state.apply(ing.take_batch(), node.now)
        if k == 2:
            assert state.quiet_applied >= 1  # the path under test was taken before
    assert rule in {f.rule for f in state.nodes[node.node_id].findings}


def test_sliced_ticks_carry_each_sample_with_its_own_basis() -> None:
    from fleetdeck.console.session import ConsoleSession

    t0 = 1_000_000.0
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: t0)
    session.apply_max_nodes = 50
    nodes = [FakeNode(f"gpu{i:04d}", t0=t0) for i in range(120)]
    encoders = [wire2.TelemetryEncoder(keyframe_every_s=5) for _ in nodes]
    for n in nodes:
        n.feed(ingest, n.birth(), Kind.BIRTH)
    session.tick(t0)
    sent: dict[str, wire2.TelemetryV2] = {}
    for k in range(12):
        for n, enc in zip(nodes, encoders, strict=True):
            payload = enc.encode(codec.decode_telemetry(codec.encode(n.telemetry())), n.now)
            sent[n.node_id] = wire2.decode(payload)
            ingest.handle(n.topic(Kind.TELEMETRY), payload, n.now)
        session.tick(t0 + k + 1)  # 50 of 120 applied, the rest carried (some superseded)
    while session.tick(t0 + 20).backlog:
        pass
    state = session.state
    for n in nodes:
        st, msg = state.nodes[n.node_id], sent[n.node_id]
        assert st.telemetry is not None and st.telemetry.seq == msg.seq
        assert st.basis is not None and st.basis[:2] == (msg.bdSeq, msg.kf)
    assert state.quiet_applied > 100
    assert all(st.findings == [] for st in state.nodes.values())


@pytest.mark.parametrize("phys", ["LinkUp", None, "Polling"])
def test_a_quiet_samples_counts_come_from_its_columns(phys: str | None) -> None:
    """GPUs present and IB ports up of a quiet delta's sample (a Pending) are counted from its
    columns, the keyframe's absent GPU and down port included, as from its rows, and the rows
    are not built for it (the fleet totals read every node)."""
    from fleetdeck.console.state import NodeState

    node = FakeNode()
    enc = wire2.TelemetryEncoder(keyframe_every_s=30)
    ing = Ingest("test")

    def odd(tel: fast.Telemetry) -> fast.Telemetry:
        gpus, ports = list(tel.gpus), list(tel.ib_ports)
        gpus[3] = msgspec.structs.replace(gpus[3], present=False)
        ports[2] = msgspec.structs.replace(ports[2], state="DOWN")
        ports[5] = msgspec.structs.replace(ports[5], phys_state=phys)
        return msgspec.structs.replace(tel, gpus=gpus, ib_ports=ports)

    samples = []
    for _ in range(3):
        tel = odd(codec.decode_telemetry(codec.encode(node.telemetry())))
        ing.handle(node.topic(Kind.TELEMETRY), enc.encode(tel, node.now), node.now)
        samples.append(ing.take_batch().telemetry[node.node_id][1])
    pending = samples[-1]
    assert type(pending) is wire2.Pending
    lazy = NodeState(node.node_id, sample=pending)
    up = 7 if phys in ("LinkUp", None) else 6
    assert (lazy.gpus_present, lazy.ib_ports_up) == (7, up)
    assert not pending.built
    eager = NodeState(node.node_id, sample=pending.full())
    assert (eager.gpus_present, eager.ib_ports_up) == (7, up)
