import pickle
import re

import pytest
from msgspec.structs import replace

from fleetdeck.console.health import (
    NO_FINDINGS,
    Finding,
    NodeHistory,
    Severity,
    Verdict,
    combine,
    describe_clock_events,
    evaluate,
    still_healthy,
)
from fleetdeck.console.state import FleetState
from tests.helpers import FakeNode


def rules(node: FakeNode, mutate, samples: int = 1, every_s: float = 1.0):
    hist = NodeHistory()
    birth = node.birth()
    t = None
    for i in range(samples):
        t = node.telemetry(advance=every_s)
        t = mutate(t, i)
        hist.update(t)
    findings = evaluate(birth, t, hist)
    return {f.rule for f in findings}, combine(findings), findings


def gpu(t, i, **fields):
    gpus = list(t.gpus)
    g = gpus[i]
    nested = {k: v for k, v in fields.items() if k in ("ecc", "row_remap", "nvlink")}
    flat = {k: v for k, v in fields.items() if k not in nested}
    for k, v in nested.items():
        flat[k] = replace(getattr(g, k), **v)
    gpus[i] = replace(g, **flat)
    return replace(t, gpus=gpus)


def port(t, i, **fields):
    ports = list(t.ib_ports)
    ports[i] = replace(ports[i], **fields)
    return replace(t, ib_ports=ports)


def test_healthy_sim_node_has_no_findings():
    found, verdict, _ = rules(FakeNode(), lambda t, i: t, samples=3)
    assert found == set() and verdict is Verdict.OK


@pytest.mark.parametrize(
    ("mutate", "rule", "verdict"),
    [
        (lambda t, i: gpu(t, 3, present=False), "G1", Verdict.FAILED),
        (lambda t, i: replace(t, gpus=t.gpus[:7]), "G1", Verdict.FAILED),
        (lambda t, i: gpu(t, 2, xid_last=79, xid_last_ts=t.ts - 1000), "G2", Verdict.FAILED),
        (lambda t, i: gpu(t, 2, xid_last=63, xid_last_ts=t.ts), "G3", Verdict.DEGRADED),
        (lambda t, i: gpu(t, 1, ecc={"dbe_vol": 1}), "G4", Verdict.FAILED),
        (lambda t, i: gpu(t, 1, row_remap={"failure": True}), "G5", Verdict.FAILED),
        (lambda t, i: gpu(t, 1, row_remap={"pending": True}), "G6", Verdict.DEGRADED),
        (lambda t, i: gpu(t, 1, row_remap={"uncorrectable": 512}), "G7", Verdict.DEGRADED),
        (lambda t, i: gpu(t, 1, ecc={"sram_unc_agg": 1}), "G8", Verdict.FAILED),
        (lambda t, i: gpu(t, 5, nvlink={"links_up": 16}), "G9", Verdict.FAILED),
        (lambda t, i: gpu(t, 0, clock_event_reasons=0x40), "G12", Verdict.DEGRADED),
        (lambda t, i: gpu(t, 0, temp_c=88.0), "G13", Verdict.DEGRADED),
        (lambda t, i: port(t, 6, state="DOWN", state_id=1, phys_state="Polling"), "N1",
         Verdict.FAILED),
        (lambda t, i: port(t, 6, rate_gbps=200.0), "N1", Verdict.FAILED),
        (lambda t, i: port(t, 6, carrier_losses_24h=5), "N5", Verdict.FAILED),
    ],
)
def test_single_sample_rules(mutate, rule, verdict):
    found, got, findings = rules(FakeNode(), mutate)
    assert rule in found, findings
    assert got is verdict


def test_old_xid_outside_two_hours_is_not_a_finding():
    found, _, _ = rules(FakeNode(), lambda t, i: gpu(t, 2, xid_last=79,
                                                       xid_last_ts=t.ts - 3 * 3600 * 1000))
    assert "G2" not in found


def test_link_downed_increment_is_fatal():
    found, verdict, _ = rules(FakeNode(), lambda t, i: port(t, 2, link_downed=i), samples=2)
    assert "N2" in found and verdict is Verdict.FAILED


def test_the_two_ports_of_a_dual_port_hca_are_counted_apart():
    """Kept by device alone, port 1's link_downed of 1 and port 2's 0 were compared with each
    other at every sample, and both read N2 "link_downed increased" on a quiet fabric (a
    newcomer's run on the node_exporter sysfs fixture, mlx4_0 ports 1 and 2)."""
    def dual(t, i):
        ports = list(t.ib_ports)
        ports[0] = replace(ports[0], dev="mlx4_0", port=1, link_downed=1)
        ports[1] = replace(ports[1], dev="mlx4_0", port=2, link_downed=0)
        return replace(t, ib_ports=ports)

    found, _, findings = rules(FakeNode(), dual, samples=4)
    assert "N2" not in found, findings
    found, _, findings = rules(FakeNode(), lambda t, i: port(dual(t, i), 1, link_downed=i // 2),
                               samples=4)
    assert [f.component for f in findings if f.rule == "N2"] == ["mlx4_0:2"]


def test_symbol_error_rate_warns_then_hourly_budget_drains():
    found, verdict, _ = rules(FakeNode(), lambda t, i: port(t, 4, symbol_error=i * 50), samples=2)
    assert found == {"N4"} and verdict is Verdict.DEGRADED
    found, verdict, _ = rules(FakeNode(), lambda t, i: port(t, 4, symbol_error=i * 50), samples=4)
    assert "N3" in found and verdict is Verdict.FAILED


def test_counter_reset_is_not_an_increment():
    found, _, _ = rules(FakeNode(), lambda t, i: port(t, 2, link_downed=[5, 0, 0][i]), samples=3)
    assert "N2" not in found


def test_nvlink_replay_growth_drains():
    found, _, _ = rules(FakeNode(), lambda t, i: gpu(t, 1, nvlink={"replay": i}), samples=2)
    assert "G9" in found


def crc(gpu_index: int, flit_per_sample: int, data_per_sample: int = 0):
    """NVLink CRC counters growing by fixed amounts per sample (cumulative, like DCGM's)."""
    return lambda t, i: gpu(t, gpu_index, nvlink={"crc_flit": 5 + i * flit_per_sample,
                                                  "crc_data": 7 + i * data_per_sample})


@pytest.mark.parametrize(
    ("flit", "data", "every_s", "severity", "verdict"),
    [
        (100, 0, 1.0, Severity.DRAIN, Verdict.FAILED),  # exactly the drain threshold
        (60, 40, 1.0, Severity.DRAIN, Verdict.FAILED),  # flit and data errors add up
        (1000, 0, 2.0, Severity.DRAIN, Verdict.FAILED),  # 500/s
        (99, 0, 1.0, Severity.WARN, Verdict.DEGRADED),  # just below drain
        (1, 0, 1.0, Severity.WARN, Verdict.DEGRADED),  # exactly the warn threshold
        (0, 3, 2.0, Severity.WARN, Verdict.DEGRADED),  # 1.5/s
    ],
)
def test_nvlink_crc_rate_g10(flit, data, every_s, severity, verdict):
    found, got, findings = rules(FakeNode(), crc(4, flit, data), samples=2, every_s=every_s)
    assert found == {"G10"}, findings
    [finding] = findings
    assert finding.severity is severity and finding.component == "gpu4"
    assert got is verdict


@pytest.mark.parametrize(
    ("flit", "data", "every_s"),
    [
        (0, 0, 1.0),  # no growth
        (1, 0, 2.0),  # 0.5/s: below warn
        (0, 9, 10.0),  # 0.9/s
    ],
)
def test_nvlink_crc_below_warn_rate_is_no_finding(flit, data, every_s):
    found, got, findings = rules(FakeNode(), crc(4, flit, data), samples=2, every_s=every_s)
    assert found == set(), findings
    assert got is Verdict.OK


def test_nvlink_crc_needs_two_samples_for_a_rate():
    # A large cumulative count in the first sample is history, not a rate: no finding yet.
    found, _, findings = rules(FakeNode(), lambda t, i: gpu(t, 4, nvlink={"crc_flit": 10**6}))
    assert found == set(), findings
    # The same count, unchanged in the next sample: still no rate.
    found, _, findings = rules(FakeNode(), lambda t, i: gpu(t, 4, nvlink={"crc_flit": 10**6}),
                               samples=2)
    assert found == set(), findings


def test_pcie_replay_rate():
    found, _, _ = rules(FakeNode(), lambda t, i: gpu(t, 1, pcie_replay_total=i * 40), samples=2)
    assert "G11" in found


@pytest.mark.parametrize("counted_by", ["console", "agent"])
def test_g11_a_replay_rate_about_the_line_is_one_degraded_held_a_minute(counted_by):
    """A GPU replaying at ~31.5/min, a sliding minute's count crossing 31 every few seconds,
    read ok/degraded 42 times in 6 min (a fault drill: ``inject pcie_replay per_min=31``), a
    timeline line and a store row each. G11 holds a minute after its last count over the line
    (as G12 holds a throttle), whoever counted: this console's window or the agent's minute
    (``pcie_replay_1m``, what a console that just started reads)."""
    storm = 180
    if counted_by == "console":
        edits = [{"pcie_replay_total": i * 63 // 120} for i in range(storm)]
        edits += [{"pcie_replay_total": edits[-1]["pcie_replay_total"]}] * 130
    else:
        edits = [{"pcie_replay_total": 0, "pcie_replay_1m": 32 if i % 4 == 0 else 30}
                 for i in range(storm)]
        edits += [{"pcie_replay_total": 0, "pcie_replay_1m": None}] * 130
    verdicts = _verdicts(edits)
    over = [i for i, (_, found) in enumerate(verdicts)
            if any(f.rule == "G11" and "within the last minute" not in f.text for f in found)]
    assert len(over) > 2 and verdicts[-1][0] is Verdict.OK
    # Degraded at the first count over the line, ok a minute after the last: one change each.
    assert _changes(verdicts) == [(over[0], Verdict.DEGRADED), (over[-1] + 61, Verdict.OK)]
    held = [f for f in verdicts[over[-1] + 30][1] if f.rule == "G11"]
    assert len(held) == 1 and re.fullmatch(
        r"G11 gpu0: PCIe replay over 31/min within the last minute \(peak 3[23]/min\)",
        str(held[0])), held
    # A fixed text while held (the node's findings are not republished each second).
    assert verdicts[over[-1] + 60][1] == verdicts[over[-1] + 1][1]


def test_g11_held_does_not_date_a_storms_peak_to_the_last_minute():
    """1,200 replays/min for 90 s, then 40/min for 5 min, then none: held, G11 said "PCIe
    replay up to 1200/min within the last minute" of a minute that held 40 at most, the 1,200
    six minutes old (a review). The peak is the hold's, the last minute's only "over 31"."""
    total, edits = 0, []
    for i in range(90 + 300 + 100):
        total += 20 if i < 90 else (2 if i % 3 == 0 else 0) if i < 390 else 0
        edits.append({"pcie_replay_total": total})
    verdicts = _verdicts(edits)
    changes = _changes(verdicts)
    assert [v for _, v in changes] == [Verdict.DEGRADED, Verdict.OK], changes
    [held] = [f for f in verdicts[changes[1][0] - 5][1] if f.rule == "G11"]
    assert held.text == "PCIe replay over 31/min within the last minute (peak 1220/min)", held


def test_precheck_refuses_while_g11_holds():
    node, hist = FakeNode(), NodeHistory()
    birth = node.birth()
    for minute in (40, None):
        t = gpu(node.telemetry(), 0, pcie_replay_1m=minute)
        hist.update(t)
        assert {f.rule for f in evaluate(birth, t, hist)} == {"G11"}
        assert not still_healthy(birth, t, hist)


def test_n4_a_symbol_rate_about_the_line_at_a_storms_start_is_one_degraded_held_a_minute():
    """A storm's first seconds at 8-12 symbol errors/s, about N4's 10/s: the node read
    ok/degraded every other second until N3's hour took over, each a timeline line and a store
    row (a fault audit). N4 holds a minute after the last sample over the line, with a fixed
    text; the healthy pre-check refuses while it holds."""
    node, hist = FakeNode(), NodeHistory()
    birth = node.birth()
    total, verdicts = 0, []
    for i in range(100):
        total += (12 if i % 2 else 8) if 1 <= i <= 10 else 0  # 100 in all: no N3
        t = port(node.telemetry(), 4, symbol_error=total)
        hist.update(t)
        found = evaluate(birth, t, hist)
        verdicts.append((combine(found), found))
        assert not (found and still_healthy(birth, t, hist)), (i, found)
    assert _changes(verdicts) == [(1, Verdict.DEGRADED), (70, Verdict.OK)], _changes(verdicts)
    assert [str(f) for f in verdicts[2][1]] == [
        "N4 mlx5_ib4:1: symbol errors over 10/s within the last minute"]
    assert verdicts[69][1] == verdicts[10][1]  # one text while held


def test_clock_event_names():
    assert describe_clock_events(0x41) == "idle, hw thermal"
    assert describe_clock_events(0) == "none"


# --- hysteresis: a GPU at its thermal limit is flagged once, not strobed -------------------------


def _verdicts(edits):
    """Each sample's verdict and findings, one sample a second, gpu0 edited by ``edits[i]``."""
    node, hist = FakeNode(), NodeHistory()
    birth = node.birth()
    out = []
    for fields in edits:
        t = gpu(node.telemetry(), 0, **fields)
        hist.update(t)
        findings = evaluate(birth, t, hist)
        out.append((combine(findings), findings))
    return out


def _changes(verdicts):
    """(sample index, verdict) at every change, the start counting as ok."""
    out, last = [], Verdict.OK
    for i, (v, _) in enumerate(verdicts):
        if v is not last:
            out.append((i, v))
            last = v
    return out


@pytest.mark.parametrize("how", ["bits", "violation time"])
def test_g12_toggling_throttle_is_one_degraded_held_60s_after_the_last_throttled_sample(how):
    # Throttled every third sample for 30 s (the SW thermal bit of a GPU at its limit comes and
    # goes), then never again: flagged on the first sample, cleared 60 s after the last one.
    throttled = [i % 3 == 0 for i in range(30)] + [False] * 70
    if how == "bits":
        edits = [{"clock_event_reasons": 0x20 if on else 0} for on in throttled]
    else:
        total, edits = 0, []
        for on in throttled:
            total += 10**9 if on else 0
            edits.append({"thermal_violation_ns": total})
        edits[0]["clock_event_reasons"] = 0x20  # the first sample has no violation delta
    for e in edits:
        e["util_pct"] = 97.0  # at work: an idle GPU's G12 waits for work to clear
    verdicts = _verdicts(edits)
    last = max(i for i, on in enumerate(throttled) if on)  # 27
    assert _changes(verdicts) == [(0, Verdict.DEGRADED), (last + 61, Verdict.OK)]
    [held] = verdicts[last + 12][1]
    why = "sw thermal" if how == "bits" else "thermal violation time grew"
    assert held.rule == "G12", held
    assert held.text == f"clock throttled ({why}) within the last minute"
    # A fixed text while held: no countdown re-publishing the node's findings every second.
    [end] = verdicts[last + 60][1]
    assert end == held
    assert [str(f) for f in verdicts[last][1]] == [f"G12 gpu0: clock throttled ({why})"]


def test_g13_hovering_at_87_is_one_degraded_until_below_the_clear_threshold():
    temps = ([86.6, 87.2, 86.4, 87.4, 86.9, 87.0, 86.1] * 3  # around max operating
             + [85.5] * 10                                   # in the band: still hot
             + [83.9]                                        # below 84 °C: cleared
             + [86.5, 86.9, 85.0])                           # back up, under 87: not again
    verdicts = _verdicts([{"temp_c": c, "clock_event_reasons": 0} for c in temps])
    assert _changes(verdicts) == [(1, Verdict.DEGRADED), (31, Verdict.OK)]
    assert [str(f) for f in verdicts[1][1]] == ["G13 gpu0: 87 °C at or above max operating (87 °C)"]
    # 86.6 °C in the band reads 86, not a rounded-up 87 beside "above max operating".
    assert [str(f) for f in verdicts[2][1]] == [
        "G13 gpu0: 86 °C, was above max operating (clears below 84 °C)"]
    assert [str(f) for f in verdicts[30][1]] == [
        "G13 gpu0: 85 °C, was above max operating (clears below 84 °C)"]
    # Over the slowdown line the text is as before.
    [hot] = _verdicts([{"temp_c": 90.0}])[0][1]
    assert str(hot) == "G13 gpu0: 90 °C at or above slowdown (89 °C)"
    # Under it, never the slowdown's degree: 88.6 °C read "89 °C above max operating".
    [warm] = _verdicts([{"temp_c": 88.6}])[0][1]
    assert str(warm) == "G13 gpu0: 88 °C at or above max operating (87 °C)"
    # At the shutdown temperature the GPU may power off: said (a fault audit).
    [fire] = _verdicts([{"temp_c": 92.0}])[0][1]
    assert str(fire) == "G13 gpu0: 92 °C at or above shutdown (92 °C): the GPU may power off"


def test_g13_band_clears_when_the_gpu_stops_reporting_a_temperature():
    verdicts = _verdicts([{"temp_c": 88.0}, {"temp_c": None}, {"temp_c": 85.0}])
    assert [v for v, _ in verdicts] == [Verdict.DEGRADED, Verdict.OK, Verdict.OK]


def test_precheck_refuses_while_a_thermal_finding_holds():
    node, hist = FakeNode(), NodeHistory()
    birth = node.birth()
    for fields in ({"clock_event_reasons": 0x40, "temp_c": 88.0}, {"temp_c": 85.0}):
        t = gpu(node.telemetry(), 0, **fields)
        hist.update(t)
        assert {f.rule for f in evaluate(birth, t, hist)} == {"G12", "G13"}
        assert not still_healthy(birth, t, hist)


def _storm(i: int) -> int:
    """symbol_error under a 1,000/s storm that saturates the 16-bit counter at sample 66."""
    return min(0xFFFF, i * 1000)


def test_a_storm_that_saturates_the_counter_keeps_n3_while_it_stays_saturated():
    """A storm past 65535 no longer moves the counter: N3 held only for the hour its window
    held the counts, then the port read healthy while the storm went on. N3 now holds while the
    counter stays saturated, and N6 says why the count stopped."""
    node, hist = FakeNode(), NodeHistory()
    birth = node.birth()
    for i in range(80):  # saturated from sample 66 on
        t = port(node.telemetry(), 4, symbol_error=_storm(i))
        hist.update(t)
    # Within the hour, the count is a floor: errors past the saturated counter are not in it
    # ("65535 symbol errors" of some 80,000 read as exact: an SRE drill).
    n3 = next(f for f in evaluate(birth, t, hist) if f.rule == "N3")
    assert n3.text.startswith("≥ 65535 symbol errors"), n3.text
    for _ in range(3700):  # an hour and more later, still saturated
        node.now += 1.0
        hist.update(port(node.telemetry(advance=0), 4, symbol_error=0xFFFF))
    t = port(node.telemetry(), 4, symbol_error=0xFFFF)
    hist.update(t)
    findings = {f.rule: f for f in evaluate(birth, t, hist)}
    assert set(findings) == {"N3", "N6"}, findings
    assert findings["N3"].severity is Severity.DRAIN
    assert "until the counter saturated" in findings["N3"].text
    assert findings["N6"].text.startswith("symbol_error saturated")
    assert combine(list(findings.values())) is Verdict.FAILED
    assert not still_healthy(birth, t, hist)
    # Cleared (perfquery -R): it counts again, and nothing is held.
    t = port(node.telemetry(), 4, symbol_error=0)
    hist.update(t)
    assert evaluate(birth, t, hist) == []


def test_a_counter_found_saturated_is_a_warning_not_a_healthy_port():
    """A console (or a one-shot ``status``) that starts after a counter saturated sees it
    flat: without N6 a storm still going on read as a healthy port."""
    found, verdict, findings = rules(
        FakeNode(), lambda t, i: port(t, 1, symbol_error=0xFFFF, rcv_errors=0xFFFF), samples=3)
    assert found == {"N6"} and verdict is Verdict.DEGRADED
    (n6,) = findings
    assert n6.component.startswith("mlx5_ib1") and "symbol_error, rcv_errors saturated" in n6.text
    found, _, _ = rules(FakeNode(), lambda t, i: port(t, 1, symbol_error=0xFFFE), samples=3)
    assert found == set()


def test_a_resume_forgets_the_storm_but_not_the_saturated_counter():
    node, hist = FakeNode(), NodeHistory()
    birth = node.birth()
    for i in range(70):
        t = port(node.telemetry(), 4, symbol_error=_storm(i))
        hist.update(t)
    hist.forget_port_windows()
    t = port(node.telemetry(), 4, symbol_error=0xFFFF)
    hist.update(t)
    assert {f.rule for f in evaluate(birth, t, hist)} == {"N6"}


def test_a_count_over_a_shorter_watch_than_its_window_says_so():
    """Three samples of a storm are no hour: the count names the watch it was made over (a
    one-shot status said "186 symbol errors/h" for ~720,000/h); a whole window, a rate."""
    _, _, found = rules(FakeNode(), lambda t, i: port(t, 4, symbol_error=i * 200), samples=3)
    [n3] = [f for f in found if f.rule == "N3"]
    assert n3.text == "400 symbol errors in 2 s watched (> 120/h)"
    # A slow leak over 70 minutes: 130 in the last hour (one every 30 s), a rate per hour.
    _, _, found = rules(FakeNode(), lambda t, i: port(t, 4, symbol_error=i), samples=141,
                        every_s=30.0)
    [n3] = [f for f in found if f.rule == "N3"]
    assert n3.text.endswith("symbol errors/h (> 120/h)"), n3.text
    _, _, found = rules(FakeNode(), lambda t, i: gpu(t, 1, pcie_replay_total=i * 40), samples=2)
    [g11] = [f for f in found if f.rule == "G11"]
    assert g11.text == "PCIe replay 40 in 1 s watched (> 31/min)"


def _agent_started(t, s_ago: float):
    return replace(t, agent=replace(t.agent, started_ts=t.ts - int(s_ago * 1000)))


def test_the_agents_own_windows_judge_what_the_console_did_not_watch():
    """One sample heard (a one-shot status): the agent's hour and minute decide N2, N3 and
    G11, with a rate when the agent watched the whole window and the watch when it did not."""
    hour_old = lambda t: _agent_started(t, 7200)  # noqa: E731
    found, verdict, f = rules(FakeNode(), lambda t, i: port(
        hour_old(t), 2, errors_1h={"link_downed": 1, "symbol_error": 500}))
    assert verdict is Verdict.FAILED and found == {"N2", "N3"}
    assert [x.text for x in f] == ["link_downed increased", "500 symbol errors/h (> 120/h)"]
    _, _, f = rules(FakeNode(), lambda t, i: port(_agent_started(t, 600), 2,
                                                  errors_1h={"symbol_error": 500}))
    assert [x.text for x in f] == ["500 symbol errors in 10 min watched (> 120/h)"]
    # A saturated counter stops the agent's count too: a floor, not a figure (a fault audit).
    _, _, f = rules(FakeNode(), lambda t, i: port(_agent_started(t, 600), 2, symbol_error=0xFFFF,
                                                  errors_1h={"symbol_error": 65535}))
    n3 = next(x for x in f if x.rule == "N3")
    assert n3.text == "≥ 65535 symbol errors in 10 min watched (> 120/h)"
    found, verdict, f = rules(FakeNode(), lambda t, i: gpu(hour_old(t), 5, pcie_replay_1m=90))
    assert verdict is Verdict.DEGRADED and [x.text for x in f] == ["PCIe replay 90/min (> 31/min)"]
    # Below the thresholds, and counters no rule reads by the hour: nothing.
    found, verdict, _ = rules(FakeNode(), lambda t, i: gpu(port(
        hour_old(t), 2, errors_1h={"symbol_error": 120}), 1, pcie_replay_1m=31))
    assert found == set() and verdict is Verdict.OK


@pytest.mark.parametrize("fields", [
    {"errors_1h": {"link_downed": 1}}, {"errors_1h": {"rnr_nak_retry_err": 3}},
    {"errors_1h": {"symbol_error": 121}}])
def test_precheck_refuses_while_the_agents_hour_fails_a_port(fields):
    node = FakeNode()
    hist = NodeHistory()
    t = port(node.telemetry(), 6, **fields)
    hist.update(t)
    assert evaluate(node.birth(), t, hist) and not still_healthy(node.birth(), t, hist)
    t = gpu(node.telemetry(), 0, pcie_replay_1m=32)
    hist.update(t)
    assert evaluate(node.birth(), t, hist) and not still_healthy(node.birth(), t, hist)


def test_a_node_short_of_what_its_sku_has_from_the_start_fails():
    """Judged against the GPUs and ports it found at start, a node that booted with 7 of its
    8 GPUs read "7/7" and ok (a newcomer's run with a real agent): told what it should have
    (``--expect-gpus 8 --expect-ib-ports 8``), it fails G1 / N1."""
    from fleetdeck.console.health import still_healthy

    node = FakeNode()
    birth = node.birth()
    t = node.telemetry()
    short = birth.model_copy(update={"gpus": birth.gpus[:7], "ib_ports": birth.ib_ports[:7],
                                     "gpus_expected": 0, "ib_ports_expected": 0})
    t7 = replace(t, gpus=t.gpus[:7], ib_ports=t.ib_ports[:7])
    hist = NodeHistory()
    hist.update(t7)
    assert combine(evaluate(short, t7, hist)) is Verdict.OK  # as found: nothing to say
    told = short.model_copy(update={"gpus_expected": 8, "ib_ports_expected": 8})
    findings = evaluate(told, t7, hist)
    assert [f"{f.rule} {f.text}" for f in findings] == [
        "G1 7/8 GPUs visible", "N1 7/8 IB ports found (an HCA missing?)"]
    assert combine(findings) is Verdict.FAILED
    assert not still_healthy(told, t7, hist)
    assert still_healthy(short, t7, hist)


NO_NVML = "NVML: init failed: NVML Shared Library Not Found (is the NVIDIA driver loaded?)"


def _without_gpus(**birth: object) -> FleetState:
    """A fleet of one node whose GPU reader found none (NVML not loaded), judged once."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    node = FakeNode()
    b = node.birth().model_copy(update={"gpus": [], "errors": [NO_NVML], **birth})
    ingest = Ingest(node.cluster)
    ingest.handle(topic_for(node.cluster, Kind.BIRTH, node.node_id), codec.encode(b), node.now)
    ingest.handle(topic_for(node.cluster, Kind.TELEMETRY, node.node_id),
                  codec.encode(replace(node.telemetry(), gpus=[])), node.now)
    state = FleetState(node.cluster, ingest.malformed)
    state.apply(ingest.take_batch(), node.now)
    return state


def test_no_gpu_visible_because_the_reader_failed_says_so_and_asks_for_the_driver():
    """Without NVML the node read "0/8 GPUs visible" and the advice was to RMA eight GPUs,
    while its birth said "NVML: init failed … (is the NVIDIA driver installed and loaded?)"
    (a newcomer's run): the finding carries what the agent said, the repair step the driver."""
    from fleetdeck.console.judgements import repair_step

    state = _without_gpus(gpus_expected=8)
    (st,) = state.nodes.values()
    (g1,) = [f for f in st.findings if f.rule == "G1"]
    assert g1.text == f"0/8 GPUs visible; the agent's GPU reader says: {NO_NVML}"
    assert repair_step(st).startswith("check the NVIDIA driver")


def test_a_node_whose_gpu_reader_found_none_counts_the_gpus_it_fails_for():
    """An agent on ``sysfs+nvml`` without ``--expect-gpus`` whose NVML did not load says
    ``gpus_expected: 0``: G1 failed it "0/8 GPUs visible", while its row said "0/0", the fleet's
    header counted none of its GPUs failed and ``status --json`` gave ``gpus_expected: 0`` (a
    real-node audit)."""
    state = _without_gpus(gpus_expected=0, source="sysfs+nvml")
    (st,) = state.nodes.values()
    (g1,) = [f.text for f in st.findings if f.rule == "G1"]
    assert g1.startswith("0/8 GPUs visible")
    assert (st.gpus_present, st.gpus_expected) == (0, 8)
    assert st.gpu_use().failed == 8
    totals = state.totals()
    assert (totals.gpus, totals.gpus_use.failed) == (8, 8)


def test_no_gpu_visible_says_what_the_reader_says_now_not_at_birth():
    """nvidia-smi hangs after a birth that quoted its "Unable to determine the device handle"
    line for one lost GPU: G1 "0/8 GPUs visible" said the birth's line, and the operator went
    after one GPU while nvidia-smi itself hung for every sample (a real-node audit)."""
    node = FakeNode()
    then = "nvidia-smi line 5: Unable to determine the device handle for GPU00000000:5D:00.0"
    now = "nvidia-smi: no answer within 10 s (driver hung?)"
    birth = node.birth().model_copy(update={"errors": [then], "source": "sysfs+nvsmi"})
    t = node.telemetry()
    t = replace(t, gpus=[], agent=replace(t.agent, errors=[now]))
    hist = NodeHistory()
    hist.update(t)
    (g1,) = [f for f in evaluate(birth, t, hist) if f.rule == "G1"]
    assert g1.text.endswith(f"the agent's GPU reader says: {now}"), g1.text


def test_the_shared_empty_findings_list_refuses_change_and_unpickles_as_itself():
    """Nodes without findings share ``NO_FINDINGS`` (one object for the GC, not two a node):
    changed in place it would give every node the finding, so it raises; a replay's snapshot
    puts it back as the same object."""
    f = Finding("G1", Severity.WARN, "gpu0", "x")
    for change in (lambda: NO_FINDINGS.append(f), lambda: NO_FINDINGS.extend([f]),
                   lambda: NO_FINDINGS.insert(0, f), lambda: NO_FINDINGS.__iadd__([f]),
                   lambda: NO_FINDINGS.__setitem__(slice(0, 0), [f])):
        with pytest.raises(TypeError):
            change()
    assert NO_FINDINGS == [] and [*NO_FINDINGS, f] == [f]
    assert pickle.loads(pickle.dumps(NO_FINDINGS)) is NO_FINDINGS


def test_a_gpu_off_the_bus_that_ran_hot_is_told_to_have_its_cooling_checked():
    """Thermal on gpu3 of gpu0001, then XID 79 on it: the findings kept G12 and G13 "before it
    went missing" (XID 79 is often heat, docs/architecture.md "Thermal findings hold"), and the
    action read "reboot the node (gpu3 fell off the bus; RMA it if it does again)" alone: a
    reboot put it back under the cooling that failed it (scenario run scen39, live on
    `sim --nodes 64`)."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import repair_step
    from fleetdeck.console.state import NodeState

    st = NodeState("gpu0001")
    st.findings = [Finding("G1", Severity.DRAIN, "gpu3", "7/8 GPUs visible"),
                   Finding("G2", Severity.DRAIN, "gpu3", "XID 79")]
    gone = "reboot the node (gpu3 fell off the bus; RMA it if it does again)"
    assert repair_step(st) == gone
    st.findings = [*st.findings,
                   Finding("G12", Severity.WARN, "gpu3",
                           "clock throttled (sw thermal) before it went missing"),
                   Finding("G13", Severity.WARN, "gpu3", "88 °C before it went missing")]
    cool = ("check gpu3's cooling before it takes work (fans, airflow, inlet temperature: it "
            "ran hot before it went missing)")
    assert repair_step(st) == f"{gone}; {cool}"
    assert repair_step(st, warn=True) == f"{gone}; {cool}"


def test_a_hot_gpu_off_the_bus_again_after_its_repair_keeps_its_cooling_step():
    """An XID 79 back after its repair is told the GPU's replacement (``recurred``), and the
    cooling step of a GPU that ran hot before it went was dropped with the repair's: "replace
    gpu3 (RMA a GPU)" alone put the new GPU under the cooling that failed the old one (a
    review)."""
    from fleetdeck.console.health import Finding, Severity, Verdict
    from fleetdeck.console.judgements import repair_step
    from fleetdeck.console.state import NodeState

    st = NodeState("gpu0001")
    st.verdict = Verdict.FAILED
    st.findings = [Finding("G1", Severity.DRAIN, "gpu3", "7/8 GPUs visible"),
                   Finding("G2", Severity.DRAIN, "gpu3", "XID 79"),
                   Finding("G13", Severity.WARN, "gpu3", "88 °C before it went missing")]
    st.recurred = (1000.0, ("G1 gpu3", "G2 gpu3"))
    assert repair_step(st) == (
        "replace gpu3 (RMA a GPU); check gpu3's cooling before it takes work (fans, airflow, "
        "inlet temperature: it ran hot before it went missing)")


def test_a_gpu_off_the_bus_that_was_power_braked_is_not_told_it_ran_hot():
    """A power brake before XID 79 (held a minute, "before it went missing") is no heat: the
    cooling step said "it ran hot" of it, sending the on-call to the fans (a review)."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import repair_step
    from fleetdeck.console.state import NodeState

    st = NodeState("gpu0001")
    st.findings = [Finding("G1", Severity.DRAIN, "gpu3", "7/8 GPUs visible"),
                   Finding("G2", Severity.DRAIN, "gpu3", "XID 79"),
                   Finding("G12", Severity.WARN, "gpu3",
                           "clock throttled (power brake) before it went missing")]
    gone = "reboot the node (gpu3 fell off the bus; RMA it if it does again)"
    assert repair_step(st) == gone
    assert repair_step(st, warn=True) == gone  # one step a GPU: its reboot
