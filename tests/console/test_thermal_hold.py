"""A GPU hovering at its thermal limit reads degraded once, through the console's fast paths too.

G12 holds THROTTLE_HOLD_S after the last throttled sample and G13 until the GPU reads below
TEMP_CLEAR_C (console/health.py, docs/architecture.md "Thermal findings hold"). Both columns
they read, ``temp_c`` and ``clock_event_reasons``, are QUIET_CHECKED: their v2 deltas are quiet,
and a healthy node's quiet sample skips the rules (``still_quiet``, ``still_healthy``). Here the
samples go through the real Ingest as v2 keyframes and deltas into a fleet state with those fast
paths and one running every rule on every sample: both see one transition to degraded on the
first sample over the line and one back to ok on the first sample past the hold, even though no
input of the rules moves while the hold runs out; the console session logs just those two.
"""

from typing import Any

import msgspec

from fleetdeck.console.health import THROTTLE_HOLD_S, Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import FleetState, Transition
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

HEALTHY = 5
"""Quiet healthy samples before the GPU heats up (the fast path is taken on them)."""
TOGGLING = 30
"""Samples (one a second) around the limit: the SW thermal bit on every third, 86.6/87.2 °C."""
BAND = 10
"""Samples at 85.5 °C: under max operating, over the clear threshold."""
LAST_THROTTLED = max(k for k in range(HEALTHY, HEALTHY + TOGGLING) if k % 3 == 0)
CLEARED = LAST_THROTTLED + int(THROTTLE_HOLD_S) + 1
"""The first sample past the G12 hold (G13 cleared long before, at 83 °C)."""
SAMPLES = CLEARED + 10


def _gpu(k: int) -> dict[str, Any]:
    """gpu2's rule inputs of sample ``k``; from HEALTHY + TOGGLING + BAND on, constant."""
    if k < HEALTHY:
        return {"temp_c": 60.0, "clock_event_reasons": 0}
    if k < HEALTHY + TOGGLING:
        return {"temp_c": 87.2 if k % 2 else 86.6,
                "clock_event_reasons": 0x20 if k % 3 == 0 else 0}
    if k < HEALTHY + TOGGLING + BAND:
        return {"temp_c": 85.5, "clock_event_reasons": 0}
    return {"temp_c": 83.0, "clock_event_reasons": 0}


def _samples() -> tuple[FakeNode, list[tuple[float, bytes]]]:
    node = FakeNode()
    enc = wire2.TelemetryEncoder(keyframe_every_s=30)
    out = []
    for k in range(SAMPLES):
        tel = codec.decode_telemetry(codec.encode(node.telemetry()))
        gpus = list(tel.gpus)
        gpus[2] = msgspec.structs.replace(gpus[2], **_gpu(k))
        tel = msgspec.structs.replace(tel, gpus=gpus)
        out.append((node.now, enc.encode(tel, node.now)))
    return node, out


def _node_transitions(trs: list[Transition]) -> list[tuple[float, Verdict | None, Verdict]]:
    return [(tr.ts, tr.old, tr.new) for tr in trs]


def test_toggling_around_the_limit_is_one_degraded_on_the_fast_paths_as_on_the_full_rules():
    node, samples = _samples()
    quick, full = FleetState("test"), FleetState("test")
    full.precheck = False
    ingests = [Ingest("test", lazy=True), Ingest("test", lazy=False)]
    for ing in ingests:
        node.feed(ing, node.birth(), Kind.BIRTH, rx=samples[0][0] - 1)
    transitions: list[list[Transition]] = [[], []]
    quiet_at: list[int] = []
    held_quiet_deltas = 0
    for k, (now, payload) in enumerate(samples):
        for i, (ing, state) in enumerate(zip(ingests, (quick, full), strict=True)):
            ing.handle(node.topic(Kind.TELEMETRY), payload, now)
            state.apply(ing.take_batch(), now)
            transitions[i] += state.take_transitions()
        a, b = quick.nodes[node.node_id], full.nodes[node.node_id]
        assert (a.verdict, a.findings, a.shape_rev) == (b.verdict, b.findings, b.shape_rev), k
        quiet_at.append(quick.quiet_applied)
        if type(a.sample) is wire2.Pending and a.findings:
            held_quiet_deltas += 1
    t0 = samples[0][0]
    expected = [(t0, None, Verdict.OK),
                (samples[HEALTHY][0], Verdict.OK, Verdict.DEGRADED),  # not delayed
                (samples[CLEARED][0], Verdict.DEGRADED, Verdict.OK)]
    assert _node_transitions(transitions[0]) == expected
    assert _node_transitions(transitions[1]) == expected
    assert full.quiet_applied == 0
    # The fast path ran before the fault and again after the hold, never while it held,
    # although the deltas it held through were quiet ones.
    assert quiet_at[HEALTHY - 1] >= 2
    assert quiet_at[CLEARED] == quiet_at[HEALTHY - 1]
    assert quiet_at[-1] > quiet_at[CLEARED] + 5
    assert held_quiet_deltas > 40


def test_the_timeline_logs_one_verdict_change_each_way():
    node, samples = _samples()
    ingest = Ingest("test")
    t0 = samples[0][0]
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: t0)
    node.feed(ingest, node.birth(), Kind.BIRTH, rx=t0 - 1)
    texts: dict[int, list[str]] = {}
    for k, (now, payload) in enumerate(samples):
        ingest.handle(node.topic(Kind.TELEMETRY), payload, now)
        session.tick(now)
        texts[k] = [str(f) for f in session.state.nodes[node.node_id].findings]
    verdicts = [line.text for _seq, line in session.log
                if line.kind == "verdict" and line.source == node.node_id]
    assert verdicts == ["ok -> degraded (G13)", "degraded -> ok"]
    # While held, the findings say the GPU was over the line, in a text that stays put.
    held = "G12 gpu2: clock throttled (sw thermal) within the last minute"
    assert texts[LAST_THROTTLED + 12] == [held]
    assert texts[HEALTHY + TOGGLING] == [
        held, "G13 gpu2: 85 °C, was above max operating (clears below 84 °C)"]
    assert texts[CLEARED - 1] == [held] and texts[CLEARED] == []
