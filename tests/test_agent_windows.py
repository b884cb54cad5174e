"""The agent's own windows (agents/windows.py): what ``errors_1h`` and ``pcie_replay_1m`` carry,
so a console that has watched for seconds judges the hour a console running all along would."""

from msgspec.structs import replace

from fleetdeck.agents.windows import CountWindow, ErrorWindows
from fleetdeck.console.health import NodeHistory, Verdict, combine, evaluate, still_healthy
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.fast import GpuSample, IbPortSample, Telemetry
from tests.helpers import FakeNode


def test_count_window_sums_the_span_and_forgets_what_aged_out() -> None:
    w = CountWindow(60)
    assert not w and w.counts(0) == {} and w.expires_at() == 2**63
    w.add(1_000, "link_downed", 1)
    w.add(30_000, "symbol_error", 50)
    w.add(40_000, "link_downed", 2)
    assert w.counts(45_000) == {"link_downed": 3, "symbol_error": 50}
    assert w.expires_at() == 61_000
    assert w.counts(61_000) == {"link_downed": 2, "symbol_error": 50}
    assert w.counts(100_000) == {} and not w


def _port(**counters: int) -> IbPortSample:
    return IbPortSample(dev="mlx5_ib0", port=1, **counters)


def test_port_increments_after_the_baseline_are_counted_for_an_hour() -> None:
    ew = ErrorWindows()
    t = 10_000_000
    # The first sample is the baseline: counters that were already high are no increment.
    [p] = ew.ports([_port(link_downed=7, symbol_error=100, rcv_errors=5)], t)
    assert p.errors_1h == {}
    [p] = ew.ports([_port(link_downed=8, symbol_error=400, rcv_errors=50)], t + 1000)
    assert p.errors_1h == {"link_downed": 1, "symbol_error": 300}  # rcv_errors: no hour rule
    # A cleared counter (perfquery -R, reboot) is no increment; the hour still holds.
    [p] = ew.ports([_port(link_downed=0, symbol_error=0)], t + 2000)
    assert p.errors_1h == {"link_downed": 1, "symbol_error": 300}
    [p] = ew.ports([_port(link_downed=0, symbol_error=0)], t + 3_601_000)
    assert p.errors_1h == {}


def test_a_resume_forgets_the_ports_hour_keeps_the_baselines_and_the_pcie_minute() -> None:
    ew = ErrorWindows()
    ew.ports([_port(link_downed=0)], 0)
    ew.gpus([GpuSample(index=2, pcie_replay_total=10)], 0)
    [p] = ew.ports([_port(link_downed=2)], 1000)
    [g] = ew.gpus([GpuSample(index=2, pcie_replay_total=110)], 1000)
    assert p.errors_1h == {"link_downed": 2} and g.pcie_replay_1m == 100
    ew.forget_ports()
    [p] = ew.ports([_port(link_downed=2)], 2000)
    [g] = ew.gpus([GpuSample(index=2, pcie_replay_total=110)], 2000)
    # The console forgets its port windows at a resume, not its PCIe minute: neither does this.
    assert p.errors_1h == {} and g.pcie_replay_1m == 100
    [p] = ew.ports([_port(link_downed=3)], 3000)  # the next increment counts at once
    assert p.errors_1h == {"link_downed": 1}


def test_a_new_port_with_the_same_counters_gets_its_own_baseline() -> None:
    """A port replaced by another whose counters read the same (all zeros on a clean fabric):
    the new port is baselined, and its first increment counts."""
    ew = ErrorWindows()
    ew.ports([_port(link_downed=0)], 0)
    other = IbPortSample(dev="mlx5_ib1", port=1, link_downed=0)
    ew.ports([other], 1000)
    [p] = ew.ports([replace(other, link_downed=1)], 2000)
    assert p.errors_1h == {"link_downed": 1}


def test_a_saturated_symbol_counter_keeps_its_hour_while_it_stays_saturated() -> None:
    """A storm that drove symbol_error to 65535 goes on uncounted: the hour's figure holds
    while the counter stays there (the console's storm_hour), and goes once it is cleared."""
    ew = ErrorWindows()
    ew.ports([_port(symbol_error=65_000)], 0)
    [p] = ew.ports([_port(symbol_error=0xFFFF)], 1000)
    assert p.errors_1h == {"symbol_error": 535}
    [p] = ew.ports([_port(symbol_error=0xFFFF)], 2 * 3_600_000)
    assert p.errors_1h == {"symbol_error": 535}
    [p] = ew.ports([_port(symbol_error=0)], 2 * 3_600_000 + 1000)  # perfquery -R
    assert p.errors_1h == {}


def test_counts_past_the_fields_bound_are_sent_as_the_bound() -> None:
    ew = ErrorWindows()
    ew.ports([_port(rnr_nak_retry_err=0)], 0)
    [p] = ew.ports([_port(rnr_nak_retry_err=2**40)], 1000)
    assert p.errors_1h == {"rnr_nak_retry_err": 2**32 - 1}
    codec.decode_telemetry(codec.encode(Telemetry(node="n", seq=1, bdSeq=1, ts=1,
                                                  ib_ports=[p])))  # the console takes it


def test_pcie_replays_count_for_a_minute() -> None:
    ew = ErrorWindows()
    gpus = [GpuSample(index=i, pcie_replay_total=0) for i in range(8)]
    assert ew.gpus(gpus, 0) is gpus
    assert ew.gpus(gpus, 1000) is gpus  # nothing moved: the list itself, nothing copied
    moved = [replace(g, pcie_replay_total=40) if g.index == 5 else g for g in gpus]
    out = ew.gpus(moved, 2000)
    assert [g.pcie_replay_1m for g in out] == [None] * 5 + [40] + [None] * 2
    assert ew.gpus(moved, 61_000)[5].pcie_replay_1m == 40
    assert ew.gpus(moved, 62_000)[5].pcie_replay_1m is None


def test_a_flap_the_console_never_saw_fails_the_node_from_the_agents_hour() -> None:
    """The agent of a node that flapped ten minutes ago: a console that hears only its latest
    sample (a one-shot status, a collector restarted since) reads N2 from ``errors_1h``."""
    node = FakeNode()
    encoder, console_side = wire2.TelemetryEncoder(), wire2.Reassembler()
    node.telemetry()
    node.sim.flap(3, count=2, down_s=2.0, every_s=5.0, t=node.sim._t_own + 0.5)
    for _ in range(600):  # ten minutes of samples after the flaps, sent as v2 keyframes/deltas
        t = node.telemetry()
        payload = encoder.encode(t, node.now)
        got = console_side.apply(wire2.decode(payload), payload)
    assert got == t  # errors_1h travels in v2 (a column like any field)
    [p] = [p for p in t.ib_ports if p.dev == "mlx5_ib3"]
    assert p.state == "ACTIVE" and p.errors_1h == {"link_downed": 2}
    assert codec.decode_telemetry(codec.encode(t)) == t  # and in v1
    fresh = NodeHistory()
    fresh.update(t)
    findings = evaluate(node.birth(), t, fresh)
    assert combine(findings) is Verdict.FAILED
    assert [f"{f.rule} {f.component}: {f.text}" for f in findings] == [
        "N2 mlx5_ib3:1: link_downed increased"]
    assert not still_healthy(node.birth(), t, fresh)


def test_the_windows_survive_an_agent_restart_and_count_each_increment_once(tmp_path) -> None:
    """A port that flapped twice, then an agent restart (an upgrade, an OOM kill) read healthy
    for the rest of its hour: the windows are kept in the state directory beside the drain.
    What moved after the last save is counted again from the counters, once."""
    from fleetdeck.agents.state import StateStore

    path = tmp_path / "state-gpu0001.json"
    ew = ErrorWindows()
    t = 10_000_000
    ew.ports([_port(link_downed=7)], t)
    ew.ports([_port(link_downed=9)], t + 1000)  # two flaps
    assert StateStore(path, "gpu0001").save_windows(ew.snapshot(t + 1000, "boot-a"))
    assert path.with_suffix(".windows.json").exists() and not path.exists()
    ew.ports([_port(link_downed=10)], t + 2000)  # a third, after the save; then a SIGKILL
    again = ErrorWindows()
    saved = StateStore(path, "gpu0001").load_windows()
    assert again.restore(saved, t + 5000, "boot-a") == ""
    # While the agent was down the link went down once more.
    [p] = again.ports([_port(link_downed=11)], t + 5000)
    assert p.errors_1h == {"link_downed": 4}
    [p] = again.ports([_port(link_downed=11)], t + 3_601_500)  # the saved two aged out
    assert p.errors_1h == {"link_downed": 2}


def test_saved_baselines_count_only_in_their_boot_and_for_a_while() -> None:
    """A week-old baseline (an agent stopped for days) or one of the last boot (counters
    climbing again after a reboot) counted what moved since as a flap now: a false N2 for an
    hour (a review). The stamped windows are kept either way: a bad cable stays bad."""
    from fleetdeck.agents.windows import BASELINES_KEPT_S

    t = 10_000_000
    ew = ErrorWindows()
    ew.ports([_port(link_downed=0)], t)
    ew.ports([_port(link_downed=2)], t + 1000)
    snap = ew.snapshot(t + 1000, "boot-a")
    late = t + 1000 + int(BASELINES_KEPT_S * 1000) + 1
    for now, boot in ((late, "boot-a"), (t + 2000, "boot-b")):
        again = ErrorWindows()
        assert again.restore(snap, now, boot).startswith("baselines left out")
        [p] = again.ports([_port(link_downed=9)], now)  # a first sample: the baseline
        assert p.errors_1h == ({"link_downed": 2} if now - t < 3_600_000 else {})


def test_saved_windows_that_do_not_read_start_empty(tmp_path, caplog) -> None:
    """A damaged windows file costs the windows, never the drain (that file is its own), and
    a snapshot of other counters or of another shape is left out whole: one with a baseline of
    4 counters crashed the agent on its first sample, at every start (a review)."""
    import copy

    from fleetdeck.agents.state import StateStore

    path = tmp_path / "state-gpu0001.json"
    path.with_suffix(".windows.json").write_text("{not json")
    store = StateStore(path, "gpu0001")
    assert store.load_windows() is None and "cannot read the saved error windows" in caplog.text
    assert store.load(0).drain.state.value == "none"
    good = ErrorWindows()
    good.ports([_port(link_downed=1)], 0)
    good.ports([_port(link_downed=2)], 1000)
    snap = good.snapshot(1000, "b")
    bad: list[object] = [{"v": 2}, [], "x", None]
    for mutate in (lambda s: s["ports"]["base"][0][1].pop(),
                   lambda s: s["ports"]["base"][0].__setitem__(1, "abcde"),
                   lambda s: s["ports"]["names"].pop(),
                   lambda s: s["ports"]["windows"][0][1][0].__setitem__(2, -1),
                   lambda s: s["ports"]["windows"][0][1][0].__setitem__(1, "other"),
                   lambda s: s["gpus"].__setitem__("held", [[[0], "x"]])):
        damaged = copy.deepcopy(snap)
        mutate(damaged)
        bad.append(damaged)
    for b in bad:
        ew = ErrorWindows()
        assert ew.restore(b, 1500, "b").startswith("left out"), b
        [p] = ew.ports([_port(link_downed=3)], 2000)  # a first sample: the baseline again
        assert p.errors_1h == {}
        [p] = ew.ports([_port(link_downed=4)], 3000)
        assert p.errors_1h == {"link_downed": 1}
    ew = ErrorWindows()
    assert ew.restore(snap, 1500, "b") == ""
    [p] = ew.ports([_port(link_downed=3)], 2000)
    assert p.errors_1h == {"link_downed": 2}


def test_a_port_read_as_columns_then_rows_then_columns_counts_every_flap():
    """The columns' key cache is dropped by a sample read as rows: kept, a flap counted from
    rows was compared again with the columns before it, and the hour lost one (a review;
    an agent keeps one path, a test or a shadow read may not)."""
    w = ErrorWindows()
    p0 = IbPortSample(dev="mlx5_0", link_downed=0)
    p1 = replace(p0, link_downed=1)
    t = 1_700_000_000_000
    w.columns([], wire2.columns_of([p0]), t)  # the baseline, as columns
    w.ports([p1], t + 1000)  # a flap, read as rows
    w.columns([], wire2.columns_of([p0]), t + 2000)  # counters cleared, as columns
    _, ports = w.columns([], wire2.columns_of([p1]), t + 3000)  # a second flap
    assert ports[wire2.PORT_FIELDS.index("errors_1h")] == ({"link_downed": 2},)
