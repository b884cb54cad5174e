"""Telemetry wire format v2: keyframes and deltas of a real simulated node, through the real
encoder, decoder, reassembler and console ingest (docs/protocol.md, "Telemetry v2")."""

import json
import random

import msgspec
import pytest
from msgspec.structs import astuple, replace

from fleetdeck.console.ingest import KEYFRAME_ASK_EVERY_S, Ingest
from fleetdeck.protocol import codec, fast, messages, wire2
from fleetdeck.protocol.codec import DecodeError
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode


def stream(n: int, keyframe_every_s: float = 10.0,
           node: FakeNode | None = None) -> list[tuple[fast.Telemetry, bytes]]:
    node = node or FakeNode()
    enc = wire2.TelemetryEncoder(keyframe_every_s)
    out = []
    for _ in range(n):
        tel = node.telemetry()
        out.append((tel, enc.encode(tel, node.now)))
    return out


def kinds(payloads: list[bytes]) -> str:
    return "".join("K" if json.loads(p)["kf"] == json.loads(p)["seq"] else "d" for p in payloads)


def test_every_sample_comes_back_exactly() -> None:
    sent = stream(40)
    assert kinds([p for _, p in sent]) == ("K" + "d" * 9) * 4
    r = wire2.Reassembler()
    for tel, payload in sent:
        assert r.apply(wire2.decode(payload), payload) == tel
    # A delta is a fraction of a keyframe, which is a fraction of v1.
    v1 = len(codec.encode(sent[-1][0]))
    assert len(sent[-1][1]) < len(sent[-10][1]) < v1


def test_lost_deltas_lose_nothing_else() -> None:
    sent = stream(60)
    rng = random.Random(7)
    r = wire2.Reassembler()
    for tel, payload in sent:
        msg = wire2.decode(payload)
        if not msg.keyframe and rng.random() < 0.5:
            continue  # lost on the way
        assert r.apply(msg, payload) == tel


def test_a_delta_needs_its_keyframe() -> None:
    sent = stream(12)
    r = wire2.Reassembler()
    tel, payload = sent[3]
    assert r.apply(wire2.decode(payload), payload) is None  # started late
    assert r.holds(tel.node) is None
    for tel, payload in sent[10:]:  # the next keyframe, then its deltas apply
        assert r.apply(wire2.decode(payload), payload) == tel
    assert r.holds(tel.node) == (tel.bdSeq, sent[10][0].seq)
    old = sent[5][1]
    assert r.apply(wire2.decode(old), old) is None  # a delta of an older keyframe


def test_keyframe_on_request_on_a_new_session_and_when_the_shape_changes() -> None:
    node = FakeNode()
    enc = wire2.TelemetryEncoder(3600)
    out = [enc.encode(node.telemetry(), node.now) for _ in range(3)]
    enc.request_keyframe()
    out.append(enc.encode(node.telemetry(), node.now))
    out.append(enc.encode(node.telemetry(), node.now))
    node.agent.bd_seq += 1  # a new MQTT session
    out.append(enc.encode(node.telemetry(), node.now))
    out.append(enc.encode(node.telemetry(), node.now))
    tel = node.telemetry()
    out.append(enc.encode(replace(tel, gpus=tel.gpus[:7]), node.now))  # a GPU fell off the bus
    assert kinds(out) == "KddKdKdK"
    assert (enc.keyframes, enc.deltas) == (4, 4)


def test_wire_1_is_plain_v1_json() -> None:
    node = FakeNode()
    enc = wire2.TelemetryEncoder(wire=1)
    tel = node.telemetry()
    payload = enc.encode(tel, node.now)
    assert fast.to_dict(codec.decode_telemetry(payload)) == codec.decode(
        messages.Telemetry, payload).model_dump() == fast.to_dict(tel)


def test_a_v2_payload_spelled_differently_still_decodes() -> None:
    tel, payload = stream(1)[0]
    spaced = json.dumps(json.loads(payload), indent=1).encode()
    msg = wire2.decode_telemetry(spaced)
    assert isinstance(msg, wire2.TelemetryV2)
    assert wire2.Reassembler().apply(msg, spaced) == tel


def _reason(payload: bytes, r: wire2.Reassembler | None = None) -> str:
    with pytest.raises(DecodeError) as err:
        msg = wire2.decode_telemetry(payload)
        assert isinstance(msg, wire2.TelemetryV2)
        (r or wire2.Reassembler()).apply(msg, payload)
    return f"{err.value.reason}: {err.value.detail}"


def test_malformed_v2_is_refused_with_a_reason() -> None:
    sent = stream(3)
    kf = json.loads(sent[0][1])
    delta = json.loads(sent[1][1])
    r = wire2.Reassembler()
    r.apply(wire2.decode(sent[0][1]), sent[0][1])
    held = r.holds("gpu0001")

    def bad(base: dict, **change: object) -> bytes:
        return json.dumps({**base, **change}).encode()

    short = {**delta["g"], "temp_c": delta["g"]["temp_c"][:7]}
    assert _reason(bad(delta, g=short), r) == (
        "invalid: g.temp_c: 7 values, expected 8 (one per row)")
    hot = {**kf["g"], "temp_c": [300.0] * 8}
    assert _reason(bad(kf, g=hot)).startswith("invalid: g.temp_c.0: Expected `float` <= 250")
    assert _reason(bad(delta, kf=delta["seq"] + 1)) == (
        f"invalid: kf: keyframe {delta['seq'] + 1} is after seq {delta['seq']}")
    no_index = {k: v for k, v in kf["g"].items() if k != "index"}
    assert _reason(bad(kf, g=no_index)) == "invalid: g.index: a keyframe needs it"
    uneven = {**kf["p"], "dev": kf["p"]["dev"][:6]}
    assert _reason(bad(kf, p=uneven)).startswith("invalid: p.")
    long = {k: v * 9 for k, v in kf["g"].items()}
    assert _reason(bad(kf, g=long)).startswith("invalid: g.")  # 72 rows > 64
    # An empty column and a short port column of a delta (checked in C, worded as before).
    assert _reason(bad(delta, g={**delta["g"], "util_pct": []}), r) == (
        "invalid: g.util_pct: 0 values, expected 8 (one per row)")
    short_p = {**delta["p"], "xmit_Bps": delta["p"]["xmit_Bps"][:3]}
    assert _reason(bad(delta, p=short_p), r) == (
        "invalid: p.xmit_Bps: 3 values, expected 8 (one per row)")
    huge = {**delta["g"], "ecc.dbe_vol": [2**64] * 8}
    assert _reason(bad(delta, g=huge), r).startswith("invalid: gpus.0.ecc.dbe_vol: Input should")
    assert _reason(bad(delta, g={"util_pct": ["high"] * 8}), r).startswith(
        "invalid: g.util_pct.0: Expected `float | null`")
    assert _reason(b'{"v":2,') == "not_json: payload is not valid JSON"
    assert _reason(b'{"v":2,' + b" " * 70_000 + b"}").startswith("oversize")
    assert r.holds("gpu0001") == held  # nothing kept from a refused message


# --- the console's ingest ----------------------------------------------------------------------


def test_ingest_merges_v2_and_reads_v1_beside_it() -> None:
    v2, v1 = FakeNode("gpu0001"), FakeNode("gpu0002")
    v1.agent.encoder = wire2.TelemetryEncoder(wire=1)
    ingest = Ingest(v2.cluster)
    for _ in range(15):
        for node in (v2, v1):
            tel = node.telemetry()
            ingest.handle(node.topic(Kind.TELEMETRY), node.agent.encoder.encode(tel, node.now),
                          node.now)
            batch = ingest.take_batch()
            assert batch.telemetry[node.node_id][1] == tel
    assert ingest.malformed.total == 0 and ingest.keyframe_missing == 0


def test_ingest_asks_for_a_missing_keyframe_at_most_every_few_seconds() -> None:
    node = FakeNode()
    ingest = Ingest(node.cluster)
    node.agent.telemetry_payload()  # the keyframe this console never saw
    for _ in range(int(KEYFRAME_ASK_EVERY_S) + 2):
        node.now += 1.0
        ingest.handle(node.topic(Kind.TELEMETRY), node.agent.telemetry_payload(), node.now)
        asked = ingest.keyframe_wanted.pop(node.node_id, None)
        if asked:
            assert asked.startswith("no keyframe 1 of session")
            node.agent.encoder.request_keyframe()  # what op keyframe does
    assert ingest.keyframe_missing == 1  # the one after the ask was a keyframe
    assert ingest.take_batch().telemetry[node.node_id][1].seq == int(KEYFRAME_ASK_EVERY_S) + 3
    assert ingest.malformed.total == 0


def test_ingest_counts_malformed_v2_by_reason_and_topic_and_keeps_nothing() -> None:
    node = FakeNode()
    ingest = Ingest(node.cluster)
    topic = node.topic(Kind.TELEMETRY)
    ingest.handle(topic, node.agent.telemetry_payload(), node.now)
    good = ingest.take_batch().telemetry[node.node_id][1]
    delta = json.loads(node.agent.telemetry_payload())
    delta["g"]["util_pct"] = delta["g"].get("util_pct", [1.0] * 8)[:3]
    ingest.handle(topic, json.dumps(delta).encode(), node.now)
    ingest.handle(topic, json.dumps({**delta, "node": "gpu0002"}).encode(), node.now)
    ingest.handle(topic, json.dumps({**delta, "kf": delta["seq"] + 5}).encode(), node.now)
    assert dict(ingest.malformed.by_reason) == {"invalid": 2, "mismatch": 1}
    assert dict(ingest.malformed.by_topic) == {topic: 3}
    assert not ingest.take_batch().telemetry
    assert ingest.reassembler.holds(node.node_id) == (good.bdSeq, good.seq)


def test_merge_is_cheap_structs() -> None:
    (_, first), (tel, payload) = stream(2)
    r = wire2.Reassembler()
    keyframe = r.apply(wire2.decode(first), first)
    merged = r.apply(wire2.decode(payload), payload)
    assert keyframe is not None and merged is not None
    assert all(type(g) is fast.GpuSample for g in merged.gpus)
    # Nested Structs that did not change are the keyframe's own objects, not copies.
    assert merged.gpus[0].row_remap is keyframe.gpus[0].row_remap
    assert merged.ib_ports[0].dev is keyframe.ib_ports[0].dev
    assert msgspec.json.encode(merged) == msgspec.json.encode(tel)


def test_nested_columns_that_move_come_back_exactly() -> None:
    node = FakeNode()
    enc = wire2.TelemetryEncoder(3600)
    r = wire2.Reassembler()
    for k in range(6):
        tel = node.telemetry()
        gpus = list(tel.gpus)
        if k >= 2:  # GPU 3 logs double-bit errors, then a remap is pending
            g = gpus[3]
            gpus[3] = replace(g, ecc=replace(g.ecc, dbe_vol=k), row_remap=replace(
                g.row_remap, pending=k >= 4), xids=[fast.XidSeen(48, tel.ts - 10)])
        tel = replace(tel, gpus=tuple(gpus))
        payload = enc.encode(tel, node.now)
        if k >= 2:
            assert b'"ecc.dbe_vol"' in payload
        assert r.apply(wire2.decode(payload), payload) == tel
    assert enc.keyframes == 1


QUIET = dict(quiet_gpu=frozenset({"util_pct", "power_w", "temp_c", "energy_j", "sm_clock_mhz",
                                  "mem_clock_mhz", "mem_util_pct", "clock_event_reasons",
                                  "mem_temp_c"}),
             quiet_port=frozenset({"xmit_bytes_total", "rcv_bytes_total", "xmit_Bps", "rcv_Bps",
                                   "xmit_pkts_total", "rcv_pkts_total"}))


def test_a_lazy_quiet_delta_is_the_same_sample_and_the_same_columns() -> None:
    """``Reassembler(lazy=True)``: a quiet delta is a Pending whose header, every GPU and port
    column and built sample equal what the eager merge gives, row by row (issue 12)."""
    eager, lazy = wire2.Reassembler(**QUIET), wire2.Reassembler(**QUIET, lazy=True)
    pending = 0
    for tel, payload in stream(25):
        msg = wire2.decode(payload)
        want, got = eager.apply(msg, payload), lazy.apply(msg, payload)
        assert want == tel and eager.basis == lazy.basis
        assert type(want) is fast.Telemetry
        if type(got) is not wire2.Pending:
            assert got == tel
            continue
        pending += 1
        assert lazy.basis is not None and lazy.basis[2]  # only quiet deltas wait
        assert (got.node, got.seq, got.bdSeq, got.ts, got.interval_s, got.agent, got.job,
                got.host) == (tel.node, tel.seq, tel.bdSeq, tel.ts, tel.interval_s, tel.agent,
                              tel.job, tel.host)
        assert wire2.rows_of(got) == (len(tel.gpus), len(tel.ib_ports))
        for c in wire2.GPU_COLUMNS:
            assert list(got.gpu_column(c.wire)) == [wire2._value(g, c) for g in tel.gpus], c
        for c in wire2.PORT_COLUMNS:
            assert list(got.port_column(c.wire)) == [wire2._value(p, c) for p in tel.ib_ports]
        assert not got.built
        assert got.full() == tel and got.built and got.full() is got.full()
        assert got == tel and wire2.full(got) is got.full()
        # After the build the columns come from the rows, and still agree.
        assert list(got.gpu_column("util_pct")) == [g.util_pct for g in tel.gpus]
    assert pending >= 15  # FakeNode's healthy samples move only quiet columns


def test_a_lazy_reassembler_builds_what_it_cannot_check_without_rows() -> None:
    """A delta that is not quiet, or whose payload may hold an integer above 2**64-1, comes
    back built (and checked), as without ``lazy``."""
    (_, first), (tel, payload) = stream(2)
    loud = wire2.Reassembler(lazy=True)  # nothing is quiet: every delta is built
    loud.apply(wire2.decode(first), first)
    assert type(loud.apply(wire2.decode(payload), payload)) is fast.Telemetry
    r = wire2.Reassembler(**QUIET, lazy=True)
    r.apply(wire2.decode(first), first)
    msg = wire2.decode(payload)
    assert type(r.apply(msg, payload)) is wire2.Pending
    # The same delta with a u64 above 2**64-1 in a quiet column: built, checked and refused.
    huge = json.loads(payload)
    assert "xmit_bytes_total" in huge["p"]
    huge["p"]["xmit_bytes_total"] = [2**64 + 5] * len(tel.ib_ports)
    raw = json.dumps(huge).encode()
    with pytest.raises(DecodeError, match="xmit_bytes_total"):
        r.apply(wire2.decode(raw), raw)


@pytest.mark.parametrize("loud", [(), ("temp_c",), ("temp_c", "util_pct")])
def test_a_delta_is_quiet_unless_it_moves_a_loud_column(loud: tuple[str, ...]) -> None:
    """The basis says quiet exactly when no column outside the quiet sets is in the delta,
    with none, one or several loud GPU columns (the delta's loud columns are picked out of its
    column tuple)."""
    quiet_gpu = frozenset(c.wire for c in wire2.GPU_COLUMNS) - set(loud)
    quiet_port = frozenset(c.wire for c in wire2.PORT_COLUMNS)
    r = wire2.Reassembler(quiet_gpu=quiet_gpu, quiet_port=quiet_port, lazy=True)
    sent = stream(2)
    r.apply(wire2.decode(sent[0][1]), sent[0][1])
    delta = json.loads(sent[1][1])
    for moved in ("util_pct", "temp_c", "power_w"):
        body = {**delta, "g": {moved: [1.0] * 8}}
        raw = json.dumps(body).encode()
        got = r.apply(wire2.decode(raw), raw)
        assert r.basis is not None and r.basis[2] is (moved not in loud), moved
        assert (type(got) is wire2.Pending) is (moved not in loud)
        assert getattr(wire2.full(got).gpus[0], moved) == 1.0


def test_held_keyframes_share_their_constant_columns() -> None:
    """Columns with one value on every row are one tuple for all nodes' held keyframes (issue 12:
    19 KB of a held keyframe per node was mostly such columns); the samples are unchanged."""
    r = wire2.Reassembler()
    sent = []
    for name in ("gpu0001", "gpu0002"):
        (tel, payload), = stream(1, node=FakeNode(name))
        assert r.apply(wire2.decode(payload), payload) == tel
        sent.append(tel)
    a, b = (r._held[t.node] for t in sent)
    at, bt = astuple(a.ports.top), astuple(b.ports.top)
    shared = [i for i, (x, y) in enumerate(zip(at, bt, strict=True)) if x is y]
    assert len(shared) >= len(at) // 2, shared
    ag, bg = wire2._top(a.gpus, 0), wire2._top(b.gpus, 0)
    assert ag is bg and ag == tuple(range(8))  # index 0..7: equal on every node, interned
    assert a.gpus.nested is b.gpus.nested  # ECC, row remap, NVLink: equal, one dict


def test_a_node_whose_nested_columns_differ_holds_its_own() -> None:
    """Interning by value gives a node its own held ECC columns when they differ from the
    others'."""
    r = wire2.Reassembler()
    (_tel, payload), = stream(1, node=FakeNode("gpu0001"))
    r.apply(wire2.decode(payload), payload)
    body = json.loads(stream(1, node=FakeNode("gpu0002"))[0][1])
    body["g"]["ecc.sbe_vol"] = [5, 0, 0, 0, 0, 0, 0, 0]
    raw = json.dumps(body).encode()
    got = wire2.full(r.apply(wire2.decode(raw), raw))
    assert got.gpus[0].ecc.sbe_vol == 5 and got.gpus[1].ecc.sbe_vol == 0
    a, b = r._held["gpu0001"], r._held["gpu0002"]
    assert a.gpus.nested is not b.gpus.nested
    # Nor is it kept once its table is replaced: a node whose counters grow made a new entry
    # at every keyframe (a review).
    assert not any(v is b.gpus.nested for v in wire2._INTERNED.values())
    (again, payload), = stream(1, node=FakeNode("gpu0001"))
    assert wire2.full(r.apply(wire2.decode(payload), payload)) == again


def test_sharing_keeps_types_and_signs_apart() -> None:
    for col, other in (([1, 1], [1.0, 1.0]), ([1, 1], [True, True]), ([0.0, 0.0], [-0.0, -0.0]),
                       ([None, None], [None])):
        a, b = wire2._share(col), wire2._share(other)
        assert list(a) == col and list(b) == other
        assert a is not b
        assert [type(x) for x in b] == [type(x) for x in other]
    assert str(wire2._share([-0.0, -0.0])[0]) == "-0.0"
    mixed = [1, 1.0]
    assert wire2._share(mixed) is mixed  # not constant by type: kept as it came
    assert wire2._share([[1], [1]]) == [[1], [1]]  # lists are not shared (mutable)


def test_columns_of_one_type_share_without_the_type_check() -> None:
    """A column whose values decode as one scalar type (strict decoding: ``float | None`` never
    holds an int) is shared without comparing types; the held keyframe's columns keep the types
    the payload decoded to, and a column that could mix types is checked as before."""
    from typing import Annotated

    assert wire2._one_scalar_type(Annotated[int, msgspec.Meta(ge=0)] | None)
    assert wire2._one_scalar_type(bool | None) and wire2._one_scalar_type(str)
    assert not wire2._one_scalar_type(int | float)
    assert not wire2._one_scalar_type(list[int]) and not wire2._one_scalar_type(None | bool | int)
    (_, payload), = stream(1)
    msg = wire2.decode(payload)
    r = wire2.Reassembler()
    r.apply(msg, payload)
    held = r._held[msg.node]
    for table, cols, spec in ((held.gpus, msg.g, wire2.GPU_COLUMNS),
                              (held.ports, msg.p, wire2.PORT_COLUMNS)):
        for c, v in wire2._present(cols, spec):
            kept = wire2._top(table, c.top) if c.sub is None else table.nested[c.top][c.sub]
            assert [type(x) for x in kept] == [type(x) for x in v], c.wire
    shared = wire2._share([1, 1], one_type=True)
    assert isinstance(shared, tuple) and [type(x) for x in shared] == [int, int]
    mixed = [1, 1.0]
    assert wire2._share(mixed, one_type=False) is mixed  # types differ: kept as it came
