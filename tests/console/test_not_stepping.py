"""A running job that stopped stepping with none of its nodes failing (a collective that never
completes: Slurm still says R) is hung: its figures froze and nothing said so. The console
says it on the job (jobs view, overview, ``status --json``'s ``not_stepping_s``) and as an
incident, once its step has not advanced for longer than it takes to step."""

from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import JOB_ALIVE_S, not_stepping
from fleetdeck.console.rows import job_row, jobs_to_act_on_first, sorted_jobs
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, port_down, publish_job

NODES = ["gpu0001", "gpu0002"]


def run(seconds: int, *, stepping_for: int, faults=None, reason: str = ""):
    """A fleet of 8 with jobs 41 (on NODES) and 42 (gpu0005); 41 steps for ``stepping_for``
    seconds and then stops; 42 steps throughout."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock)
    fleet.birth(ingest)
    for t in range(seconds):
        clock.advance(1.0)
        if t <= stepping_for:
            publish_job(ingest, job_status("41", NODES, clock, step=100 + t).model_copy(
                update={"reason": reason}), clock)
        publish_job(ingest, job_status("42", ["gpu0005"], clock, step=100 + t), clock)
        fleet.telemetry(ingest, faults=faults or {})
        session.tick()
    return session


def test_a_job_that_steps_is_not_called_hung():
    session = run(60, stepping_for=60)
    state = session.state
    assert all(not_stepping(j, state, session.clock()) is None for j in state.jobs.values())
    assert not [i for i in incidents(state) if i.kind == "job"]


def test_a_job_whose_step_stopped_is_hung_in_every_view_and_in_json():
    session = run(60, stepping_for=10)
    state, now = session.state, session.clock()
    quiet = not_stepping(state.jobs["41"], state, now)
    assert quiet is not None and quiet > JOB_ALIVE_S
    assert not_stepping(state.jobs["42"], state, now) is None
    rows = jobs_to_act_on_first(job_row(j, state, now) for j in sorted_jobs(state))
    assert rows[0].job_id == "41"  # first, above a job that steps
    assert rows[0].stalled.startswith(f"no step for {quiet:.0f} s (step 110 at ")
    assert rows[0].held_up == rows[0].stalled
    (inc,) = [i for i in incidents(state) if i.kind == "job"]
    assert inc.key == "job:41" and inc.severity == "error" and inc.jobs == ["41"]
    assert inc.title.startswith("job 41 hung: no step for") and "restart-job 41" in inc.action
    out = fleet_summary(state, now)
    by_id = {j["job_id"]: j for j in out["jobs"]}
    assert by_id["41"]["not_stepping_s"] == round(quiet, 1)
    assert by_id["42"]["not_stepping_s"] is None


def test_a_job_stopped_by_a_failed_node_is_that_nodes_incident_not_a_hang():
    session = run(60, stepping_for=10, faults={"gpu0002": port_down()})
    state, now = session.state, session.clock()
    row = job_row(state.jobs["41"], state, now)
    assert row.sick.startswith("gpu0002 failed") and "no step for" in row.held_up
    assert not [i for i in incidents(state) if i.kind == "job"]
    assert any(i.kind == "node" and "41" in i.jobs for i in incidents(state))


def test_a_job_with_a_reason_or_never_seen_to_step_is_not_called_hung():
    state = run(60, stepping_for=10, reason="gpu0002 mlx5_ib3 link down").state
    assert not_stepping(state.jobs["41"], state, state.judged_at) is None
    # Its one status says where it is, not how often it moves (a retained status on connect).
    state = run(120, stepping_for=0).state
    assert not_stepping(state.jobs["41"], state, state.judged_at) is None


def test_a_scheduler_that_reports_at_checkpoints_is_waited_for():
    """A status every 20 steps of 1 s (a bridge that polls, the offline simulator's
    recordings): 25 s without a new one is the cadence, not a hang; 3 cadences are."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(ingest)
    quiet = []
    for t in range(200):
        clock.advance(1.0)
        if t <= 100 and t % 20 == 0:
            publish_job(ingest, job_status("41", NODES, clock, step=100 + t), clock)
        fleet.telemetry(ingest)
        session.tick()
        quiet.append(not_stepping(session.state.jobs["41"], session.state, clock()))
    assert all(q is None for q in quiet[:100 + 60])
    assert quiet[-1] is not None and quiet[-1] > 60


def test_silence_while_the_console_was_cut_off_is_not_the_jobs():
    session = run(20, stepping_for=20)
    state, clock = session.state, session.clock
    state.lose_sight(clock(), "broker connection lost")
    clock.advance(120)
    assert not_stepping(state.jobs["41"], state, clock()) is None  # blind now
    state.regain_sight(clock())
    clock.advance(5)
    assert not_stepping(state.jobs["41"], state, clock()) is None  # the agents' grace


SCENARIO = """\
name = "hang"
description = "job 4101 hangs at 20 s (no node fails) and steps again at 80 s"
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
duration = "60s"
"""


def test_the_simulators_job_hang_reads_hung_then_stepping_again(tmp_path):
    """`inject job_hang job=4101` (here a scenario, recorded in virtual time, its job status
    written at each checkpoint): the job stays R with no reason while its step stops; the
    console calls it hung once the step has not moved for 30 s, and not once it steps again."""
    from fleetdeck.console.replay import run_headless
    from tests.conftest import run_cli

    scenario = tmp_path / "hang.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "hang.jsonl.gz"
    res = run_cli("sim", "--scenario", str(scenario), "--out", str(out), "--duration", "100s")
    assert res.returncode == 0, res.stderr
    for until, hung in ((40.0, False), (75.0, True), (95.0, False)):
        state = run_headless(out, until=until).session.state
        job = state.jobs["4101"]
        assert job.state.value == "R" and not job.reason.strip(), job
        quiet = not_stepping(job, state, state.judged_at)
        assert (quiet is not None) is hung, (until, quiet)
        kinds = {i.key: i for i in incidents(state)}
        assert ("job:4101" in kinds) is hung, kinds
