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

from fleetdeck.console.health import THROTTLE_HOLD_S, THROTTLE_UNPROVEN, Verdict
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
    """gpu2's rule inputs of sample ``k``; from HEALTHY + TOGGLING + BAND on, constant. The GPU
    works throughout: an idle one's G12 waits for work to clear (``THROTTLE_IDLE_HOLD_S``)."""
    return {"util_pct": 97.0, **_thermal(k)}


def _thermal(k: int) -> dict[str, Any]:
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


def _feed_both(gpu_at, seconds: int):
    """Feed gpu2's inputs ``gpu_at(k)`` through both fleet states (fast paths, full rules);
    yield (k, node state) after each sample, the two asserted alike."""
    node = FakeNode()
    enc = wire2.TelemetryEncoder(keyframe_every_s=30)
    quick, full = FleetState("test"), FleetState("test")
    full.precheck = False
    ingests = [Ingest("test", lazy=True), Ingest("test", lazy=False)]
    for ing in ingests:
        node.feed(ing, node.birth(), Kind.BIRTH, rx=node.now - 1)
    for k in range(seconds):
        tel = codec.decode_telemetry(codec.encode(node.telemetry()))
        gpus = list(tel.gpus)
        gpus[2] = msgspec.structs.replace(gpus[2], **gpu_at(k))
        payload = enc.encode(msgspec.structs.replace(tel, gpus=gpus), node.now)
        for ing, state in zip(ingests, (quick, full), strict=True):
            ing.handle(node.topic(Kind.TELEMETRY), payload, node.now)
            state.apply(ing.take_batch(), node.now)
        a, b = quick.nodes[node.node_id], full.nodes[node.node_id]
        assert (a.verdict, a.findings) == (b.verdict, b.findings), k
        yield k, a


WORKED = 20
"""Seconds the GPU throttles under its job before the job goes (a requeue: it idles)."""


def _busy_then_idle(back_to_work_at: int | None):
    def gpu_at(k: int) -> dict[str, Any]:
        if k < WORKED:
            return {"util_pct": 98.0, "temp_c": 88.0, "clock_event_reasons": 0x20}
        if back_to_work_at is not None and k >= back_to_work_at:
            return {"util_pct": 98.0, "temp_c": 72.0, "clock_event_reasons": 0}
        return {"util_pct": 0.0, "temp_c": 45.0, "clock_event_reasons": 0}
    return gpu_at


def test_a_gpu_that_throttled_and_went_idle_stays_flagged_until_it_works_or_an_hour_passes():
    """A thermally throttled GPU whose job was requeued read ok a minute later, idle, and its
    node went back to the pool to slow the next job (a 3 a.m. drive): idle, it cannot show
    that its cooling is fixed. G12 holds until a minute of work without throttling, or an
    hour idle, and the idle node's advice is to drain it and check the cooling."""
    from fleetdeck.console.health import THROTTLE_UNPROVEN
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.thermal import THROTTLE_IDLE_HOLD_S

    seen: dict[int, Any] = {}
    for k, st in _feed_both(_busy_then_idle(None), WORKED + int(THROTTLE_IDLE_HOLD_S) + 5):
        if k in (WORKED + 30, WORKED + 600, WORKED + int(THROTTLE_IDLE_HOLD_S) - 30):
            seen[k] = (st.verdict, [str(f) for f in st.findings], recommended_action(st))
        last = st
    assert seen[WORKED + 30][1] == ["G12 gpu2: clock throttled (sw thermal) within the last "
                                    "minute"]
    for k in (WORKED + 600, WORKED + int(THROTTLE_IDLE_HOLD_S) - 30):
        verdict, findings, action = seen[k]
        assert verdict is Verdict.DEGRADED
        assert findings == [f"G12 gpu2: clock throttled (sw thermal) earlier; "
                            f"{THROTTLE_UNPROVEN}"]
        assert action.startswith("drain it and check gpu2's cooling before it takes work")
    assert last.verdict is Verdict.OK and last.findings == []  # an hour idle: forgotten

    back = WORKED + 300
    cleared = None
    for k, st in _feed_both(_busy_then_idle(back), back + 90):
        if cleared is None and not st.findings:
            cleared = k
    # Back at work, a minute without throttling clears it.
    assert cleared == back + int(THROTTLE_HOLD_S)


def test_a_power_brake_on_an_idle_gpu_clears_after_its_minute():
    """Power brake and HW slowdown come with a facility's power cap, on every node at once:
    only the cooling's own throttles hold an idle GPU past the minute (a review)."""
    def gpu_at(k: int) -> dict[str, Any]:
        if k < WORKED:
            return {"util_pct": 98.0, "temp_c": 70.0, "clock_event_reasons": 0x80}
        return {"util_pct": 0.0, "temp_c": 45.0, "clock_event_reasons": 0}

    cleared = None
    for k, st in _feed_both(gpu_at, WORKED + 120):
        if k >= WORKED and cleared is None and not st.findings:
            cleared = k
    assert cleared == WORKED - 1 + int(THROTTLE_HOLD_S) + 1


def test_a_gpu_replaced_at_its_index_does_not_inherit_the_consoles_hold():
    """gpu2 throttled for heat and went idle (G12, held up to an hour), then a technician
    replaced it and the node rebooted: samples name a GPU by index only, so the console held
    the new GPU degraded and told the operator to drain the node just repaired. A birth with
    another uuid at gpu2 forgets the old GPU's history; the same GPU's rebirth keeps it."""
    from fleetdeck.console.health import THROTTLE_UNPROVEN

    for replaced in (True, False):
        node = FakeNode()
        enc = wire2.TelemetryEncoder(keyframe_every_s=30)
        quick, full = FleetState("test"), FleetState("test")
        full.precheck = False
        ingests = [Ingest("test", lazy=True), Ingest("test", lazy=False)]

        def feed(msg, kind, node=node, ingests=ingests, quick=quick, full=full):
            for ing, state in zip(ingests, (quick, full), strict=True):
                ing.handle(node.topic(kind), msg if isinstance(msg, bytes) else
                           codec.encode(msg), node.now)
                state.apply(ing.take_batch(), node.now)
            a, b = quick.nodes[node.node_id], full.nodes[node.node_id]
            assert (a.verdict, a.findings) == (b.verdict, b.findings)
            return [str(f) for f in a.findings]

        feed(node.birth(), Kind.BIRTH)
        gpu_at = _busy_then_idle(None)
        for k in range(WORKED + 120):
            tel = codec.decode_telemetry(codec.encode(node.telemetry()))
            gpus = list(tel.gpus)
            gpus[2] = msgspec.structs.replace(gpus[2], **gpu_at(k))
            findings = feed(enc.encode(msgspec.structs.replace(tel, gpus=gpus), node.now),
                            Kind.TELEMETRY)
        held = [f"G12 gpu2: clock throttled (sw thermal) earlier; {THROTTLE_UNPROVEN}"]
        assert findings == held
        # The reboot: a new agent session, its birth with gpu2's uuid (another if replaced).
        node.now += 300
        if replaced:
            node.sim.gpus[2].uuid = "GPU-00000000-0000-0000-0000-000000000002"
        node.agent.bd_seq = node.agent._next_bd_seq()
        feed(node.birth(), Kind.BIRTH)
        tel = codec.decode_telemetry(codec.encode(node.telemetry()))
        gpus = list(tel.gpus)
        gpus[2] = msgspec.structs.replace(gpus[2], **gpu_at(WORKED + 121))
        findings = feed(enc.encode(msgspec.structs.replace(tel, gpus=gpus), node.now),
                        Kind.TELEMETRY)
        assert findings == ([] if replaced else held), replaced
        assert quick.nodes[node.node_id].verdict is (Verdict.OK if replaced
                                                     else Verdict.DEGRADED)


def _held_then_reborn(births, at: int, renumber: bool = False, first=None,
                      unread: int | None = None) -> list[str]:
    """gpu2 throttled for heat and went idle (G12 held), the node rebooted and sent
    ``births(node)`` (one session); then a sample with that idle GPU's values at index ``at``
    (GPUs after gpu1 one index down if ``renumber``). The G12 findings of it, the console
    with its fast paths and the one running every rule agreeing. ``first(node)``: the first
    birth (the node's own if None); ``unread``: a GPU no sample carries."""
    node = FakeNode()
    quick, full = FleetState("test"), FleetState("test")
    full.precheck = False
    ingests = [Ingest("test", lazy=True), Ingest("test", lazy=False)]

    def feed(msg, kind):
        for ing, state in zip(ingests, (quick, full), strict=True):
            ing.handle(node.topic(kind), msg if isinstance(msg, bytes) else codec.encode(msg),
                       node.now)
            state.apply(ing.take_batch(), node.now)
        a, b = quick.nodes[node.node_id], full.nodes[node.node_id]
        assert (a.verdict, a.findings) == (b.verdict, b.findings)
        return [str(f) for f in a.findings if f.rule in ("G12", "G13")]

    def sample(enc, k, index):
        tel = codec.decode_telemetry(codec.encode(node.telemetry()))
        gpus = list(tel.gpus)
        if renumber:
            gpus = [msgspec.structs.replace(g, index=i) for i, g in
                    enumerate(g for g in gpus if g.index != 1)]
        gpus[index] = msgspec.structs.replace(gpus[index], **gpu_at(k))
        gpus = [g for g in gpus if g.index != unread]
        return feed(enc.encode(msgspec.structs.replace(tel, gpus=gpus), node.now),
                    Kind.TELEMETRY)

    feed(node.birth() if first is None else first(node), Kind.BIRTH)
    gpu_at = _busy_then_idle(None)
    enc = wire2.TelemetryEncoder(keyframe_every_s=30)
    for k in range(WORKED + 120):
        findings = sample(enc, k, 2)
    assert findings == [f"G12 gpu2: clock throttled (sw thermal) earlier; {THROTTLE_UNPROVEN}"]
    node.now += 300
    node.agent.bd_seq = node.agent._next_bd_seq()
    for birth in births(node):
        feed(birth, Kind.BIRTH)
    return sample(wire2.TelemetryEncoder(keyframe_every_s=30), WORKED + 121, at)


def test_a_replaced_gpu_is_seen_past_a_birth_without_gpus():
    """A rebooted node's first birth often has no GPUs (the agent's first inventory hung: a
    stand-in). The real birth was compared with it, nothing forgotten, and the new GPU at
    gpu2 held degraded (G12) with the advice to drain the node just repaired."""
    def replaced(node, stand_in):
        first = node.birth()
        node.sim.gpus[2].uuid = "GPU-00000000-0000-0000-0000-000000000002"
        again = node.birth()
        if stand_in == "no GPUs":
            return [first.model_copy(update={"gpus": []}), again]
        gpus = list(again.gpus)
        gpus[2] = gpus[2].model_copy(update={"uuid": ""})
        return [again.model_copy(update={"gpus": gpus}), again]

    for stand_in in ("no GPUs", "gpu2 without a uuid"):
        assert _held_then_reborn(lambda node, s=stand_in: replaced(node, s), 2) == [], stand_in


def test_a_renumbered_or_swapped_gpu_keeps_its_history():
    """gpu1 dropped off PCIe and the node rebooted: NVML numbers the rest 0-6 (GPUs 2-7 at
    1-6, docs/real-nodes.md). Compared by index, each GPU after gpu1 read as replaced and its
    history, the held G12 of the old gpu2 too, was forgotten; two GPUs swapped between slots
    lost both. A GPU's history follows its uuid."""
    def swapped(node):
        a, b = node.sim.gpus[2], node.sim.gpus[5]
        a.uuid, b.uuid = b.uuid, a.uuid
        return [node.birth()]

    def renumbered(node):
        birth = node.birth()
        gpus = [g.model_copy(update={"index": i})
                for i, g in enumerate(g for g in birth.gpus if g.index != 1)]
        return [birth.model_copy(update={"gpus": gpus})]

    held = "G12 gpu{}: clock throttled (sw thermal) earlier; " + THROTTLE_UNPROVEN
    assert _held_then_reborn(swapped, 5) == [held.format(5)]
    assert _held_then_reborn(renumbered, 1, renumber=True) == [held.format(1)]


def _with_uuids(birth, **at: str):
    """``birth`` with the uuid ``at["gpu5"]`` at gpu5 and so on."""
    return birth.model_copy(update={"gpus": [
        g.model_copy(update={"uuid": at.get(f"gpu{g.index}", g.uuid)}) for g in birth.gpus]})


def test_a_uuid_or_an_index_listed_twice_in_a_birth_keeps_the_history_where_it_is():
    """A birth is network input: a buggy source or a forged one listed gpu2's uuid at gpu2 and
    gpu3, or gpu2 twice with two uuids. The last one won: gpu2's history (its held G12) moved
    to gpu3 or was forgotten as a replacement, and births that repeated it moved it back and
    forth. Such a uuid is unknown: the history stays where it is."""
    def twice_the_uuid(node):
        birth = node.birth()
        return [_with_uuids(birth, gpu3=birth.gpus[2].uuid)] * 2

    def twice_the_index(node):
        birth = node.birth()
        other = birth.gpus[2].model_copy(update={"uuid": "GPU-other"})
        return [birth.model_copy(update={"gpus": [*birth.gpus[:3], other, *birth.gpus[3:]]})] * 2

    held = [f"G12 gpu2: clock throttled (sw thermal) earlier; {THROTTLE_UNPROVEN}"]
    for births in (twice_the_uuid, twice_the_index):
        assert _held_then_reborn(births, 2) == held, births.__name__


def test_a_known_gpu_moved_to_the_index_of_an_unknown_ones_history_does_not_inherit_it():
    """gpu2's uuid was unknown when it throttled (a birth without it), and gpu5 had no
    history (no sample carried it); then a birth shows gpu5's GPU at gpu2. It inherited the
    unknown GPU's history (G12 held, with the advice to drain) only because it had none of its
    own. That history is forgotten; one whose index holds no known GPU moved there stays."""
    def unknown(node):
        return _with_uuids(node.birth(), gpu2="")

    def moved_in(node):
        birth = node.birth()
        return [_with_uuids(birth, gpu2=birth.gpus[5].uuid, gpu5="GPU-new")]

    def new_gpu(node):
        return [_with_uuids(node.birth(), gpu2="GPU-new")]

    held = [f"G12 gpu2: clock throttled (sw thermal) earlier; {THROTTLE_UNPROVEN}"]
    assert _held_then_reborn(moved_in, 2, first=unknown, unread=5) == []
    assert _held_then_reborn(new_gpu, 2, first=unknown, unread=5) == held
