"""An interrupted job that runs again says so in the timeline, with where and how long after:
a restart was "done" at the requeue ("now PD (Resources)") and nothing said when the job ran
again (a jobs audit)."""

import pytest

from fleetdeck.console.commands import fmt_duration
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import JOB_CLEAR_CONFIRM_S
from fleetdeck.protocol.messages import JobState
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


def session_with_job() -> ConsoleSession:
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    SynthFleet(8, clock).birth(session.ingest)
    return session


def seconds(session: ConsoleSession, n: int, **job) -> None:
    """``n`` seconds of the fleet with job 41 reported as ``job`` says, a tick each."""
    clock = session.clock
    for _ in range(n):
        clock.advance(1.0)  # type: ignore[attr-defined]
        nodes = job.get("nodes", ["gpu0001", "gpu0002"])
        publish_job(session.ingest, job_status(
            "41", nodes, clock, state=job.get("state", JobState.R), step=job.get("step", 500),
            requeues=job.get("requeues", 0), started_offset_s=job.get("started", 3600)),
            clock)
        session.tick()


def job_lines(session: ConsoleSession) -> list[str]:
    return [ln.text for ln in session.log.lines() if ln.kind == "job"]


def test_a_requeued_job_that_waits_then_runs_is_said_to_run_again():
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 40, state=JobState.PD, requeues=1, nodes=[])
    assert job_lines(session) == []  # waiting for nodes: nothing to say yet
    seconds(session, 3, requeues=1, nodes=["gpu0003", "gpu0004"], step=400, started=0)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 1) from step 400 on gpu[0003-0004], ")
    assert line.endswith("after its run ended")
    assert "41s after" in line or "42s after" in line or "40s after" in line, line


def test_an_interrupted_job_that_fails_instead_is_let_go():
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 60, state=JobState.F, requeues=1)
    assert job_lines(session) == []
    assert session._rerun == {}


def test_a_failed_job_an_operator_restarts_is_said_to_run_again():
    """Job 41 failed (F) and, 5 min later, restarted (``restart-job``: RQ, PD, R): a requeued
    job got "runs again" and a restarted failed one nothing, in the timeline nor in
    ``fleetdeck events`` (a newcomer's run). Timed from its failure."""
    session = session_with_job()
    seconds(session, 10)
    failed_at = session.clock() + 1
    seconds(session, 300, state=JobState.F)
    assert session._rerun == {}  # let go of the watch: it may never be restarted
    assert job_lines(session) == []
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 20, state=JobState.PD, requeues=1, nodes=[])
    assert job_lines(session) == []
    seconds(session, 2, requeues=1, nodes=["gpu0003", "gpu0004"], step=400, started=0)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 1) from step 400 on gpu[0003-0004], "
                           f"{fmt_duration(session.clock() - 1 - failed_at)}"), line
    assert line.endswith("after its run ended"), line
    assert len(session.interruptions.total) == 1  # the failure, not the restart again
    assert session._rerun == {} and session._rerun_failed == {}


def test_a_failed_job_seen_running_again_is_said_to_run_again():
    """The scheduler itself put the failed job back (R, a new start, no requeue counted)."""
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 30, state=JobState.F)
    seconds(session, 2, nodes=["gpu0003", "gpu0004"], step=400, started=0)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 0) from step 400 on gpu[0003-0004]")


def test_a_failed_job_withdrawn_unrestarted_is_let_go():
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 30, state=JobState.F)
    assert list(session._rerun_failed) == ["41"]
    session.ingest.handle(topic_for(CLUSTER, Kind.JOB, "41"), b"", session.clock())
    session.tick()
    session.clock.advance(JOB_CLEAR_CONFIRM_S)  # type: ignore[attr-defined]
    session.tick()
    assert "41" not in session.state.jobs
    assert session._rerun_failed == {} and session._rerun == {}


def test_a_seek_back_to_before_the_failure_forgets_the_failed_watch():
    """The watch is part of a replay's snapshot: seeking back to before the job failed and
    playing on the same statuses says the same lines (docs/replay.md)."""
    session = session_with_job()
    seconds(session, 10)
    before = session.snapshot()
    seconds(session, 30, state=JobState.F)
    assert "41" in session._rerun_failed
    session.restore(before)
    assert session._rerun_failed == {}


def test_a_job_a_node_failure_requeued_says_so_when_it_runs_again():
    """NF, then RQ, PD and R (the simulator's requeue after a node failure): the interruption
    is booked while the job reads NF, and the line was never said (a review)."""
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 15, state=JobState.NF)
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 20, state=JobState.PD, requeues=1, nodes=[])
    assert job_lines(session) == []
    seconds(session, 2, requeues=1, nodes=["gpu0003", "gpu0004"], step=400, started=0)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 1) from step 400 on gpu[0003-0004]")


def test_the_run_that_ended_is_not_taken_for_the_next():
    """A requeue the scheduler reports while its status still says R with the old run's start
    (a bridge that stamps the state before the start): not running again yet."""
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 13, requeues=1)  # R, requeues bumped, started an hour ago: the old run
    assert job_lines(session) == []
    seconds(session, 12, requeues=1, started=0)  # the interruption is booked within 10 s
    assert len(job_lines(session)) == 1


async def started_on(first: ConsoleSession, tmp_path) -> ConsoleSession:
    """A console started on the store ``first`` wrote, on the same clock."""
    later = ConsoleSession(CLUSTER, clock=first.clock, ingest=Ingest(CLUSTER), follow_up=False)
    SynthFleet(8, first.clock).birth(later.ingest)  # type: ignore[arg-type]
    await later.open_store(tmp_path / "store.db")
    return later


async def restarted_after_interruption(tmp_path) -> ConsoleSession:
    """A console with a store sees job 41 requeued (RQ, then PD) and stops; another one is
    started on the store while the job still waits."""
    first = session_with_job()
    await first.open_store(tmp_path / "store.db")
    seconds(first, 10)
    seconds(first, 1, state=JobState.RQ, requeues=1)
    seconds(first, 15, state=JobState.PD, requeues=1, nodes=[])
    await first.flush()
    await first.close()
    later = await started_on(first, tmp_path)
    return later


async def test_a_console_started_after_the_interruption_says_the_job_runs_again(tmp_path):
    """It recalled the interruption from the store, and never said the job ran again."""
    later = await restarted_after_interruption(tmp_path)
    try:
        # Its first ticks come before the broker's retained job statuses (a review: the
        # first tick let every recalled job go).
        later.clock.advance(1.0)  # type: ignore[attr-defined]
        later.tick()
        seconds(later, 5, state=JobState.PD, requeues=1, nodes=[])
        assert job_lines(later) == []
        seconds(later, 2, requeues=1, nodes=["gpu0005", "gpu0006"], step=400, started=0)
        (line,) = job_lines(later)
        assert line.startswith("job 41 runs again (requeues 1) from step 400 on gpu[0005-0006]")
        assert line.endswith("after its run ended"), line
    finally:
        await later.close()


async def test_a_job_that_ran_again_before_the_console_started_says_when(tmp_path):
    later = await restarted_after_interruption(tmp_path)
    try:
        # Running for 5 s when this console first hears of it: after the requeue (10 s
        # before), before this console.
        seconds(later, 1, requeues=1, nodes=["gpu0005", "gpu0006"], step=400, started=5)
        (line,) = job_lines(later)
        assert line.startswith("job 41 runs again (requeues 1) from step 400 on gpu[0005-0006]")
        assert line.endswith(" UTC, before this console started)"), line
    finally:
        await later.close()


def test_a_job_back_at_an_earlier_step_with_no_requeue_is_an_interruption():
    """A simulator restarted under running jobs brought job 4101 back from step 127 to 1 under
    the same id, no requeue counted: nothing was said, nothing booked (a 3 a.m. drive). A
    launcher that restarts a job inside its allocation does the same."""
    session = session_with_job()
    for step in range(500, 510):
        seconds(session, 1, step=step)
    seconds(session, 12, step=120, started=2)  # a cause is looked for for 10 s
    (it,) = session.interruptions.total
    assert it.job_id == "41"
    assert it.detail == "R -> R (restarted without a requeue: step 509 -> 120)", it.detail
    assert it.lost_gpu_hours > 0  # its work since the checkpoint at step 400
    assert job_lines(session) == [
        "job 41 runs again in place (restarted without a requeue: step 509 -> 120; its "
        "launcher or its scheduler restarted it)"]
    assert session._rerun == {}
    # A new run: its steps are advances of its own, not one of 389 back.
    steps, _gap = session.state.job_step_delta.get("41", (0, None))
    assert steps <= 1
    seconds(session, 3, step=121, started=2)
    assert len(session.interruptions.total) == 1
    assert it.cause == "software"  # no node of it looked unhealthy


async def test_a_job_the_store_saw_run_again_is_not_said_again_after_a_restart(tmp_path):
    """The console before said "runs again"; a restart within the hour said it a second time."""
    first = session_with_job()
    await first.open_store(tmp_path / "store.db")
    seconds(first, 10)
    seconds(first, 1, state=JobState.RQ, requeues=1)
    seconds(first, 5, state=JobState.PD, requeues=1, nodes=[])
    seconds(first, 70, requeues=1, nodes=["gpu0005", "gpu0006"], step=400, started=0)
    assert len(job_lines(first)) == 1
    await first.flush()
    await first.close()
    later = await started_on(first, tmp_path)
    try:
        assert later._rerun == {}
        recalled = job_lines(later)  # the line the console before said, from the store
        assert [line.split(",")[0] for line in recalled] == [
            "job 41 runs again (requeues 1) from step 400 on gpu[0005-0006]"]
        seconds(later, 3, requeues=1, nodes=["gpu0005", "gpu0006"], step=470, started=73)
        assert job_lines(later) == recalled
    finally:
        await later.close()


async def test_a_recalled_job_never_heard_again_is_let_go(tmp_path):
    later = await restarted_after_interruption(tmp_path)
    try:
        assert list(later._rerun) == ["41"]
        for _ in range(61):
            later.clock.advance(1.0)  # type: ignore[attr-defined]
            later.tick()
        assert later._rerun == {}
    finally:
        await later.close()


async def test_a_restart_in_place_while_no_console_ran_loses_one_checkpoint_interval(tmp_path):
    """A 16-GPU job kept at step 5060, the console down 8 h, the job back at step 60: booked
    131 GPU-h lost, dated now (a review). Its checkpoints went on meanwhile: at most one
    interval is lost, dated by the new run's start."""
    first = session_with_job()
    await first.open_store(tmp_path / "store.db")
    seconds(first, 5, step=5060)
    await first.flush()
    await first.close()
    first.clock.advance(8 * 3600.0)  # type: ignore[attr-defined]
    later = await started_on(first, tmp_path)
    try:
        seconds(later, 12, step=60, started=60)
        (it,) = later.interruptions.total
        # job_status: checkpoint every 100 steps of 1 s, 2 nodes of 8 GPUs.
        assert it.lost_gpu_hours == pytest.approx(16 * 100 / 3600)
        assert it.ts == pytest.approx(later.clock() - 12 - 60, abs=2)
        assert it.detail.startswith("R -> R (restarted without a requeue: step 5060 -> 60")
    finally:
        await later.close()


def test_a_step_left_out_of_a_status_is_no_restart():
    """A bridge may send a status for another change without ``step`` (it reads 0)."""
    session = session_with_job()
    clock = session.clock
    run = job_status("41", ["gpu0001", "gpu0002"], clock, step=500)  # one start throughout
    for step in (500, 501, 502, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0):
        clock.advance(1.0)  # type: ignore[attr-defined]
        publish_job(session.ingest, run.model_copy(update={"step": step,
                                                           "ts": int(clock() * 1000)}), clock)
        session.tick()
    assert session.interruptions.total == []


def test_a_job_pending_again_with_no_requeue_is_an_interruption_and_its_rerun_said():
    """A restarted simulator's jobs went R (step 36), PD (step 0), R (step 0, a new start),
    requeues 0: nothing was booked and the report said 100 % effective (a drill). Booked once
    it runs again, dated when it went back to the queue."""
    session = session_with_job()
    for step in range(500, 510):
        seconds(session, 1, step=step)
    queued = session.clock() + 1
    seconds(session, 12, state=JobState.PD, step=0, nodes=[])
    assert session.interruptions.total == []  # a suspend reported as PD loses nothing
    seconds(session, 12, step=0, nodes=["gpu0005", "gpu0006"], started=0)
    (it,) = session.interruptions.total
    assert it.detail == "R -> PD -> R (queued again without a requeue: step 509 -> 0)", \
        it.detail
    assert it.lost_gpu_hours > 0 and it.ts == pytest.approx(queued, abs=1)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 0) from step 0 on gpu[0005-0006], ")


def test_a_job_back_from_pending_as_it_was_is_no_interruption():
    """A bridge may report a suspended job as PD: back at its step, its run the same."""
    session = session_with_job()
    clock = session.clock
    run = job_status("41", ["gpu0001", "gpu0002"], clock, step=500)
    for state, step in [(JobState.R, 500), (JobState.R, 501), *[(JobState.PD, 501)] * 5,
                        *[(JobState.R, 501)] * 3, *[(JobState.R, 502)] * 12]:
        clock.advance(1.0)  # type: ignore[attr-defined]
        publish_job(session.ingest, run.model_copy(update={
            "state": state, "step": step, "ts": int(clock() * 1000)}), clock)
        session.tick()
    assert session.interruptions.total == []


def test_runs_again_names_the_checkpoint_it_restarted_from():
    """"runs again … from step 28" was the step the console first saw it at, not the
    checkpoint (0) it restarted from (a drill)."""
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 1, state=JobState.RQ, requeues=1)
    seconds(session, 5, state=JobState.PD, requeues=1, nodes=[])
    seconds(session, 12, requeues=1, nodes=["gpu0003", "gpu0004"], step=428, started=1)
    (line,) = job_lines(session)
    assert line.startswith("job 41 runs again (requeues 1) from its checkpoint at step 400 "
                           "(at step 428 now) on gpu[0003-0004]"), line


async def test_an_interruption_while_no_console_ran_is_dated_when_it_happened(tmp_path):
    """A console that stopped while job 41 ran, and another started 60 s after the job was
    requeued and ran again: the interruption's line was dated at the second console's start,
    and the job "ran again 0s after its run ended" (an SRE drill). Both are dated by the
    scheduler's word: the line at the new run's start, and no time since a run's end that
    no one saw."""
    first = session_with_job()
    await first.open_store(tmp_path / "store.db")
    seconds(first, 10)
    await first.flush()
    await first.close()
    clock = first.clock
    clock.advance(30.0)  # type: ignore[attr-defined]
    requeued_at = clock()
    clock.advance(60.0)  # type: ignore[attr-defined]
    later = await started_on(first, tmp_path)
    try:
        seconds(later, 1, requeues=1, nodes=["gpu0005", "gpu0006"], step=400, started=61)
        for _ in range(11):  # no cause on its nodes: software, once 10 s have shown none
            clock.advance(1.0)  # type: ignore[attr-defined]
            later.tick()
        (it,) = [ln for ln in later.log.lines() if ln.kind == "interruption"]
        assert abs(it.ts - requeued_at) < 2, (it.ts - requeued_at, it.text)
        assert it.text.endswith(" (while no console or collector ran)"), it.text
        (line,) = job_lines(later)
        assert "after its run ended" not in line, line
        assert line.endswith(" UTC, before this console started)"), line
    finally:
        await later.close()


def test_a_second_interruption_books_only_the_work_since_the_run_resumed():
    """A job requeued from a checkpoint 30 min old and interrupted again a minute later lost
    a minute of work, not the 30 min the first interruption booked already (a newcomer's
    run)."""
    session = session_with_job()
    # Each status says the run started 60 s before it and the checkpoint is 30 min old.
    seconds(session, 10, started=60)
    seconds(session, 15, state=JobState.NF, started=60)
    (it,) = session.interruptions.total
    gpus = 2 * 8
    assert it.lost_gpu_hours == pytest.approx(gpus * 60 / 3600, abs=gpus * 5 / 3600), it


def another_job_41(session: ConsoleSession, n: int) -> None:
    """A restarted simulator's new job 41 (another name and user, one node, from step 0),
    its status each second for ``n`` seconds."""
    clock = session.clock
    for step in range(n):
        clock.advance(1.0)  # type: ignore[attr-defined]
        other = job_status("41", ["gpu0007"], clock, step=step, started_offset_s=20)
        publish_job(session.ingest, other.model_copy(update={"name": "vit-h14", "user": "bob"}),
                    clock)
        session.tick()


def test_another_job_under_the_id_is_no_interruption_of_the_one_before():
    """A simulator restarted with other jobs counted from 4101 again: its new 4104 (another
    name, one node, step 0) was booked as an interruption of the old 4104 withdrawn 5 min
    before ("runs again ... 0s after its run ended", 2.9 GPU-h lost; a drill)."""
    session = session_with_job()
    for step in range(500, 510):
        seconds(session, 1, step=step)
    another_job_41(session, 12)
    assert session.interruptions.total == []
    assert job_lines(session) == []


def test_another_job_under_an_interrupted_jobs_id_is_not_said_to_run_again():
    """Job 41 interrupted (NF), then a restarted simulator's new 41 (another name and user,
    one node, step 0): the timeline said "job 41 runs again (requeues 0) from step 4 on
    gpu0007, 0s after its run ended" of a job that never ran before (a review)."""
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 15, state=JobState.NF)
    assert "41" in session._rerun  # interrupted, waiting to run again
    another_job_41(session, 12)
    assert job_lines(session) == []
    assert session._rerun == {}


def test_another_job_under_the_id_within_the_interruptions_booking_is_not_its_rerun():
    """The same, the new 41 coming 2 s after the old one's NF, while the interruption's cause
    was still looked for: booked after the new job came, it waited on that job all the same."""
    session = session_with_job()
    seconds(session, 10)
    seconds(session, 2, state=JobState.NF)
    another_job_41(session, 20)
    (it,) = session.interruptions.total  # the old 41's interruption is real
    assert it.detail.startswith("R -> NF")
    assert job_lines(session) == []
    assert session._rerun == {} and session.interruptions.replaced == {}
