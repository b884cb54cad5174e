"""A running job that stopped stepping with none of its nodes failing (a collective that never
completes: Slurm still says R) is hung: its figures froze and nothing said so. The console
says it on the job (jobs view, overview, ``status --json``'s ``not_stepping_s``) and as an
incident, once its step has not advanced for longer than a checkpoint save takes
(``JOB_HUNG_S``) or than its scheduler's reports are apart, while the scheduler is heard."""

import re

from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import JOB_HUNG_S, not_stepping
from fleetdeck.console.rows import job_row, jobs_to_act_on_first, sorted_jobs
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol.messages import JobState
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)

NODES = ["gpu0001", "gpu0002"]
LONG = int(JOB_HUNG_S) + 60
"""Seconds a run lasts to see a hang: past the window."""


def run(seconds: int, *, stepping_for: int, faults=None, reason: str = "", other: bool = True,
        every: int = 1, session: ConsoleSession | None = None, state=JobState.R,
        slowest: str | None = None):
    """A fleet of 8 with jobs 41 (on NODES) and, with ``other``, 42 (gpu0005); 41 steps
    (a status every ``every`` s) for ``stepping_for`` seconds and then stops; 42 steps
    throughout (the scheduler is heard)."""
    if session is None:
        clock = Clock()
        session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER),
                                 follow_up=False)
        session.fleet = SynthFleet(8, clock)  # type: ignore[attr-defined]
        session.fleet.birth(session.ingest)  # type: ignore[attr-defined]
    clock, ingest, fleet = session.clock, session.ingest, session.fleet  # type: ignore[attr-defined]
    start = getattr(session, "t", 0)
    for t in range(start, start + seconds):
        clock.advance(1.0)
        if t - start <= stepping_for and t % every == 0:
            publish_job(ingest, job_status("41", NODES, clock, step=100 + t, state=state,
                                           slowest_node=slowest)
                        .model_copy(update={"reason": reason}), clock)
        if other:
            publish_job(ingest, job_status("42", ["gpu0005"], clock, step=100 + t), clock)
        fleet.telemetry(ingest, faults=faults or {})
        session.tick()
    session.t = start + seconds  # type: ignore[attr-defined]
    return session


def hung(session) -> float | None:
    return not_stepping(session.state.jobs["41"], session.state, session.clock())


def test_a_job_that_steps_or_pauses_for_a_checkpoint_save_is_not_called_hung():
    session = run(LONG, stepping_for=LONG)
    state = session.state
    assert all(not_stepping(j, state, session.clock()) is None for j in state.jobs.values())
    assert not [i for i in incidents(state) if i.kind == "job"]
    # A 4-minute save (no step) is not a hang (30 s flagged every save: a review).
    session = run(240, stepping_for=0, session=run(20, stepping_for=20))
    assert hung(session) is None


def test_a_job_whose_step_stopped_is_hung_in_every_view_and_in_json():
    session = run(LONG, stepping_for=10)
    state, now = session.state, session.clock()
    quiet = hung(session)
    assert quiet is not None and quiet > JOB_HUNG_S
    assert not_stepping(state.jobs["42"], state, now) is None
    rows = jobs_to_act_on_first(job_row(j, state, now) for j in sorted_jobs(state))
    assert rows[0].job_id == "41"  # first, above a job that steps
    assert rows[0].stalled.startswith(f"no step for {quiet:.0f} s (step 110 at ")
    assert rows[0].held_up == rows[0].stalled
    (inc,) = [i for i in incidents(state) if i.kind == "job"]
    assert inc.key == "job:41" and inc.severity == "error" and inc.jobs == ["41"]
    assert inc.title.startswith("job 41 hung: no step for") and inc.action.endswith(
        "restart-job 41 from its checkpoint at step 400 if it does not step again")
    # A checkpoint known by its step alone is one too, as a failed job's restart says it (the
    # hung job's said "no checkpoint yet: from step 0": a review).
    from fleetdeck.console.judgements import restart_point

    by_step = state.jobs["41"].model_copy(update={"last_checkpoint_ts": None})
    assert restart_point(by_step) == "from its checkpoint at step 400"
    out = fleet_summary(state, now)
    by_id = {j["job_id"]: j for j in out["jobs"]}
    assert by_id["41"]["not_stepping_s"] == round(quiet, 1)
    assert by_id["42"]["not_stepping_s"] is None
    # Its last step's ETA is no ETA of a job that does not step (a jobs audit).
    assert by_id["41"]["eta_s"] is None and by_id["42"]["eta_s"] is not None


def test_a_job_stopped_by_a_failed_node_is_that_nodes_incident_not_a_hang():
    session = run(LONG, stepping_for=10, faults={"gpu0002": port_down()})
    state, now = session.state, session.clock()
    row = job_row(state.jobs["41"], state, now)
    assert row.sick.startswith("gpu0002 failed") and "no step for" in row.held_up
    assert not [i for i in incidents(state) if i.kind == "job"]
    assert any(i.kind == "node" and "41" in i.jobs for i in incidents(state))


def test_a_straggler_of_a_hung_job_is_not_told_to_wait_for_its_next_checkpoint():
    """A thermal straggler's job hung (a fault drill: `inject job_hang` on a job with a
    throttled GPU): its node read "it slows job 4103 by 24%: drain it --now right after the
    job's next checkpoint (... at step 265 now)" for as long as the hang lasted, a checkpoint
    that never comes. Its action says the job is hung and drains it so the restart does not
    land there; the same words in the incident and the node's JSON."""
    def action(session):
        out = fleet_summary(session.state, session.clock())
        [node] = [n for n in out["nodes"] if n["id"] == "gpu0002"]
        [inc] = [i for i in out["incidents"] if i["key"] == "node:gpu0002"]
        assert node["verdict"] == "degraded" and inc["action"] == node["action"]
        return node["action"]

    stepping = run(60, stepping_for=60, slowest="gpu0002", faults={"gpu0002": throttled(3)})
    assert action(stepping).startswith("it slows job 41 by 50% (rank 11)")
    session = run(LONG, stepping_for=10, slowest="gpu0002", faults={"gpu0002": throttled(3)})
    quiet = hung(session)
    assert quiet is not None
    said = action(session)
    assert said == (
        f"it slowed job 41 by 50% (rank 11) before the job stopped stepping (hung: no step "
        f"for {quiet:.0f} s): drain it (finish) so restart-job does not place the job on it "
        "again, then check gpu3's cooling (fans, airflow, inlet temperature) once the job has "
        "left it")
    assert "next checkpoint" not in said and "ends in" not in said
    # With the job's other stragglers to drain too (``drain_fellows``), they are named.
    from fleetdeck.console.judgements import slowing, straggler_action

    st = session.state.nodes["gpu0002"]
    slow, job = slowing(st, session.state)
    assert straggler_action(st, slow, job, fellows=["gpu0001"], hung=quiet).startswith(
        f"it slowed job 41 by 50% (rank 11) before the job stopped stepping (hung: no step for "
        f"{quiet:.0f} s): drain it (finish) with gpu0001 so restart-job does not place the job "
        "on them again, then check gpu3's cooling")
    # Drained (finish) as told, its next step is not "once its jobs have finished": the job
    # is hung and never finishes; it leaves when restarted (a review).
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    st.drain = DrainInfo(state=DrainState.DRAINING)
    assert recommended_action(st, session.state) == (
        f"draining: job 41 on it is hung (no step for {quiet:.0f} s) and will not finish: once "
        "it has left (restart-job 41 from its checkpoint at step 400), check gpu3's cooling "
        "(fans, airflow, inlet temperature), then resume")


def test_a_job_with_a_reason_is_not_called_hung():
    assert hung(run(LONG, stepping_for=10, reason="gpu0002 mlx5_ib3 link down")) is None


def started_after_the_hang():
    """A console whose first look finds job 41's status 6 min older than job 42's: the
    scheduler's clock says 41 stopped stepping before this console started."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    stopped = job_status("41", NODES, clock, step=500)
    clock.advance(JOB_HUNG_S + 60)
    for job in (stopped, job_status("42", ["gpu0005"], clock, step=900)):
        publish_job(session.ingest, job, clock)
    fleet.telemetry(session.ingest)
    session.tick()
    return session, stopped


def test_a_job_never_seen_to_step_is_judged_by_the_schedulers_clock():
    """A one-shot status (or a console started after the hang) reads retained statuses: job
    41's, stamped 6 min before job 42's, says where it stopped (a 3 a.m. drive: status never
    said a job was hung). A status younger than the window, or one per checkpoint of a
    scheduler that reports at checkpoints, is not a hang."""
    session, stopped = started_after_the_hang()
    clock = session.clock
    quiet = hung(session)
    assert quiet is not None and round(quiet) == JOB_HUNG_S + 60
    out = fleet_summary(session.state, clock())
    assert {j["job_id"]: j["not_stepping_s"] for j in out["jobs"]} == {
        "41": JOB_HUNG_S + 60, "42": None}
    # A status on a checkpoint may be one of a scheduler that reports only there (every 500
    # steps of 1 s): 6 min is not three of those. One between checkpoints is a hang.
    slow = stopped.model_copy(update={"checkpoint_every": 500, "last_checkpoint_step": 500})
    publish_job(session.ingest, slow, clock)
    session.tick()
    assert hung(session) is None
    publish_job(session.ingest, slow.model_copy(update={"last_checkpoint_step": 0}), clock)
    session.tick()
    assert hung(session) is not None
    # A scheduler that reports no step time says nothing of steps.
    publish_job(session.ingest, stopped.model_copy(update={"step_time_ms": None}), clock)
    session.tick()
    assert hung(session) is None


def test_a_status_restamped_for_a_reason_dates_the_hang_from_its_step():
    """A status sent when the job's reason cleared carries a new ``ts`` and the same step: a
    one-shot status dated the hang from it, 2.5 min late ("no step for 307 s" of a job stopped
    for 7.5 min: a fault audit). ``step_ts`` says when the step moved."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    stepped_ms = int(clock() * 1000)
    clock.advance(150)
    restamped = job_status("41", NODES, clock, step=500).model_copy(
        update={"step_ts": stepped_ms})
    clock.advance(JOB_HUNG_S)
    for job in (restamped, job_status("42", ["gpu0005"], clock, step=900)):
        publish_job(session.ingest, job, clock)
    fleet.telemetry(session.ingest)
    session.tick()
    quiet = hung(session)
    assert quiet is not None and round(quiet) == JOB_HUNG_S + 150


def test_the_simulator_says_when_a_step_moved_in_the_jobs_run():
    """``step_ts`` is the step's time in the current run: a job out of a long wait stands at
    the step it waited at, and read hung at its start when the wait was dated as its step (a
    review)."""
    from fleetdeck.agents.sim.scheduler import Scheduler
    from tests.sim.harness import Harness, job

    # 16 nodes: "big" waits for "train" (12 of them, 40 steps) to end.
    h = Harness(actions=[job("train", nodes=12, steps=40, step_time=1.0),
                         job("big", nodes=16, step_time=1.0, at=1)])
    sched: Scheduler = h.world.scheduler
    ran = None
    h.run(3)
    for _ in range(60):
        h.run(1)
        st = sched.status(h.job("big"), h.world.t)
        if st.state.value == "R":
            ran = st
            break
        assert st.step_ts is not None and st.step_ts <= st.ts
    assert ran is not None, "big never started"
    assert ran.step_ts is not None and ran.ts - ran.step_ts < 2000, ran  # not the wait's start


def test_a_job_just_out_of_a_long_wait_is_not_hung():
    """A status whose ``step_ts`` is older than its run (a scheduler that stamps the step,
    not the run) is dated from the run's start."""
    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    waited_ms = int(clock() * 1000)
    clock.advance(JOB_HUNG_S + 100)
    started = job_status("41", NODES, clock, step=0).model_copy(
        update={"step_ts": waited_ms, "started_ts": int(clock() * 1000)})
    for job in (started, job_status("42", ["gpu0005"], clock, step=900)):
        publish_job(session.ingest, job, clock)
    fleet.telemetry(session.ingest)
    session.tick()
    assert hung(session) is None


def test_a_quiet_scheduler_is_not_every_job_hung():
    """Every job's step stopped because nothing from the scheduler arrives (a bridge with no
    presence, a hung poll loop): the jobs are not called hung (a review: every job got an
    error incident saying to restart it)."""
    assert hung(run(LONG, stepping_for=10, other=False)) is None
    assert hung(run(LONG, stepping_for=0, other=False)) is None  # by its clock neither


def test_a_requeued_job_running_again_is_judged_afresh():
    """Requeued (RQ, PD), then running again from its checkpoint: it read "hung: no step for
    121 s" the moment it ran (a review)."""
    session = run(30, stepping_for=30)
    session = run(120, stepping_for=120, session=session, state=JobState.PD)
    session = run(5, stepping_for=0, session=session)  # R again, loading its checkpoint
    assert hung(session) is None
    session = run(200, stepping_for=-1, session=session)
    assert hung(session) is None  # 3 min: still within the window of its new run
    # Steps (this helper's step jumps 205 at once: the window is 3 such advances), then
    # stops for good.
    session = run(10, stepping_for=10, session=session)
    session = run(700, stepping_for=-1, session=session)
    assert hung(session) is not None


def test_a_scheduler_that_reports_at_checkpoints_is_waited_for():
    """A status every 200 steps of 1 s (a bridge that polls, the offline simulator's
    recordings): 5 min without a new one is its cadence, not a hang; 3 cadences are."""
    session = run(700, stepping_for=700, every=200)
    assert hung(session) is None
    session = run(700, stepping_for=0, session=session)
    assert hung(session) is not None


def test_silence_while_the_console_was_cut_off_is_not_the_jobs():
    session = run(20, stepping_for=20)
    state, clock = session.state, session.clock
    state.lose_sight(clock(), "broker connection lost")
    clock.advance(JOB_HUNG_S * 2)
    assert hung(session) is None  # blind now
    state.regain_sight(clock())
    clock.advance(5)
    assert hung(session) is None  # the agents' grace
    session = run(60, stepping_for=-1, other=False, session=session)
    # The scheduler not heard since: the window counts from the end of the blindness.
    assert hung(session) is None
    session = run(LONG, stepping_for=-1, other=False, session=session)
    assert hung(session) is None  # nor after it: a quiet scheduler is not every job hung
    session = run(5, stepping_for=-1, session=session)
    assert hung(session) is not None  # heard again, the scheduler dates 41's last step


def test_a_job_hung_across_the_consoles_outage_is_hung_by_the_schedulers_clock():
    """Job 41 stopped stepping 2.5 min before a 6 s broker restart: a one-shot `status`
    called it hung 5 min after its last step, the console 2.5 min later (its window began
    again after the outage), so the two disagreed for minutes (a fault audit). The scheduler,
    heard after the outage, stamps 41's step before it: nothing was missed."""
    session = run(int(JOB_HUNG_S) // 2, stepping_for=10)
    state, clock = session.state, session.clock
    state.lose_sight(clock(), "broker connection lost")
    clock.advance(6)
    state.regain_sight(clock())
    session = run(int(JOB_HUNG_S) // 2 + 40, stepping_for=-1, session=session)
    quiet = hung(session)
    assert quiet is not None and quiet > JOB_HUNG_S, quiet
    assert quiet < JOB_HUNG_S + 60  # dated from its last step, not the outage
    # A job that stepped until the outage is not hung just after it, scheduler heard or not.
    session = run(20, stepping_for=20)
    session.state.lose_sight(session.clock(), "broker connection lost")
    session.clock.advance(6)
    session.state.regain_sight(session.clock())
    session = run(60, stepping_for=-1, session=session)
    assert hung(session) is None


SCENARIO = """\
name = "hang"
description = "job 4101 hangs at 20 s (no node fails) and steps again at 420 s"
[fleet]
nodes = 4
[[job]]
name = "llama"
nodes = 2
step_time = "1s"
checkpoint_every = 5
[[fault]]
at = "20s"
fault = "job_hang"
job = "4101"
duration = "400s"
"""


def test_the_simulators_job_hang_reads_hung_then_stepping_again(tmp_path):
    """`inject job_hang job=4101` (here a scenario, recorded in virtual time, its job status
    written at each checkpoint, the scheduler's presence every 30 s): the job stays R with no
    reason while its step stops; the console calls it hung once the step has not moved for
    5 min, and not once it steps again."""
    from fleetdeck.console.replay import run_headless
    from tests.conftest import run_cli

    scenario = tmp_path / "hang.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "hang.jsonl.gz"
    res = run_cli("sim", "--scenario", str(scenario), "--out", str(out), "--duration", "500s")
    assert res.returncode == 0, res.stderr
    for until, is_hung in ((200.0, False), (400.0, True), (490.0, False)):
        state = run_headless(out, until=until).session.state
        job = state.jobs["4101"]
        assert job.state.value == "R" and not job.reason.strip(), job
        quiet = not_stepping(job, state, state.judged_at)
        assert (quiet is not None) is is_hung, (until, quiet)
        keys = {i.key for i in incidents(state)}
        assert ("job:4101" in keys) is is_hung, keys


def test_the_overviews_top_problems_name_a_hung_job():
    """The overview said "Top problems none: every node reports healthy" while a job was hung
    (a 3 a.m. drive)."""
    from fleetdeck.console.rows import top_problems

    session = run(LONG, stepping_for=10)
    problems, nodes = top_problems(session.state, 6)
    assert nodes == 0
    (p,) = problems
    assert (p.node, p.state, p.verdict.value) == ("job 41", "hung", "failed")
    assert p.text.startswith("no step for ")


def test_an_operators_restart_of_a_hung_job_is_booked_to_the_hang_and_its_held_time():
    """Restarting a hung job from the jobs view was booked "operator, 0.25 GPU-h" for a job of
    64 GPUs held 2 min with no checkpoint (a 3 a.m. drive): it is the hang's ("software"),
    and with no checkpoint everything since the run started is lost. A restart of a job that
    steps stays the operator's."""
    def restart(session):
        publish_job(session.ingest, job_status("41", NODES, session.clock, step=999,
                                               state=JobState.RQ, requeues=1).model_copy(
            update={"reason": "restart by root"}), session.clock)
        for _ in range(15):
            session.clock.advance(1.0)
            session.tick()
        (it,) = session.interruptions.total
        return it

    it = restart(run(LONG, stepping_for=10))
    assert it.cause == "software", it
    it = restart(run(60, stepping_for=60))
    assert it.cause == "operator", it

    from fleetdeck.console.commands import since_checkpoint_s

    clock = Clock()
    fresh = job_status("41", NODES, clock, step=67, started_offset_s=600).model_copy(
        update={"last_checkpoint_step": 0, "last_checkpoint_ts": None})
    assert since_checkpoint_s(fresh, clock()) == 600.0  # held 10 min, not 67 steps' worth


def test_a_hang_and_its_end_are_in_the_timeline():
    """A 100 s hang that cleared by itself left nothing behind (a 3 a.m. drive)."""
    session = run(LONG, stepping_for=10)
    session = run(5, stepping_for=5, session=session)  # steps again
    lines = [(ln.kind, ln.severity, ln.text) for ln in session.log.lines() if ln.kind == "job"]
    assert len(lines) == 2, lines
    assert lines[0][:2] == ("job", "error") and lines[0][2].startswith("job 41 hung: no step")
    assert lines[1][2].startswith("job 41 steps again (step ")


def test_the_restart_of_a_job_hung_before_this_console_started_is_the_hangs():
    """A console started after the hang (it never saw the job step) booked its restart to
    the operator (a 3 a.m. drive)."""
    session, _stopped = started_after_the_hang()
    clock = session.clock
    assert hung(session) is not None
    publish_job(session.ingest, job_status("41", NODES, clock, step=400, state=JobState.RQ,
                                           requeues=1).model_copy(
        update={"reason": "restart by root"}), clock)
    for _ in range(15):
        clock.advance(1.0)
        session.tick()
    (it,) = session.interruptions.total
    assert it.cause == "software", it


def test_the_restart_dialog_says_the_job_is_hung_and_offers_it_as_the_reason():
    """The restart dialog asked "restart?" of a hung job without saying it was hung, and asked
    no reason, so the audit's ``why`` stayed empty (left open by the hung-job work)."""
    from fleetdeck.console.commands import job_blast_radius
    from fleetdeck.console.judgements import restart_reason_hint

    session = run(LONG, stepping_for=10)
    state, now = session.state, session.clock()
    quiet = hung(session)
    radius = job_blast_radius(state, "41", now)
    assert [n for n in radius.notes if n.startswith(f"job 41 is hung: no step for {quiet:.0f} s")]
    assert restart_reason_hint(state.jobs["41"], state, now) == f"hung: no step for {quiet:.0f} s"
    # A stepping job is not called hung there, and has nothing to offer.
    assert not [n for n in job_blast_radius(state, "42", now).notes if "hung" in n]
    assert restart_reason_hint(state.jobs["42"], state, now) == ""
    # A job a failed node holds up offers that node.
    session = run(30, stepping_for=30, faults={"gpu0002": port_down()})
    state, now = session.state, session.clock()
    assert restart_reason_hint(state.jobs["41"], state, now).startswith("gpu0002 failed: N1 ")


def test_the_status_text_lists_a_hung_job_among_the_jobs_held_up():
    """The incident said "job 4105 hung: no step for 310 s", and --json had not_stepping_s,
    but the text's "jobs held up" listed only jobs with a sick node or a straggler (an SRE
    drill)."""
    import io

    from rich.console import Console

    from fleetdeck.console.cli.status import render_held_up_jobs

    out = io.StringIO()
    jobs = [{"job_id": "4105", "name": "llama", "sick_nodes": [], "straggler": None,
             "not_stepping_s": 310.4},
            {"job_id": "4106", "name": "gpt", "sick_nodes": [], "straggler": None,
             "not_stepping_s": None}]
    render_held_up_jobs(jobs, Console(file=out, width=120))
    assert out.getvalue().splitlines() == ["jobs held up (1 of 2):",
                                           "  4105 llama: hung: no step for 310 s"]


def test_a_step_standing_still_is_said_before_the_job_is_hung():
    """A job that stopped read healthy for the 5 minutes before it was hung (a 3 a.m. drive):
    after a minute its row says so, muted and not counted as held up; at the hang window it is
    hung, and the quiet line gives way to it."""
    from fleetdeck.console.judgements import step_quiet

    session = run(20, stepping_for=20)
    session = run(30, stepping_for=-1, session=session)
    job, state, now = session.state.jobs["41"], session.state, session.clock()
    assert step_quiet(job, state, now) is None  # half a minute: nothing yet
    session = run(60, stepping_for=-1, session=session)
    now = session.clock()
    quiet = step_quiet(job, state, now)
    assert quiet is not None and 85 <= quiet <= 95
    row = job_row(job, state, now)
    assert row.quiet.startswith("no step for ")
    # When it turns into a hang first: a narrow HELD UP column cuts the step, not the time.
    assert re.search(r"; hung at (\d\d:\d\d:\d\d) if still none \(step \d+ at (\d\d:\d\d:\d\d)\)$",
                     row.quiet), row.quiet
    by, at = re.findall(r"\d\d:\d\d:\d\d", row.quiet)
    assert _seconds(by) - _seconds(at) == 300  # the hang window, from its last step
    assert not row.stalled and not row.held_up and not row.sick
    summary = fleet_summary(state, now)
    (j,) = [j for j in summary["jobs"] if j["job_id"] == "41"]
    assert j["not_stepping_s"] is None and 85 <= j["step_quiet_s"] <= 95
    # The time the row says, for a script: it had the seconds only.
    from fleetdeck.console.judgements import utc_hms

    assert utc_hms(j["hung_at"]) == by, (j["hung_at"], row.quiet)
    session = run(LONG, stepping_for=-1, session=session)
    now = session.clock()
    assert hung(session) is not None and step_quiet(job, state, now) is None
    row = job_row(job, state, now)
    assert row.stalled and not row.quiet
    # A job that steps says nothing.
    (other,) = [j for j in fleet_summary(state, now)["jobs"] if j["job_id"] == "42"]
    assert other["step_quiet_s"] is None and other["hung_at"] is None


def _seconds(hms: str) -> int:
    h, m, sec = map(int, hms.split(":"))
    return h * 3600 + m * 60 + sec


def test_a_one_shot_status_says_a_quiet_step_by_the_schedulers_clock():
    """`status --json` never gave step_quiet_s: a one-shot watch never sees the job step (a
    drill). As for the hang, its retained status against the scheduler's newest word says it."""
    from fleetdeck.console.judgements import step_quiet

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    SynthFleet(8, clock).birth(session.ingest)
    clock.advance(1.0)
    # Retained, as a one-shot status gets them: 41 last stepped 90 s before 42's status.
    publish_job(session.ingest, job_status("41", NODES, clock, step=13).model_copy(
        update={"ts": int((clock() - 90) * 1000)}), clock)
    publish_job(session.ingest, job_status("42", ["gpu0005"], clock, step=100), clock)
    session.tick()
    state = session.state
    quiet = step_quiet(state.jobs["41"], state, clock())
    assert quiet is not None and 89 <= quiet <= 91
    assert step_quiet(state.jobs["42"], state, clock()) is None
    assert not_stepping(state.jobs["41"], state, clock()) is None


def test_a_step_made_while_the_console_was_cut_off_is_dated_by_the_schedulers_clock():
    """Job 41 stepped on 2 min into a 10 min outage of this console, then stopped. Heard
    again, its retained status is 8 min old by the scheduler's clock: hung for as long as a
    one-shot `status` of the same moment says, not 'no step for 30 s' counted from when this
    console heard the status again (a review)."""
    session = run(20, stepping_for=20)
    state, clock, ingest = session.state, session.clock, session.ingest
    state.lose_sight(clock(), "broker connection lost")
    clock.advance(120)
    last_word = job_status("41", NODES, clock, step=500)  # published while this console was off
    clock.advance(480)
    state.regain_sight(clock())
    publish_job(ingest, last_word, clock)  # the broker's retained copy, heard on reconnect
    session = run(30, stepping_for=-1, session=session)
    quiet = hung(session)
    one_shot = run(1, stepping_for=-1)
    publish_job(one_shot.ingest, last_word, one_shot.clock)
    publish_job(one_shot.ingest, job_status("42", ["gpu0005"], clock, step=900), one_shot.clock)
    one_shot.tick()
    fresh = not_stepping(one_shot.state.jobs["41"], one_shot.state, one_shot.clock())
    assert fresh is not None and quiet is not None
    assert abs(quiet - fresh) < 2, (quiet, fresh)
    assert quiet > 480


def test_a_step_standing_still_has_no_eta_in_the_jobs_row_nor_in_json():
    """The jobs view read "ETA 11m09s" beside "no step for 316 s" (a fault audit): the ETA is
    its last step's pace, and a job that does not step ends at no known time. Not only once it
    is hung: the row and `status --json` say it alike (``shown_eta_s``)."""
    session = run(20, stepping_for=20)
    session = run(90, stepping_for=-1, session=session)
    state, now = session.state, session.clock()
    row = job_row(state.jobs["41"], state, now)
    assert row.quiet and not row.stalled  # standing still, not hung yet
    assert row.eta == "-"
    by_id = {j["job_id"]: j for j in fleet_summary(state, now)["jobs"]}
    assert by_id["41"]["step_quiet_s"] is not None and by_id["41"]["eta_s"] is None
    # A job that steps keeps its ETA, in both.
    assert job_row(state.jobs["42"], state, now).eta == "8m20s"
    assert by_id["42"]["eta_s"] == 500.0


def test_no_eta_while_nothing_says_whether_the_job_steps():
    """A job paused by a reason (a link down), a scheduler gone, or this console cut off from
    its broker: its ETA is its last word, frozen. A job paused on "gpu0002 mlx5_ib3 link down"
    read "ETA 8m20s" for 200 s (a review)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.messages import SchedulerStatus
    from fleetdeck.protocol.topics import Kind, topic_for

    def eta(session) -> tuple[str, object]:
        state, now = session.state, session.clock()
        by_id = {j["job_id"]: j for j in fleet_summary(state, now)["jobs"]}
        return job_row(state.jobs["41"], state, now).eta, by_id["41"]["eta_s"]

    assert eta(run(5, stepping_for=5)) == ("8m20s", 500.0)
    paused = run(5, stepping_for=5, session=run(5, stepping_for=5),
                 reason="gpu0002 mlx5_ib3 link down")
    assert eta(paused) == ("-", None)
    # The scheduler gone (its will believed).
    session = run(5, stepping_for=5)
    clock = session.clock
    session.ingest.handle(topic_for(CLUSTER, Kind.SCHED_STATUS), codec.encode(SchedulerStatus(
        online=False, started=int(clock() * 1000) - 60_000, name="slurm-bridge",
        ts=int(clock() * 1000))), clock())
    clock.advance(5)
    session.tick()
    assert eta(session) == ("-", None)
    # This console cut off from its broker.
    session = run(5, stepping_for=5)
    session.state.lose_sight(session.clock(), "broker connection lost")
    assert eta(session) == ("-", None)


def test_every_hung_job_is_counted_however_many_rows_fit():
    """The overview's top problems heading counted the hung jobs on the rows that fit (below
    40 terminal rows, three): two hung jobs under a limit of one read "1 job hung" (a review).
    ``hung_jobs`` is every job judged hung, the rows' source and the heading's count."""
    from fleetdeck.console.rows import hung_jobs, top_problems, top_problems_said

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(session.ingest)
    for t in range(LONG):
        clock.advance(1.0)
        for job, nodes in (("41", NODES), ("43", ["gpu0006"])):
            if t <= 10:  # both stop stepping after 10 s
                publish_job(session.ingest, job_status(job, nodes, clock, step=100 + t), clock)
        publish_job(session.ingest, job_status("42", ["gpu0005"], clock, step=100 + t), clock)
        fleet.telemetry(session.ingest)
        session.tick()
    hung_now = sorted(job.job_id for job, _quiet in hung_jobs(session.state))
    assert hung_now == ["41", "43"]
    problems, nodes = top_problems(session.state, 1)
    assert [p.node for p in problems] == ["job 41"]
    assert top_problems_said(session.state, problems, nodes, []) == (
        "2 jobs hung, every node healthy")


def test_a_hung_job_the_scheduler_gives_a_reason_for_does_not_step_again():
    """A hung job whose node then died: the scheduler only added a reason (it says why the job
    waits, so it is no longer called hung) and its step never moved; the timeline read "job
    4105 steps again (step 277), 1285 s after its step stopped" (a drive). It steps again
    only once its step moves, and the hang is not said twice meanwhile."""
    session = run(LONG, stepping_for=10)
    assert hung(session) is not None
    clock, ingest = session.clock, session.ingest
    # The hung job's figures as they stood (step 110), now with the scheduler's reason.
    stalled = job_status("41", NODES, clock, step=110).model_copy(
        update={"reason": "NodeFail gpu0002"})
    for _ in range(30):
        clock.advance(1.0)
        publish_job(ingest, stalled, clock)
        publish_job(ingest, job_status("42", ["gpu0005"], clock, step=999), clock)
        session.tick()
    assert hung(session) is None  # a reason: not called hung
    texts = [ln.text for ln in session.log.lines() if ln.kind == "job"]
    assert not [t for t in texts if "steps again" in t], texts
    # The reason gone, the step still at 110: hung as before, not a second "hung" line.
    for _ in range(5):
        clock.advance(1.0)
        publish_job(ingest, stalled.model_copy(update={"reason": ""}), clock)
        publish_job(ingest, job_status("42", ["gpu0005"], clock, step=999), clock)
        session.tick()
    assert hung(session) is not None
    texts = [ln.text for ln in session.log.lines() if ln.kind == "job"]
    assert len([t for t in texts if t.startswith("job 41 hung")]) == 1, texts
    # Once it steps it steps again.
    session = run(5, stepping_for=5, session=session)
    texts = [ln.text for ln in session.log.lines() if ln.kind == "job"]
    assert [t for t in texts if t.startswith("job 41 steps again (step ")], texts
