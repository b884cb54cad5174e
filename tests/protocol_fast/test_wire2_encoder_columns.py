"""The v2 encoder's columns are made in C (``wire2._table``, ``wire2._changed``) for the
simulator's CPU (docs/performance.md, "Simulator capacity"): every payload must be the bytes
the field-by-field encoder it replaced gave, kept here as the reference, through faults that
move the nested columns, keyframes and row counts that change."""

from typing import Any

import msgspec
import pytest
from msgspec.structs import astuple, replace

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.spec import parse_action
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import fast, wire2

_NESTED = {"ecc", "row_remap", "nvlink"}
_GPU_FIELDS = tuple(f.name for f in msgspec.structs.fields(fast.GpuSample))
_PORT_FIELDS = tuple(f.name for f in msgspec.structs.fields(fast.IbPortSample))


def reference_table(rows: Any, fields: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Columns as the encoder made them field by field before (nested ones expanded)."""
    out: list[tuple[Any, ...]] = []
    if not rows:
        return out
    for name, col in zip(fields, zip(*map(astuple, rows), strict=True), strict=True):
        if name in _NESTED:
            out.extend(zip(*map(astuple, col), strict=True))
        else:
            out.append(col)
    return out


class ReferenceEncoder(wire2.TelemetryEncoder):
    """The delta as the encoder built it before: a comprehension over every column."""

    def encode(self, tel: fast.Telemetry, now: float) -> bytes:
        kf = self._kf
        payload = super().encode(tel, now)  # keeps the keyframe and its timing
        if kf is None or self._kf is not kf:
            return payload  # a keyframe: made as before (only its columns are checked below)
        gpus = reference_table(tel.gpus, _GPU_FIELDS)
        ports = reference_table(tel.ib_ports, _PORT_FIELDS)
        body: dict[str, Any] = {"v": 2, "node": tel.node, "seq": tel.seq, "bdSeq": tel.bdSeq,
                                "ts": tel.ts, "kf": kf.seq}
        if tel.interval_s != kf.interval_s:
            body["interval_s"] = tel.interval_s
        if tel.agent != kf.agent:
            body["agent"] = tel.agent
        if tel.job != kf.job:
            body["job"] = tel.job
        if tel.host != kf.host:
            body["host"] = tel.host
        kf_gpus = [tuple(c) for c in kf.gpus]
        kf_ports = [tuple(c) for c in kf.ports]
        if gpus and (g := {c.wire: v for c, v, k in zip(wire2.GPU_COLUMNS, gpus, kf_gpus,
                                                          strict=True) if v != k}):
            body["g"] = g
        if ports and (p := {c.wire: v for c, v, k in zip(wire2.PORT_COLUMNS, ports, kf_ports,
                                                           strict=True) if v != k}):
            body["p"] = p
        return msgspec.json.encode(body)


def faulted_world() -> tuple[SimWorld, list[NodeAgent]]:
    world = SimWorld(WorldOptions(nodes=12, background_jobs=2, seed=5,
                                  epoch_ms=1_700_000_000_000))
    agents = []
    for node in world.nodes:
        agent = NodeAgent(cluster="t", node_id=node.node_id, source=node,
                          url=BrokerURL("127.0.0.1", 1),
                          clock=lambda: world.epoch_ms / 1000 + world.t)
        agents.append(agent)
    names = [n.node_id for n in world.nodes]
    for raw in (
        {"fault": "thermal", "node": names[1], "gpu": 2, "temp": 95, "at": 3},
        {"fault": "xid", "node": names[2], "gpu": 1, "code": 79, "at": 4},
        {"fault": "ib_flap", "node": names[3], "port": 2, "count": 3, "at": 2},
        {"fault": "symbol_storm", "node": names[4], "port": 1, "at": 2},
        {"fault": "ecc_dbe", "node": names[5], "gpu": 3, "at": 5},
        {"fault": "pcie_replay", "node": names[6], "gpu": 0, "per_min": 50, "at": 1},
        {"fault": "nvlink", "node": names[7], "gpu": 4, "links": 2, "at": 6},
        {"fault": "link_down", "node": names[8], "port": 5, "at": 3},
    ):
        world.inject(parse_action(dict(raw), default_at=0.0))
    return world, agents


def test_every_payload_of_a_faulted_fleet_is_the_field_by_field_encoders() -> None:
    world, agents = faulted_world()
    ours = [wire2.TelemetryEncoder(10.0) for _ in agents]
    theirs = [ReferenceEncoder(10.0) for _ in agents]
    deltas = 0
    for _ in range(40):
        world.step()
        for agent, mine, ref in zip(agents, ours, theirs, strict=True):
            tel = agent.telemetry()
            now = agent.clock()
            kf = ref._kf
            want = ref.encode(tel, now)
            assert mine.encode(tel, now) == want, agent.node_id
            if ref._kf is kf:
                deltas += 1
            else:  # a keyframe: its columns are the reference's
                assert mine._kf is not None and ref._kf is not None
                assert mine._kf.gpus == reference_table(tel.gpus, _GPU_FIELDS)
                assert mine._kf.ports == reference_table(tel.ib_ports, _PORT_FIELDS)
    assert deltas > 400
    assert sum(e.keyframes for e in ours) == sum(e.keyframes for e in theirs) > 12


def test_nested_columns_a_delta_moves_and_a_row_count_change_match_the_reference() -> None:
    world, agents = faulted_world()
    agent = agents[0]
    mine, ref = wire2.TelemetryEncoder(3600), ReferenceEncoder(3600)
    for k in range(12):
        world.step()
        tel = agent.telemetry()
        gpus = list(tel.gpus)
        if k >= 2:  # ECC, row remap and NVLink move on two GPUs: nested columns in the delta
            for i in (0, 6):
                g = gpus[i]
                gpus[i] = replace(g, ecc=replace(g.ecc, dbe_vol=k),
                                  row_remap=replace(g.row_remap, pending=k >= 5),
                                  nvlink=replace(g.nvlink, replay=k * 3))
        if k >= 8:  # a GPU drops off: fewer rows, a keyframe
            gpus = gpus[:7]
        tel = replace(tel, gpus=tuple(gpus))
        want = ref.encode(tel, agent.clock())
        got = mine.encode(tel, agent.clock())
        assert got == want, k
        if 2 <= k < 8:
            assert b'"ecc.dbe_vol"' in got and b'"nvlink.replay"' in got
    assert mine.keyframes == ref.keyframes == 2


def test_rows_given_as_columns_encode_as_the_rows_in_both_wires() -> None:
    """``encode_columns`` (the simulator's columns, NodeAgent.columns) gives ``encode``'s
    bytes, v1 included (rows made back from the columns)."""
    for wire in (1, 2):
        world, agents = faulted_world()
        rows = [wire2.TelemetryEncoder(10.0, wire) for _ in agents]
        cols = [wire2.TelemetryEncoder(10.0, wire) for _ in agents]
        for _ in range(25):
            world.step()
            for agent, by_rows, by_cols in zip(agents, rows, cols, strict=True):
                agent.columns = False
                tel = agent.telemetry()
                head = replace(tel, gpus=(), ib_ports=())
                assert by_cols.encode_columns(
                    head, wire2.columns_of(tel.gpus), wire2.columns_of(tel.ib_ports),
                    agent.clock()) == by_rows.encode(tel, agent.clock()), (wire, agent.node_id)


def test_columns_of_another_width_are_refused() -> None:
    world, agents = faulted_world()
    world.step()
    tel = agents[0].telemetry()
    enc = wire2.TelemetryEncoder(3600)
    gpus, ports = wire2.columns_of(tel.gpus), wire2.columns_of(tel.ib_ports)
    enc.encode_columns(tel, gpus, ports, 0.0)  # the keyframe
    with pytest.raises(ValueError):
        enc.encode_columns(tel, gpus[:-1], ports, 1.0)  # a field's column left out


def test_a_refused_keyframe_leaves_the_encoder_as_it_was() -> None:
    """Columns of another width for a keyframe raised, but the keyframe was held: every later
    sample, well formed, raised too until the next keyframe (a review)."""
    world, agents = faulted_world()
    world.step()
    tel = agents[0].telemetry()
    gpus, ports = wire2.columns_of(tel.gpus), wire2.columns_of(tel.ib_ports)
    enc = wire2.TelemetryEncoder(3600)
    with pytest.raises(ValueError):
        enc.encode_columns(tel, gpus[:-1], ports, 0.0)
    assert enc.keyframes == 0
    fresh = wire2.TelemetryEncoder(3600)
    assert enc.encode_columns(tel, gpus, ports, 1.0) == fresh.encode_columns(tel, gpus, ports,
                                                                             1.0)
    assert enc.keyframes == 1
