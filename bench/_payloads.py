"""Telemetry that evolves like a real fleet's, cheap enough to publish 16,384 samples a second.

Building and encoding one real sample (SimNode + NodeAgent.telemetry + codec.encode) costs
~400 µs on the development machine, so a 2-core publisher cannot make 16,384 fresh ones a second.
Instead, each of P "personas" (real simulated nodes from ``SimWorld``, jobs included, so some are
training) gives two consecutive real samples; every numeric field that differs between them
becomes a hole in a byte template:

* counters (``*_total``, ``energy_j``, ``*_ns``) advance by their per-sample step every round,
  so counters move on every node on every sample (FleetState's history then does its real work,
  not the "nothing moved" fast path);
* gauges (util, temperature, power, rates, …) alternate between the two samples' values;
* ``node``, ``seq``, ``bdSeq`` and ``ts`` are filled in per message.

Node ``i`` uses persona ``i % P`` with its own name and its own seq. A payload is one C-level
``bytes % tuple``: ~10 µs, so the publisher stays a small share of the machine. Births come from
the same personas (name replaced), so every node is born before its telemetry counts.

``wire=2`` (the default: what agents send, docs/protocol.md) gives each persona instead one
keyframe period of real v2 messages — its agent's own encoder over 30 consecutive simulated
seconds: a keyframe, then 29 deltas — and node ``i``'s ``k``-th sample is message ``k % 30`` of
its persona with ``node``, ``seq``, ``bdSeq``, ``ts`` and ``kf`` filled in. Values repeat every
30 s; a counter that falls back at a keyframe reads as a reset (no increment), as after an agent
restart. ``wire=1`` is the v1 stream above.
"""

import json
import re
import time
from dataclasses import dataclass
from typing import Any

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.messages import Status
from fleetdeck.protocol.topics import Kind, topic_for

COUNTER_SUFFIXES = ("_total", "energy_j", "_ns")
_HOLE = re.compile(rb'"@@H(\d+)@@"')


def node_name(i: int) -> str:
    return f"gpu{i + 1:05d}"


@dataclass
class _Persona:
    templates: tuple[bytes, bytes]
    """Per round parity, ``%``-format with the gauges filled in; holes left, in order: node,
    seq, bdSeq, ts, then the counters."""
    counters: list[tuple[float, float]]
    """(value at round 0, step per round), in template order (ints for integer counters)."""
    birth: bytes
    name: bytes


def _leaves(obj: object, path: tuple[object, ...] = ()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _leaves(v, (*path, i))
    else:
        yield path, obj


def _set(obj: object, path: tuple[object, ...], value: object) -> None:
    for p in path[:-1]:
        obj = obj[p]  # type: ignore[index]
    obj[path[-1]] = value  # type: ignore[index]


_ABSENT = object()


def _get(obj: object, path: tuple[object, ...]) -> object:
    try:
        for p in path:
            obj = obj[p]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return _ABSENT
    return obj


def _num(v: object) -> bytes:
    return json.dumps(v).encode()


def _persona(agent: NodeAgent, cluster: str) -> _Persona:
    first = json.loads(codec.encode(agent.telemetry()))
    raw = codec.encode(agent.telemetry())
    second = json.loads(raw)
    holes: list[tuple[tuple[object, ...], str]] = [(("node",), "node"), (("seq",), "seq"),
                                                   (("bdSeq",), "bdseq"), (("ts",), "ts")]
    fixed = {h[0] for h in holes}
    for path, v2 in _leaves(second):
        if path in fixed or isinstance(v2, bool) or not isinstance(v2, int | float):
            continue
        v1 = _get(first, path)
        if v1 is _ABSENT or isinstance(v1, bool) or not isinstance(v1, int | float) or v1 == v2:
            continue  # constant, or not in the first sample: stays as in the second
        key = str(path[-1])
        holes.append((path, "counter" if key.endswith(COUNTER_SUFFIXES) else "gauge"))
    head = {"node": b'"%s"', "seq": b"%d", "bdseq": b"%d", "ts": b"%d"}
    gauge: dict[int, tuple[bytes, bytes]] = {}
    counter: dict[int, tuple[Any, Any, bool]] = {}
    for n, (path, kind) in enumerate(holes):
        old: Any = _get(first, path)
        new: Any = _get(second, path)
        _set(second, path, f"@@H{n}@@")
        if kind == "gauge":
            gauge[n] = (_num(old), _num(new))
        elif kind == "counter":
            # ints stay ints: ``%d`` of a float costs 3x more than of an int
            counter[n] = (new, abs(new - old) or 1, isinstance(new, float))
    text = json.dumps(second, separators=(",", ":")).encode().replace(b"%", b"%%")
    parts = _HOLE.split(text)
    templates = []
    for parity in (0, 1):
        out = bytearray(parts[0])
        order: list[str] = []
        counters: list[tuple[float, float]] = []
        for j in range(1, len(parts), 2):
            hid = int(parts[j])
            kind = holes[hid][1]
            order.append(kind)
            if kind == "gauge":
                out += gauge[hid][parity]
            elif kind == "counter":
                base, step, is_float = counter[hid]
                counters.append((base, step))
                out += b"%.3f" if is_float else b"%d"
            else:
                out += head[kind]
            out += parts[j + 1]
        templates.append(bytes(out))
    fixed_order = [k for k in order if k not in ("gauge", "counter")]
    assert fixed_order == ["node", "seq", "bdseq", "ts"], fixed_order
    assert order[:4] == fixed_order, "node, seq, bdSeq and ts must come before the counters"
    birth = codec.encode(agent.birth())
    return _Persona((templates[0], templates[1]), counters, birth, agent.node_id.encode())


V2_CYCLE = int(wire2.KEYFRAME_EVERY_S)
_V2_HEAD = re.compile(rb'^\{"v":2,"node":"[^"]*","seq":\d+,"bdSeq":\d+,"ts":\d+,"kf":\d+')


def _v2_cycles(world: SimWorld, cluster: str, bd_seq: int) -> list[list[bytes]]:
    """Per node of ``world``: one keyframe period of its agent's v2 messages as templates."""
    clock = [time.time()]
    url = BrokerURL("127.0.0.1", 1)
    agents = [NodeAgent(cluster=cluster, node_id=node.node_id, source=node, url=url,
                        clock=lambda: clock[0], wire=2) for node in world.nodes]
    cycles: list[list[bytes]] = [[] for _ in agents]
    for _ in range(V2_CYCLE):
        world.step()
        clock[0] += 1.0
        for agent, cycle in zip(agents, cycles, strict=True):
            agent.bd_seq = bd_seq
            raw = agent.telemetry_payload()
            head = _V2_HEAD.match(raw)
            assert head is not None, raw[:80]
            cycle.append(b'{"v":2,"node":"%s","seq":%d,"bdSeq":%d,"ts":%d,"kf":%d'
                         + raw[head.end():].replace(b"%", b"%%"))
    assert wire2.decode(cycles[0][0] % (b"x", 1, bd_seq, 1, 1)).keyframe
    return cycles


class EvolvingFleet:
    """Births, statuses and evolving telemetry payloads for ``n`` nodes of ``cluster``."""

    def __init__(self, n: int, cluster: str, bd_seq: int, personas: int = 1024,
                 seed: int = 1, wire: int = 2) -> None:
        self.n = n
        self.cluster = cluster
        self.bd_seq = bd_seq
        p = max(1, min(n, personas))
        world = SimWorld(WorldOptions(nodes=p, seed=seed, background_jobs=max(1, p // 32)))
        for _ in range(5):  # let the scheduler start jobs: some nodes train, some idle
            world.step()
        url = BrokerURL("127.0.0.1", 1)
        self.personas: list[_Persona] = []
        for node in world.nodes:
            agent = NodeAgent(cluster=cluster, node_id=node.node_id, source=node, url=url)
            agent.bd_seq = bd_seq
            self.personas.append(_persona(agent, cluster))
        # Tuples of strings and bytes, and personas looked up by index: the GC benchmarks
        # (bench/gc_sweep.py) measure the console's state, and a list a node here was ~5
        # references a node that a sweep followed and no console holds.
        self.names = tuple(node_name(i) for i in range(n))
        self.topics = tuple(topic_for(cluster, Kind.TELEMETRY, x) for x in self.names)
        self._name_b = tuple(x.encode() for x in self.names)
        self.wire = wire
        self._v2_cycles: list[list[bytes]] = []
        if wire == 2:
            self._v2_cycles = _v2_cycles(world, cluster, bd_seq)
        self.sick: dict[int, tuple[_Persona, list[bytes]]] = {}
        """Nodes given another persona (v1) and cycle of v2 payloads (bench/apply_cost.py)."""

    def birth(self, i: int) -> tuple[str, bytes]:
        per = self.personas[i % len(self.personas)]
        payload = per.birth.replace(b'"node":"' + per.name + b'"',
                                    b'"node":"' + self._name_b[i] + b'"', 1)
        return topic_for(self.cluster, Kind.BIRTH, self.names[i]), payload

    def status(self, i: int, ts_ms: int) -> tuple[str, bytes]:
        st = Status(node=self.names[i], online=True, bdSeq=self.bd_seq, ts=ts_ms)
        return topic_for(self.cluster, Kind.STATUS, self.names[i]), codec.encode(st)

    def telemetry(self, i: int, k: int, ts_ms: int) -> bytes:
        """Node ``i``'s ``k``-th sample (k = 0, 1, …), stamped ``ts_ms``."""
        sick = self.sick.get(i) if self.sick else None
        if self._v2_cycles:
            c = k % V2_CYCLE
            cycle = sick[1] if sick else self._v2_cycles[i % len(self._v2_cycles)]
            return cycle[c] % (self._name_b[i], k + 1, self.bd_seq, ts_ms, k - c + 1)
        per = sick[0] if sick else self.personas[i % len(self.personas)]
        return per.templates[k & 1] % (self._name_b[i], k + 1, self.bd_seq, ts_ms,
                                       *[base + k * step for base, step in per.counters])
