"""The node model: healthy baselines (TELEMETRY.md §5), job phases, counter semantics."""

from fleetdeck.agents.sim.node import COUNTER_MAX, U64, SimNode
from fleetdeck.console.health import Verdict
from tests.sim.harness import Harness, job


def test_idle_fleet_is_healthy_and_looks_idle():
    h = Harness(nodes=16)
    h.run(30)
    for name, t in h.last.items():
        assert h.verdict(name) is Verdict.OK, (name, h.findings[name])
        assert t.job is None and len(t.gpus) == 8 and len(t.ib_ports) == 8
        for g in t.gpus:
            assert g.present and g.util_pct == 0 and 60 <= g.power_w <= 80
            assert g.sm_clock_mhz == 345 and g.mem_clock_mhz == 2619
            assert g.clock_event_reasons == 0x1  # GPU_IDLE
            assert 36 <= g.temp_c <= 46 and g.mem_temp_c > g.temp_c
            assert g.nvlink.links_up == g.nvlink.links_total == 18
        for i, p in enumerate(t.ib_ports):
            assert (p.dev, p.port, p.state, p.phys_state) == (f"mlx5_ib{i}", 1, "ACTIVE", "LinkUp")
            assert (p.state_id, p.phys_state_id, p.rate_gbps, p.width) == (4, 5, 400, "4X NDR")
            assert p.xmit_Bps < 1e6  # management traffic only


def test_birth_carries_topology_and_inventory():
    h = Harness(nodes=40, nodes_per_leaf=16)
    b1, b17, b40 = h.births["gpu0001"], h.births["gpu0017"], h.births["gpu0040"]
    assert (b1.topology.rack, b1.topology.leaf, b1.topology.spine_group) == (
        "rack001", "leaf01", "spine01")
    assert b17.topology.leaf == "leaf02" and b40.topology.leaf == "leaf03"
    assert b40.topology.rack == "rack010"
    assert [g.name for g in b1.gpus] == ["NVIDIA H100 80GB HBM3"] * 8
    assert [(p.dev, p.netdev, p.gpu_affinity) for p in b1.ib_ports][3] == ("mlx5_ib3", "ib3", 3)
    assert b1.sku == "ND96isr_H100_v5"


def test_running_jobs_stay_healthy_and_show_compute_and_allreduce_phases():
    h = Harness(nodes=16, actions=[job("train", nodes=8, step_time=1.3)])
    h.run(80)
    powers, rates = [], []
    for st in h.world.scheduler.jobs.values():
        assert st.state.value == "R"
    for name in h.last:
        assert h.verdict(name) is Verdict.OK, (name, h.findings[name])
    for tel in h.run(40):
        for name, t in tel.items():
            if h.node(name).binding is None:
                continue
            assert t.job is not None and t.job.ranks_on_node == 8 and t.job.step_time_ms > 0
            for g in t.gpus:
                assert g.util_pct >= 90 and g.sm_clock_mhz == 1980 and g.clock_event_reasons == 0
                assert 430 <= g.power_w <= 700 and g.temp_c < 85
                assert 60_000 <= g.fb_used_mib <= 80_000
                powers.append(g.power_w)
            rates.extend(p.xmit_Bps for p in t.ib_ports)
    # Compute phase near 600-690 W, all-reduce phase 430-520 W: both are sampled.
    assert max(powers) > 590 and min(powers) < 530
    # IB: bursts during the all-reduce, never beyond NDR line rate (50 GB/s).
    assert max(rates) > 5e9 and max(rates) <= 50e9


def test_data_counters_count_words_and_wrap_at_2_64():
    node = SimNode("n1", seed=3)
    node.read(100.0)
    p = node.ports[0]
    p.xmit_words = U64 - 10  # 10 words before the wrap
    s = node.read(101.0).ib_ports[0]
    assert s.xmit_bytes_total == (p.xmit_words * 4) % U64
    assert p.xmit_words < 10**9  # wrapped
    assert s.xmit_Bps > 0


def test_error_counters_saturate_at_ibta_width_and_deltas_stop():
    h = Harness(nodes=2, actions=[])
    h.run(1)
    node = h.node("gpu0001")
    node.symbol_storm(2, rate=10_000, bandwidth=0.5)
    h.run(10)
    p = h.last["gpu0001"].ib_ports[2]
    assert p.symbol_error == COUNTER_MAX["symbol_error"] == 65535
    assert "symbol_error" not in p.d  # a saturated counter stops moving
    assert p.rcv_errors <= 65535


def test_standalone_node_works_without_a_world():
    node = SimNode("solo", seed=1)
    r1 = node.read(1000.0)
    r2 = node.read(1001.0)
    assert len(r1.gpus) == 8 and r2.gpus[0].energy_j > r1.gpus[0].energy_j
    assert not node.busy()
