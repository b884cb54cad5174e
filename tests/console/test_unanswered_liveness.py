"""A command's time-out blames what the node's liveness says, on every kind of console.

- A node's deltas heard while its keyframe is awaited (a ``viewer`` console: its keyframe asks
  are dropped by the ACL) make it "talking" only while they keep coming: a rack that lost power
  10 s after the console started talked for ever (no silence incident, "wait for its keyframe"
  an hour on, a drain's time-out blaming the ACL).
- On a console on digests the collector's H1/H2 come among the node's findings: a drain to a
  node whose agent had died said "the node reports: may this broker user publish node/+/cmd?".

Real protocol messages through a real Ingest and FleetState; no broker is needed for the
judgement (tests/security/test_viewer_sees_talking_nodes.py drives the viewer end to end)."""

import json

from fleetdeck.console.commands import CommandTracker, Phase, never_reached, why_unanswered
from fleetdeck.console.health import Verdict
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import recommended_action
from fleetdeck.console.state import FleetState
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet

ACL = "may this broker user publish node/+/cmd?"
TALKING = "telemetry deltas heard"


def _deltas(fleet: SynthFleet, ingest: Ingest, names: list[str]) -> None:
    """Each node's next sample as its agent puts it on the wire (v2: a delta, its keyframe
    long gone by before this console subscribed)."""
    for name in names:
        ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, name),
                      fleet.agents[name].telemetry_payload(), fleet.clock())


def _tick(fleet: SynthFleet, ingest: Ingest, state: FleetState, names: list[str],
          tracker: CommandTracker | None = None) -> None:
    """One second: the nodes of ``names`` send a delta (1 s interval), the console judges."""
    fleet.clock.advance(1)
    _deltas(fleet, ingest, names)
    batch = ingest.take_batch()
    state.apply(batch, fleet.clock())
    state.judge_fleet(fleet.clock())
    if tracker is not None:
        tracker.observe(state, [a for _r, a in batch.acks], fleet.clock())


def test_a_rack_that_stops_talking_before_its_keyframe_is_a_silent_rack_not_a_talking_one():
    clock = Clock()
    fleet = SynthFleet(16, clock)  # racks r00 (gpu0001-8) and r01 (gpu0009-16)
    for agent in fleet.agents.values():
        agent.telemetry_payload()  # the keyframe this console never saw; the next in 30 s
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)
    fleet.birth(ingest)
    r00, r01 = fleet.names[:8], fleet.names[8:]
    for _ in range(10):  # ten seconds of deltas, every keyframe ask dropped (no answer)
        _tick(fleet, ingest, state, fleet.names)
    st = state.nodes["gpu0012"]
    assert st.verdict is Verdict.STALE and st.talks, st.all_findings
    assert not [inc for inc in incidents(state) if inc.kind in ("rack", "fleet")]
    # Then r01 loses power; r00 talks on, its periodic keyframe not due yet.
    for _ in range(8):
        _tick(fleet, ingest, state, r00)
    dead, alive = state.nodes["gpu0012"], state.nodes["gpu0003"]
    assert dead.verdict is Verdict.STALE and not dead.talks
    [h1] = [f for f in dead.liveness if f.rule == "H1"]
    assert TALKING not in h1.text and "no telemetry heard" in h1.text, h1
    assert "wait for its keyframe" not in recommended_action(dead, state)
    assert alive.verdict is Verdict.STALE and alive.talks
    assert TALKING in str(alive.liveness[0])
    assert "wait for its keyframe" in recommended_action(alive, state)
    found = {inc.key: inc for inc in incidents(state)}
    assert "rack:r01" in found and "fell silent" in found["rack:r01"].title, found
    assert set(found["rack:r01"].nodes) == set(r01)
    assert "rack:r00" not in found, found
    # A drain of each times out: the dead node's says so, the talking one's names the ACL.
    tracker = CommandTracker(CLUSTER, "sre1", ack_timeout_s=5)
    drains = {name: tracker.drain([name], "drill", clock()) for name in ("gpu0012", "gpu0003")}
    for _ in range(6):
        _tick(fleet, ingest, state, r00, tracker)
    dead_t, alive_t = drains["gpu0012"].targets[0], drains["gpu0003"].targets[0]
    assert dead_t.phase is Phase.TIMED_OUT and alive_t.phase is Phase.TIMED_OUT
    assert "hung or cut off" in dead_t.detail and ACL not in dead_t.detail, dead_t.detail
    assert ACL in alive_t.detail and "hung" not in alive_t.detail, alive_t.detail


def _digest(**over: object) -> bytes:
    d = {"v": 1, "node": "gpu1234", "by": "shard-1", "ts": 1_000_500, "verdict": "ok",
         "gpus": [{"index": 0, "util_pct": 50.0, "temp_c": 40.0, "power_w": 300.0}],
         "ports": [{"dev": "mlx5_ib0", "up": True}], "drain": {"state": "none"}}
    d.update(over)
    return json.dumps(d).encode()


def _on_digests(payload: bytes, rx: float) -> FleetState:
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)
    ingest.handle(topic_for(CLUSTER, Kind.DIGEST, "gpu1234"), payload, rx)
    state.apply(ingest.take_batch(), rx)
    state.judge_fleet(rx)
    return state


def _drain_times_out(state: FleetState, now: float) -> str:
    tracker = CommandTracker(CLUSTER, "sre1", ack_timeout_s=15)
    req = tracker.drain(["gpu1234"], "drill", now)
    tracker.observe(state, [], now + 16)
    assert req.phase is Phase.TIMED_OUT
    return req.targets[0].detail


def test_a_drain_to_a_dead_node_on_a_digest_console_says_no_agent_is_there_not_the_acl():
    h2 = {"rule": "H2", "severity": "drain", "text": "agent offline (Last Will)"}
    state = _on_digests(_digest(verdict="offline", online=False, findings=[h2]), 1000.5)
    st = state.nodes["gpu1234"]
    assert st.verdict is Verdict.OFFLINE and not st.liveness  # H2 is among its findings
    assert never_reached(state, "gpu1234") == ""
    detail = _drain_times_out(state, 1000.5)
    assert "no agent is there to answer" in detail and ACL not in detail, detail
    # A collector that judged it stale (its agent hung) says H1 the same way.
    h1 = {"rule": "H1", "severity": "warn", "text": "no telemetry (last 40 s ago)"}
    state = _on_digests(_digest(verdict="stale", stale=True, findings=[h1]), 1000.5)
    detail = _drain_times_out(state, 1000.5)
    assert "hung or cut off" in detail and ACL not in detail, detail


def test_a_drain_to_a_node_whose_collector_went_quiet_does_not_blame_the_acl():
    state = _on_digests(_digest(), 1000.5)
    state.judge_fleet(1000.5 + 3600)  # its collector's digests stopped: D1
    st = state.nodes["gpu1234"]
    assert st.verdict is Verdict.STALE and [f.rule for f in st.liveness] == ["D1"]
    assert "shard-1" in why_unanswered(state, "gpu1234")
    assert never_reached(state, "gpu1234") == ""


def test_a_drain_to_a_live_node_on_a_digest_console_still_names_the_acl():
    state = _on_digests(_digest(), 1000.5)
    assert why_unanswered(state, "gpu1234") == ""
    assert ACL in _drain_times_out(state, 1000.5)


def test_a_drain_to_a_talking_node_on_a_digest_console_names_the_acl_not_a_hung_agent():
    # The collector heard the node's deltas, its keyframe asks dropped (a viewer-like ACL):
    # its H1 says it talks. The console on digests set ``talks`` False for every digest node
    # and a drain's time-out said "its agent is hung or cut off" of a node that talked.
    from fleetdeck.console.digest import make_digest
    from fleetdeck.protocol import codec

    clock = Clock()
    fleet = SynthFleet(8, clock)
    for agent in fleet.agents.values():
        agent.telemetry_payload()  # the keyframe the collector never saw
    ingest = Ingest(CLUSTER)
    collector = FleetState(CLUSTER, ingest.malformed)
    fleet.birth(ingest)
    for _ in range(10):
        _tick(fleet, ingest, collector, fleet.names)
    st = collector.nodes["gpu0003"]
    assert st.verdict is Verdict.STALE and st.talks, st.all_findings
    dig_in = Ingest(CLUSTER)
    dig = FleetState(CLUSTER, dig_in.malformed)
    dig_in.handle(topic_for(CLUSTER, Kind.DIGEST, "gpu0003"),
                  codec.encode(make_digest(st, "shard-1", clock())), clock())
    dig.apply(dig_in.take_batch(), clock())
    dig.judge_fleet(clock())
    d = dig.nodes["gpu0003"]
    assert d.verdict is Verdict.STALE and d.talks, d.all_findings
    assert why_unanswered(dig, "gpu0003") == ""
    tracker = CommandTracker(CLUSTER, "sre1", ack_timeout_s=15)
    req = tracker.drain(["gpu0003"], "drill", clock())
    tracker.observe(dig, [], clock() + 16)
    detail = req.targets[0].detail
    assert ACL in detail and "hung" not in detail, detail
    # Its collector gone quiet (D1): nothing says it talks any more.
    dig.judge_fleet(clock() + 3600)
    assert not d.talks and "hung" not in never_reached(dig, "gpu0003")


def test_a_talking_node_reads_waiting_everywhere_and_writes_no_false_history():
    """A node read bad only for want of its keyframe is ``waiting`` in the views, the totals,
    the top problems and the JSON alike, as ``status`` said it alone; and no "ok -> stale ->
    ok" is written for it. Once its deltas stop, it is stale, and the row is written then."""
    from fleetdeck.console.rows import top_problems
    from fleetdeck.console.summary import fleet_summary, judged_not_ok

    clock = Clock()
    fleet = SynthFleet(16, clock)
    for agent in fleet.agents.values():
        agent.telemetry_payload()  # the keyframe this console never saw
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)
    fleet.birth(ingest)
    for _ in range(10):
        _tick(fleet, ingest, state, fleet.names)
    st = state.nodes["gpu0003"]
    assert st.verdict is Verdict.STALE and st.unread_talking
    assert st.verdict_shown == "waiting"
    out = fleet_summary(state, clock())
    assert out["totals"]["by_verdict"]["stale"] == 0, out["totals"]
    assert out["totals"]["by_verdict"]["waiting"] == 16, out["totals"]
    assert {n["verdict"] for n in out["nodes"]} == {"waiting"}
    assert out["incidents"] == [], out["incidents"]
    assert not judged_not_ok(state), "a talking node is not a problem to list"
    assert top_problems(state) == ([], 0)
    assert not [t for t in state.transitions if t.new is Verdict.STALE], state.transitions
    # r01 loses power: silent now, stale, and its rows are written.
    for _ in range(8):
        _tick(fleet, ingest, state, fleet.names[:8])
    dead = state.nodes["gpu0012"]
    assert dead.verdict_shown == "stale" and not dead.unread_talking
    stale_rows = {t.node for t in state.transitions if t.new is Verdict.STALE}
    assert stale_rows == set(fleet.names[8:]), stale_rows
    assert state.nodes["gpu0003"].verdict_shown == "waiting"
