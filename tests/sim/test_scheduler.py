"""Simulated Slurm: placement, queueing, drain/resume, restart_job and its acks."""

from fleetdeck.agents.guard import EXPIRY_SKEW_MS
from fleetdeck.agents.sim.scheduler import SimJob
from fleetdeck.protocol.messages import AckResult, Command, CommandOp, DrainMode, DrainState
from tests.sim.harness import EPOCH_MS, Harness, act, job


def restart(ref: str, cmd_id: str = "c1", expires: int = EPOCH_MS + 10**9) -> Command:
    return Command(cmd_id=cmd_id, op=CommandOp.RESTART_JOB, target=ref, issued_by="op",
                   issued_at=EPOCH_MS, expires_at=expires)


def nodes_of(j: SimJob) -> list[str]:
    return [n.node_id for n in j.nodes]


def test_queue_when_short_and_first_fit_backfill():
    h = Harness(nodes=8, actions=[job("big", nodes=6, steps=20), job("huge", nodes=8),
                                  job("small", nodes=2)])
    h.run(3)
    assert h.job("big").state.value == "R" and nodes_of(h.job("big")) == [
        f"gpu{i:04d}" for i in range(1, 7)]
    assert h.job("huge").state.value == "PD" and h.job("huge").reason == "Resources"
    assert h.job("small").state.value == "R"  # backfilled behind the blocked head
    h.run(30)
    assert h.job_states(h.job("big").job_id) == ["PD", "R", "CG", "CD"]


def test_drain_finish_waits_for_the_job_then_no_placement():
    h = Harness(nodes=4, actions=[job("a", nodes=2, steps=15), job("later", nodes=4, at=30)])
    h.run(3)
    n1 = h.node("gpu0001")
    n1.on_drain(DrainState.DRAINING, DrainMode.FINISH)
    assert n1.busy()  # DRAINING: the agent waits
    h.run(20)
    assert h.job("a").state.value == "CD" and not n1.busy()
    n1.on_drain(DrainState.DRAINED, DrainMode.FINISH)
    h.run(15)
    assert h.job("later").state.value == "PD"  # 4 nodes wanted, only 3 placeable
    n1.on_drain(DrainState.NONE, DrainMode.FINISH)  # resume
    h.run(2)
    assert h.job("later").state.value == "R" and "gpu0001" in nodes_of(h.job("later"))


def test_drain_now_requeues_at_once_from_checkpoint_elsewhere():
    h = Harness(nodes=6, actions=[job("a", nodes=2, checkpoint_every=5)])
    h.run(13)
    j = h.job("a")
    ck = j.last_checkpoint_step
    assert ck >= 5
    n2 = h.node("gpu0002")
    n2.on_drain(DrainState.DRAINING, DrainMode.NOW)
    assert not n2.busy() and j.state.value == "RQ" and j.progress == ck
    h.run(3)
    assert j.state.value == "R" and "gpu0002" not in nodes_of(j) and j.requeues == 1
    assert h.job_states(j.job_id)[-3:] == ["RQ", "PD", "R"]


def test_restart_job_acks_and_excludes_drained_and_failed_nodes():
    h = Harness(nodes=6, actions=[job("a", nodes=2, checkpoint_every=5),
                                  act("xid79", 12, node="gpu0002", gpu=1)])
    h.run(18)
    j = h.job("a")
    assert j.state.value == "R" and nodes_of(j) == ["gpu0001", "gpu0003"]  # after NF+requeue
    h.node("gpu0003").on_drain(DrainState.DRAINING, DrainMode.FINISH)
    sched = h.world.scheduler
    sched.command(restart(j.job_id), EPOCH_MS)
    acks = sched.take_acks()
    assert [a.result for a in acks] == [AckResult.ACCEPTED] and acks[0].by == "sched"
    assert j.state.value == "RQ" and j.progress == j.last_checkpoint_step
    h.run(3)
    assert j.state.value == "R"
    assert not {"gpu0002", "gpu0003"} & set(nodes_of(j))
    done = sched.take_acks()
    assert [a.result for a in done] == [AckResult.DONE] and done[0].cmd_id == "c1"


def test_restart_job_rejections():
    h = Harness(nodes=2, actions=[job("a", nodes=2, steps=3), job("b", nodes=2)])
    h.run(2)
    sched = h.world.scheduler
    sched.command(restart("nope"), EPOCH_MS)
    sched.command(restart(h.job("b").job_id, "c2"), EPOCH_MS)  # still pending
    # Expired past the slack for a sender's clock behind this one (agents/guard.py).
    sched.command(restart(h.job("a").job_id, "c3", expires=EPOCH_MS - EXPIRY_SKEW_MS - 1),
                  EPOCH_MS)
    h.run(8)
    sched.command(restart(h.job("a").job_id, "c4"), EPOCH_MS)  # completed
    results = [(a.cmd_id, a.result) for a in sched.take_acks()]
    assert results == [("c1", AckResult.REJECTED), ("c2", AckResult.REJECTED),
                       ("c3", AckResult.REJECTED), ("c4", AckResult.REJECTED)]


def test_restart_by_name_of_a_failed_job():
    h = Harness(nodes=4, actions=[job("a", nodes=1), act("ecc_dbe", 5, node="gpu0001", gpu=0)])
    h.run(6)
    assert h.job("a").state.value == "F"
    h.world.scheduler.command(restart("a"), EPOCH_MS)
    h.run(3)
    assert h.job("a").state.value == "R" and nodes_of(h.job("a")) == ["gpu0002"]


def test_no_placement_on_failed_or_dead_nodes_or_without_agent():
    h = Harness(nodes=4, actions=[act("xid79", 0, node="gpu0001"),
                                  act("node_death", 0, node="gpu0002"),
                                  act("agent_death", 0, node="gpu0003"),
                                  job("a", nodes=1, at=1), job("b", nodes=1, at=1)])
    h.run(4)
    assert nodes_of(h.job("a")) == ["gpu0004"] and h.job("b").state.value == "PD"


def test_job_status_fields_and_publishing_on_change():
    h = Harness(nodes=4, actions=[job("a", nodes=2, steps=50, checkpoint_every=10)])
    h.run(20)
    st = [s for s in h.jobs if s.job_id == h.job("a").job_id]
    last = st[-1]
    assert last.state.value == "R" and last.nodes == ["gpu0001", "gpu0002"]
    assert last.total_steps == 50 and last.checkpoint_every == 10
    assert last.last_checkpoint_step == last.step // 10 * 10
    assert last.step_time_ms and last.median_step_time_ms and last.eta_s
    assert len(last.slowest) == 8 and last.slowest[0].step_time_ms >= last.slowest[-1].step_time_ms
    assert last.started_ts and last.submitted_ts and last.ts >= last.started_ts
    assert len(st) >= 15  # a status every step


def test_background_jobs_keep_the_fleet_busy_and_healthy():
    h = Harness(nodes=32, background_jobs=4)
    h.run(60)
    active = [j for j in h.world.scheduler.jobs.values() if j.state.value in ("R", "PD")]
    assert len(active) >= 4
    assert all(h.verdict(n).value == "ok" for n in h.last)


def test_a_pending_row_remap_does_not_refuse_new_work():
    """NVIDIA: with a remap pending, running work goes on and new work may launch; the reset
    waits for a convenient time. The console says degraded (G6), the scheduler still places."""
    h = Harness(nodes=2, actions=[job("a", nodes=1, steps=5), job("b", nodes=2, at=10)])
    h.run(2)
    remapped = h.node("gpu0001").gpus[3]
    remapped.remap_pending = True
    remapped.remap_corr += 1
    h.run(3)
    assert h.job("a").state.value == "R"  # running work goes on
    assert h.node("gpu0001").fatal_reasons(h.world.t) == []
    h.run(10)
    assert h.job("b").state.value == "R" and nodes_of(h.job("b")) == ["gpu0001", "gpu0002"]
    assert h.rules("gpu0001") == {"G6"} and h.verdict("gpu0001").value == "degraded"
    # A failed remap still keeps work away (G5 drains).
    remapped.remap_failure = True
    assert h.node("gpu0001").fatal_reasons(h.world.t) == ["gpu3 ECC/row remap"]
