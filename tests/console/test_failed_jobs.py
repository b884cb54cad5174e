"""A job the scheduler ended failed (F: a rank crashed, an XID 48 on its node) waits for an
operator's ``restart-job``: nothing requeues it. It was in no incident and on no line of
`status` (only `--json`'s jobs and the TUI's jobs view had it: a fault audit). The operator is
told which job failed where and why, to drain the node, and to restart the job from its
checkpoint; it clears once the job is restarted (or cancelled)."""

import io

from rich.console import Console

from fleetdeck.console.cli.status import render_held_up_jobs
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol.messages import JobState
from tests.console.test_judgements import xid
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job

NODES = ["gpu0001", "gpu0002"]
GRACE_S = 10
"""``judgements.REQUEUE_GRACE_S``: how long an NF waits for its requeue."""
REASON_48 = "rank 3 on gpu0002 gpu3: CUDA error: uncorrectable ECC error encountered (Xid 48)"
REASON_13 = "rank 11 on gpu0002 gpu3: CUDA error: an illegal memory access was encountered (Xid 13)"


def session_with_failed(reason: str, faults=None, state: JobState = JobState.F,
                        seconds: int = 5):
    """Job 41 ran on NODES and ended ``state`` with ``reason``; job 42 steps on gpu0005 (the
    scheduler is heard)."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    for t in range(3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("41", NODES, clock, step=100 + t), clock)
        fleet.telemetry(session.ingest, job={n: "41" for n in NODES})
        session.tick()
    ended = job_status("41", [], clock, step=102, state=state).model_copy(
        update={"reason": reason, "eta_s": None})
    publish_job(session.ingest, ended, clock)
    for t in range(seconds):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("42", ["gpu0005"], clock, step=200 + t), clock)
        fleet.telemetry(session.ingest, faults=faults or {})
        session.tick()
    session.fleet = fleet  # type: ignore[attr-defined]
    return session


def test_a_failed_job_is_said_on_its_nodes_incident_with_the_drain_and_the_restart():
    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    state, now = session.state, session.clock()
    found = incidents(state)
    (inc,) = [i for i in found if "41" in i.jobs]
    assert inc.key == "node:gpu0002" and inc.severity == "error"
    assert inc.title.startswith("gpu0002 failed: G2 gpu3: XID 48")
    assert inc.title.endswith(f"; job 41 failed on gpu0002 ({REASON_48})")
    # The node first (drain, repair), then the job from its checkpoint.
    assert inc.action.startswith("drain")
    assert inc.action.endswith("; then restart-job 41 from its checkpoint at step 400")
    assert not [i for i in found if i.kind == "job"]  # one line for the node and the job
    # status --json carries the judgement on the job, and the text lists it with the action.
    out = fleet_summary(state, now)
    (job,) = [j for j in out["jobs"] if j["job_id"] == "41"]
    assert job["failed"] == {
        "state": "F", "reason": REASON_48, "nodes": ["gpu0002"],
        "text": f"job 41 failed on gpu0002 ({REASON_48})",
        "action": "drain gpu0002, then restart-job 41 from its checkpoint at step 400",
        "lapsed": None}
    assert next(i for i in out["incidents"] if i["key"] == "node:gpu0002")["jobs"] == ["41"]
    text = io.StringIO()
    render_held_up_jobs(out["jobs"], Console(file=text, width=300))
    assert text.getvalue().splitlines() == [
        "jobs held up (1 of 2):",
        f"  41 llama-70b: failed on gpu0002 ({REASON_48}); drain gpu0002, then restart-job 41 "
        "from its checkpoint at step 400"]


def test_a_failed_job_on_healthy_nodes_is_an_incident_of_its_own():
    """XID 13 is the application's: the node reads ok, and the job's failure was said nowhere."""
    session = session_with_failed(REASON_13, {"gpu0002": xid(3, 13)})
    state = session.state
    assert state.nodes["gpu0002"].verdict.value == "ok"
    (inc,) = [i for i in incidents(state) if "41" in i.jobs]
    assert inc.key == "job:41" and inc.kind == "job" and inc.severity == "error"
    assert inc.title == (f"job 41 failed on gpu0002 ({REASON_13}); Xid 13: the "
                         "application's fault, most likely")
    assert inc.action.startswith("restart-job 41 from its checkpoint at step 400")


def test_it_clears_once_the_job_is_restarted_or_cancelled():
    for after in (JobState.RQ, JobState.PD, JobState.R, JobState.CA):
        session = session_with_failed(REASON_13)
        clock = session.clock
        publish_job(session.ingest, job_status("41", NODES if after is JobState.R else [],
                                               clock, step=400, state=after), clock)
        clock.advance(1.0)
        session.tick()
        state = session.state
        assert not [i for i in incidents(state) if "41" in i.jobs], after
        (job,) = [j for j in fleet_summary(state, clock())["jobs"] if j["job_id"] == "41"]
        assert job["failed"] is None


def test_a_node_fail_is_failed_only_once_no_requeue_came():
    """NF is requeued a moment later when the job asked for it (RQ): not an incident for that
    moment; one left at NF waits for an operator as a failed one does."""
    reason = "NCCL watchdog: collective stalled 30 s (gpu0002 not responding)"
    soon = session_with_failed(reason, state=JobState.NF, seconds=int(GRACE_S) - 3)
    assert not [i for i in incidents(soon.state) if "41" in i.jobs]
    late = session_with_failed(reason, state=JobState.NF, seconds=int(GRACE_S) + 3)
    (inc,) = [i for i in incidents(late.state) if "41" in i.jobs]
    assert "job 41 ended by a node failure on gpu0002, not requeued (" in inc.title
    assert "restart-job 41" in inc.action


def test_a_drained_node_under_a_failed_job_is_not_in_hand_until_the_restart():
    """Its node drained, the incident still asks for the restart: it stays above what is in
    hand (``acted_on``)."""
    from fleetdeck.console.incidents import acted_on
    from fleetdeck.protocol.messages import DrainState

    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    fleet, clock = session.fleet, session.clock  # type: ignore[attr-defined]
    fleet.status(session.ingest, "gpu0002", DrainState.DRAINED, reason="xid 48", by="root")
    clock.advance(1.0)
    session.tick()
    (inc,) = [i for i in incidents(session.state) if i.key == "node:gpu0002"]
    assert not acted_on(session.state, inc)
    assert inc.action.endswith("then restart-job 41 from its checkpoint at step 400")


def go_on(session, seconds: int, faults=None, step: int = 300) -> None:
    """``seconds`` more of the fleet's telemetry (with ``faults``), job 42 stepping on."""
    fleet, clock = session.fleet, session.clock
    for t in range(seconds):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("42", ["gpu0005"], clock, step=step + t), clock)
        fleet.telemetry(session.ingest, faults=faults or {})
        session.tick()


def job_incident(session):
    (inc,) = [i for i in incidents(session.state) if "41" in i.jobs]
    return inc


def test_a_node_s_failure_is_not_the_application_s_once_the_node_is_repaired():
    """XID 48 failed job 41 on gpu0002; drained and repaired, gpu0002 reads ok: it read "gpu0002
    reads healthy: the application's fault, most likely" (a review). Said without blame."""
    from fleetdeck.protocol.messages import DrainState

    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    session.fleet.status(session.ingest, "gpu0002", DrainState.DRAINED, reason="xid 48",
                         by="root")
    go_on(session, 3)
    session.fleet.status(session.ingest, "gpu0002", DrainState.NONE)
    go_on(session, 30)
    assert session.state.nodes["gpu0002"].verdict.value == "ok"
    inc = job_incident(session)
    assert inc.key == "job:41" and inc.severity == "error"
    assert inc.title == f"job 41 failed on gpu0002 ({REASON_48})"
    assert inc.action == "restart-job 41 from its checkpoint at step 400"


def test_a_job_failed_naming_no_xid_is_the_application_s_only_on_nodes_ok_throughout():
    """No XID in the reason: the application's fault only where each node it names read ok
    from before the failure until now, undrained (a drain and resume since, its agent's drain
    events, says someone thought otherwise), and every one of them (one ok of two is not)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.messages import Event
    from fleetdeck.protocol.topics import Kind, topic_for

    reason = "rank 3 on gpu0002 exited with code 1"
    session = session_with_failed(reason)
    inc = job_incident(session)
    assert inc.title == (f"job 41 failed on gpu0002 ({reason}); gpu0002 has read healthy "
                         "throughout: the application's fault, most likely")
    assert inc.action.endswith("; if it fails so again, the job's own log")
    # Drained and resumed since: its agent said so.
    clock = session.clock
    for seq, what in ((1, "draining: suspect [root]"), (2, "resumed [root]")):
        ev = Event(node="gpu0002", event_id=f"gpu0002.1.{seq}", seq=seq, ts=int(clock() * 1000),
                   kind="drain", message=what)
        session.ingest.handle(topic_for(CLUSTER, Kind.EVENT, "gpu0002"), codec.encode(ev),
                              clock())
        go_on(session, 1)
    assert job_incident(session).title == f"job 41 failed on gpu0002 ({reason})"
    # Two nodes named, one ok throughout, the other throttled since (after the failure, so
    # not what failed it): no blame.
    from tests.tui.fleet import throttled
    both = "ranks on gpu[0002-0003] exited with code 1"
    session = session_with_failed(both)
    go_on(session, 70)
    go_on(session, 3, faults={"gpu0003": throttled(1)})
    assert session.state.nodes["gpu0003"].verdict.value != "ok"
    assert job_incident(session).title == f"job 41 failed on gpu[0002-0003] ({both})"


def test_a_later_fault_of_its_node_does_not_take_the_failed_job():
    """gpu0002 repaired after the XID 48 that failed job 41, throttled two minutes later: the
    throttle is not what failed the job. It read "gpu0002 degraded: … clock throttled …; job 41
    failed on gpu0002 (…Xid 48)" (a review): the job keeps an incident of its own."""
    from tests.tui.fleet import throttled

    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    go_on(session, 120)
    go_on(session, 5, faults={"gpu0002": throttled(1)})
    found = incidents(session.state)
    node = next(i for i in found if i.key == "node:gpu0002")
    assert "41" not in node.jobs and "job 41" not in node.title and node.severity == "warn"
    own = next(i for i in found if i.key == "job:41")
    assert own.title == f"job 41 failed on gpu0002 ({REASON_48})" and own.severity == "error"


def test_a_failed_job_lapses_after_a_while_or_once_its_node_runs_other_work():
    """Nothing withdraws a failed job where the scheduler keeps it (the simulator; a user's own
    crash names no node): it stayed an error "losing work now" for ever (a review). After
    ``FAILED_LAPSE_S`` by the scheduler's clock, or once its node runs another job, it is a
    warning, said last, still on the job in ``status --json``."""
    from fleetdeck.console.judgements import FAILED_LAPSE_S
    from fleetdeck.console.rows import top_problems

    session = session_with_failed("NonZeroExitCode")
    assert job_incident(session).losing_work
    clock = session.clock
    clock.advance(FAILED_LAPSE_S)
    go_on(session, 1)
    inc = job_incident(session)
    assert inc.severity == "warn" and not inc.losing_work
    assert inc.title == "job 41 failed (NonZeroExitCode); not restarted in 30 min"
    (job,) = [j for j in fleet_summary(session.state, clock())["jobs"] if j["job_id"] == "41"]
    assert job["failed"]["lapsed"] == "not restarted in 30 min"
    (row,) = [p for p in top_problems(session.state)[0] if p.node == "job 41"]
    assert row.state == "failed" and row.verdict.value == "degraded"
    # Its node given another job.
    session = session_with_failed(REASON_13)
    publish_job(session.ingest, job_status("43", ["gpu0002"], session.clock, step=1),
                session.clock)
    go_on(session, 1)
    inc = job_incident(session)
    assert inc.severity == "warn" and inc.title.endswith("; gpu0002 runs job 43 now")


def test_a_failed_job_lapsed_by_other_work_stays_lapsed_once_that_work_left():
    """Job 4103 failed by Xid 13 on gpu0004, which then ran job 4107 (lapsed: "gpu0004 runs job
    4107 now"); gpu0004's link went down and 4107 was requeued elsewhere: 4103 was an error
    "losing work now" again at the top of the overview, on gpu0004's row as if its link had
    failed it 6 min before it went down (scenario run scen39, live on `sim --nodes 64`). The
    scheduler moved on once; it stays so."""
    session = session_with_failed(REASON_13)
    clock = session.clock
    publish_job(session.ingest, job_status("43", ["gpu0002"], clock, step=1), clock)
    clock.advance(1.0)
    session.fleet.telemetry(session.ingest, job={"gpu0002": "43"})
    session.tick()
    assert job_incident(session).title.endswith("; gpu0002 runs job 43 now")
    publish_job(session.ingest, job_status("43", ["gpu0009"], clock, step=1, requeues=1), clock)
    go_on(session, 1, faults={"gpu0002": xid(3, 48)})
    inc = job_incident(session)
    assert inc.severity == "warn" and not inc.losing_work, inc
    assert inc.key == "job:41" and inc.title.endswith("; gpu0002 ran job 43 since"), inc.title
    # A console that did not see the lapse (restarted): gpu0002's telemetry named job 43
    # after the failure (``NodeState.left_job``, which the store gives back).
    session.state.failed_lapsed.clear()
    inc = job_incident(session)
    assert inc.severity == "warn" and inc.title.endswith("; gpu0002 ran job 43 since"), inc


def test_a_failed_job_withdrawn_by_its_scheduler_is_a_line_of_the_timeline():
    """A Slurm bridge withdraws a finished job after MinJobAge (300 s): its incident vanished
    with no word (a review)."""
    from fleetdeck.console.state import JOB_CLEAR_CONFIRM_S
    from fleetdeck.protocol.topics import Kind, topic_for

    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    session.ingest.handle(topic_for(CLUSTER, Kind.JOB, "41"), b"", session.clock())
    go_on(session, int(JOB_CLEAR_CONFIRM_S) + 1)  # no status of it came: the clear stands
    assert not [i for i in incidents(session.state) if "41" in i.jobs]
    assert [ln.text for ln in session.log.lines() if ln.kind == "job"
            and "withdrawn" in ln.text] == [
        f"job 41 withdrawn by its scheduler while F ({REASON_48}) at step 102: not restarted, "
        "and its incident ends"]


def test_a_lapsed_failed_job_withdrawn_by_its_scheduler_is_forgotten_with_its_lapse():
    """``FleetState.failed_lapsed`` kept an entry for every lapsed job its scheduler withdrew
    (Slurm, after MinJobAge): a console that ran for months held one per failed job ever."""
    from fleetdeck.console.state import JOB_CLEAR_CONFIRM_S
    from fleetdeck.protocol.topics import Kind, topic_for

    session = session_with_failed(REASON_13)
    clock = session.clock
    publish_job(session.ingest, job_status("43", ["gpu0002"], clock, step=1), clock)
    go_on(session, 1)
    assert job_incident(session).title.endswith("; gpu0002 runs job 43 now")
    assert "41" in session.state.failed_lapsed
    session.ingest.handle(topic_for(CLUSTER, Kind.JOB, "41"), b"", session.clock())
    go_on(session, int(JOB_CLEAR_CONFIRM_S) + 1)
    assert "41" not in session.state.jobs
    assert "41" not in session.state.failed_lapsed


def test_the_overview_and_the_jobs_view_say_a_failed_job_as_status_does():
    """`status` put job 41's failure first ("Worst first": it loses work now, its node drained
    or not); the overview's top problems said nothing of it, and the jobs view listed a
    straggler's job above it (a review)."""
    import dataclasses

    from fleetdeck.console.rows import job_row, jobs_to_act_on_first, top_problems
    from fleetdeck.protocol.messages import DrainState

    # On its node's row, above an idle failed node no one has drained, as in `status`.
    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48), "gpu0007": xid(1, 79)})
    session.fleet.status(session.ingest, "gpu0002", DrainState.DRAINED, reason="xid 48",
                         by="root")
    go_on(session, 1, faults={"gpu0002": xid(3, 48), "gpu0007": xid(1, 79)})
    state, now = session.state, session.clock()
    said = [i["key"] for i in fleet_summary(state, now)["incidents"]]
    assert said == ["node:gpu0002", "node:gpu0007"]
    problems = top_problems(state)[0]
    assert [p.node for p in problems] == ["gpu0002", "gpu0007"]
    assert problems[0].text == f"G2 gpu3: XID 48; job 41 failed on gpu0002 ({REASON_48})"
    # Of its own: a row next to the hung jobs.
    session = session_with_failed("NonZeroExitCode")
    (row,) = top_problems(session.state)[0]
    assert (row.node, row.state, row.text) == ("job 41", "failed", "failed (NonZeroExitCode)")
    # The jobs view's HELD UP column, and its order: before a job a straggler only slows.
    state, now = session.state, session.clock()
    failed = job_row(state.jobs["41"], state, now)
    assert failed.held_up == ("failed (NonZeroExitCode); restart-job 41 from its checkpoint at "
                              "step 400")
    slowed = dataclasses.replace(job_row(state.jobs["42"], state, now), job_id="40",
                                 straggler="rank 3 on gpu0005 1.5x")
    assert [r.job_id for r in jobs_to_act_on_first([slowed, failed])] == ["41", "40"]


def test_status_lists_failed_jobs_before_a_straggler_s():
    """Two jobs held up: the failed one first, as the jobs view has it, though its id is
    later."""
    session = session_with_failed("NonZeroExitCode")
    jobs = fleet_summary(session.state, session.clock())["jobs"]
    (failed,) = [j for j in jobs if j["job_id"] == "41"]
    slowed = {"job_id": "40", "name": "bert", "straggler": {
        "node": "gpu0005", "text": "rank 3 on gpu0005 50% slower"}}
    text = io.StringIO()
    render_held_up_jobs([slowed, failed], Console(file=text, width=300))
    assert [ln.split(":")[0].strip() for ln in text.getvalue().splitlines()[1:]] == [
        "41 llama-70b", "40 bert"]


def test_the_node_s_incident_is_an_error_while_the_job_it_failed_waits():
    """XID 94 kills the rank it hits and leaves the node only degraded: the work it stopped is
    lost until the restart, whatever the node's own severity."""
    reason = "rank 3 on gpu0002 gpu3: CUDA error: uncorrectable ECC error encountered (Xid 94)"
    session = session_with_failed(reason, {"gpu0002": xid(3, 94)})
    assert session.state.nodes["gpu0002"].verdict.value == "degraded"
    inc = job_incident(session)
    assert inc.key == "node:gpu0002" and inc.severity == "error" and inc.losing_work


def test_nodes_that_failed_together_say_what_the_job_is_now_once():
    """Three nodes an XID 79 took out of job 41 said "job 41 is NF now"; once the NF is left
    unrequeued, the failed job's words replace it, not follow it."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    session.fleet = fleet  # type: ignore[attr-defined]
    three = ["gpu0001", "gpu0002", "gpu0003"]
    for t in range(3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("41", three, clock, step=100 + t), clock)
        fleet.telemetry(session.ingest, job={n: "41" for n in three})
        session.tick()
    faults = {n: xid(1, 79) for n in three}
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, job={n: "41" for n in three}, faults=faults)
        session.tick()
    reason = "rank 3 on gpu0002 gpu1: CUDA error: unspecified launch failure (Xid 79)"
    publish_job(session.ingest, job_status("41", [], clock, step=102, state=JobState.NF)
                .model_copy(update={"reason": reason, "eta_s": None}), clock)
    go_on(session, 3, faults=faults)
    assert job_incident(session).title.endswith("; job 41 is NF now")
    go_on(session, GRACE_S + 2, faults=faults)
    inc = job_incident(session)
    assert inc.key == "job:41:failed" and "is NF now" not in inc.title
    assert inc.title.endswith(f"; job 41 ended by a node failure on gpu0002, not requeued "
                              f"({reason})")


def test_a_node_already_drained_is_not_to_be_drained_again():
    from fleetdeck.protocol.messages import DrainState

    reason = "ranks on gpu[0002-0003] died"
    faults = {"gpu0002": xid(3, 48), "gpu0003": xid(1, 79)}
    session = session_with_failed(reason, faults)
    session.fleet.status(session.ingest, "gpu0003", DrainState.DRAINED, reason="xid 79",
                         by="root")
    go_on(session, 1, faults=faults)
    (job,) = [j for j in fleet_summary(session.state, session.clock())["jobs"]
              if j["job_id"] == "41"]
    assert job["failed"]["action"] == ("drain gpu0002, then restart-job 41 from its checkpoint "
                                       "at step 400")


def test_every_node_that_failed_with_the_job_is_drained_before_its_restart():
    """The scheduler's reason names the rank that died first (gpu0002); gpu0001 failed in job
    41 with it (XID 79). "drain gpu0002, then restart-job 41" let the restart land on gpu0001,
    failed and not drained (a review): every failed node the job was struck on is drained
    first, named by the reason or not; one it named that is drained already is not."""
    from fleetdeck.protocol.messages import DrainState

    faults = {"gpu0001": xid(1, 79), "gpu0002": xid(3, 48)}
    session = session_with_failed(REASON_48, faults)
    restart = "restart-job 41 from its checkpoint at step 400"

    def failed() -> dict:
        (job,) = [j for j in fleet_summary(session.state, session.clock())["jobs"]
                  if j["job_id"] == "41"]
        return job["failed"]

    assert failed()["nodes"] == ["gpu0002"]  # what the reason names
    assert failed()["action"] == f"drain gpu[0001-0002], then {restart}"
    (inc,) = [i for i in incidents(session.state) if "41" in i.jobs]
    assert set(inc.nodes) == {"gpu0001", "gpu0002"} and inc.action.endswith(f"then {restart}")
    session.fleet.status(session.ingest, "gpu0001", DrainState.DRAINED, reason="xid 79",
                         by="root")
    go_on(session, 1, faults=faults)
    assert failed()["action"] == f"drain gpu0002, then {restart}"


def test_a_job_failed_on_two_nodes_is_said_on_each_one_s_incident_with_one_restart():
    """Job 41 failed on gpu0002 (XID 48) and gpu0003 (XID 79), each its own incident: it was
    named on the first only, and the second's reader never learnt it held up job 41 (a
    review). Each says the job, is an error, and both say the same one restart: after every
    node to drain is drained, not "restart-job 41" once per node."""
    from fleetdeck.console.rows import top_problems
    from fleetdeck.protocol.messages import DrainState

    reason = "ranks on gpu[0002-0003] died"
    faults = {"gpu0002": xid(3, 48), "gpu0003": xid(1, 79)}
    session = session_with_failed(reason, faults)
    said = f"; job 41 failed on gpu[0002-0003] ({reason})"
    restart = "; then restart-job 41 from its checkpoint at step 400"
    found = {i.key: i for i in incidents(session.state)}
    assert [k for k, i in found.items() if "41" in i.jobs] == ["node:gpu0002", "node:gpu0003"]
    for key in ("node:gpu0002", "node:gpu0003"):
        inc = found[key]
        assert inc.severity == "error" and inc.title.endswith(said), inc
        assert inc.action.endswith(f"{restart} once gpu[0002-0003] are drained"), inc.action
    # status --json and the overview's rows say it alike.
    out = fleet_summary(session.state, session.clock())
    assert [i["key"] for i in out["incidents"] if "41" in i["jobs"]] == [
        "node:gpu0002", "node:gpu0003"]
    rows = {p.node: p.text for p in top_problems(session.state)[0]}
    assert rows["gpu0002"].endswith(said) and rows["gpu0003"].endswith(said)
    # One drained: the other's drain is what both wait for.
    session.fleet.status(session.ingest, "gpu0002", DrainState.DRAINED, reason="xid 48",
                         by="root")
    go_on(session, 1, faults=faults)
    for key in ("node:gpu0002", "node:gpu0003"):
        inc = next(i for i in incidents(session.state) if i.key == key)
        assert inc.action.endswith(
            f"{restart} once gpu0003 is drained (one restart for gpu[0002-0003])"), inc.action
    # Both drained: one restart, said as one on each.
    session.fleet.status(session.ingest, "gpu0003", DrainState.DRAINED, reason="xid 79",
                         by="root")
    go_on(session, 1, faults=faults)
    for key in ("node:gpu0002", "node:gpu0003"):
        inc = next(i for i in incidents(session.state) if i.key == key)
        assert inc.action.endswith(f"{restart} (one restart for gpu[0002-0003])"), inc.action


def scheduler_gone_after(session, faults=None) -> None:
    """The scheduler, heard online, leaves its will; judged once its going is believed."""
    from tests.console.test_scheduler_status import TOPIC, sched

    clock = session.clock
    started = clock() - 100
    session.ingest.handle(TOPIC, sched(True, started, clock), clock())
    go_on(session, 1, faults=faults)
    session.ingest.handle(TOPIC, sched(False, started, clock), clock())
    for _ in range(4):
        clock.advance(1.0)
        session.fleet.telemetry(session.ingest, faults=faults or {})
        session.tick()


def test_a_failed_job_s_restart_waits_for_the_scheduler_once_it_is_gone():
    """The scheduler's incident said "restart-job gets no answer until it is back" and job
    41's said "then restart-job 41" (a review): every place says it waits for the scheduler."""
    from fleetdeck.console.rows import job_row

    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)})
    scheduler_gone_after(session, {"gpu0002": xid(3, 48)})
    state, now = session.state, session.clock()
    found = {i.key: i for i in incidents(state)}
    assert "restart-job gets no answer until it is back" in found["scheduler"].title
    restart = "restart-job 41 from its checkpoint at step 400 once the scheduler is back"
    assert found["node:gpu0002"].action.endswith(f"; then {restart}")
    (job,) = [j for j in fleet_summary(state, now)["jobs"] if j["job_id"] == "41"]
    assert job["failed"]["action"] == f"drain gpu0002, then {restart}"
    assert job_row(state.jobs["41"], state, now).held_up.endswith(
        f"; drain gpu0002, then {restart}")
    # Of its own (the application's fault) too.
    session = session_with_failed(REASON_13, {"gpu0002": xid(3, 13)})
    scheduler_gone_after(session)
    (inc,) = [i for i in incidents(session.state) if i.key == "job:41"]
    assert inc.action.startswith(f"{restart}; if it fails so again")


def silent_world(silent: list[str], reason: str, nodes: int = 32):
    """Job 41 ran on NODES; ``silent`` leave their wills as it ends NF with ``reason``, not
    requeued; the scheduler is heard throughout (job 42 steps on the last node)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(nodes, clock)  # racks of 8
    fleet.birth(session.ingest)
    for t in range(3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("41", NODES, clock, step=100 + t), clock)
        fleet.telemetry(session.ingest, job={n: "41" for n in NODES})
        session.tick()
    for name in silent:
        will = fleet.agents[name].status(online=False)
        session.ingest.handle(topic_for(CLUSTER, Kind.STATUS, name), codec.encode(will),
                              clock())
    publish_job(session.ingest, job_status("41", [], clock, step=102, state=JobState.NF)
                .model_copy(update={"reason": reason, "eta_s": None}), clock)
    live = [n for n in fleet.names if n not in silent]
    for t in range(GRACE_S + 3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("42", live[-1:], clock, step=200 + t), clock)
        fleet.telemetry(session.ingest, names=live)
        session.tick()
    return session


REASON_NR = "NCCL watchdog: collective stalled 30 s (gpu0002 not responding)"


def test_a_failed_job_under_a_silent_rack_or_node_is_restarted_without_waiting_for_it():
    """Joined to its rack's silence it read "check the rack's power …; drain the nodes if they
    do not come back; then restart-job 41", as if the restart waited for the rack (a
    review). The scheduler, heard, places the job only on nodes it reaches: the restart need
    not wait for what this console cannot see."""
    said = f"; job 41 ended by a node failure on gpu0002, not requeued ({REASON_NR})"
    restart = ("; restart-job 41 from its checkpoint at step 400, without waiting for gpu0002 "
               "(silent: the scheduler places it only on nodes it reaches)")
    rack = silent_world([f"gpu{i:04d}" for i in range(1, 9)], REASON_NR)
    (inc,) = [i for i in incidents(rack.state) if "41" in i.jobs]
    assert inc.key == "rack:r00" and inc.title.endswith(said)
    assert inc.action.endswith(f"drain the nodes if they do not come back{restart}")
    node = silent_world(["gpu0002"], REASON_NR)
    (inc,) = [i for i in incidents(node.state) if "41" in i.jobs]
    assert inc.key == "node:gpu0002" and inc.title.endswith(said)
    assert inc.action.endswith(f"its agent takes a drain only once it is back{restart}")


def test_a_failed_job_under_a_fleet_wide_silence_is_an_incident_of_its_own():
    """The fleet's silence is the network to the broker or the agents' host, its nodes not
    known to be down: the job's failure on it read as its cause, and "check the network path
    …; then restart-job 41" chained the restart after it (a review). The job keeps its own
    incident, the scheduler's word and its restart."""
    session = silent_world([f"gpu{i:04d}" for i in range(1, 25)], REASON_NR)
    found = {i.key: i for i in incidents(session.state)}
    assert "41" not in found["fleet:silent"].jobs and "job 41" not in found["fleet:silent"].title
    own = found["job:41"]
    assert own.severity == "error" and own.title == (
        f"job 41 ended by a node failure on gpu0002, not requeued ({REASON_NR})")
    assert own.action == "restart-job 41 from its checkpoint at step 400"


def test_a_node_that_failed_two_jobs_says_both_on_its_row_as_on_its_incident():
    """gpu0002's XID 48 failed jobs 41 and 43: its incident said both, the overview's row the
    first only, and job 43 got a row of its own as if nothing of the fleet's had failed it (a
    helper's audit). One row, as one incident: the node's findings, then each job."""
    from fleetdeck.console.rows import top_problems

    reason43 = "rank 0 on gpu0002 gpu5: CUDA error: uncorrectable ECC error encountered (Xid 48)"
    session = session_with_failed(REASON_48, {"gpu0002": xid(3, 48)}, seconds=1)
    clock = session.clock
    publish_job(session.ingest, job_status("43", ["gpu0002"], clock, step=50, state=JobState.F)
                .model_copy(update={"reason": reason43, "eta_s": None}), clock)
    go_on(session, 2, faults={"gpu0002": xid(3, 48)})
    said = (f"; job 41 failed on gpu0002 ({REASON_48}); job 43 failed on gpu0002 "
            f"({reason43})")
    (inc,) = [i for i in incidents(session.state) if {"41", "43"} & set(i.jobs)]
    assert inc.key == "node:gpu0002" and inc.title.endswith(said), inc.title
    problems = top_problems(session.state)[0]
    assert [p.node for p in problems] == ["gpu0002"], problems
    assert problems[0].text == f"G2 gpu3: XID 48{said}"


def test_a_silent_rack_s_row_names_the_job_that_failed_with_it():
    """The incidents list put job 41 on its rack's silence; the overview's top problems gave
    the rack a row that never named it and the job a row of its own (a helper's audit). One
    row, as one incident; the job first, as the rack's title would leave it past an 80-column
    overview's edge (the row's columns already say the rack and "silent")."""
    from fleetdeck.console.rows import top_problems

    session = silent_world([f"gpu{i:04d}" for i in range(1, 9)], REASON_NR)
    (inc,) = [i for i in incidents(session.state) if "41" in i.jobs]
    assert inc.key == "rack:r00"
    (row,) = top_problems(session.state)[0]
    assert (row.node, row.state) == ("r00", "silent")
    assert row.text == ("job 41 ended by a node failure on gpu0002, not requeued; "
                        f"{inc.title.split('; job 41 ')[0]}")
    # What an 80-column overview shows of it (the TUI's row: verdict, node, state, text).
    line = f" {row.verdict.value:<8} {row.node:<10} {row.state:<6} {row.text}"[:78]
    assert "job 41" in line and "r00" in line


def test_nodes_that_failed_together_say_the_failed_job_on_their_row_as_on_their_incident():
    """Nodes an XID 79 took out of job 41 together are one incident, which says the job's
    failure once it is left unrequeued; the overview's row still read "job 41 is NF now" and
    the job had a second row of its own."""
    from fleetdeck.console.rows import top_problems

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    session.fleet = fleet  # type: ignore[attr-defined]
    three = ["gpu0001", "gpu0002", "gpu0003"]
    for t in range(3):
        clock.advance(1.0)
        publish_job(session.ingest, job_status("41", three, clock, step=100 + t), clock)
        fleet.telemetry(session.ingest, job={n: "41" for n in three})
        session.tick()
    faults = {n: xid(1, 79) for n in three}
    reason = "rank 3 on gpu0002 gpu1: CUDA error: unspecified launch failure (Xid 79)"
    publish_job(session.ingest, job_status("41", [], clock, step=102, state=JobState.NF)
                .model_copy(update={"reason": reason, "eta_s": None}), clock)
    go_on(session, GRACE_S + 3, faults=faults)
    (inc,) = [i for i in incidents(session.state) if "41" in i.jobs]
    (row,) = top_problems(session.state)[0]
    assert (row.node, row.state) == ("job 41", "nodes")
    assert row.text == inc.title.removeprefix("job 41: ")
    assert "is NF now" not in row.text and row.text.endswith(f"not requeued ({reason})")


def test_a_failed_job_s_lapse_does_not_depend_on_when_a_view_looked():
    """The lapse was recorded only when a view judged the failed job while its node ran other
    work: job 43 on gpu0002 for a few seconds, then requeued elsewhere, lapsed job 41 for a
    console whose TUI looked meanwhile, and not for a replay sought past it, a console whose
    node's telemetry never named job 43 (digests) or one that looked only at the end. Recorded
    where the job statuses are applied, the same stream reads the same whenever it is looked
    at."""
    answers = []
    for look in (False, True):
        session = session_with_failed(REASON_13)
        clock = session.clock
        publish_job(session.ingest, job_status("43", ["gpu0002"], clock, step=1), clock)
        go_on(session, 2)  # gpu0002's telemetry never names job 43
        if look:
            assert job_incident(session).title.endswith("; gpu0002 runs job 43 now")
        publish_job(session.ingest, job_status("43", ["gpu0009"], clock, step=1, requeues=1),
                    clock)
        go_on(session, 2)
        inc = job_incident(session)
        answers.append((inc.severity, inc.title, inc.losing_work))
    assert answers[0] == answers[1], answers
    assert answers[0][1].endswith("; gpu0002 ran job 43 since") and not answers[0][2]


def test_a_batch_of_job_statuses_costs_its_jobs_not_its_jobs_times_the_failed_ones():
    """``_note_lapses`` tested each failed job not lapsed yet against each job of the batch
    that holds nodes: 100 failed jobs (a simulator withdraws none) and 400 running ones that
    stepped cost ~40 ms a batch at 16,384 nodes, on every tick they step. Looked up in an index
    of the failed jobs' nodes, a batch reads each of its jobs' nodes once; what lapses is the
    same (the smallest node, then job, of those that hold one)."""
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol.messages import JobStatus

    state = FleetState(CLUSTER)
    calls = []
    job_nodes = state.job_nodes

    def counted(job):
        calls.append(job.job_id)
        return job_nodes(job)

    state.job_nodes = counted
    nodes = [f"gpu{i:05d}" for i in range(500 * 4)]

    def status(jid, i, state_, ts, step=1):
        return JobStatus(job_id=jid, state=state_, nodes=nodes[i * 4:(i + 1) * 4], step=step,
                         reason=f"rank 1 on {nodes[i * 4 + 1]}" if state_ is JobState.F else "",
                         ts=ts)

    jobs = {str(i): status(str(i), i, JobState.F if i < 100 else JobState.R, 1000)
            for i in range(500)}
    state.jobs.update(jobs)
    state._note_lapses({j: (1.0, s) for j, s in jobs.items()})
    assert not state.failed_lapsed
    calls.clear()
    heard = {}
    for i in range(100, 500):
        s = heard[str(i)] = (2.0, status(str(i), i, JobState.R, 2000, step=2))
        state.jobs[str(i)] = s[1]
    state._note_lapses(heard)
    assert len(calls) <= len(heard), len(calls)
    # Job 600 takes gpu00029 (failed job 7's) and gpu00009 (job 2's), job 601 gpu00013 (job
    # 3's) and gpu00008 (job 2's): each lapses on its smallest node another job holds.
    s7 = JobStatus(job_id="600", state=JobState.R, nodes=["gpu00029", "gpu00009"], ts=3000)
    s8 = JobStatus(job_id="601", state=JobState.R, nodes=["gpu00013", "gpu00008"], ts=3000)
    state.jobs.update({"600": s7, "601": s8})
    state._note_lapses({"600": (3.0, s7), "601": (3.0, s8)})
    assert state.failed_lapsed == {"2": (1000, "gpu00008", "601"), "3": (1000, "gpu00013", "601"),
                                   "7": (1000, "gpu00029", "600")}
    assert not {"2", "3", "7"} & {j for js in state._unlapsed_on.values() for j in js}
    # Withdrawn or restarted, a failed job is forgotten, its nodes with it.
    state._withdraw_job("5")
    restarted = status("6", 6, JobState.R, 4000)
    state.jobs["6"] = restarted
    state._note_lapses({"6": (4.0, restarted)})
    assert not {"5", "6"} & {*state._unlapsed, *(j for js in state._unlapsed_on.values()
                                                  for j in js)}
    assert all(state._unlapsed_on.values())


def test_the_jobs_view_opens_every_node_the_job_failed_on_not_only_the_one_its_reason_names():
    """Enter on job 41 (F; its reason names gpu0002, gpu0001 failed in it by XID 79) opened
    gpu0002 alone, under an action saying "drain gpu[0001-0002], then restart-job 41" (a
    review): ``JobRow.failed_on`` is every node it failed on, drained since or not."""
    from fleetdeck.console.rows import job_row
    from fleetdeck.protocol.messages import DrainState

    faults = {"gpu0001": xid(1, 79), "gpu0002": xid(3, 48)}
    session = session_with_failed(REASON_48, faults)

    def failed_on() -> str:
        job = session.state.jobs["41"]
        return job_row(job, session.state, session.clock()).failed_on

    assert failed_on() == "gpu[0001-0002]"
    session.fleet.status(session.ingest, "gpu0001", DrainState.DRAINED, reason="xid 79",
                         by="root")
    go_on(session, 1, faults=faults)
    assert failed_on() == "gpu[0001-0002]"
