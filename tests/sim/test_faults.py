"""Each fault kind: its telemetry signature (TELEMETRY.md §8), the console's verdict (§7 rules via
console.health) and its effect on the job running there."""

import pytest

from fleetdeck.console.health import Verdict
from tests.sim.harness import Harness, act, job

# Placement is first-fit in name order: job "train" (4 nodes) lands on gpu0001-0004.
TRAIN = job("train", nodes=4, step_time=1.0, checkpoint_every=10)


def healthy_step_time(h: Harness) -> float:
    j = h.job("train")
    return j.healthy_step_s


def test_ib_flap_signature_rules_and_stall():
    h = Harness(actions=[TRAIN, act("ib_flap", 10, node="gpu0002", port=3, count=5)])
    h.run(10)
    before = h.last["gpu0002"].ib_ports[3]
    seen, stalled = [], False
    for _ in range(34):
        t = h.tick()["gpu0002"].ib_ports[3]
        seen.append((t.state, t.phys_state))
        stalled |= h.job("train").stalled
    after = h.last["gpu0002"].ib_ports[3]
    assert ("DOWN", "Polling") in seen and ("INIT", "LinkUp") in seen
    assert seen[-1] == ("ACTIVE", "LinkUp")
    assert after.link_downed - before.link_downed == 5
    assert after.link_error_recovery - before.link_error_recovery == 5
    assert after.carrier_losses_24h == 5
    texts = [e.message for e in h.events["gpu0002"]]
    assert texts.count("ib3: lost carrier") == 5 and texts.count("ib3: Gained carrier") == 5
    assert {"N2", "N5"} <= h.rules("gpu0002") and h.verdict("gpu0002") is Verdict.FAILED
    assert stalled and h.job("train").state.value == "R"  # short outages: slows, survives
    assert h.verdict("gpu0001") is Verdict.OK


def test_hard_link_down_freezes_counters_then_node_fail_and_requeue_from_checkpoint():
    h = Harness(actions=[TRAIN, act("link_down", 25, node="gpu0003", port=1)],
                hang_timeout_s=8)
    h.run(25)
    p0 = h.tick()["gpu0003"].ib_ports[1]
    p1 = h.tick()["gpu0003"].ib_ports[1]
    assert (p1.state, p1.state_id, p1.phys_state, p1.phys_state_id) == ("DOWN", 1, "Polling", 2)
    assert p1.rate_gbps == 10 and p1.xmit_bytes_total == p0.xmit_bytes_total  # frozen
    assert p1.xmit_Bps == 0 and p1.link_downed >= 1
    assert "N1" in h.rules("gpu0003") and h.verdict("gpu0003") is Verdict.FAILED
    j = h.job("train")
    assert j.stalled and j.state.value == "R"
    h.run(12)
    assert h.job_states(j.job_id) == ["PD", "R", "NF", "RQ", "PD", "R"]
    nf = next(s for s in h.jobs if s.state.value == "NF")
    assert "NCCL watchdog" in nf.reason and "gpu0003 mlx5_ib1 link down" in nf.reason
    rq = next(s for s in h.jobs if s.state.value == "RQ")
    assert rq.step == nf.last_checkpoint_step and rq.step % 10 == 0 and rq.requeues == 1
    assert "gpu0003" not in [n.node_id for n in j.nodes] and len(j.nodes) == 4


def test_symbol_storm_stays_up_counts_errors_and_slows_the_job():
    h = Harness(actions=[TRAIN, act("symbol_storm", 10, node="gpu0004", port=6, rate=200)])
    h.run(30)
    p = h.last["gpu0004"].ib_ports[6]
    assert (p.state, p.phys_state) == ("ACTIVE", "LinkUp")
    assert 100 <= p.d["symbol_error"] <= 300 and p.symbol_error > 2000
    assert p.rcv_errors > 0
    assert {"N3", "N4"} <= h.rules("gpu0004")
    j = h.job("train")
    # Comm (25 % of a healthy step) runs at half bandwidth on one rail: 0.75 + 0.25 * 2 = 1.25.
    assert j.step_time_s / healthy_step_time(h) == pytest.approx(1.25, abs=0.03)
    # The rank on GPU 6 (rail 6) of gpu0004 is the one whose all-reduce takes longest.
    assert (j.slowest[0].node, j.slowest[0].rank) == ("gpu0004", 3 * 8 + 6)


def test_xid79_gpu_falls_off_the_bus_node_fail_and_requeue_elsewhere():
    h = Harness(actions=[TRAIN, act("xid79", 33, node="gpu0002", gpu=5)])
    h.run(33)
    ck = h.job("train").last_checkpoint_step
    t = h.tick()["gpu0002"]
    g = t.gpus[5]
    assert g.present is False and g.xid_last == 79 and g.util_pct is None
    assert sum(x.present for x in t.gpus) == 7
    assert "G1" in h.rules("gpu0002") and h.verdict("gpu0002") is Verdict.FAILED
    xid = [e for e in h.events["gpu0002"] if e.kind == "xid"]
    assert "79, pid=" in xid[0].message and "GPU has fallen off the bus" in xid[0].message
    h.run(4)
    j = h.job("train")
    assert h.job_states(j.job_id) == ["PD", "R", "NF", "RQ", "PD", "R"]
    nf = next(s for s in h.jobs if s.state.value == "NF")
    assert "Xid 79" in nf.reason
    assert j.requeues == 1 and j.progress >= ck and j.step < ck + 5
    assert "gpu0002" not in [n.node_id for n in j.nodes]


@pytest.mark.parametrize("failure", [False, True])
def test_ecc_dbe_row_remap_and_job_crash(failure):
    h = Harness(actions=[TRAIN, act("ecc_dbe", 12, node="gpu0001", gpu=4,
                                    remap_failure=failure)])
    h.run(14)
    g = h.last["gpu0001"].gpus[4]
    assert g.ecc.dbe_vol == 1 and g.ecc.dbe_agg == 1 and g.row_remap.uncorrectable == 1
    codes = [e.data["xid"] for e in h.events["gpu0001"] if e.kind == "xid"]
    assert [x.code for x in g.xids] == codes  # every XID, not only the last
    if failure:
        assert codes == [48, 64] and g.row_remap.failure is True and g.xid_last == 64
        assert {"G4", "G5", "G2"} <= h.rules("gpu0001")
    else:
        assert codes == [48, 63] and g.row_remap.pending is True and g.xid_last == 63
        # XID 48 drains (G2) though the 63 came last; the pending remap alone would only warn.
        assert {"G4", "G6", "G3", "G2"} <= h.rules("gpu0001")
    assert h.verdict("gpu0001") is Verdict.FAILED
    j = h.job("train")
    assert j.state.value == "F" and "Xid 48" in j.reason  # a crash: no automatic requeue
    h.run(3)
    assert h.job("train").state.value == "F"


def test_thermal_throttle_signature_and_straggler_slowdown():
    h = Harness(actions=[TRAIN, act("thermal", 5, node="gpu0003", gpu=2, temp=92,
                                    clock_mhz=1500)])
    h.run(5)
    base = h.last["gpu0003"].gpus[2].thermal_violation_ns
    h.run(60)
    g = h.last["gpu0003"].gpus[2]
    assert g.temp_c >= 85 and g.clock_event_reasons & 0x20
    assert g.sm_clock_mhz <= 1500 and g.thermal_violation_ns > base
    assert g.util_pct >= 90 and g.xid_last is None
    assert "G12" in h.rules("gpu0003") and h.verdict("gpu0003") is Verdict.DEGRADED
    j = h.job("train")
    # Compute is 75 % of the step and runs 1980/1500 slower on one rank; comm unchanged.
    expect = 0.75 * 1980 / 1500 + 0.25
    assert j.step_time_s / healthy_step_time(h) == pytest.approx(expect, rel=0.03)
    assert j.slowest[0].node == "gpu0003" and j.slowest[0].rank == 2 * 8 + 2
    st = [s for s in h.jobs if s.job_id == j.job_id][-1]
    assert st.slowest[0].step_time_ms > 1.2 * st.median_step_time_ms  # J1 straggler
    on3 = h.last["gpu0003"].job
    on1 = h.last["gpu0001"].job
    assert on3 is not None and on1 is not None
    assert on3.step_time_ms > 1.2 * on1.step_time_ms


def test_a_throttling_gpu_stays_throttled_while_its_cooling_fault_lasts():
    # A marginal cooling fault (89 °C target) hovers at the slowdown limit; the throttle reason
    # must not blink off with the job's compute/all-reduce phases, or a one-shot status that
    # watches 3 s reads the GPU healthy between blinks.
    h = Harness(actions=[TRAIN, act("thermal", 5, node="gpu0003", gpu=2, temp=89)])
    h.run(5)
    seen: list[int] = []
    for _ in range(90):
        h.run(1)
        seen.append(h.last["gpu0003"].gpus[2].clock_event_reasons & 0x20)
    first = next(i for i, bit in enumerate(seen) if bit)
    assert all(seen[first:]), seen


def test_power_cap_signature_straggler_and_repair():
    """``power_cap``: the console judges a GPU power-capped by software (bit 0x4, its limit
    below its job's other nodes') and the simulator had no way to make one (docs/scenarios.md,
    ``power_cap``)."""
    h = Harness(actions=[TRAIN, act("power_cap", 5, node="gpu0003", gpu=2, limit=400),
                         act("repair", 60, node="gpu0003")])
    h.run(5)
    healthy = h.job("train").step_time_s
    h.run(20)
    base = h.last["gpu0003"].gpus[2].power_violation_ns
    h.run(10)
    g = h.last["gpu0003"].gpus[2]
    assert (g.power_limit_w, g.power_w) == (400, 400)
    assert g.clock_event_reasons & 0x4 and not g.clock_event_reasons & 0x20
    # The clock scales with limit / demand (600-690 W in compute, 430-520 W in the all-reduce).
    assert 1980 * 400 / 690 - 1 <= g.sm_clock_mhz <= 1980 * 400 / 430 + 1, g.sm_clock_mhz
    assert g.power_violation_ns > base and g.util_pct >= 90 and g.xid_last is None
    assert not h.rules("gpu0003") and h.verdict("gpu0003") is Verdict.OK  # no rule judges 0x4
    for other in (h.last["gpu0003"].gpus[1], h.last["gpu0001"].gpus[2]):
        assert other.power_limit_w == 700 and not other.clock_event_reasons & 0x4
    j = h.job("train")
    # The rank's compute runs at 400/645 of the clock (645 W: the compute phase's draw).
    assert j.step_time_s / healthy == pytest.approx(0.75 * 645 / 400 + 0.25, rel=0.03)
    assert j.slowest[0].node == "gpu0003" and j.slowest[0].rank == 2 * 8 + 2
    h.run(30)  # repaired at 60 s: the stock limit is back
    g = h.last["gpu0003"].gpus[2]
    assert g.power_limit_w == 700 and not g.clock_event_reasons & 0x4
    assert g.sm_clock_mhz == 1980 and g.power_w < 700
    assert h.job("train").step_time_s == pytest.approx(healthy, rel=0.03)


def test_a_timed_power_cap_ends_by_itself_and_a_high_limit_caps_nothing():
    h = Harness(actions=[TRAIN, act("power_cap", 5, node="gpu0002", gpu=0, limit=250,
                                    duration="20s"),
                         act("power_cap", 5, node="gpu0004", gpu=5, limit=695)])
    h.run(15)
    assert h.last["gpu0002"].gpus[0].clock_event_reasons & 0x4
    assert h.last["gpu0002"].gpus[0].sm_clock_mhz >= 600  # floored, not 1980 * 250 / 690
    seen = [h.run(1)[-1]["gpu0004"].gpus[5] for _ in range(20)]
    # Above every draw of the model: the limit reads lowered, and nothing is ever capped.
    assert {g.power_limit_w for g in seen} == {695}
    assert not any(g.clock_event_reasons & 0x4 for g in seen)
    h.run(5)
    g = h.last["gpu0002"].gpus[0]
    assert g.power_limit_w == 700 and not g.clock_event_reasons & 0x4
    assert ("power_cap on gpu0002 ended" in [text for _t, text in h.world.log])


def test_a_timed_fault_applied_again_restarts_its_clock():
    """A timed fault applied again before it ended kept its first end too: a 20 s cap
    re-applied for 40 s at 10 s ended at 25 s, and one re-applied with no end ended there as
    well. The latest application's end is the fault's."""
    h = Harness(actions=[TRAIN,
                         act("power_cap", 5, node="gpu0002", gpu=0, limit=250, duration="20s"),
                         act("power_cap", 10, node="gpu0002", gpu=0, limit=250, duration="40s"),
                         act("power_cap", 5, node="gpu0003", gpu=1, limit=250, duration="20s"),
                         act("power_cap", 10, node="gpu0003", gpu=1, limit=250)])
    h.run(35)  # past the first applications' ends (25 s)
    assert h.last["gpu0002"].gpus[0].power_limit_w == 250
    assert h.last["gpu0003"].gpus[1].power_limit_w == 250
    h.run(20)  # past 50 s: the second's end
    assert h.last["gpu0002"].gpus[0].power_limit_w == 700
    assert h.last["gpu0003"].gpus[1].power_limit_w == 250
    ended = [text for _t, text in h.world.log if text.endswith("ended")]
    assert ended == ["power_cap on gpu0002 ended"], ended


def test_a_power_cap_outside_what_a_gpu_takes_is_refused_in_a_sentence():
    from fleetdeck.agents.sim.spec import SpecError, parse_action

    for limit, why in (("50", r"limit must be in \[100, 700\], not '50'"),
                       ("701", r"limit must be in \[100, 700\], not '701'"),
                       ("nan", "limit must be a finite number, not 'nan'"),
                       ("inf", "limit must be a finite number, not 'inf'"),
                       (None, "'limit' is required")):
        raw = {"fault": "power_cap", "node": "gpu0001"} | ({} if limit is None
                                                             else {"limit": limit})
        with pytest.raises(SpecError, match=why):
            parse_action(raw, default_at=0)


def test_nvlink_error_xid74_links_down():
    h = Harness(actions=[TRAIN, act("nvlink", 5, node="gpu0001", gpu=6, links=2)])
    h.run(8)
    t = h.last["gpu0001"]
    g = t.gpus[6]
    assert g.xid_last == 74 and g.nvlink.links_up == 16 and g.nvlink.links_total == 18
    assert g.nvlink.replay > 0 and g.nvlink.recovery > 0
    assert t.gpus[7].xid_last == 74  # the GPU at the other end logs it too
    assert {"G2", "G9"} <= h.rules("gpu0001") and h.verdict("gpu0001") is Verdict.FAILED
    j = h.job("train")
    assert j.state.value == "R" and j.step_time_s > 1.3 * healthy_step_time(h)


def test_pcie_replay_storm_warns():
    h = Harness(actions=[act("pcie_replay", 2, node="gpu0005", gpu=0, per_min=120)])
    h.run(40)
    assert "G11" in h.rules("gpu0005") and h.verdict("gpu0005") is Verdict.DEGRADED


def test_agent_death_ranks_keep_going():
    h = Harness(actions=[TRAIN, act("agent_death", 10, node="gpu0002")])
    h.run(10)
    h.world.step()
    ops = h.world.take_agent_ops()
    assert [(o.op, o.node) for o in ops] == [("kill", "gpu0002")]
    step = h.job("train").step
    tel = h.run(10)
    assert all("gpu0002" not in t for t in tel)  # no telemetry from a dead agent
    j = h.job("train")
    assert j.state.value == "R" and j.step > step + 5 and "gpu0002" in [n.node_id for n in j.nodes]


def test_an_agent_restart_only_if_dead_leaves_a_running_agent_be():
    """A fault rate table follows each agent_death with an agent_restart: when a repair had
    brought the agent back already, it killed and restarted it again (a review)."""
    h = Harness(actions=[act("agent_death", 1, node="gpu0002")])
    h.run(2)
    h.world.take_agent_ops()
    h.world.apply(act("repair", node="gpu0002"), h.world.t)
    assert [(o.op, o.node) for o in h.world.take_agent_ops()] == [("start", "gpu0002")]
    text = h.world.apply(act("agent_restart", node="gpu0002", only_dead=True), h.world.t)
    assert h.world.take_agent_ops() == [] and "left be" in text
    h.world.apply(act("agent_restart", node="gpu0002"), h.world.t)  # asked for: a restart
    assert [(o.op, o.node) for o in h.world.take_agent_ops()] == [("kill", "gpu0002"),
                                                                 ("start", "gpu0002")]


def test_node_death_stops_ranks_job_hangs_then_fails():
    h = Harness(actions=[TRAIN, act("node_death", 10, node="gpu0004")], hang_timeout_s=6)
    h.run(10)
    h.world.step()
    assert [(o.op, o.node) for o in h.world.take_agent_ops()] == [("kill", "gpu0004")]
    j = h.job("train")
    assert j.stalled and "gpu0004 not responding" in j.reason
    h.run(10)
    assert h.job_states(j.job_id)[-4:] == ["NF", "RQ", "PD", "R"]
    assert "gpu0004" not in [n.node_id for n in j.nodes]
    h.world.apply(act("repair", node="gpu0004"), h.world.t)
    assert [(o.op, o.node) for o in h.world.take_agent_ops()] == [("start", "gpu0004")]
    assert h.node("gpu0004").up and not h.node("gpu0004").fatal_reasons(h.world.t)


def test_leaf_switch_rail_takes_one_port_of_every_node_in_the_leaf_group():
    h = Harness(nodes=16, nodes_per_leaf=8, actions=[
        act("leaf_switch", 3, leaf="leaf01", rail=5), act("repair", 20, leaf="leaf01")])
    h.run(5)
    for i in range(1, 9):
        t = h.last[f"gpu{i:04d}"]
        assert [p.state for p in t.ib_ports].count("DOWN") == 1
        assert t.ib_ports[5].phys_state == "Polling" and "N1" in h.rules(f"gpu{i:04d}")
    for i in range(9, 17):
        assert h.verdict(f"gpu{i:04d}") is Verdict.OK
    h.run(17)
    assert all(p.state == "ACTIVE" for p in h.last["gpu0001"].ib_ports)


def test_leaf_switch_whole_group_and_timed_recovery():
    h = Harness(nodes=16, nodes_per_leaf=8, actions=[
        act("leaf_switch", 2, node="gpu0010", duration="5s")])
    h.run(4)
    assert all(p.state == "DOWN" for p in h.last["gpu0012"].ib_ports)
    assert all(p.state == "ACTIVE" for p in h.last["gpu0001"].ib_ports)
    assert h.node("gpu0012").fatal_reasons(h.world.t)  # its ports are down: no work there
    h.run(5)
    assert all(p.state == "ACTIVE" for p in h.last["gpu0012"].ib_ports)
    # Back with its switch: the switch lost the carrier, not the node, so the scheduler places
    # work on it again, as the console counts it free (it held a requeued job pending for the
    # hour: a 3 a.m. drive). A loss of the node's own link still keeps work away for the hour.
    assert h.node("gpu0012").fatal_reasons(h.world.t) == []
    node = h.node("gpu0001")
    node.link_down(2, "Polling", h.world.t, int(h.world.t * 1000))
    node.link_restore(2, h.world.t, int(h.world.t * 1000))
    assert node.fatal_reasons(h.world.t) == ["mlx5_ib2 lost carrier"]


def test_a_port_whose_switch_is_dead_does_not_flap():
    # A flapping cable behind a switch that died: the sim went on saying "ib2: Gained carrier"
    # every 6 s and counting link_downed, so the console read the node's own N4 ("6 link
    # recoveries/min") and N5 beside its switch's fault (a newcomer's run). With no peer the
    # PHY polls; nothing comes up until the switch does.
    h = Harness(nodes=16, nodes_per_leaf=8, actions=[
        act("ib_flap", 2, node="gpu0002", port=2, count=6),
        act("leaf_switch", 5, leaf="leaf01"), act("repair", 40, leaf="leaf01")])
    h.run(5)
    h.events["gpu0002"].clear()
    before = h.last["gpu0002"].ib_ports[2]
    for _ in range(30):
        port = h.tick()["gpu0002"].ib_ports[2]
        assert (port.state, port.phys_state) == ("DOWN", "Polling")
    ib2 = [e.message for e in h.events["gpu0002"] if e.message.startswith("ib2:")]
    assert ib2 == [], ib2
    assert port.link_downed - before.link_downed <= 1  # the switch's loss, if the flap had
    assert port.carrier_losses_24h <= before.carrier_losses_24h + 1  # it up at that moment
    h.run(10)
    assert h.last["gpu0002"].ib_ports[2].state == "ACTIVE"
    assert [e.message for e in h.events["gpu0002"] if e.message.startswith("ib2:")] == [
        "ib2: Gained carrier"]


def test_repair_clears_gpu_faults_with_a_reboot():
    h = Harness(actions=[act("xid79", 2, node="gpu0001", gpu=0),
                         act("repair", 5, node="gpu0001")])
    h.run(4)
    boot = h.node("gpu0001").boot_id
    assert h.verdict("gpu0001") is Verdict.FAILED
    h.run(3)
    assert h.last["gpu0001"].gpus[0].present and h.node("gpu0001").boot_id != boot
    assert h.verdict("gpu0001") is Verdict.OK


def test_a_cooling_fault_throttles_on_a_node_that_waits_for_a_straggler():
    """Found in a drill (2026-12-04): ``thermal temp=91`` on a node whose job was slowed 38 % by
    another node's NVLink fault peaked at 84 °C and never throttled: the node spent its steps
    waiting at the all-reduce, and the simulated failed cooling heated a waiting GPU a third
    less than a computing one. A failed fan fails under any work; a GPU busy in a collective
    still runs hot (docs/scenarios.md, ``thermal``)."""
    h = Harness(actions=[TRAIN, act("nvlink", 2, node="gpu0001", gpu=6, links=2),
                         act("thermal", 5, node="gpu0003", gpu=2, temp=91)])
    h.run(95)
    g = h.last["gpu0003"].gpus[2]
    assert h.job("train").step_time_s > 1.3 * healthy_step_time(h)  # the straggler is there
    assert g.temp_c >= 87 and g.clock_event_reasons & 0x20, (g.temp_c, g.clock_event_reasons)
    assert "G12" in h.rules("gpu0003") and h.verdict("gpu0003") is Verdict.DEGRADED


def test_cancelling_a_job_that_ended_is_said_not_done():
    """``inject cancel job=4102`` of a job already cancelled printed "injected" (an SRE
    drill); it is skipped with why, as a hang of a job that is not running is."""
    h = Harness(nodes=2, actions=[job("a", nodes=1, steps=5), act("cancel", 3, job="4101"),
                                  act("cancel", 5, job="4101")])
    h.run(8)
    texts = [text for _t, text in h.world.log]
    assert "cancelled job 4101" in texts, texts
    assert any(text.startswith("skipped") and "is CA already" in text for text in texts), texts


def test_an_injection_into_a_job_that_cannot_take_it_is_refused_before_it_is_said():
    """``inject job_hang job=4101`` of a failed job answered "injected" and did nothing (a
    newcomer's run): the simulator refuses it before answering, as it refuses an unknown job."""
    import pytest

    from fleetdeck.agents.sim.spec import SpecError, parse_action

    h = Harness(nodes=2, actions=[job("a", nodes=1, steps=5), act("cancel", 3, job="4101")])
    h.run(5)
    for raw, why in (({"fault": "job_hang", "job": "4101"}, "is CA, not running"),
                     ({"fault": "cancel", "job": "4101"}, "is CA already")):
        with pytest.raises(SpecError, match=why):
            h.world.inject(parse_action(raw, default_at=0))


def test_an_injection_says_where_it_lands():
    """``inject thermal job=4102 index=3`` answered "injected: thermal job=4102 index=3 …"
    and named no node, and ``leaf_switch node=gpu0020`` took every rail of the node's leaf
    group down without saying so (a newcomer's run)."""
    from fleetdeck.agents.sim.spec import parse_action

    h = Harness(nodes=16, nodes_per_leaf=8, actions=[TRAIN])
    h.run(3)
    job_id = h.job("train").job_id
    said = [h.world.inject(parse_action(raw, default_at=0)) for raw in (
        {"fault": "thermal", "job": job_id, "index": 2, "gpu": 1},
        {"fault": "leaf_switch", "node": "gpu0010"},
        {"fault": "leaf_switch", "leaf": "leaf01", "rail": 5},
        {"fault": "xid79", "node": "gpu0004"})]
    assert said[0].startswith(f"thermal job={job_id} index=2") and said[0].endswith(
        " (on gpu0003)"), said
    assert said[1] == "leaf_switch node=gpu0010 (leaf group leaf02, all 8 rails, 8 nodes)"
    assert said[2] == "leaf_switch leaf=leaf01 rail=5 (leaf group leaf01, rail 5, 8 nodes)"
    assert said[3] == "xid79 node=gpu0004 gpu=0"


def test_a_single_node_job_reduces_over_nvlink_so_its_ib_ports_do_not_touch_it():
    """A leaf switch failure killed a one-node job (NF, "network on gpu0003") and inflated the
    network's interruptions (a 3 a.m. drive): its ranks never cross InfiniBand."""
    solo = job("solo", nodes=1, step_time=1.0, checkpoint_every=10)
    h = Harness(actions=[solo, act("link_down", 5, node="gpu0001", port=1),
                         act("symbol_storm", 5, node="gpu0001", port=6, rate=200)],
                hang_timeout_s=8)
    h.run(30)
    j = h.job("solo")
    assert h.job_states(j.job_id) == ["PD", "R"]
    assert not j.stalled
    assert j.step_time_s == pytest.approx(j.healthy_step_s, rel=0.03)


def test_a_hot_gpu_that_falls_off_the_bus_keeps_its_heat_in_the_findings():
    """A GPU that throttled at 92 °C and then fell off the bus (XID 79 is often heat): its G12
    and G13 vanished with its readings, and the incident said only G1/G2, losing why it went (a
    fault audit). They stay, said of the time before it went; a repair clears them."""
    h = Harness(actions=[TRAIN, act("thermal", 5, node="gpu0003", gpu=2, temp=92,
                                    clock_mhz=1500),
                         act("xid79", 80, node="gpu0003", gpu=2)])
    h.run(90)
    assert not h.last["gpu0003"].gpus[2].present
    said = {f.rule: f.text for f in h.findings["gpu0003"] if f.component == "gpu2"}
    assert {"G1", "G2", "G12", "G13"} <= said.keys() and h.verdict("gpu0003") is Verdict.FAILED
    assert said["G12"].startswith("clock throttled (") and "before it went missing" in said["G12"]
    assert said["G13"].endswith(" °C before it went missing")
    assert int(said["G13"].split(" °C")[0]) >= 87
    h.run(10)
    assert {f.text for f in h.findings["gpu0003"] if f.rule in ("G12", "G13")} == {
        said["G12"], said["G13"]}  # fixed texts: no change every sample
    h.world.apply(act("repair", node="gpu0003"), h.world.t)
    h.run(3)
    # Back on the bus: its own readings judge it again (the agent's throttle hold may stand).
    assert not [f for f in h.findings["gpu0003"] if "before it went missing" in f.text]
