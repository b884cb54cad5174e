"""Command lifecycle and blast radius, driven with real protocol messages through Ingest."""

import pytest

from fleetdeck.console.commands import (
    CommandTracker,
    Phase,
    blast_radius,
    job_blast_radius,
    job_refusal,
)
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol.messages import AckResult, CommandOp, DrainMode, DrainState
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


@pytest.fixture
def world():
    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(12, clock)
    fleet.birth(ingest)
    fleet.telemetry(ingest)
    state = FleetState(CLUSTER, ingest.malformed)
    state.apply(ingest.take_batch(), clock())
    return clock, ingest, fleet, state


def step(ingest, state, tracker, clock):
    batch = ingest.take_batch()
    state.apply(batch, clock())
    return tracker.observe(state, [a for _r, a in batch.acks], clock())


def test_drain_done_only_when_status_says_drained(world):
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0001"], "XID 79", clock())
    cmd = req.targets[0].cmd
    assert cmd.op is CommandOp.DRAIN and cmd.args.reason == "XID 79"
    assert cmd.expires_at > cmd.issued_at
    fleet.ack(ingest, cmd.cmd_id, "gpu0001", AckResult.ACCEPTED, "drain (finish)")
    moves = step(ingest, state, tr, clock)
    assert [m.new for m in moves] == [Phase.ACKNOWLEDGED]
    # The agent says done, but nothing is observed yet: still acknowledged.
    fleet.ack(ingest, cmd.cmd_id, "gpu0001", AckResult.DONE, "DRAINED")
    step(ingest, state, tr, clock)
    assert req.phase is Phase.ACKNOWLEDGED
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, "XID 79", "alice", cmd.cmd_id)
    (move,) = step(ingest, state, tr, clock)
    assert req.targets[0].detail == "DRAINING"
    # Said as what moved: "acknowledged" a second time read as a duplicate acknowledgement.
    assert move.text == "status now DRAINING"
    fleet.status(ingest, "gpu0001", DrainState.DRAINED, "XID 79", "alice", cmd.cmd_id)
    moves = step(ingest, state, tr, clock)
    assert req.phase is Phase.DONE and moves[-1].detail == "DRAINED"
    assert moves[-1].text == "done (DRAINED)"
    assert req.finished_at == clock()


def test_two_drains_of_one_node_both_end_done_once_it_is_drained(world):
    """Two operators drain one node at once: the agent takes both, its status names the one
    that reached it last. The other, which had requeued the job, read "timed out" (an SRE
    drill): acknowledged and drained is done, whichever drain the status names."""
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    now_drain = tr.drain(["gpu0003"], "B-second", clock(), DrainMode.NOW)
    finish = tr.drain(["gpu0003"], "A-first", clock())
    b, a = now_drain.targets[0].cmd, finish.targets[0].cmd
    fleet.ack(ingest, b.cmd_id, "gpu0003", AckResult.ACCEPTED, "drain (now)")
    fleet.ack(ingest, b.cmd_id, "gpu0003", AckResult.DONE, "DRAINED")
    fleet.status(ingest, "gpu0003", DrainState.DRAINED, "B-second", "bob", b.cmd_id)
    step(ingest, state, tr, clock)
    assert now_drain.phase is Phase.DONE
    fleet.ack(ingest, a.cmd_id, "gpu0003", AckResult.ACCEPTED, "drain (finish)")
    fleet.status(ingest, "gpu0003", DrainState.DRAINED, "A-first", "alice", a.cmd_id)
    step(ingest, state, tr, clock)
    assert finish.phase is Phase.DONE
    # The other order: the status names the later drain before the first one saw its own.
    tr2 = CommandTracker(CLUSTER, "alice")
    first = tr2.drain(["gpu0004"], "first", clock(), DrainMode.NOW)
    second = tr2.drain(["gpu0004"], "second", clock())
    for r in (first, second):
        fleet.ack(ingest, r.targets[0].cmd.cmd_id, "gpu0004", AckResult.ACCEPTED, "drain")
    fleet.status(ingest, "gpu0004", DrainState.DRAINED, "second", "carol",
                 second.targets[0].cmd.cmd_id)
    step(ingest, state, tr2, clock)
    assert first.phase is Phase.DONE and second.phase is Phase.DONE
    # Naming whose drain it was (two operators at once: a 2026-12-07 drill).
    assert first.targets[0].detail == "DRAINED (its status names another drain: second [carol])"
    clock.advance(120)
    step(ingest, state, tr2, clock)
    assert first.phase is Phase.DONE  # not timed out later


def test_rejected_and_duplicate_acks(world):
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0002"], "x", clock())
    cid = req.targets[0].cmd.cmd_id
    fleet.ack(ingest, cid, "gpu0002", AckResult.REJECTED, "no")
    fleet.ack(ingest, cid, "gpu0002", AckResult.REJECTED, "no")  # redelivery
    fleet.ack(ingest, cid, "gpu0003", AckResult.ACCEPTED)  # someone else: ignored
    moves = step(ingest, state, tr, clock)
    assert len(moves) == 1 and req.phase is Phase.REJECTED
    assert req.targets[0].detail == "no"


def test_timeouts(world):
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice", ack_timeout_s=5, effect_timeout_s=20)
    silent = tr.resume(["gpu0004"], clock())
    slow = tr.drain(["gpu0005"], "x", clock(), DrainMode.NOW)
    fleet.ack(ingest, slow.targets[0].cmd.cmd_id, "gpu0005", AckResult.ACCEPTED)
    step(ingest, state, tr, clock)
    clock.advance(6)
    step(ingest, state, tr, clock)
    assert silent.phase is Phase.TIMED_OUT and "no acknowledgement" in silent.targets[0].detail
    assert slow.phase is Phase.ACKNOWLEDGED
    clock.advance(20)
    step(ingest, state, tr, clock)
    assert slow.phase is Phase.TIMED_OUT and "DRAINED not seen" in slow.targets[0].detail


def test_bulk_phase_is_worst(world):
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0006", "gpu0007"], "x", clock())
    a, b = (t.cmd.cmd_id for t in req.targets)
    fleet.ack(ingest, a, "gpu0006", AckResult.ACCEPTED)
    fleet.status(ingest, "gpu0006", DrainState.DRAINED, "x", "alice", a)
    fleet.ack(ingest, b, "gpu0007", AckResult.REJECTED, "busy")
    step(ingest, state, tr, clock)
    assert req.counts() == {Phase.DONE: 1, Phase.REJECTED: 1}
    assert req.phase is Phase.REJECTED
    assert req.target_text == "gpu[0006-0007]"
    # The audit record's detail keeps the node that did drain (its one outcome is the worst).
    from fleetdeck.console.outbox import finish_details

    assert finish_details(req) == "done gpu0006; rejected gpu0007; gpu0007: busy"


def test_restart_job_done_when_requeued(world):
    clock, ingest, fleet, state = world
    job = job_status("41", ["gpu0001", "gpu0002"], clock)
    publish_job(ingest, job, clock)
    state.apply(ingest.take_batch(), clock())
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.restart_job("41", clock(), job=state.jobs["41"])
    kind, _subject, cmd = req.commands()[0]
    assert kind.value == "sched_cmd" and cmd.args.job == "41"
    fleet.ack(ingest, cmd.cmd_id, "sched", AckResult.ACCEPTED, op=CommandOp.RESTART_JOB)
    step(ingest, state, tr, clock)
    assert req.phase is Phase.ACKNOWLEDGED
    publish_job(ingest, job_status("41", ["gpu0001", "gpu0002"], clock, requeues=1), clock)
    step(ingest, state, tr, clock)
    assert req.phase is Phase.DONE and "requeues 1" in req.targets[0].detail


def test_a_restart_of_a_job_the_console_does_not_know_is_refused_with_one_sentence(world):
    """It used to be sent anyway (the scheduler rejected it). Before any job status arrived
    the job cannot be called unknown: the sentence says the scheduler was not heard from."""
    clock, ingest, _fleet, state = world
    assert job_refusal(state, "41") == (
        f"job 41 cannot be checked: nothing heard from the scheduler on cluster '{CLUSTER}' "
        "yet, not one job status")
    publish_job(ingest, job_status("41", ["gpu0001"], clock), clock)
    state.apply(ingest.take_batch(), clock())
    assert job_refusal(state, "41") == ""
    assert job_refusal(state, "999") == (
        f"unknown job 999: the scheduler has published no such job on cluster '{CLUSTER}'")
    # squeue shows names too: an operator types one (an SRE drill read "unknown job").
    name = state.jobs["41"].name
    assert name and job_refusal(state, name) == (
        f"{name} is a job name, not a job id: restart-job takes the id (41)")


def test_an_open_drain_says_which_of_its_nodes_are_draining(world):
    """Where an open drain stands (the quit question's line): its nodes seen DRAINING are
    draining, their jobs still on them, not "acknowledged" like a node that has not begun."""
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0001", "gpu0002", "gpu0003"], "fan", clock())
    assert req.standing() == "requested"
    ids = {t.target: t.cmd.cmd_id for t in req.targets}
    for node in ("gpu0001", "gpu0002"):
        fleet.ack(ingest, ids[node], node, AckResult.ACCEPTED, "drain (finish)")
    step(ingest, state, tr, clock)
    assert req.standing() == "acknowledged"
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, "fan", "alice", ids["gpu0001"])
    step(ingest, state, tr, clock)
    assert req.standing() == ("draining 1 (its jobs run to completion first), acknowledged 1, "
                              "requested 1")
    fleet.status(ingest, "gpu0002", DrainState.DRAINED, "fan", "alice", ids["gpu0002"])
    step(ingest, state, tr, clock)
    assert req.standing() == ("draining 1 (its jobs run to completion first), done 1, "
                              "requested 1")


def test_an_open_drain_now_says_its_draining_nodes_jobs_are_requeued(world):
    """A drain --now requeues its nodes' jobs from their last checkpoint: the quit question said
    of its DRAINING node "its jobs run to completion first", a drain that lets them finish."""
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0001", "gpu0002"], "xid 79", clock(), DrainMode.NOW)
    ids = {t.target: t.cmd.cmd_id for t in req.targets}
    for node in ("gpu0001", "gpu0002"):
        fleet.ack(ingest, ids[node], node, AckResult.ACCEPTED, "drain (now)")
        fleet.status(ingest, node, DrainState.DRAINING, "xid 79", "alice", ids[node])
    step(ingest, state, tr, clock)
    assert req.standing() == "draining 2 (their jobs requeued from their last checkpoint)"
    finish = tr.drain(["gpu0003"], "fan", clock())
    fleet.ack(ingest, finish.targets[0].cmd.cmd_id, "gpu0003", AckResult.ACCEPTED,
              "drain (finish)")
    fleet.status(ingest, "gpu0003", DrainState.DRAINING, "fan", "alice",
                 finish.targets[0].cmd.cmd_id)
    step(ingest, state, tr, clock)
    assert finish.standing() == "draining (its jobs run to completion first)"


def test_blast_radius(world):
    clock, ingest, fleet, state = world
    nodes = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    publish_job(ingest, job_status("41", nodes, clock), clock)
    fleet.telemetry(ingest, job={n: "41" for n in nodes})
    state.apply(ingest.take_batch(), clock())
    finish = blast_radius(state, CommandOp.DRAIN, ["gpu0002"], clock())
    assert finish.gpus == 8 and [j.job_id for j in finish.jobs] == ["41"]
    assert finish.nodes_affected == 4 and finish.gpus_affected == 32
    assert finish.gpu_hours_at_risk == 0.0  # jobs finish first
    # With how it reads: a healthy node marked by mistake was listed as plainly as a sick
    # one (a 3 a.m. drive).
    assert "gpu0002 (job 41, 8 GPUs): ok, nothing found on it" in finish.target_lines
    # An idle target with it: the job is still on its 4 nodes (it read "1 job on 5 nodes").
    both = blast_radius(state, CommandOp.DRAIN, ["gpu0002", "gpu0007"], clock())
    assert both.nodes_affected == 4 and both.gpus_affected == 32
    assert "1 job on 4 nodes / 32 GPUs" in both.summary()
    now = blast_radius(state, CommandOp.DRAIN, ["gpu0002"], clock(), DrainMode.NOW)
    assert now.gpu_hours_at_risk == pytest.approx(32 * 0.5)  # 30 min since checkpoint
    assert not [n for n in now.notes if "pending ahead" in n]
    # A queue ahead takes the freed nodes first (a jobs audit).
    from fleetdeck.protocol.messages import JobState
    publish_job(ingest, job_status("42", [], clock, state=JobState.PD), clock)
    state.apply(ingest.take_batch(), clock())
    now = blast_radius(state, CommandOp.DRAIN, ["gpu0002"], clock(), DrainMode.NOW)
    assert ("1 job pending ahead (42): it may take the freed nodes first, and a requeued job "
            "waits behind it") in now.notes
    assert finish.free_gpus_after == 8 * 8  # 12 nodes - 4 busy
    # A failed node's GPUs are not free (status counts them out): the radius said 183 free
    # GPUs left where status said 176 (an SRE drill).
    from tests.tui.fleet import port_down

    fleet.telemetry(ingest, job={n: "41" for n in nodes}, faults={"gpu0010": port_down()})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    assert state.nodes["gpu0010"].verdict.value == "failed"
    assert blast_radius(state, CommandOp.DRAIN, ["gpu0002"], clock()).free_gpus_after == 7 * 8
    assert not finish.needs_typed_confirmation
    many = blast_radius(state, CommandOp.DRAIN, fleet.names[:9], clock())
    assert many.needs_typed_confirmation
    restart = job_blast_radius(state, "41", clock())
    assert restart.gpu_hours_at_risk == pytest.approx(16.0) and restart.gpus == 32
    # A whole clause: "…, 16.0 GPU-h since it" read as a line cut off at the dialog's edge.
    # With its time left: a drain --now requeued a job 5 min from its end (a jobs audit).
    assert restart.jobs[0].line().endswith("checkpoint 30m00s ago, 16.0 GPU-h of work since "
                                           "then; ends in 8m20s at its pace"), \
        restart.jobs[0].line()


def test_a_drain_of_a_failed_idle_node_takes_its_gpus_status_counts_out(world):
    """An idle node failed by XID 79 (7 of 8 GPUs visible): its radius said "1 node, 8 GPUs"
    beside an unchanged "free GPUs left", where status counts its GPUs failed or out already
    (a newcomer's run); then "no GPU taken from service", false for the scheduler, where the
    node is idle and the drain takes its 8 GPUs away (a review). Both are said."""
    from msgspec.structs import replace

    from tests.tui.fleet import port_down

    def off_the_bus(tel):
        return replace(tel, gpus=[replace(g, present=False) if g.index == 0 else g
                                  for g in tel.gpus])

    clock, ingest, fleet, state = world
    fleet.telemetry(ingest, faults={"gpu0010": off_the_bus, "gpu0011": port_down()})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    assert state.nodes["gpu0010"].verdict.value == "failed"
    assert state.nodes["gpu0011"].verdict.value == "failed"
    free = blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock()).free_gpus_after
    xid = blast_radius(state, CommandOp.DRAIN, ["gpu0010"], clock())
    assert xid.gpus == 8 and xid.free_gpus_after == free + 8
    assert xid.summary() == ("1 node, 8 GPUs (status counts them out already: 1 failed, "
                             "7 on a node that cannot take work), no running jobs, "
                             f"{free + 8} free GPUs left")
    both = blast_radius(state, CommandOp.DRAIN, ["gpu0001", "gpu0010", "gpu0011"], clock())
    assert both.gpus == 24 and both.free_gpus_after == free
    assert both.summary().startswith("3 nodes, 24 GPUs (status counts 16 of them out already: "
                                     "1 failed, 15 on a node that cannot take work), "
                                     "no running jobs")
    # A sound idle node's GPUs are free: its drain takes all 8, said as before.
    assert blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock()).summary().startswith(
        "1 node, 8 GPUs, no running jobs")


def test_a_resume_of_a_draining_node_cancels_its_drain_and_gives_nothing_back(world):
    """A DRAINING node's job still holds its GPUs: its resume read "8 GPUs given back to the
    scheduler" and "drained for …", where the resume only cancels the drain and the job runs
    on. A DRAINED node's GPUs are given back, in the same radius."""
    clock, ingest, fleet, state = world
    publish_job(ingest, job_status("41", ["gpu0001", "gpu0002"], clock), clock)
    fleet.telemetry(ingest, job={"gpu0001": "41", "gpu0002": "41"})
    fleet.status(ingest, "gpu0001", DrainState.DRAINING, "fan noise", "alice")
    fleet.status(ingest, "gpu0002", DrainState.DRAINING, "fan noise", "alice")
    fleet.status(ingest, "gpu0003", DrainState.DRAINED, "disk", "bob")
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    one = blast_radius(state, CommandOp.RESUME, ["gpu0001"], clock())
    assert one.gpus == 0
    assert one.summary() == ("1 node, draining: its drain is cancelled and its job keeps "
                             "running on it (nothing given back)")
    assert one.target_lines == ['gpu0001 (job 41, 8 GPUs, draining): draining for "fan noise" '
                                'by alice']
    two = blast_radius(state, CommandOp.RESUME, ["gpu0001", "gpu0002"], clock())
    assert two.summary() == ("2 nodes, draining: their drains are cancelled and their jobs "
                             "keep running on them (nothing given back)")
    mixed = blast_radius(state, CommandOp.RESUME, ["gpu0001", "gpu0003"], clock())
    assert mixed.gpus == 8
    assert mixed.summary() == ("2 nodes, 8 GPUs given back to the scheduler; 1 draining: its "
                               "drain is cancelled and its job keeps running on it (nothing "
                               "given back)")
    assert 'gpu0003 (idle, 8 GPUs, drained): drained for "disk" by bob' in mixed.target_lines


def test_a_drain_of_a_drained_node_says_it_replaces_the_reason_or_changes_nothing(world):
    """"note: already drained: gpu0003", then the drain went out and said "1 done": the
    operator could not tell that Slurm replaces the reason, nor that the same one changes
    nothing."""
    from fleetdeck.console.commands import drained_for

    clock, ingest, fleet, state = world
    fleet.status(ingest, "gpu0003", DrainState.DRAINED, "XID 79 OPS-1", "alice", "c1")
    fleet.status(ingest, "gpu0004", DrainState.DRAINED, "XID 79 OPS-1", "alice", "c2")
    state.apply(ingest.take_batch(), clock())
    both = ["gpu0003", "gpu0004"]
    other = blast_radius(state, CommandOp.DRAIN, ["gpu0003"], clock(), DrainMode.NOW, "again")
    assert "gpu0003 is already drained (reason 'XID 79 OPS-1' by alice): this replaces its " \
        "reason" in other.notes, other.notes
    # The TUI's dialog shows the radius before its reason is typed.
    unknown = blast_radius(state, CommandOp.DRAIN, both, clock())
    assert "gpu[0003-0004] are already drained (reason 'XID 79 OPS-1' by alice): this " \
        "replaces their reason" in unknown.notes, unknown.notes
    same = blast_radius(state, CommandOp.DRAIN, both, clock(), DrainMode.NOW, "XID 79 OPS-1 ")
    assert "gpu[0003-0004] are already drained for this reason by alice: nothing changes on " \
        "them" in same.notes, same.notes
    assert drained_for(state, [*both, "gpu0005"], "XID 79 OPS-1") == both
    # Only what is in service is taken out: the drained node's GPUs are out already.
    mixed = blast_radius(state, CommandOp.DRAIN, ["gpu0003", "gpu0005"], clock())
    assert mixed.gpus == 8, mixed.summary()
    assert mixed.summary().startswith(
        "2 nodes, 8 GPUs (1 is drained or draining already: its GPUs are out), "), \
        mixed.summary()
    assert drained_for(state, both, "again") == []


def test_a_job_without_a_checkpoint_is_not_said_to_have_one(world):
    """The drain dialog said "checkpoint 2m27s ago" of a job at "ckpt -" (its start time)."""
    clock, ingest, _fleet, state = world
    nodes = ["gpu0001", "gpu0002"]
    fresh = job_status("42", nodes, clock, step=67, started_offset_s=147).model_copy(
        update={"last_checkpoint_step": 0, "last_checkpoint_ts": None})
    publish_job(ingest, fresh, clock)
    state.apply(ingest.take_batch(), clock())
    (job,) = blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock(), DrainMode.NOW).jobs
    assert "checkpoint 2m" not in job.line()
    assert "no checkpoint yet: a requeue restarts it from step 0" in job.line()
    assert "GPU-h since it started" in job.line()


def test_draining_a_node_whose_only_fault_is_its_suspect_switch_says_so():
    from tests.console.test_judgements import session_with
    from tests.tui.fleet import port_down

    down = port_down("mlx5_ib2")
    session = session_with({n: down for n in ("gpu0001", "gpu0002", "gpu0003")})
    state = session.state
    radius = blast_radius(state, CommandOp.DRAIN, ["gpu0001", "gpu0005"], session.clock())
    assert any("behind suspect switch leaf00-r2, with no fault of their own: gpu0001" in note
               for note in radius.notes), radius.notes


def test_a_reason_is_made_printable_before_it_is_signed(world):
    """An agent (and every console after it) reads a reason with control characters as
    U+FFFD (docs/protocol.md, "Text from the network"); the command carries that text, so what
    is signed, audited and shown is what the agent keeps."""
    from fleetdeck.protocol import signing

    clock, _ingest, _fleet, _state = world
    tr = CommandTracker(CLUSTER, "alice")
    cmd = tr.drain(["gpu0001"], "XID 79\x1b]0;pwned\x07 seen", clock()).targets[0].cmd
    assert cmd.args.reason == "XID 79\ufffd]0;pwned\ufffd seen"
    key = b"k" * 32
    assert signing.check(signing.sign(cmd, key), key, cmd.issued_at) == ""


def test_a_cleared_retained_job_status_withdraws_the_job():
    """MQTT deletes a retained message with an empty one: a job a dead scheduler left retained
    (running for ever, priced by restart-job, named in incidents) is withdrawn that way, and
    the console counted the empty payload as malformed and kept the job. Through the session's
    tick, as every console, collector and replay applies a batch."""
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.state import JOB_CLEAR_CONFIRM_S
    from fleetdeck.protocol.topics import Kind, topic_for

    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    publish_job(ingest, job_status("4104", ["gpu0001", "gpu0002"], clock), clock)
    session.tick()
    assert "4104" in session.state.jobs
    ingest.handle(topic_for(CLUSTER, Kind.JOB, "4104"), b"", clock())
    session.tick()
    # Kept until no status of it came for JOB_CLEAR_CONFIRM_S (tests/console/test_job_clears.py).
    assert "4104" in session.state.jobs and session.state.malformed.total == 0
    clock.advance(JOB_CLEAR_CONFIRM_S)
    session.tick()
    assert "4104" not in session.state.jobs and session.state.malformed.total == 0
    # A running job that leaves is said (a restarted simulator dropped one in silence).
    assert [ln.text for ln in session.log.lines() if ln.kind == "job"] == [
        "job 4104 withdrawn (its retained status cleared) while it last read R (step 500 on "
        "gpu[0001-0002]): nothing reports it now"]
    # Withdrawn, then published again in one batch: the newer word stands.
    ingest.handle(topic_for(CLUSTER, Kind.JOB, "4104"), b"", clock())
    publish_job(ingest, job_status("4104", ["gpu0001"], clock), clock)
    session.tick()
    assert session.state.jobs["4104"].nodes == ["gpu0001"]


def test_the_drain_dialog_suggests_now_for_a_failed_node_under_a_job(world):
    """Finish was the default for every drain: for a failed node under a job that holds the
    job's other nodes for nothing, against the node's own action ("drain (requeue its jobs
    from their checkpoint)", an operator's walkthrough)."""
    from fleetdeck.console.commands import suggested_drain_mode
    from tests.tui.fleet import port_down, throttled

    clock, ingest, fleet, state = world
    busy = {n: "41" for n in ("gpu0001", "gpu0002", "gpu0003")}
    fleet.telemetry(ingest, job=busy, faults={"gpu0001": port_down(), "gpu0002": throttled(),
                                              "gpu0005": port_down("mlx5_ib4")})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    assert state.nodes["gpu0001"].verdict.value == "failed"
    assert suggested_drain_mode(state, ["gpu0001"]) is DrainMode.NOW
    assert suggested_drain_mode(state, ["gpu0002"]) is DrainMode.FINISH  # degraded: finish
    assert suggested_drain_mode(state, ["gpu0005"]) is DrainMode.FINISH  # failed, idle
    assert suggested_drain_mode(state, ["gpu0001", "gpu0003"]) is DrainMode.FINISH  # mixed


def test_the_drain_reason_hint_is_the_node_s_worst_finding(world):
    from fleetdeck.console.judgements import drain_reason_hint
    from tests.tui.fleet import port_down, throttled

    clock, ingest, fleet, state = world

    def both(tel):
        return port_down("mlx5_ib4")(throttled(1)(tel))

    fleet.telemetry(ingest, faults={"gpu0001": both})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    assert drain_reason_hint(state.nodes["gpu0001"]) == "N1 mlx5_ib4:1"  # not G12 gpu1
    assert drain_reason_hint(state.nodes["gpu0002"]) == ""
    assert drain_reason_hint(None) == ""


def test_a_restart_names_a_failed_node_of_the_job_that_is_not_drained(world):
    """The restart dialog listed the job's failed node as a plain target: requeued, the job
    can go straight back onto it (a 3 a.m. drive). Drained, it is no longer flagged."""
    from tests.tui.fleet import port_down

    clock, ingest, fleet, state = world
    nodes = ["gpu0001", "gpu0002"]
    publish_job(ingest, job_status("42", nodes, clock), clock)
    fleet.telemetry(ingest, job={n: "42" for n in nodes}, faults={"gpu0002": port_down()})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    radius = job_blast_radius(state, "42", clock())
    assert radius.target_lines[0] == "gpu0001 (8 GPUs)"
    assert radius.target_lines[1].startswith("gpu0002 (8 GPUs): failed (N1 mlx5_ib2:1: "), \
        radius.target_lines
    assert radius.target_lines[1].endswith(", not drained")
    [note] = radius.notes
    assert note.startswith("gpu0002 (failed: N1 mlx5_ib2:1: "), note
    assert note.endswith(") is not drained: a restart may put the job on it again, to stall "
                         "again; drain gpu0002 first"), note
    fleet.status(ingest, "gpu0002", DrainState.DRAINING, reason="IB down")
    state.apply(ingest.take_batch(), clock())
    radius = job_blast_radius(state, "42", clock())
    # Listed as the drain leaves it: plain, it read as a node the job would come back to.
    assert radius.target_lines[1] == ("gpu0002 (8 GPUs): draining, the requeued job will not be "
                                      "placed there") and not radius.notes


def test_sinfo_state_shows_a_drain_on_a_node_that_is_down():
    """A drained node that went offline read "down*", hiding the drain (a review): as sinfo,
    "drain*"."""
    from fleetdeck.console.rows import slurm_state
    from fleetdeck.console.state import NodeState
    from fleetdeck.protocol.messages import DrainInfo

    st = NodeState("gpu0001", online=False)
    assert slurm_state(st) == "down*"
    st.drain = DrainInfo(state=DrainState.DRAINED)
    assert slurm_state(st) == "drain*"
    st.drain = DrainInfo(state=DrainState.DRAINING)
    assert slurm_state(st) == "drng*"
    st.online = True
    assert slurm_state(st) == "drng"


def test_a_restart_does_not_flag_a_node_whose_agent_died_while_its_ranks_step(world):
    """Offline with its job still stepping is a dead agent, not a sick node: H2 says do not
    drain; the restart dialog said "drain first" (a review)."""
    clock, ingest, _fleet, state = world
    nodes = ["gpu0001", "gpu0002"]
    publish_job(ingest, job_status("42", nodes, clock), clock)
    state.apply(ingest.take_batch(), clock())
    from fleetdeck.console.health import Verdict

    state.nodes["gpu0002"].verdict = Verdict.OFFLINE
    state.nodes["gpu0002"].job_stepping = "42"
    radius = job_blast_radius(state, "42", clock())
    assert not radius.notes
    # Tagged, not a plain target line (a 3 a.m. drive).
    assert any(line.startswith("gpu0002") and "its agent is silent" in line
               for line in radius.target_lines), radius.target_lines
    state.nodes["gpu0002"].job_stepping = ""
    assert job_blast_radius(state, "42", clock()).notes


def test_restarting_an_ended_job_says_what_the_restart_does(world):
    """A failed job holds no node: its restart dialog said "0 nodes, 0 GPUs requeued" and
    "Targets (0)", and offered "NCCL timeout at step 1200" as its reason (a 3 a.m. drive)."""
    from fleetdeck.console.judgements import restart_reason_hint
    from fleetdeck.protocol.messages import JobState

    clock, ingest, _fleet, state = world
    failed = job_status("43", [], clock, state=JobState.F).model_copy(
        update={"reason": "NodeFail gpu0012 (Xid 79)"})
    publish_job(ingest, failed, clock)
    state.apply(ingest.take_batch(), clock())
    radius = job_blast_radius(state, "43", clock())
    assert ("job 43 (F) holds no nodes: the scheduler requeues it from its checkpoint at "
            "step 400 wherever it finds room") in radius.notes, radius.notes
    assert restart_reason_hint(state.jobs["43"], state, clock()) == (
        "F: NodeFail gpu0012 (Xid 79)")
    # "Targets (0):" with nothing under it (a newcomer's run): the job, and where it failed.
    from fleetdeck.console.tui.modals import radius_text

    assert radius.subject == "job 43 (F), on no nodes now; it failed on gpu0012"
    text = radius_text(radius)
    assert "Targets (0)" not in text, text
    assert text.endswith("[b]Target[/]: job 43 (F), on no nodes now; it failed on gpu0012"), text


def test_the_drain_reason_example_names_a_silent_node_s_liveness_not_an_xid(world):
    """The drain dialog offered "e.g. XID 79 on gpu3" for a node whose agent was offline
    (a 3 a.m. drive)."""
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.judgements import drain_reason_hint

    clock, ingest, fleet, state = world
    fleet.telemetry(ingest)
    state.apply(ingest.take_batch(), clock())
    st = state.nodes["gpu0002"]
    assert drain_reason_hint(st) == ""
    st.liveness = [Finding("H2", Severity.DRAIN, "", "agent offline (Last Will); job 4 …")]
    assert drain_reason_hint(st) == "H2 agent offline"


def test_a_restart_whose_job_is_requeued_but_pending_is_not_done_until_the_scheduler_says(world):
    """"done (requeued (requeues 1), now RQ)" while a queued job took the nodes and the restarted
    one sat PD (Resources) for good (a jobs audit): done means running again, or the
    scheduler's own done for a job still pending, said as pending."""
    from fleetdeck.protocol.messages import JobState

    clock, ingest, fleet, state = world
    publish_job(ingest, job_status("41", ["gpu0001", "gpu0002"], clock), clock)
    state.apply(ingest.take_batch(), clock())
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.restart_job("41", clock(), job=state.jobs["41"])
    cmd = req.targets[0].cmd
    fleet.ack(ingest, cmd.cmd_id, "sched", AckResult.ACCEPTED, op=CommandOp.RESTART_JOB)
    step(ingest, state, tr, clock)
    pending = job_status("41", [], clock, requeues=1, state=JobState.PD)
    publish_job(ingest, pending.model_copy(update={"reason": "Resources"}), clock)
    step(ingest, state, tr, clock)
    assert req.phase is Phase.ACKNOWLEDGED
    assert req.targets[0].detail == ("requeued (requeues 1), now PD (Resources); waiting for it "
                                     "to run")
    fleet.ack(ingest, cmd.cmd_id, "sched", AckResult.DONE,
              "job 41 requeued from step 400; pending (Resources: needs 2 nodes)",
              op=CommandOp.RESTART_JOB)
    step(ingest, state, tr, clock)
    assert req.phase is Phase.DONE
    assert req.targets[0].detail == ("requeued (requeues 1), now PD (Resources): it runs once "
                                     "the scheduler finds it nodes")
    # Running again is done at once, with where it runs from.
    req2 = tr.restart_job("41", clock(), job=state.jobs["41"])
    publish_job(ingest, job_status("41", ["gpu0003", "gpu0004"], clock, requeues=2, step=400),
                clock)
    fleet.ack(ingest, req2.targets[0].cmd.cmd_id, "sched", AckResult.ACCEPTED,
              op=CommandOp.RESTART_JOB)
    step(ingest, state, tr, clock)
    assert (req2.phase, req2.targets[0].detail) == (
        Phase.DONE, "requeued (requeues 2), running again at step 400")


def test_a_restart_of_a_pending_completed_or_cancelled_job_is_refused_before_it_is_sent(world):
    """The dry run promised "the scheduler requeues it from its checkpoint", then the restart
    came back rejected, exit 3 (a jobs audit): what a scheduler rejects is refused first."""
    from fleetdeck.protocol.messages import JobState

    clock, ingest, _fleet, state = world
    for job_id, kind, reason in (("41", JobState.PD, "Resources"), ("42", JobState.CD, ""),
                                 ("43", JobState.CA, ""), ("44", JobState.F, "NodeFail")):
        publish_job(ingest, job_status(job_id, [], clock, state=kind).model_copy(
            update={"reason": reason}), clock)
    state.apply(ingest.take_batch(), clock())
    assert job_refusal(state, "41") == (
        "job 41 is PD (Resources): it is waiting to run already, there is nothing to restart")
    assert job_refusal(state, "42") == (
        "job 42 is CD (completed): there is nothing to restart; submit it again")
    assert job_refusal(state, "43").startswith("job 43 is CA (cancelled)")
    assert job_refusal(state, "44") == ""  # a crashed job is what a restart brings back


def test_a_restart_of_a_job_a_straggler_slows_says_to_drain_it_first(world):
    """Restarting a job slowed by a throttled GPU put it back on the same nodes, as slow, for
    2.3 GPU-h of lost work (a jobs audit): the radius says so, as it does of a failed node."""
    from tests.tui.fleet import throttled

    clock, ingest, fleet, state = world
    publish_job(ingest, job_status("41", ["gpu0002", "gpu0003"], clock,
                                   slowest_node="gpu0003"), clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={"gpu0003": throttled(3)})
        state.apply(ingest.take_batch(), clock())
    radius = job_blast_radius(state, "41", clock())
    [note] = [n for n in radius.notes if n.startswith("gpu0003")]
    assert note.startswith("gpu0003 (degraded: G12 gpu3: clock throttled"), note
    assert note.endswith(") is not drained: a restart may put the job on it again, as slow; "
                         "drain gpu0003 first"), note


def test_the_resume_radius_says_what_a_node_was_drained_for_and_how_it_reads_now(world):
    """The resume dialog showed "gpu0006 (idle, 8 GPUs, drained)" for a node drained for a
    throttled GPU, still degraded: resumed, it slowed the next job by 23 % (a jobs audit)."""
    from tests.tui.fleet import throttled

    clock, ingest, fleet, state = world
    fleet.status(ingest, "gpu0003", DrainState.DRAINED, "thermal gpu3", "alice")
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={"gpu0003": throttled(3)})
        state.apply(ingest.take_batch(), clock())
    state.judge(clock())
    radius = blast_radius(state, CommandOp.RESUME, ["gpu0003"], DrainMode.FINISH, clock())
    [line] = radius.target_lines
    assert line.startswith('gpu0003 (idle, 8 GPUs, drained): drained for "thermal gpu3" by '
                           "alice; now degraded: G12 gpu3: clock throttled")
    assert "still degraded: gpu0003 (the scheduler may place work there; a throttled GPU " \
           "slows every job it joins)" in radius.notes


def test_a_pending_job_says_how_many_nodes_it_waits_for_and_if_it_can_ever_start(world):
    """`inject submit nodes=64` on 48 nodes sat "PD (Resources)" beside 128 free GPUs, NODES
    "-", with nothing to say it would wait for ever (a jobs audit)."""
    from fleetdeck.console.rows import job_row
    from fleetdeck.console.summary import job_summary
    from fleetdeck.protocol.messages import JobState

    clock, ingest, _fleet, state = world
    for job_id, wanted in (("41", 4), ("42", 64)):
        publish_job(ingest, job_status(job_id, [], clock, state=JobState.PD).model_copy(
            update={"reason": "Resources", "nodes_wanted": wanted}), clock)
    state.apply(ingest.take_batch(), clock())
    fits, never = state.jobs["41"], state.jobs["42"]
    assert job_row(fits, state, clock()).reason == "Resources: needs 4 nodes"
    assert job_row(never, state, clock()).reason == (
        "Resources: needs 64 nodes; the cluster has 12: it can never start here")
    assert job_summary(fits, state, clock())["never_fits"] is None
    assert job_summary(never, state, clock())["never_fits"] == (
        "needs 64 nodes; the cluster has 12: it can never start here")
    assert job_summary(never, state, clock())["nodes_wanted"] == 64


def test_the_restart_radius_says_what_waits_ahead_and_which_switch_its_nodes_sit_behind(world):
    """A restart's nodes went to the pending job at the queue's head, and the restarted job
    sat PD for 13 min; a switch outage's restart said nothing of the switch (a 3 a.m. drive)."""
    from fleetdeck.protocol.messages import JobState

    clock, ingest, _fleet, state = world
    publish_job(ingest, job_status("41", ["gpu0001", "gpu0002"], clock), clock)
    publish_job(ingest, job_status("42", [], clock, state=JobState.PD), clock)
    state.apply(ingest.take_batch(), clock())
    state.nodes["gpu0002"].behind_switch = "leaf00-r2"
    radius = job_blast_radius(state, "41", clock())
    assert ("1 job pending ahead (42): it may take the freed nodes first, and a requeued job "
            "waits behind it") in radius.notes
    # A job asking for more nodes than the cluster has never takes the freed ones: "2 jobs
    # pending ahead (4102, 4107)" named a 40-node job on 32 nodes (a jobs audit).
    publish_job(ingest, job_status("43", [], clock, state=JobState.PD).model_copy(
        update={"nodes_wanted": 64}), clock)
    state.apply(ingest.take_batch(), clock())
    radius = job_blast_radius(state, "41", clock())
    assert ("1 job pending ahead (42): it may take the freed nodes first, and a requeued job "
            "waits behind it") in radius.notes
    assert ("its nodes are behind suspect switch leaf00-r2: a requeued job may land behind it "
            "again; check the switch first") in radius.notes


def test_a_long_outcome_is_cut_with_a_mark_not_mid_word(world):
    """"… no agent is there to answe)": the line was cut at 120 characters (a 3 a.m. drive)."""
    clock, _ingest, _fleet, _state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0001"], "x", clock())
    req.targets[0].detail = ("no acknowledgement within 10 s — the node is offline (H2 agent "
                             "offline (Last Will)): no agent is there to answer")
    assert req.describe().endswith("no agent is there to answer")
    req.targets[0].detail = "x" * 300
    assert req.describe().endswith("x…") and len(req.describe()) < 320


def test_the_resume_radius_blames_throttling_only_on_throttled_nodes(world):
    """"a throttled GPU slows every job it joins" was said of a node degraded by an XID, never
    throttled (a 3 a.m. drive): a degraded node that is not throttled is named with its own
    finding."""
    from tests.tui.fleet import throttled

    clock, ingest, fleet, state = world
    fleet.src("gpu0005").xid(2, [94], 0.0, int(clock() * 1000))
    for n in ("gpu0003", "gpu0005"):
        fleet.status(ingest, n, DrainState.DRAINED, "check it", "alice")
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults={"gpu0003": throttled(3)})
        state.apply(ingest.take_batch(), clock())
    state.judge(clock())
    assert state.nodes["gpu0005"].verdict.value == "degraded"
    radius = blast_radius(state, CommandOp.RESUME, ["gpu0003", "gpu0005"], DrainMode.FINISH,
                          clock())
    throttle = [n for n in radius.notes if "throttled GPU" in n]
    assert throttle == ["still degraded: gpu0003 (the scheduler may place work there; a "
                        "throttled GPU slows every job it joins)"], radius.notes
    [other] = [n for n in radius.notes if "gpu0005" in n]
    assert other.startswith("still degraded: gpu0005 (the scheduler may place work there: "
                            "G3 gpu2: XID 94"), other


def test_a_drain_now_says_which_other_unfit_node_of_the_job_is_not_drained(world):
    """A drain now requeues the target's job, as a restart does, but only the restart dialog
    said the job could land back on its throttled node: a flapping port drained now, the job
    came back on gpu0019, throttled and not drained, as slow as before (a 3 a.m. drive)."""
    from tests.tui.fleet import port_down, throttled

    clock, ingest, fleet, state = world
    nodes = ["gpu0001", "gpu0002", "gpu0003"]
    publish_job(ingest, job_status("42", nodes, clock), clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, job={n: "42" for n in nodes},
                        faults={"gpu0001": port_down(), "gpu0003": throttled(4)})
        state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    assert state.nodes["gpu0003"].verdict.value == "degraded"
    radius = blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock(), DrainMode.NOW)
    [note] = [n for n in radius.notes if "gpu0003" in n]
    assert note.startswith("gpu0003 (degraded: G12 gpu4: clock throttled"), note
    assert note.endswith("is not drained: job 42's requeue may put it back there, as slow; "
                         "drain gpu0003 too"), note
    # A drain that lets the job finish requeues nothing; both drained: nothing left to say.
    finish = blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock(), DrainMode.FINISH)
    assert not [n for n in finish.notes if "gpu0003" in n]
    both = blast_radius(state, CommandOp.DRAIN, ["gpu0001", "gpu0003"], clock(), DrainMode.NOW)
    assert not [n for n in both.notes if "requeue may put" in n], both.notes


def test_a_drain_now_names_another_failed_node_of_the_job_that_is_not_drained(world):
    from tests.tui.fleet import port_down

    clock, ingest, fleet, state = world
    nodes = ["gpu0001", "gpu0002"]
    publish_job(ingest, job_status("42", nodes, clock), clock)
    fleet.telemetry(ingest, job={n: "42" for n in nodes},
                    faults={"gpu0001": port_down(), "gpu0002": port_down("mlx5_ib5")})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    radius = blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock(), DrainMode.NOW)
    [note] = [n for n in radius.notes if "gpu0002" in n]
    assert note.startswith("gpu0002 (failed: N1 mlx5_ib5:1: "), note
    assert note.endswith("is not drained: job 42's requeue may put it back there, to stall "
                         "again; drain gpu0002 too"), note


def test_a_sick_node_two_requeued_jobs_share_is_named_once(world):
    """A target under two jobs that share a failed node said it twice, one note per job (a
    review): one line names the node and both jobs."""
    from tests.tui.fleet import port_down

    clock, ingest, fleet, state = world
    nodes = ["gpu0001", "gpu0002"]
    for job_id in ("42", "43"):
        publish_job(ingest, job_status(job_id, nodes, clock), clock)
    fleet.telemetry(ingest, job={n: "42" for n in nodes},
                    faults={"gpu0001": port_down(), "gpu0002": port_down("mlx5_ib5")})
    state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    radius = blast_radius(state, CommandOp.DRAIN, ["gpu0001"], clock(), DrainMode.NOW)
    [note] = [n for n in radius.notes if n.startswith("gpu0002")]
    assert ") is not drained: the requeues of jobs 42, 43 may put it back there, to stall " \
        "again; drain gpu0002 too" in note, note


def test_a_restart_names_a_throttled_node_that_is_not_the_straggler(world):
    """The drain-now dialog named a throttled node of the job and the restart dialog did not
    (it looked for failed nodes and the straggler only; a review): one rule serves both."""
    from fleetdeck.console.judgements import straggler
    from tests.tui.fleet import throttled

    clock, ingest, fleet, state = world
    nodes = ["gpu0001", "gpu0002", "gpu0003"]
    publish_job(ingest, job_status("42", nodes, clock), clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, job={n: "42" for n in nodes}, faults={"gpu0003": throttled(4)})
        state.apply(ingest.take_batch(), clock())
    state.judge_fleet(clock())
    assert straggler(state.jobs["42"], state) is None  # the scheduler names no slow node
    radius = job_blast_radius(state, "42", clock())
    [note] = radius.notes
    assert note.startswith("gpu0003 (degraded: G12 gpu4: clock throttled"), note
    assert note.endswith("is not drained: a restart may put the job on it again, as slow; "
                         "drain gpu0003 first"), note


def test_a_one_node_job_is_one_node_not_1_nodes():
    """The restart dialog of a one-node job read "rl-ppo, R): 1 nodes, 8 GPUs" (a newcomer
    run)."""
    from fleetdeck.console.commands import JobImpact

    def impact(nodes: int) -> str:
        return JobImpact("4106", "rl-ppo", "fay", "R", nodes_total=nodes, nodes_targeted=1,
                         gpus=8 * nodes, since_checkpoint_s=60.0, gpu_hours_at_risk=0.1,
                         hostlist="gpu0059").line()

    assert "(rl-ppo, R): 1 node, 8 GPUs, checkpoint 1m" in impact(1), impact(1)
    assert "(rl-ppo, R): 2 nodes, 16 GPUs," in impact(2), impact(2)


def test_a_drain_lost_with_its_agents_state_fails_it_is_not_called_resumed(world):
    """A drain seen DRAINING, then no drain: the same agent session, or a new one of the same
    process (an agent re-arms its will after a resume, agents/agent.py), is a resume:
    superseded. A new process that kept no state (FleetState.drains_lost) was resumed by
    nobody: the drain failed. A new session waits for its first sample to say which."""
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    nodes = {"gpu0001": "lost", "gpu0002": "resumed", "gpu0003": "re-armed"}
    reqs = {node: tr.drain([node], "swap", clock()) for node in nodes}
    fleet.telemetry(ingest, names=list(nodes))
    for node, req in reqs.items():
        cmd = req.targets[0].cmd
        fleet.ack(ingest, cmd.cmd_id, node, AckResult.ACCEPTED, "drain (finish)")
        fleet.status(ingest, node, DrainState.DRAINING, "swap", "alice", cmd.cmd_id)
    step(ingest, state, tr, clock)
    assert {r.targets[0].detail for r in reqs.values()} == {"DRAINING"}
    clock.advance(1.0)
    fleet.agents["gpu0001"].bd_seq += 1
    fleet.agents["gpu0001"].started_ms += 1000  # a new process, its state file gone
    fleet.agents["gpu0003"].bd_seq += 1  # the same process, a new session
    for node in nodes:
        fleet.status(ingest, node, DrainState.NONE)
    step(ingest, state, tr, clock)
    assert reqs["gpu0002"].phase is Phase.SUPERSEDED
    assert reqs["gpu0002"].targets[0].detail == "resumed before it drained: the node is in service"
    # A new session: open until its first sample says whose it is.
    assert reqs["gpu0001"].phase is Phase.ACKNOWLEDGED
    assert reqs["gpu0003"].phase is Phase.ACKNOWLEDGED
    clock.advance(1.0)
    fleet.telemetry(ingest, names=["gpu0001", "gpu0003"])
    step(ingest, state, tr, clock)
    assert (reqs["gpu0001"].phase, reqs["gpu0001"].targets[0].detail) == (
        Phase.FAILED, "the agent restarted without its drain: the node is in service again")
    assert reqs["gpu0003"].phase is Phase.SUPERSEDED


def test_a_drain_seen_draining_before_any_sample_and_then_resumed_is_superseded(world):
    """Seen DRAINING before the console had a sample of the node, the drain kept no process
    to compare with; the resume's re-armed will (a new bdSeq, the same process) read as an
    agent that restarted without its drain: "failed" in the audit log (a review)."""
    clock, ingest, fleet, state = world
    tr = CommandTracker(CLUSTER, "alice")
    req = tr.drain(["gpu0003"], "swap", clock())
    fleet.status(ingest, "gpu0003", DrainState.NONE)
    step(ingest, state, tr, clock)
    cmd = req.targets[0].cmd
    st = state.nodes["gpu0003"]
    st.agent_started = None  # no sample of it heard yet
    st.sample = None
    fleet.ack(ingest, cmd.cmd_id, "gpu0003", AckResult.ACCEPTED, "drain (finish)")
    fleet.status(ingest, "gpu0003", DrainState.DRAINING, "swap", "alice", cmd.cmd_id)
    step(ingest, state, tr, clock)
    assert req.targets[0].draining_session is not None
    clock.advance(1.0)
    fleet.agents["gpu0003"].bd_seq += 1  # the same process re-arms its will after the resume
    fleet.status(ingest, "gpu0003", DrainState.NONE)
    step(ingest, state, tr, clock)
    clock.advance(1.0)
    fleet.telemetry(ingest, names=["gpu0003"])
    step(ingest, state, tr, clock)
    assert req.phase is Phase.SUPERSEDED, (req.phase, req.targets[0].detail)


def test_a_job_resumed_from_its_checkpoint_risks_only_the_work_since_it_resumed(world):
    """A drain dialog seconds after a restart booked 0.3 GPU-h for 4 steps of 32 GPUs: it
    counted from the checkpoint's time, not from the run that resumed from it (a newcomer's
    run)."""
    clock, ingest, _fleet, state = world
    nodes = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    # Checkpoint 30 min ago (job_status), requeued from it and running again for 60 s.
    publish_job(ingest, job_status("41", nodes, clock, started_offset_s=60, requeues=1), clock)
    state.apply(ingest.take_batch(), clock())
    restart = job_blast_radius(state, "41", clock())
    assert restart.gpu_hours_at_risk == pytest.approx(32 * 60 / 3600)
    (job,) = restart.jobs
    assert "checkpoint 30m00s ago, resumed from it 1m00s ago: 0.5 GPU-h of work since" \
        in job.line(), job.line()
    now = blast_radius(state, CommandOp.DRAIN, ["gpu0002"], clock(), DrainMode.NOW)
    assert now.gpu_hours_at_risk == pytest.approx(32 * 60 / 3600)


def test_restarting_a_failed_job_names_the_node_it_failed_on_not_drained(world):
    """A failed job holds no node, and its restart (dialog and `restart-job`) said nothing of
    gpu0012, failed under it and not drained, where the incident said "drain gpu0012, then
    restart-job 43" (a newcomer's run)."""
    from fleetdeck.console.health import Verdict
    from fleetdeck.protocol.messages import DrainInfo, DrainState, JobState

    clock, ingest, _fleet, state = world
    failed = job_status("43", [], clock, state=JobState.F).model_copy(
        update={"reason": "rank 5 on gpu0012 gpu5: uncorrectable ECC error (Xid 48)"})
    publish_job(ingest, failed, clock)
    state.apply(ingest.take_batch(), clock())
    state.nodes["gpu0012"].verdict = Verdict.FAILED
    notes = job_blast_radius(state, "43", clock()).notes
    assert any(n.startswith("gpu0012 (failed") and "where job 43 failed, is not drained" in n
               and n.endswith("drain gpu0012 first") for n in notes), notes
    state.nodes["gpu0012"].drain = DrainInfo(state=DrainState.DRAINED, reason="DBE OPS-7")
    notes = job_blast_radius(state, "43", clock()).notes
    assert not any(n.startswith("gpu0012") for n in notes), notes


def test_a_done_restart_keeps_what_done_means_in_its_audit_record(world):
    """The CLI printed "done (requeued (requeues 1), running again at step 50)" and the audit
    log's done record had an empty detail (a newcomer's run): the session writes the record
    for the TUI and the CLI alike, and the TUI's toast reads the same detail."""
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.session import ConsoleSession

    clock, ingest, fleet, _state = world
    audit = MemoryAudit()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, audit=audit, follow_up=False)
    publish_job(ingest, job_status("41", ["gpu0001", "gpu0002"], clock), clock)
    session.tick()
    req = session.restart_job("41", "stuck")
    (_kind, _subject, cmd), = req.commands()
    fleet.ack(ingest, cmd.cmd_id, "sched", AckResult.ACCEPTED, op=CommandOp.RESTART_JOB)
    clock.advance(1.0)
    session.tick()
    publish_job(ingest, job_status("41", ["gpu0003", "gpu0004"], clock, requeues=1, step=50,
                                   started_offset_s=0), clock)
    clock.advance(1.0)
    session.tick()
    done = audit.records[-1]
    assert done.outcome == "done"
    assert done.detail == "requeued (requeues 1), running again at step 50", done


def test_a_restart_that_loses_nothing_more_does_not_read_as_no_work_lost():
    """A failed job's restart radius read "0 nodes, 0 GPUs … 0.0 GPU-h since it started", and a
    one-GPU job's "checkpoint 1m50s ago, 0.0 GPU-h of work since then": both read as "no work
    lost" (a 3 a.m. drive on 1,024 nodes). The CLI and the TUI share this line."""
    from fleetdeck.console.commands import JobImpact

    failed = JobImpact("300", "llama-70b", "alice", "F", nodes_total=0, nodes_targeted=0,
                       gpus=0, since_checkpoint_s=None, gpu_hours_at_risk=0.0, hostlist="",
                       checkpointed=False).line()
    assert failed == ("job 300 alice (llama-70b, F): holds no nodes now: the restart loses "
                      "nothing more (its run's work was lost when it failed)"), failed
    small = JobImpact("301", "probe", "bob", "R", nodes_total=1, nodes_targeted=1, gpus=1,
                      since_checkpoint_s=110.0, gpu_hours_at_risk=110 / 3600,
                      hostlist="gpu0001").line()
    assert small.endswith("checkpoint 1m50s ago, <0.1 GPU-h of work since then"), small


def test_a_drain_saved_at_last_by_its_agent_is_not_said_unsaved(world):
    """The agent's disk refused the DRAINING state (its accepted ack says "not saved on the
    node") and then kept the DRAINED one (its done ack says nothing of the disk): the outcome
    read "DRAINED; not saved on the node (…): an agent restart forgets it", and a restart
    kept the drain. A drain whose last save failed still says so."""
    clock, ingest, fleet, state = world
    unsaved = "not saved on the node (/s/state-gpu0005.json: No space left on device)"
    tr = CommandTracker(CLUSTER, "alice")
    results = []
    for node, done in (("gpu0005", "DRAINED"), ("gpu0006", f"DRAINED; {unsaved}")):
        req = tr.drain([node], "maint", clock())
        cmd = req.targets[0].cmd
        fleet.ack(ingest, cmd.cmd_id, node, AckResult.ACCEPTED, f"drain (finish); {unsaved}")
        fleet.status(ingest, node, DrainState.DRAINING, "maint", "alice", cmd.cmd_id)
        step(ingest, state, tr, clock)
        # The agent's order: the status, then the ack, seen in one tick.
        fleet.status(ingest, node, DrainState.DRAINED, "maint", "alice", cmd.cmd_id)
        fleet.ack(ingest, cmd.cmd_id, node, AckResult.DONE, done)
        step(ingest, state, tr, clock)
        assert req.phase is Phase.DONE
        results.append(req.targets[0].detail)
    assert results == ["DRAINED", f"DRAINED; {unsaved}"]


def test_free_gpus_left_names_only_unheard_nodes_it_would_count():
    """'free GPUs left (not counting …: not heard from yet)' named every node not heard yet,
    those a job holds or drained too, whose GPUs it counts as free in no case: a busy cluster
    read 'not counting gpu[0001-0004,0006-0012]' where 7 idle nodes were the unknown ones."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(12, clock)
    fleet.birth(ingest)
    state = FleetState(CLUSTER, ingest.malformed)
    publish_job(ingest, job_status("41", fleet.names[:4], clock), clock)
    fleet.status(ingest, "gpu0012", DrainState.DRAINED, "fan", "alice")
    state.apply(ingest.take_batch(), clock())
    assert all(st.waiting for st in state.nodes.values())
    radius = blast_radius(state, CommandOp.DRAIN, ["gpu0005"], clock())
    assert radius.unheard == [f"gpu{i:04d}" for i in range(6, 12)], radius.unheard
    assert radius.summary().endswith(
        "0 free GPUs left (not counting gpu[0006-0011]: not heard from yet)"), radius.summary()
