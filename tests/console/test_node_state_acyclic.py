"""No ``NodeState`` reaches itself or its ``FleetState`` through what it holds.

``NodeState`` is a ``gc=False`` msgspec Struct (console/state.py): the collector never looks at
it, so a cycle through one is never freed. A field that came to hold a closure, a bound method
or a container leading back to the node or the fleet would leak every node's state, each time
it is replaced (a reconnect, a restore, a replay's seek), and nothing would say so. These walk
what a node's state holds after realistic traffic (the recorded faults, drains, events with a
gap, digests, a snapshot's restore) the way the collector would if it could."""

import gc
import types
from collections.abc import Iterator
from pathlib import Path

import msgspec

from fleetdeck.agents.source import EventDraft
from fleetdeck.console.digest import make_digest
from fleetdeck.console.health import Verdict
from fleetdeck.console.replay import Player
from fleetdeck.console.state import FleetState, NodeState
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.messages import DrainState
from fleetdeck.protocol.topics import Kind, topic_for
from tests.helpers import FakeNode
from tests.replay.test_fast_replay import FAULTS, FIXTURES
from tests.replay.test_fast_replay_v2 import to_v2
from tests.sharding.test_digest import _on_digests, raw_state

WALK_LIMIT = 200_000
"""Objects one node's walk may meet: far more than a node holds (its samples, 50 events, its
findings); a walk past it has left the node (a module's globals) and proves nothing."""


def _referents(o: object) -> list[object]:
    """What ``o`` holds, as the collector would follow it were ``o`` tracked: a ``gc=False``
    Struct's fields and a class's slots (``gc.get_referents`` sees neither), a closure's cells
    and defaults, a bound method's object, a frame's locals; never a class or a module (they
    reach everything, and are in no node's cycle)."""
    if isinstance(o, (types.FunctionType, types.LambdaType)):
        cells = [c.cell_contents for c in o.__closure__ or () if c.cell_contents is not None]
        return cells + list(o.__defaults__ or ()) + list((o.__kwdefaults__ or {}).values())
    if isinstance(o, types.MethodType):
        return [o.__self__, o.__func__]
    if isinstance(o, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
        frame = getattr(o, "gi_frame", None) or getattr(o, "cr_frame", None) or getattr(
            o, "ag_frame", None)
        return [frame] if frame is not None else []
    if isinstance(o, types.FrameType):
        return list(o.f_locals.values())
    if isinstance(o, types.CodeType):
        return []
    out: list[object] = []
    if isinstance(o, msgspec.Struct):
        out += [getattr(o, f, None) for f in o.__struct_fields__]
    for cls in type(o).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(o, name):
                out.append(getattr(o, name))
    attrs = getattr(o, "__dict__", None)
    if isinstance(attrs, dict) and not isinstance(o, type):
        out.append(attrs)
    out += gc.get_referents(o)
    return [x for x in out if not isinstance(x, (type, types.ModuleType))]


def reaches_back(state: FleetState, st: NodeState) -> str | None:
    """'itself' or 'the fleet state' when ``st`` holds a way back to either, else None."""
    seen = {id(st)}
    stack = _referents(st)
    while stack:
        o = stack.pop()
        if o is st:
            return "itself"
        if o is state:
            return "the fleet state"
        if id(o) in seen or isinstance(o, (str, bytes, int, float, bool)) or o is None:
            continue
        seen.add(id(o))
        assert len(seen) < WALK_LIMIT, f"{st.node_id}'s walk left the node: {type(o)}"
        stack.extend(_referents(o))
    return None


def back_refs(state: FleetState) -> dict[str, str]:
    assert state.nodes
    out = {}
    for name, st in state.nodes.items():
        found = reaches_back(state, st)
        if found is not None:
            out[name] = found
    return out


def _play(path: Path) -> Player:
    """Played to its end as the console plays it: the Player's steps, a tick after each."""
    p = Player(path)
    while p.position + 1 < p.end:
        p.advance(1.0)
        if not p.busy:
            p.session.tick()
    p.session.tick()
    return p


def _more_traffic(p: Player) -> None:
    """On top of a recording: a node whose events came with a gap (two never delivered), on
    v2 telemetry (keyframe, then deltas), and a node known only from a collector's digest of
    a failed node."""
    session = p.session
    cluster = session.cluster
    node = FakeNode("gpu0100", cluster=cluster, t0=p.clock())
    enc = wire2.TelemetryEncoder(keyframe_every_s=30)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.status(), Kind.STATUS)
    for i in range(6):
        ev = node.agent._event(EventDraft("ib_flap", f"flap {i}"))
        if i not in (2, 3):  # lost on the way: the node's events have a gap
            node.feed(session.ingest, ev, Kind.EVENT)
        tel = node.telemetry()
        session.ingest.handle(node.topic(Kind.TELEMETRY), enc.encode(tel, node.now), node.now)
        session.tick()
    assert session.state.nodes["gpu0100"].event_ahead
    failed = raw_state(FakeNode("gpu0200", cluster=cluster, t0=node.now), fault=True)
    digest = make_digest(failed.nodes["gpu0200"], "shard-1", node.now)
    session.ingest.handle(topic_for(cluster, Kind.DIGEST, "gpu0200"), codec.encode(digest),
                          node.now)
    session.tick()
    assert session.state.nodes["gpu0200"].digest is not None


def fleets(tmp_path: Path) -> Iterator[tuple[str, FleetState]]:
    """Fleet states after realistic traffic, one at a time (each is the walk's input)."""
    twins = {name: tmp_path / f"{name}.v2.jsonl.gz" for name in ("xid79", "drain")}
    for name, twin in twins.items():
        to_v2(FIXTURES / f"{name}.jsonl.gz", twin, keyframe_every_s=5.0)
    for name in FAULTS:
        p = _play(FIXTURES / f"{name}.jsonl.gz")
        if name == "xid79":
            _more_traffic(p)
        yield name, p.state
        if name == "xid79":
            yield "on digests", _on_digests(p.session)
            # Back into the recording: the picture a snapshot of the Player put back.
            p.seek(p.start + (p.end - p.start) / 2)
            p.session.tick()
            yield "xid79 after a seek back", p.state
            p.session.restore(p.session.snapshot())
            yield "xid79 restored from a snapshot", p.state
    for name, twin in twins.items():
        yield f"{name} on v2 telemetry", _play(twin).state


def test_no_node_state_reaches_itself_or_the_fleet_state(tmp_path):
    walked = []
    held: set[str] = set()
    for label, state in fleets(tmp_path):
        assert back_refs(state) == {}, label
        walked.append(label)
        for st in state.nodes.values():
            # What the traffic was to put into the nodes' states is in them.
            held.update(what for what, there in (
                ("v2 sample", isinstance(st.sample, wire2.Pending)),
                ("digest", st.digest is not None), ("event gap", bool(st.event_ahead)),
                ("drain", st.drain.state is not DrainState.NONE), ("left job", st.left_job),
                ("failed", st.verdict is Verdict.FAILED)) if there)
    assert len(walked) == len(FAULTS) + 5, walked
    assert held == {"v2 sample", "digest", "event gap", "drain", "left job", "failed"}, held


def test_the_walk_finds_a_planted_cycle(tmp_path):
    """The walk is no vacuous pass: a field holding a closure over the node's state (deep in
    a container), or a bound method of the fleet state, is found."""
    p = _play(FIXTURES / "xid79.jsonl.gz")
    state = p.state
    st, other = state.nodes["gpu0006"], state.nodes["gpu0001"]
    assert back_refs(state) == {}
    was = st.judge_key, other.judge_key

    def over(x: object):
        return lambda: x

    try:
        st.judge_key = ([{"k": over(st)}],)
        assert back_refs(state) == {"gpu0006": "itself"}
        st.judge_key = (state.totals,)
        assert back_refs(state) == {"gpu0006": "the fleet state"}
        # Through a gc=False Struct, whose fields gc.get_referents does not list.
        st.judge_key = (NodeState("decoy", judge_key=(over(state),)),)
        assert gc.get_referents(st.judge_key[0]) == []
        assert back_refs(state) == {"gpu0006": "the fleet state"}
        st.judge_key = (over(other),)  # another node's state is no cycle of its own
        assert back_refs(state) == {}
        other.judge_key = (over(st),)  # ... until that one holds this one back
        assert back_refs(state) == {"gpu0006": "itself", "gpu0001": "itself"}
    finally:
        st.judge_key, other.judge_key = was
    assert back_refs(state) == {}

