"""The agent's thermal holds (agents/windows.py, ``ThermalHolds``): each GPU's last throttle
(``throttled_last_ts``, ``throttled_last_reasons``) and last hot reading (``hot_last_ts``) while
rules G12 and G13 hold them, so a console that has watched for seconds (a one-shot ``status``)
holds them as a console that watched all along does (docs/protocol.md, "Agent windows").

Found in a fault drill: after a thermal fault ended, the TUI held the idle GPU degraded with the
advice to drain it and check its cooling, and ``status`` (a 3.5 s watch) said "ok ... do not
drain"."""

from typing import Any

from msgspec.structs import replace

from fleetdeck.agents.windows import ErrorWindows
from fleetdeck.console.health import (
    THROTTLE_UNPROVEN,
    NodeHistory,
    Verdict,
    combine,
    evaluate,
    still_healthy,
)
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.fast import GpuSample, Telemetry
from fleetdeck.protocol.thermal import THROTTLE_HOLD_MS, THROTTLE_IDLE_HOLD_MS
from tests.helpers import FakeNode

T0 = 10_000_000
SW_THERMAL, POWER_BRAKE, IDLE = 0x20, 0x80, 0x1


def _gpus(**gpu3: Any) -> list[GpuSample]:
    """Eight cool, busy GPUs; gpu3 with ``gpu3``'s values."""
    base = {"util_pct": 97.0, "temp_c": 60.0, "clock_event_reasons": 0,
            "thermal_violation_ns": 1_000}
    return [GpuSample(index=i, **(base | gpu3 if i == 3 else base)) for i in range(8)]


def _holds(out: list[GpuSample]) -> dict[int, tuple[int | None, int | None, int | None]]:
    return {g.index: (g.throttled_last_ts, g.throttled_last_reasons, g.hot_last_ts)
            for g in out if (g.throttled_last_ts, g.hot_last_ts) != (None, None)}


def test_nothing_held_is_the_list_itself_nothing_copied() -> None:
    """Nearly every sample of a fleet: the simulator runs thousands of agents."""
    ew = ErrorWindows()
    gpus = _gpus()
    assert ew.gpus(gpus, T0) is gpus
    assert ew.gpus(gpus, T0 + 1000) is gpus
    assert all(g.throttled_last_ts is None and g.hot_last_ts is None for g in gpus)


def test_an_idle_gpu_that_throttled_for_heat_is_held_until_it_works_a_minute_or_an_hour() -> None:
    ew = ErrorWindows()
    ew.gpus(_gpus(), T0)
    out = ew.gpus(_gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=5_000), T0 + 1000)
    assert _holds(out) == {3: (T0 + 1000, SW_THERMAL, None)}
    # Its job ends: idle, it cannot show that its cooling is fixed.
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=5_000)
    for now in (T0 + 2000, T0 + 1000 + THROTTLE_HOLD_MS + 1, T0 + 1000 + THROTTLE_IDLE_HOLD_MS):
        assert _holds(ew.gpus(idle, now)) == {3: (T0 + 1000, SW_THERMAL, None)}, now
    assert _holds(ew.gpus(idle, T0 + 1001 + THROTTLE_IDLE_HOLD_MS)) == {}
    # A new throttle, then a minute of work without one clears it, as the console's rule.
    t1 = T0 + 2 * THROTTLE_IDLE_HOLD_MS
    ew.gpus(_gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=9_000), t1)
    cool = _gpus(thermal_violation_ns=9_000)
    for s in range(1, 61):
        assert _holds(ew.gpus(cool, t1 + s * 1000)) == {3: (t1, SW_THERMAL, None)}, s
    assert _holds(ew.gpus(cool, t1 + 61_000)) == {}


def test_a_grown_violation_counter_holds_and_a_power_brake_clears_after_its_minute() -> None:
    ew = ErrorWindows()
    ew.gpus(_gpus(util_pct=0.0), T0)
    # No throttle bit, but the thermal violation time grew: thermal, as the console reads it.
    grown = _gpus(util_pct=0.0, thermal_violation_ns=2_000)
    assert _holds(ew.gpus(grown, T0 + 1000)) == {3: (T0 + 1000, 0, None)}
    assert _holds(ew.gpus(grown, T0 + 1000 + 10 * THROTTLE_HOLD_MS)) == {3: (T0 + 1000, 0, None)}
    # A power brake is the facility's, not the GPU's cooling: its minute, busy or not.
    other = ErrorWindows()
    other.gpus(_gpus(util_pct=0.0), T0)
    other.gpus(_gpus(util_pct=0.0, clock_event_reasons=POWER_BRAKE), T0 + 1000)
    assert _holds(other.gpus(_gpus(util_pct=0.0), T0 + 1000 + THROTTLE_HOLD_MS)) == {
        3: (T0 + 1000, POWER_BRAKE, None)}
    assert _holds(other.gpus(_gpus(util_pct=0.0), T0 + 1001 + THROTTLE_HOLD_MS)) == {}


def test_a_hot_reading_is_held_until_one_below_the_clear_threshold() -> None:
    ew = ErrorWindows()
    ew.gpus(_gpus(), T0)
    assert _holds(ew.gpus(_gpus(temp_c=87.4), T0 + 1000)) == {3: (None, None, T0 + 1000)}
    assert _holds(ew.gpus(_gpus(temp_c=84.0), T0 + 2000)) == {3: (None, None, T0 + 1000)}
    assert _holds(ew.gpus(_gpus(temp_c=83.9), T0 + 3000)) == {}


def test_the_holds_survive_an_agent_restart(tmp_path) -> None:
    """An agent restart (an upgrade, an OOM kill) in the hour of an idle hold forgot it, and
    its next one-shot status read the GPU ok. The run of work that proves the cooling starts
    again; a file of an older agent (no holds in it) holds nothing, as before."""
    from fleetdeck.agents.state import StateStore

    path = tmp_path / "state-gpu0001.json"
    ew = ErrorWindows()
    ew.gpus(_gpus(), T0)
    ew.gpus(_gpus(clock_event_reasons=SW_THERMAL, temp_c=90.0, thermal_violation_ns=4_000),
            T0 + 1000)
    snap = ew.snapshot(T0 + 1000, "boot-a")
    assert StateStore(path, "gpu0001").save_windows(snap)
    again = ErrorWindows()
    # Another boot: the baselines are left out, the holds are kept (the cooling is as bad).
    assert again.restore(StateStore(path, "gpu0001").load_windows(), T0 + 600_000,
                         "boot-b").startswith("baselines left out")
    idle = _gpus(util_pct=0.0, temp_c=85.0, thermal_violation_ns=0)
    assert _holds(again.gpus(idle, T0 + 600_000)) == {3: (T0 + 1000, SW_THERMAL, T0 + 1000)}
    old = {k: v for k, v in snap.items() if k != "thermal"}
    older = ErrorWindows()
    assert older.restore(old, T0 + 2000, "boot-a") == ""
    assert _holds(older.gpus(idle, T0 + 2000)) == {}
    # Past the idle hold when the next agent starts: over.
    late = ErrorWindows()
    late.restore(snap, T0 + 1001 + THROTTLE_IDLE_HOLD_MS, "boot-a")
    assert _holds(late.gpus(_gpus(util_pct=0.0), T0 + 1001 + THROTTLE_IDLE_HOLD_MS)) == {}
    for bad in ([[3, "x", 32, None]], [[3, T0, 32]], {"3": T0}, [[None, T0, 32, None]]):
        damaged = ErrorWindows()
        assert damaged.restore(snap | {"thermal": bad}, T0 + 2000, "boot-a").startswith(
            "left out"), bad
        assert _holds(damaged.gpus(idle, T0 + 2000)) == {}


def _older_agent_takes(snap: dict[str, Any]) -> bool:
    """Whether the agent before the thermal flag takes ``snap`` back (its shape check, as it
    was: any other item and the whole file, every window, was left out)."""
    if snap.get("v") != 1:
        return False
    return all(isinstance(item, list) and len(item) == 4 and item[0] is not None
               and all(v is None or (type(v) is int and v >= 0) for v in item)
               for item in snap.get("thermal", []))


def test_a_rolled_back_agent_takes_back_the_saved_windows() -> None:
    """The holds were saved with their thermal flag as a fifth element, which the agent before
    it refused: rolled back, it started with every window empty (the hour of IB errors, the
    PCIe minute, the holds; a review). Saved as it reads them, the flag under its own key; this
    agent reads both, and the five of the few agents that wrote them."""
    ew = ErrorWindows()
    ew.gpus(_gpus(), T0)
    # A job that ended mid-throttle: idle bits, the violation time grown; thermal by the flag.
    ew.gpus(_gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=4_000),
            T0 + 1000)
    snap = ew.snapshot(T0 + 1000, "boot-a")
    assert snap["thermal"] and _older_agent_takes(snap)
    again = ErrorWindows()
    assert again.restore(snap, T0 + 2000, "boot-a") == ""
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=4_000)
    # Held past the power-cap minute: the flag came back (without it, idle bits read as power).
    assert _holds(again.gpus(idle, T0 + 120_000)) == {3: (T0 + 1000, IDLE, None)}
    five = {k: v for k, v in snap.items() if k != "thermal_flags"} | {
        "thermal": [[3, T0 + 1000, IDLE, None, 1]]}
    fives = ErrorWindows()
    assert fives.restore(five, T0 + 2000, "boot-a") == ""
    assert _holds(fives.gpus(idle, T0 + 120_000)) == {3: (T0 + 1000, IDLE, None)}
    for bad in ({"3": 1}, [[3, 2]], [[3]], [["3", 1]]):
        damaged = ErrorWindows()
        assert damaged.restore(snap | {"thermal_flags": bad}, T0 + 2000, "boot-a").startswith(
            "left out"), bad


def _judged(t: Telemetry, watched_from: Telemetry | None = None) -> list[str]:
    hist = NodeHistory()
    if watched_from is not None:
        hist.update(watched_from)
    hist.update(t)
    return [f"{f.rule} {f.component}: {f.text}" for f in evaluate(None, t, hist)]


def test_a_console_that_did_not_watch_the_throttle_holds_it_from_the_agent() -> None:
    """A one-shot status's first sample, as a console that watched all along judges it, and a
    console that watched but missed the throttle (an older agent: no fields, its own judgement)."""
    node = FakeNode()
    t = node.telemetry()
    ew = ErrorWindows()
    hot = _gpus(clock_event_reasons=SW_THERMAL, temp_c=89.5, thermal_violation_ns=9_000)
    ew.gpus(_gpus(), t.ts - 120_000)
    ew.gpus(hot, t.ts - 90_000)
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, temp_c=85.0, thermal_violation_ns=9_000)
    sample = replace(t, gpus=tuple(ew.gpus(idle, t.ts)), job=None)
    # Both on the wire, v1 and v2 (a column like any field).
    assert codec.decode_telemetry(codec.encode(sample)) == sample
    payload = wire2.TelemetryEncoder().encode(sample, node.now)
    assert wire2.Reassembler().apply(wire2.decode(payload), payload) == sample
    findings = _judged(sample)
    assert findings == [
        f"G12 gpu3: clock throttled (sw thermal) earlier; {THROTTLE_UNPROVEN}",
        "G13 gpu3: 85 °C, was above max operating (clears below 84 °C)"]
    hist = NodeHistory()
    hist.update(sample)
    assert combine(evaluate(None, sample, hist)) is Verdict.DEGRADED
    assert not still_healthy(None, sample, hist)
    # Within the minute: said so.
    recent = replace(sample, ts=t.ts - 60_000)
    assert _judged(recent)[0] == "G12 gpu3: clock throttled (sw thermal) within the last minute"
    # A console that watched since before the throttle and missed the throttled samples (QoS 0,
    # its carry keeps a node's newest): the agent's holds count for it too.
    watched = replace(t, ts=t.ts - 100_000, gpus=_gpus(thermal_violation_ns=9_000))
    assert _judged(sample, watched_from=watched) == findings
    # An older agent: no fields, today's judgement.
    assert _judged(replace(sample, gpus=idle)) == []


def _tui_and_agent(steps: list[tuple[int, list[GpuSample]]], t: Telemetry,
                   ew: ErrorWindows | None = None, hist: NodeHistory | None = None
                   ) -> list[tuple[int, list[str], int | None]]:
    """Each step as a console that watched all along judges it (its G12/G13 findings) beside
    the agent's hold of gpu3 (``throttled_last_ts``)."""
    ew = ew or ErrorWindows()
    hist = hist or NodeHistory()
    out = []
    for k, (dt, gpus) in enumerate(steps):
        s = replace(t, ts=t.ts + dt, seq=t.seq + k, gpus=ew.gpus(gpus, t.ts + dt), job=None)
        hist.update(s)
        out.append((dt, [f.rule for f in evaluate(None, s, hist)], s.gpus[3].throttled_last_ts))
    return out


def test_a_job_that_ends_mid_throttle_leaves_an_idle_gpu_held_for_its_cooling() -> None:
    """NVML's reason bits are of the sample's moment: the last throttled sample of a job that
    ended mid-throttle has the idle bit (or the power cap under load) and the violation time
    grown, no throttle bit. Read as a power throttle, the idle GPU was forgotten a minute later,
    on the agent and on the console: the 3 a.m. case the hold exists for (a review)."""
    t = FakeNode().telemetry()
    for mid in (IDLE, 0x4):
        idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=9_000)
        steps = [(0, _gpus()),
                 (1000, _gpus(clock_event_reasons=SW_THERMAL, temp_c=88.0,
                              thermal_violation_ns=5_000)),
                 (2000, _gpus(util_pct=0.0, clock_event_reasons=mid,
                              thermal_violation_ns=9_000))]
        steps += [(2000 + s * 1000, idle) for s in (30, 61, 62, 600)]
        seen = _tui_and_agent(steps, t)
        for dt, rules, agent in seen[1:]:
            assert rules == ["G12"] or rules == ["G12", "G13"], (mid, dt)
            assert agent == t.ts + 2000 or dt == 1000, (mid, dt)


def test_a_throttle_the_agent_saw_at_the_consoles_first_sample_is_held() -> None:
    """The agent saw the violation time grow between its sample before and the one-shot
    status's first: the console, with no sample before, cannot; status said ok while a TUI
    held the GPU degraded (a review)."""
    node = FakeNode()
    t = node.telemetry()
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=9_000)
    ew = ErrorWindows()
    ew.gpus(_gpus(util_pct=0.0, clock_event_reasons=IDLE), t.ts - 1000)
    first = replace(t, gpus=ew.gpus(idle, t.ts), job=None)
    assert first.gpus[3].throttled_last_ts == t.ts
    status = NodeHistory()
    for k in range(4):
        s = first if k == 0 else replace(first, ts=t.ts + 1000 * k,
                                         gpus=ew.gpus(idle, t.ts + 1000 * k))
        status.update(s)
        assert [f"{f.rule} {f.text}" for f in evaluate(None, s, status)] == [
            "G12 clock throttled (thermal violation time grew) within the last minute"], k
        assert not still_healthy(None, s, status), k


def _saved(saved_ms: int, thermal: list[list[int | None]]) -> dict[str, Any]:
    """A saved file of an agent that held ``thermal`` (``ThermalHolds.snapshot``)."""
    return ErrorWindows().snapshot(saved_ms, "boot-a") | {"thermal": thermal}


def _status(s: Telemetry) -> list[str]:
    """A one-shot ``status`` at ``s``: a console whose first sample of the node it is."""
    hist = NodeHistory()
    hist.update(s)
    return [f.rule for f in evaluate(None, s, hist)]


def _tui_and_status(steps: list[tuple[int, list[GpuSample]]], t: Telemetry,
                    ew: ErrorWindows | None = None, hist: NodeHistory | None = None
                    ) -> list[tuple[int, list[str], list[str]]]:
    """Each step as a console that watched all along (the TUI) and a one-shot status at that
    sample judge it: their G12/G13 findings, which must agree."""
    ew = ew or ErrorWindows()
    hist = hist or NodeHistory()
    out = []
    for k, (dt, gpus) in enumerate(steps):
        s = replace(t, ts=t.ts + dt, seq=t.seq + k, gpus=ew.gpus(gpus, t.ts + dt), job=None)
        hist.update(s)
        out.append((dt, [f.rule for f in evaluate(None, s, hist)], _status(s)))
    return out


def test_a_console_that_missed_the_throttled_sample_holds_it_from_the_agent() -> None:
    """A console watching the node before the throttle that missed its one throttled sample
    (QoS 0 telemetry, the carry keeps each node's newest; no violation counter from NVML) had
    no hold of its own: the TUI read the idle GPU ok for the hour ``status`` held it (a review).
    The agent's hold counts for it as for a new console, in the findings and the fast path."""
    t = FakeNode().telemetry()
    ew, hist = ErrorWindows(), NodeHistory()
    busy = _gpus(thermal_violation_ns=None, temp_c=70.0)
    hot = _gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=None, temp_c=88.0)
    warm = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=None, temp_c=85.0)
    steps = [(0, busy), (1000, hot)] + [(1000 + s * 1000, warm) for s in (1, 60, 600, 1800)]
    seen = []
    for k, (dt, gpus) in enumerate(steps):
        s = replace(t, ts=t.ts + dt, seq=t.seq + k, gpus=ew.gpus(gpus, t.ts + dt), job=None)
        if dt == 1000:
            continue  # never reached this console
        hist.update(s)
        tui = [f.rule for f in evaluate(None, s, hist)]
        assert tui == _status(s), dt
        assert still_healthy(None, s, hist) is (not tui), dt
        seen.append(tui)
    assert seen == [[]] + [["G12", "G13"]] * 4


def test_a_sample_with_no_gpu_rows_leaves_the_holds_and_baselines_as_they_were() -> None:
    """A GPU read that raised (or NVML not open) sends no rows: taken as every GPU gone, it
    ended each hold while the console kept its own, so the TUI held G12 and a new status said
    "ok ... do not drain" of the idle GPU (a review)."""
    t = FakeNode().telemetry()
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, temp_c=85.0, thermal_violation_ns=5_000)
    steps = [(0, _gpus()),
             (1000, _gpus(clock_event_reasons=SW_THERMAL, temp_c=88.0,
                          thermal_violation_ns=5_000)),
             (2000, idle), (3000, []), (4000, idle), (120_000, idle)]
    seen = _tui_and_status(steps, t)
    assert [(dt, tui) for dt, tui, _ in seen] == [
        (0, []), (1000, ["G12", "G13"]), (2000, ["G12", "G13"]), (3000, ["G1"]),
        (4000, ["G12", "G13"]), (120_000, ["G12", "G13"])]
    for dt, tui, status in seen:
        assert status == tui, dt
    # The violation counter's baseline too: what it grew by across the empty sample is a
    # throttle, on the agent as on the console.
    ew, hist = ErrorWindows(), NodeHistory()
    cool = _gpus(util_pct=0.0, clock_event_reasons=IDLE)
    grown = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=3_000)
    seen = _tui_and_status([(0, cool), (1000, []), (2000, grown)], t, ew, hist)
    assert seen[-1][1:] == (["G12"], ["G12"])


def test_a_gpu_gone_from_the_rows_is_held_as_an_idle_one_for_the_hour() -> None:
    """A GPU no longer in the rows (a node rebuilt with fewer, a source that drops it) is not
    read: its holds age as an idle GPU's, over after the idle hour, as the console's (it keeps
    the GPU's history). Deleted at once, a GPU back in the rows read ok on status while the TUI
    held it (a review); kept for ever, the fast path stayed off."""
    t = FakeNode().telemetry()
    ew, hist = ErrorWindows(), NodeHistory()
    without3 = [g for g in _gpus(util_pct=0.0, thermal_violation_ns=5_000) if g.index != 3]
    back = _gpus(util_pct=0.0, temp_c=85.0, thermal_violation_ns=5_000)
    steps = [(0, _gpus()),
             (1000, _gpus(clock_event_reasons=SW_THERMAL, temp_c=90.0, thermal_violation_ns=5_000)),
             (2000, without3), (600_000, without3), (600_001, back), (600_002, without3),
             (1000 + THROTTLE_IDLE_HOLD_MS, without3)]
    seen = _tui_and_status(steps, t, ew, hist)
    assert seen[4][1:] == (["G12", "G13"], ["G12", "G13"])
    saved = ew.snapshot(t.ts + 1000 + THROTTLE_IDLE_HOLD_MS, "boot-a")
    assert (saved["thermal"], saved["thermal_flags"]) == ([[3, t.ts + 1000, SW_THERMAL,
                                                           t.ts + 1000]], [[3, 1]])
    # Over once the hour has passed: the holds gone, the fast path back (nothing copied).
    late = t.ts + 1001 + THROTTLE_IDLE_HOLD_MS
    assert _holds(ew.gpus(without3, late)) == {}
    assert ew.snapshot(late, "boot-a")["thermal"] == []
    assert ew.gpus(without3, late + 1000) is without3
    # Back after the hour, busy: over on the agent and on the console (which kept its history
    # and would otherwise have held it for a minute of work).
    busy = _gpus(temp_c=83.0, thermal_violation_ns=5_000)
    seen = _tui_and_status([(1002 + THROTTLE_IDLE_HOLD_MS, busy)], t, ew, hist)
    assert seen[0][1:] == ([], [])


def test_a_gpu_off_the_bus_is_idle_not_proven_by_its_missing_utilisation() -> None:
    """A GPU off the bus keeps its row (``present`` False, no utilisation): read as busy, its
    thermal hold was "proven" and cleared a minute later, on the agent and the console, though
    an XID 79 is often heat (a review). It is idle: the hour holds."""
    t = FakeNode().telemetry()
    gone = [GpuSample(index=3, present=False) if g.index == 3 else g
            for g in _gpus(thermal_violation_ns=5_000)]
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=0)
    steps = [(0, _gpus()),
             (1000, _gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=5_000))]
    steps += [(s * 1000, gone) for s in range(2, 125)]
    steps += [(125_000, idle), (126_000, idle)]
    seen = _tui_and_status(steps, t)
    assert [seen[-2][1:], seen[-1][1:]] == [(["G12"], ["G12"]), (["G12"], ["G12"])]


def test_a_restored_hot_reading_holds_until_one_below_the_clear_threshold() -> None:
    """G13 holds until a reading below TEMP_CLEAR_C however long ago the hot one was, as a
    running agent holds it; a restart dropped one over an hour old, and status said ok of the
    GPU in the band the TUI held (a review)."""
    t = FakeNode().telemetry()
    ew, hist = ErrorWindows(), NodeHistory()
    warm = _gpus(util_pct=0.0, temp_c=85.0)
    later = 2 * THROTTLE_IDLE_HOLD_MS
    steps = [(0, _gpus()), (1000, _gpus(temp_c=88.0)), (2000, warm), (later, warm)]
    assert _tui_and_status(steps, t, ew, hist)[-1][1:] == (["G13"], ["G13"])
    again = ErrorWindows()
    assert again.restore(ew.snapshot(t.ts + later, "boot-a"), t.ts + later + 1000,
                         "boot-a") == ""
    restarted = replace(t, bdSeq=t.bdSeq + 1)
    seen = _tui_and_status([(later + 1000, warm), (later + 2000, _gpus(temp_c=83.9))],
                           restarted, again, hist)
    assert [x[1:] for x in seen] == [(["G13"], ["G13"]), ([], [])]


def test_a_thermal_throttle_stays_thermal_whatever_its_last_sample_shows() -> None:
    """Only the last throttled sample's bits decided: a thermal throttle (0x20) then a power
    brake sample (0x80), or the violation time grown beside HW slowdown (0x8, raised for heat
    too) or a power brake, cleared in a minute on the idle GPU, agent and console alike (a
    review). Thermal once, thermal until the hold ends, across an agent restart too."""
    t = FakeNode().telemetry()
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=9_000)
    cases = {
        "thermal then power brake": [
            _gpus(util_pct=0.0, clock_event_reasons=SW_THERMAL, thermal_violation_ns=9_000),
            _gpus(util_pct=0.0, clock_event_reasons=POWER_BRAKE, thermal_violation_ns=9_000)],
        "grown with hw slowdown": [_gpus(util_pct=0.0, clock_event_reasons=0x8,
                                         thermal_violation_ns=9_000)],
        "grown with power brake": [_gpus(util_pct=0.0, clock_event_reasons=POWER_BRAKE,
                                         thermal_violation_ns=9_000)]}
    for name, throttled in cases.items():
        ew, hist = ErrorWindows(), NodeHistory()
        steps = [(0, _gpus(util_pct=0.0))] + [(1000 * (k + 1), g) for k, g in enumerate(throttled)]
        last = 1000 * len(throttled)
        steps += [(last + s * 1000, idle) for s in (1, 30, 62, 600)]
        for dt, tui, status in _tui_and_status(steps, t, ew, hist)[1:]:
            assert (tui, status) == (["G12"], ["G12"]), (name, dt)
        # An agent restart keeps it thermal (the console's history does).
        again = ErrorWindows()
        at = last + 600_000
        assert again.restore(ew.snapshot(t.ts + at, "boot-a"), t.ts + at, "boot-a") == ""
        restarted = replace(t, bdSeq=t.bdSeq + 1)
        for dt, tui, status in _tui_and_status([(at + s * 1000, idle) for s in (1, 62, 120)],
                                               restarted, again, hist):
            assert (tui, status) == (["G12"], ["G12"]), (name, dt)
    # A power brake alone (no thermal bit, the counter still) clears after its minute.
    steps = [(0, _gpus(util_pct=0.0)), (1000, _gpus(util_pct=0.0, clock_event_reasons=POWER_BRAKE))]
    steps += [(1000 + s * 1000, _gpus(util_pct=0.0)) for s in (60, 61)]
    assert [x[1:] for x in _tui_and_status(steps, t)][2:] == [(["G12"], ["G12"]), ([], [])]


def test_holds_saved_by_a_clock_ahead_count_from_now() -> None:
    """An agent whose clock ran a day ahead saved its holds; after the clock was put right
    they never aged: held idle for a day and an hour (a review)."""
    ahead = T0 + 86_400_000
    ew = ErrorWindows()
    assert not ew.restore(_saved(ahead, [[3, ahead, SW_THERMAL, ahead]]), T0,
                          "boot-a").startswith("left out")
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, temp_c=85.0)
    assert _holds(ew.gpus(idle, T0)) == {3: (T0, SW_THERMAL, T0)}
    assert _holds(ew.gpus(idle, T0 + THROTTLE_IDLE_HOLD_MS)) == {3: (T0, SW_THERMAL, T0)}
    assert _holds(ew.gpus(idle, T0 + 1 + THROTTLE_IDLE_HOLD_MS)) == {3: (None, None, T0)}
    # The clock put right while it ran: the same, on the agent and on the console.
    t = FakeNode().telemetry()
    ew, hist = ErrorWindows(), NodeHistory()
    day = 86_400_000
    steps = [(day, _gpus()), (day + 1000, _gpus(clock_event_reasons=SW_THERMAL))]
    steps += [(s, idle) for s in (0, THROTTLE_IDLE_HOLD_MS, THROTTLE_IDLE_HOLD_MS + 1)]
    assert [(rules, agent) for _, rules, agent in _tui_and_agent(steps, t, ew, hist)][2:] == [
        (["G12"], t.ts), (["G12"], t.ts), ([], None)]


def test_an_agent_restart_restarts_the_proving_minute_on_the_console_too() -> None:
    """The restored hold restarts the minute of work that proves the cooling; the console kept
    its own run, so the TUI read the GPU ok up to a minute before status did (a review)."""
    node = FakeNode()
    t = node.telemetry()
    ew, hist = ErrorWindows(), NodeHistory()
    busy = _gpus(thermal_violation_ns=5_000)
    before = _tui_and_agent(
        [(0, _gpus()), (1000, _gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=5_000))]
        + [(s * 1000, busy) for s in range(2, 31)], t, ew, hist)
    assert before[-1][1:] == (["G12"], t.ts + 1000)
    # The agent restarts: a new session (bdSeq), its first sample seq 1, the holds restored.
    again = ErrorWindows()
    assert again.restore(ew.snapshot(t.ts + 30_000, "boot-a"), t.ts + 31_000, "boot-a") == ""
    restarted = replace(t, bdSeq=t.bdSeq + 1, seq=1)
    after = _tui_and_agent([(s * 1000, busy) for s in range(31, 95)], restarted, again, hist)
    for dt, rules, agent in after:
        assert (rules == ["G12"]) == (agent is not None), dt
    assert next(dt for dt, rules, _ in after if not rules) == 91_000


def test_a_restart_whose_first_sample_was_lost_restarts_the_proving_minute_a_reconnect_not(
        ) -> None:
    """Telemetry is QoS 0: the console restarted the proving minute only if it got the new
    agent's seq-1 sample, and the TUI read the GPU ok up to a minute before status did (a
    review). A reconnect of the same agent (a new session, its seq going on) keeps its proving
    run, on the agent and on the console."""
    t = FakeNode().telemetry()
    busy = _gpus(thermal_violation_ns=5_000)
    for restart in (True, False):
        ew, hist = ErrorWindows(), NodeHistory()
        before = _tui_and_agent(
            [(0, _gpus()), (1000, _gpus(clock_event_reasons=SW_THERMAL,
                                        thermal_violation_ns=5_000))]
            + [(s * 1000, busy) for s in range(2, 31)], t, ew, hist)
        assert before[-1][1:] == (["G12"], t.ts + 1000)
        if restart:
            again = ErrorWindows()
            assert again.restore(ew.snapshot(t.ts + 30_000, "boot-a"), t.ts + 31_000,
                                 "boot-a") == ""
            again.gpus(busy, t.ts + 31_000)  # its seq-1 sample, lost on the way
            session = replace(t, bdSeq=t.bdSeq + 1, seq=2)
        else:
            again, session = ew, replace(t, bdSeq=t.bdSeq + 1, seq=t.seq + 31)
        after = _tui_and_agent([(s * 1000, busy) for s in range(32, 95)], session, again, hist)
        tui = next(dt for dt, rules, _ in after if not rules)
        agent = next(dt for dt, _, agent in after if agent is None)
        # The agent's run began at the lost sample, the console's at the next: a sample apart
        # (a minute apart before).
        assert (agent, tui) == ((91_000, 92_000) if restart else (62_000, 62_000)), restart


def _agent_of(sim: Any, path: Any, now: list[float]) -> Any:
    """A new agent process of ``sim``'s node, its state in ``path`` (a restart)."""
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.state import StateStore
    from fleetdeck.brokerurl import BrokerURL

    agent = NodeAgent(cluster="test", node_id=sim.node_id, source=sim,
                      url=BrokerURL("127.0.0.1", 1), clock=lambda: now[0],
                      state=StateStore(path, sim.node_id))
    agent.bd_seq = agent._next_bd_seq()
    return agent


def _gpu3_hold(agent: Any, now: list[float]) -> int | None:
    """The agent's birth, then its next sample's ``throttled_last_ts`` of gpu3."""
    agent.birth()
    now[0] += 1.0
    return next(g.throttled_last_ts for g in agent.telemetry().gpus if g.index == 3)


def test_a_gpu_replaced_at_its_index_does_not_inherit_the_hold(tmp_path) -> None:
    """A technician replaced gpu3, whose thermal violation time had grown (G12, held up to an
    hour idle), and the node rebooted: samples name a GPU by index only, so the new, healthy
    GPU was held degraded with the advice to drain the node just repaired. The hold is of the
    GPU whose uuid the birth's inventory gave; the same GPU keeps it across a restart, and the
    file stays one the agent before the uuids takes back whole."""
    from fleetdeck.agents.sim.node import SimNode

    for replaced in (True, False):
        now = [1_000_000.0]
        sim = SimNode("gpu0001", seed=1)
        path = tmp_path / f"state-{replaced}.json"
        first = _agent_of(sim, path, now)
        assert _gpu3_hold(first, now) is None
        sim.gpus[3].thermal_violation_ns += 5 * 10**9
        now[0] += 1.0
        held = next(g.throttled_last_ts for g in first.telemetry().gpus if g.index == 3)
        assert held == int(now[0] * 1000)
        first.keep_windows(at_once=True)
        saved = first.state.load_windows()
        assert _older_agent_takes(saved) and saved["thermal_uuids"] == [[3, sim.gpus[3].uuid]]
        if replaced:
            sim.gpus[3].uuid, sim.gpus[3].thermal_violation_ns = "GPU-replaced", 0
        now[0] += 600.0
        assert _gpu3_hold(_agent_of(sim, path, now), now) == (None if replaced else held)


def test_a_hold_of_an_unknown_gpu_is_kept_and_a_rebirth_compares_too() -> None:
    """A file of an agent before the uuids (or a source without them): which GPU the hold is
    of is not known, so it is kept, as before. A hold restored before any birth is compared
    with the first birth's GPUs; a birth of a running agent with another GPU drops it too."""
    gpu3 = {i: f"GPU-{i}" for i in range(8)}
    hot = _gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=5_000)
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=5_000)
    ew = ErrorWindows()
    ew.inventory(gpu3)
    ew.gpus(_gpus(), T0)
    ew.gpus(hot, T0 + 1000)
    snap = ew.snapshot(T0 + 1000, "boot-a")
    swapped = gpu3 | {3: "GPU-new"}
    held = {3: (T0 + 1000, SW_THERMAL, None)}
    cases = {"no uuids saved": ({k: v for k, v in snap.items() if k != "thermal_uuids"},
                                swapped, held),
             "no uuid in the inventory": (snap, gpu3 | {3: ""}, held),
             "the same GPU": (snap, gpu3, held),
             "another GPU": (snap, swapped, {})}
    for name, (saved, inventory, expected) in cases.items():
        for birth_first in (True, False):
            again = ErrorWindows()
            if birth_first:
                again.inventory(inventory)
            assert again.restore(saved, T0 + 2000, "boot-a") == "", name
            if not birth_first:
                again.inventory(inventory)
            assert _holds(again.gpus(idle, T0 + 2000)) == expected, (name, birth_first)
    # A running agent's rebirth showing another GPU at gpu3.
    ew.inventory(swapped)
    assert _holds(ew.gpus(idle, T0 + 3000)) == {}


def test_a_damaged_thermal_uuid_leaves_that_uuid_unknown_not_the_file_out() -> None:
    """One pair of another shape under ``thermal_uuids`` made the agent leave out the whole
    windows file (the IB error hour N2/N3, the PCIe minute, every hold): a damaged uuid is
    an unknown one, and an unknown one keeps its hold, as before the uuids."""
    ew = ErrorWindows()
    ew.inventory({i: f"GPU-{i}" for i in range(8)})
    ew.gpus(_gpus(), T0)
    ew.gpus(_gpus(clock_event_reasons=SW_THERMAL, thermal_violation_ns=5_000), T0 + 1000)
    snap = ew.snapshot(T0 + 1000, "boot-a")
    idle = _gpus(util_pct=0.0, clock_event_reasons=IDLE, thermal_violation_ns=5_000)
    for bad in ({"3": "GPU-3"}, "GPU-3", [[3, 3]], [[3]], [["3", "GPU-3"]], [[3, "GPU-3", "x"]],
                [[3, None]], [[-3, "GPU-3"]], [None], [[3, "GPU-3"], [4, "GPU-3"]],
                [[3, "GPU-new"], [3, "GPU-3"]], [[3, "GPU-3"], [3, "GPU-new"]]):
        damaged = ErrorWindows()
        assert damaged.restore(snap | {"thermal_uuids": bad}, T0 + 2000, "boot-a") == "", bad
        damaged.inventory({i: f"GPU-{i}" for i in range(8)} | {3: "GPU-new"})
        assert _holds(damaged.gpus(idle, T0 + 2000)) == {3: (T0 + 1000, SW_THERMAL, None)}, bad


def _rows(**at: dict[str, Any]) -> list[GpuSample]:
    """Eight cool, idle GPUs; ``at["gpu5"]``'s values on gpu5 and so on."""
    base = {"util_pct": 0.0, "temp_c": 60.0, "clock_event_reasons": IDLE,
            "thermal_violation_ns": 1_000}
    return [GpuSample(index=i, **(base | at.get(f"gpu{i}", {}))) for i in range(8)]


def test_a_renumbered_or_swapped_gpu_takes_its_hold_along() -> None:
    """gpu3 dropped off PCIe and the node rebooted: NVML numbers the other seven 0-6, GPUs 4-7
    at 3-6 (docs/real-nodes.md). Matched by index, gpu5's hold (now gpu4's GPU) was dropped
    as a replacement and gpu3's went to the GPU now at 3; two GPUs swapped between slots lost
    both. A hold follows its uuid; one whose GPU is absent from the inventory is dropped."""
    gpus = {i: f"GPU-{i}" for i in range(8)}
    renumbered = {i: gpus[i if i < 3 else i + 1] for i in range(7)}
    swapped = gpus | {2: "GPU-5", 5: "GPU-2"}
    hot = {"clock_event_reasons": SW_THERMAL, "thermal_violation_ns": 5_000}
    cases = {"renumbered": (renumbered, {4: T0 + 1000}), "swapped": (swapped, {5: T0 + 1000})}
    for name, (inventory, expected) in cases.items():
        for how in ("rebirth", "restore then birth", "birth then restore"):
            ew = ErrorWindows()
            ew.inventory(gpus)
            ew.gpus(_rows(), T0)
            ew.gpus(_rows(gpu3=hot, gpu5=hot) if name == "renumbered" else _rows(gpu2=hot),
                    T0 + 1000)
            if how != "rebirth":
                snap = ew.snapshot(T0 + 1000, "boot-a")
                ew = ErrorWindows()
                if how == "birth then restore":
                    ew.inventory(inventory)
                assert ew.restore(snap, T0 + 2000, "boot-a") == ""
            # A stand-in birth without GPUs (the first inventory hung) says nothing of them.
            ew.inventory({})
            if how != "birth then restore":
                ew.inventory(inventory)
            rows = [r for r in _rows() if r.index in inventory]
            got = {i: h[0] for i, h in _holds(ew.gpus(rows, T0 + 2000)).items()}
            assert got == expected, (name, how)


def _held_at(ew: ErrorWindows, now: int) -> dict[int, int | None]:
    """The throttle each index holds at an idle sample of eight GPUs."""
    return {i: h[0] for i, h in _holds(ew.gpus(_rows(), now)).items()}


def test_a_uuid_or_an_index_listed_twice_in_a_birth_moves_no_hold() -> None:
    """A birth is network input: a buggy source or a forged one listed gpu0's uuid at gpu0 and
    gpu1 (or gpu0 with two uuids). The last pair won: gpu0's hold moved to gpu1 and gpu1's was
    dropped, and births that repeated it moved the hold back and forth. Such a uuid is
    unknown: the holds stay where they are, birth after birth, restart or not."""
    gpus = {i: f"GPU-{i}" for i in range(8)}
    rest = [(i, u) for i, u in gpus.items() if i > 1]
    hot = {"clock_event_reasons": SW_THERMAL, "thermal_violation_ns": 5_000}
    births = {"a uuid at two indices": [(0, "GPU-0"), (1, "GPU-0"), *rest],
              "an index with two uuids": [(0, "GPU-0"), (0, "GPU-new"), (1, "GPU-1"), *rest],
              "both": [(0, "GPU-1"), (0, "GPU-0"), (1, "GPU-0"), *rest]}
    for name, birth in births.items():
        for restart in (False, True):
            ew = ErrorWindows()
            ew.inventory(gpus)
            ew.gpus(_rows(), T0)
            ew.gpus(_rows(gpu0=hot), T0 + 1000)
            ew.gpus(_rows(gpu1=hot | {"thermal_violation_ns": 9_000}), T0 + 1500)
            if restart:
                snap = ew.snapshot(T0 + 1500, "boot-a")
                ew = ErrorWindows()
                assert ew.restore(snap, T0 + 1600, "boot-a") == ""
            for k in range(3):
                ew.inventory(birth)
                assert _held_at(ew, T0 + 2000 + k) == {0: T0 + 1000, 1: T0 + 1500}, (name, k)


def test_a_known_gpu_moved_to_the_index_of_an_unknown_ones_hold_does_not_inherit_it() -> None:
    """gpu1's uuid was unknown when it throttled (a source without one); then the birth shows
    gpu0's GPU at gpu1. That GPU inherited the unknown GPU's hold when it had none of its own,
    and lost it when it had one (the very bug the uuids fix). The hold is dropped either way;
    one whose index holds no known GPU that moved there stays."""
    hot = {"clock_event_reasons": SW_THERMAL, "thermal_violation_ns": 5_000}
    gpus = {i: f"GPU-{i}" for i in range(8)} | {1: ""}
    moved_in = gpus | {0: "GPU-new", 1: "GPU-0"}
    cases = {"moved in, no hold of its own": (moved_in, False, {}),
             "moved in with its own": (moved_in, True, {1: T0 + 500}),
             "still unknown": (gpus | {0: "GPU-new"}, False, {1: T0 + 1000}),
             "a new GPU": (gpus | {1: "GPU-new"}, False, {1: T0 + 1000})}
    for name, (birth, own, expected) in cases.items():
        ew = ErrorWindows()
        ew.inventory(gpus)
        ew.gpus(_rows(), T0)
        if own:
            ew.gpus(_rows(gpu0=hot), T0 + 500)
        ew.gpus(_rows(gpu1=hot | {"thermal_violation_ns": 9_000}), T0 + 1000)
        ew.inventory(birth)
        assert _held_at(ew, T0 + 2000) == expected, name


def test_a_hot_gpu_off_the_bus_keeps_g12_and_g13_on_status_as_in_the_tui() -> None:
    """A GPU that throttled at 92 °C and then fell off the bus keeps G12 and G13 'before it
    went missing' in a console that watched it go (docs/architecture.md, 'Thermal findings
    hold'). A one-shot status (its first sample is of the GPU gone) read G1 alone: the console
    did not read the agent's throttle hold of a GPU off the bus, and the agent dropped its hot
    hold at the first sample with no temperature (a review). Both hold for the idle hour."""
    t = FakeNode().telemetry()
    gone = [GpuSample(index=3, present=False) if g.index == 3 else g
            for g in _gpus(thermal_violation_ns=5_000)]
    steps = [(0, _gpus()),
             (1000, _gpus(clock_event_reasons=SW_THERMAL, temp_c=92.0,
                          thermal_violation_ns=5_000))]
    steps += [(s * 1000, gone) for s in (2, 3, 120, 1800)]
    steps += [(2000 + THROTTLE_IDLE_HOLD_MS, gone)]
    seen = _tui_and_status(steps, t)
    for dt, tui, status in seen[2:-1]:
        assert tui == status == ["G1", "G12", "G13"], (dt, tui, status)
    assert seen[-1][1:] == (["G1"], ["G1"])
    cool = _tui_and_status([(0, _gpus()), (1000, gone), (2000, gone)], t)
    assert [seen[1:] for seen in cool[1:]] == [(["G1"], ["G1"])] * 2  # never hot: nothing
