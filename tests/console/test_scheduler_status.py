"""The scheduler's retained birth and Last Will (``sched/status``): a console says when the job
states it shows are a dead scheduler's last word (docs/protocol.md, "Scheduler status")."""

import json

from fleetdeck.console.commands import job_blast_radius
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.rows import job_row
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState, SchedulerStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, port_down, publish_job

TOPIC = topic_for(CLUSTER, Kind.SCHED_STATUS)


def sched(online: bool, started: float, clock: Clock, ts: float | None = None) -> bytes:
    return codec.encode(SchedulerStatus(online=online, started=int(started * 1000),
                                        name="slurm-bridge",
                                        ts=int((clock() if ts is None else ts) * 1000)))


def world() -> tuple[Clock, Ingest, ConsoleSession]:
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(ingest)
    fleet.telemetry(ingest)
    publish_job(ingest, job_status("41", fleet.names[:2], clock), clock)
    publish_job(ingest, job_status("42", fleet.names[2:], clock, state=JobState.CD), clock)
    session.tick()
    return clock, ingest, session


def test_a_scheduler_never_heard_is_unknown_not_gone():
    clock, _ingest, session = world()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"] is None
    assert not [i for i in out["incidents"] if i["kind"] == "scheduler"]


def test_its_will_makes_the_running_jobs_as_of_its_death():
    clock, ingest, session = world()
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["online"] is True and out["scheduler"]["name"] == "slurm-bridge"
    assert "scheduler" not in {i["kind"] for i in out["incidents"]}
    clock.advance(30.0)
    ingest.handle(TOPIC, sched(False, started, clock), clock())  # the broker sends its will
    will_at = clock()
    session.tick()
    # A will this young may be a shutting-down broker's: not believed for WILL_BURST_S.
    young = fleet_summary(session.state, clock())
    assert young["scheduler"]["online"] is False and young["scheduler"]["text"] == ""
    assert "scheduler" not in {i["kind"] for i in young["incidents"]}
    # … and the jobs view and restart-job's radius agree with the incident (not said).
    assert "scheduler offline" not in job_row(session.state.jobs["41"], session.state,
                                              clock()).held_up
    assert not any("is offline" in n for n in job_blast_radius(session.state, "41",
                                                                 clock()).notes)
    clock.advance(3.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    gone = out["scheduler"]
    assert gone["online"] is False and gone["since"] == will_at
    assert gone["jobs_running"] == ["41"]  # 42 is done: nothing to say of it
    assert gone["jobs_as_of"] == started  # the last job status it left
    (inc,) = [i for i in out["incidents"] if i["kind"] == "scheduler"]
    assert inc["severity"] == "error" and inc["jobs"] == ["41"]
    assert "scheduler slurm-bridge offline (heard " in inc["title"]
    row = job_row(session.state.jobs["41"], session.state, clock())
    assert row.held_up.startswith("scheduler offline: as of ")
    assert "scheduler offline" not in job_row(session.state.jobs["42"], session.state,
                                              clock()).held_up
    radius = job_blast_radius(session.state, "41", clock())
    assert any("is offline: nothing answers a restart" in n for n in radius.notes)


def scheduler_dies(job_state: JobState, before=None, faults=None) -> ConsoleSession:
    """Four nodes (``faults`` on them), job 41 on two in ``job_state``; the scheduler, online,
    dies 30 s in, and is judged 10 s later. ``before``: a check of the session that holds just
    before it dies."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(4, clock)
    fleet.birth(ingest)
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    publish_job(ingest, job_status("41", fleet.names[:2], clock, state=job_state), clock)
    for t in range(40):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults or {})
        if t == 30:
            ingest.handle(TOPIC, sched(False, started, clock), clock())
        session.tick()
        if t == 29 and before is not None:
            assert before(session)
    return session


def test_the_overview_s_top_problems_say_the_scheduler_is_gone_over_a_healthy_fleet():
    """The simulator's scheduler died with every node healthy: `status` led with "scheduler
    … offline", the console's overview said "none: every node reports healthy" (a fault
    audit). Its top problems say it first, as the incidents do."""
    from fleetdeck.console.rows import top_problems, top_problems_heading

    session = scheduler_dies(JobState.R, lambda s: top_problems(s.state) == ([], 0))
    problems, nodes = top_problems(session.state)
    assert nodes == 0
    (p,) = problems
    assert (p.node, p.verdict.value, p.state) == ("scheduler", "failed", "sched")
    assert p.text.startswith("scheduler slurm-bridge offline (heard "), p.text
    assert "job(s) read running" in p.text and "(41)" in p.text
    assert top_problems_heading(nodes, 0, 0, sched=True) == (
        "scheduler offline, every node healthy")
    assert top_problems_heading(2, 1, 0, sched=True) == (
        "scheduler offline, 2 nodes need attention, 1 switch")
    assert top_problems_heading(2, 1, 0) == "2 nodes need attention, 1 switch"


def test_a_late_will_of_an_older_process_loses_to_a_newer_birth():
    clock, ingest, session = world()
    ingest.handle(TOPIC, sched(True, clock() + 5, clock), clock())
    session.tick()
    ingest.handle(TOPIC, sched(False, clock(), clock), clock())  # the old process's will
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is True


def test_a_dead_duplicate_scheduler_does_not_outrank_the_real_one():
    """A second simulator on the same cluster (started later) fought the real one for its
    client id and exited; the broker restarted; the real scheduler was SIGKILLed. `status`,
    reading the retained will, said "scheduler sim offline"; the console, ranking by process
    start, kept the dead duplicate's last birth ("the newer process always wins"): no incident
    (a newcomer's run). The newest word of a live process counts; a will or goodbye only from
    the process counted (docs/protocol.md, "Scheduler status")."""
    clock, ingest, session = world()
    real, duplicate = clock() - 600, clock() - 60
    ingest.handle(TOPIC, sched(True, real, clock), clock())
    session.tick()
    for _ in range(3):  # each connect takes the other's session, and says its birth (the
        # loser's will, which mosquitto sends on every takeover: test_a_fight_of_two_…)
        clock.advance(1.0)
        ingest.handle(TOPIC, sched(True, duplicate, clock), clock())
        session.tick()
        clock.advance(1.0)
        ingest.handle(TOPIC, sched(True, real, clock), clock())
        session.tick()
    clock.advance(1.0)
    ingest.handle(TOPIC, sched(True, duplicate, clock), clock())  # its last word
    session.tick()
    # The duplicate is killed as the broker restarts with nothing retained: its will goes
    # with the broker, unheard (not with a takeover: mosquitto sends the loser's will on every
    # one). The real one says its birth again.
    clock.advance(20.0)
    session.state.lose_sight(clock())
    clock.advance(5.0)
    session.state.regain_sight(clock())
    ingest.handle(TOPIC, sched(True, real, clock), clock())
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is True
    # A goodbye of the duplicate, were it heard late, is not the real one's.
    clock.advance(30.0)
    ingest.handle(TOPIC, sched(False, duplicate, clock), clock())
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is True
    clock.advance(30.0)
    ingest.handle(TOPIC, sched(False, real, clock), clock())  # SIGKILL: its will
    clock.advance(5.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["online"] is False and out["scheduler"]["jobs_running"] == ["41"]
    (inc,) = [i for i in out["incidents"] if i["kind"] == "scheduler"]
    # What `status` says, from the retained will alone: the same incident.
    fclock, fresh_ingest, fresh = world()
    fresh_ingest.handle(TOPIC, sched(False, real, fclock), fclock())
    fclock.advance(5.0)
    fresh.tick()
    alone = fleet_summary(fresh.state, fclock())
    (said,) = [i for i in alone["incidents"] if i["kind"] == "scheduler"]
    assert (said["severity"], said["jobs"]) == (inc["severity"], inc["jobs"]) == ("error", ["41"])


def test_a_goodbye_of_a_duplicate_scheduler_is_not_the_live_one_s():
    """A duplicate started later says goodbye and exits: the console counted it, so it read
    offline, and ranking by start it stayed so under the real scheduler's births (an incident
    while the scheduler ran). A live process's word outranks one gone."""
    clock, ingest, session = world()
    real, duplicate = clock() - 600, clock() - 60
    ingest.handle(TOPIC, sched(True, real, clock), clock())
    ingest.handle(TOPIC, sched(True, duplicate, clock), clock())
    session.tick()
    clock.advance(1.0)
    ingest.handle(TOPIC, sched(False, duplicate, clock), clock())  # its clean stop
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is False
    clock.advance(1.0)
    ingest.handle(TOPIC, sched(True, real, clock), clock())  # the real one's reconnect
    clock.advance(10.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["online"] is True
    assert "scheduler" not in {i["kind"] for i in out["incidents"]}


def scheduler_lived_then_died(clock: Clock, ingest: Ingest, session: ConsoleSession,
                              beats: int) -> float:
    """A scheduler process heard ``beats`` times 30 s apart (its birth, then its heartbeat),
    then its will, judged 5 s later: returns its start time."""
    started = clock()
    will = sched(False, started, clock)  # set at its connect, as a Last Will is
    for _ in range(beats):
        ingest.handle(TOPIC, sched(True, started, clock), clock())
        session.tick()
        clock.advance(30.0)
    ingest.handle(TOPIC, will, clock())
    clock.advance(5.0)
    session.tick()
    return started


def scheduler_incidents(out: dict) -> list[dict]:
    return [i for i in out["incidents"] if i["kind"] == "scheduler"]


def test_an_old_birth_a_restored_broker_replays_does_not_bring_a_dead_scheduler_back():
    """P1 ran, P2 replaced it and was SIGKILLed; the broker restarted from an older save of its
    retained messages and replayed P1's last birth: the console, counting any live process's
    birth, said online with no incident, for ever (a review). A birth older than the
    scheduler's newest word by more than SCHED_REPLAY_S is a replay."""
    clock, ingest, session = world()
    p1 = clock() - 600
    ingest.handle(TOPIC, sched(True, p1, clock), clock())
    session.tick()
    saved = sched(True, p1, clock)  # the retained birth in the broker's older save
    clock.advance(1.0)
    scheduler_lived_then_died(clock, ingest, session, beats=5)
    assert len(scheduler_incidents(fleet_summary(session.state, clock()))) == 1
    for _restart in range(2):  # once, and again: the save still holds it
        session.state.lose_sight(clock())
        clock.advance(5.0)
        session.state.regain_sight(clock())
        ingest.handle(TOPIC, saved, clock())
        clock.advance(10.0)
        session.tick()
        out = fleet_summary(session.state, clock())
        assert out["scheduler"]["online"] is False and out["scheduler"]["jobs_running"] == ["41"]
        (inc,) = scheduler_incidents(out)
        assert inc["severity"] == "error"


def test_a_new_scheduler_whose_clock_lags_counts_once_it_speaks_again():
    """A bridge's fail-over to a host whose clock is 5 min behind, its birth heard as this
    console reconnects: it reads as a replay (SCHED_REPLAY_S), its heartbeat, ``ts`` moving,
    as the live process it is."""
    clock, ingest, session = world()
    scheduler_lived_then_died(clock, ingest, session, beats=3)
    lag = 300.0
    p3 = clock() - lag
    session.state.lose_sight(clock())
    clock.advance(5.0)
    session.state.regain_sight(clock())
    ingest.handle(TOPIC, sched(True, p3, clock, ts=clock() - lag), clock())
    clock.advance(5.0)
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is False
    clock.advance(25.0)
    ingest.handle(TOPIC, sched(True, p3, clock, ts=clock() - lag), clock())
    clock.advance(5.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["online"] is True and not scheduler_incidents(out)


def test_a_birth_and_an_old_process_s_will_in_one_tick_read_as_in_two():
    """P2's birth and P1's late will in one ingest batch: only the last was kept, offline with
    an incident; in two ticks, online. The TUI and `status` tick at other moments: they
    disagreed (a review). Each is applied, in order."""
    said = []
    for one_tick in (True, False):
        clock, ingest, session = world()
        p1 = clock() - 600
        ingest.handle(TOPIC, sched(True, p1, clock), clock())
        session.tick()
        clock.advance(1.0)
        ingest.handle(TOPIC, sched(True, clock(), clock), clock())
        if not one_tick:
            session.tick()
        clock.advance(0.2)
        ingest.handle(TOPIC, sched(False, p1, clock), clock())  # keepalive expired: P1's will
        clock.advance(5.0)
        session.tick()
        out = fleet_summary(session.state, clock())
        said.append((out["scheduler"]["online"], len(scheduler_incidents(out))))
    assert said == [(True, 0), (True, 0)]


def test_a_fight_of_two_schedulers_leaves_the_console_on_the_one_that_stays():
    """Two simulators with one client id take each other's session every second, and
    mosquitto sends the loser's will each time, before or after the winner's birth. The later
    one gives up: the console counts the one that stays, and its death is an incident."""
    for will_first in (True, False):
        clock, ingest, session = world()
        stays, quits = clock() - 600, clock() - 60
        ingest.handle(TOPIC, sched(True, stays, clock), clock())
        session.tick()
        for i in range(10):
            winner, loser = (quits, stays) if i % 2 == 0 else (stays, quits)
            clock.advance(1.0)
            said = [sched(False, loser, clock), sched(True, winner, clock)]
            for msg in said if will_first else reversed(said):
                ingest.handle(TOPIC, msg, clock())
            session.tick()
        # `quits` lost the last round and exits; `stays` runs on, heard each heartbeat.
        for _ in range(3):
            clock.advance(30.0)
            ingest.handle(TOPIC, sched(True, stays, clock), clock())
            session.tick()
        out = fleet_summary(session.state, clock())
        assert out["scheduler"]["online"] is True, will_first
        assert not scheduler_incidents(out)
        clock.advance(10.0)
        ingest.handle(TOPIC, sched(False, stays, clock), clock())
        clock.advance(5.0)
        session.tick()
        (inc,) = scheduler_incidents(fleet_summary(session.state, clock()))
        assert inc["severity"] == "error"


def test_a_will_sent_with_a_broker_s_shutdown_is_not_a_dead_scheduler():
    # A graceful broker restart sends every client's will: "scheduler offline" on every
    # running job until the scheduler reconnected (a review of this change).
    clock, ingest, session = world()
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    session.tick()
    clock.advance(10.0)
    ingest.handle(TOPIC, sched(False, started, clock), clock())
    session.state.lose_sight(clock() + 0.5)  # the console's own connection goes with it
    clock.advance(5.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["text"] == "" and not out["scheduler"]["jobs_running"]
    assert "scheduler" not in {i["kind"] for i in out["incidents"]}


def test_a_malformed_scheduler_status_is_counted_with_its_topic():
    clock, ingest, session = world()
    ingest.handle(TOPIC, b'{"v": 1, "online": "yes"}', clock())
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"] is None
    assert out["totals"]["malformed"] == 1
    assert out["malformed"][0]["topic"] == TOPIC


def test_a_cleared_retained_scheduler_status_is_as_never_heard():
    # A scheduler retired for good (or replaced by a bridge that does not say) left its will
    # retained: an incident for ever, and the empty payload that clears it was "malformed".
    clock, ingest, session = world()
    ingest.handle(TOPIC, sched(False, clock(), clock), clock())
    clock.advance(5.0)
    session.tick()
    assert fleet_summary(session.state, clock())["scheduler"]["online"] is False
    ingest.handle(TOPIC, b"", clock())
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"] is None and out["totals"]["malformed"] == 0
    assert "scheduler" not in {i["kind"] for i in out["incidents"]}


def test_its_going_and_its_return_are_lines_of_the_timeline():
    """Only the incidents view said the scheduler was offline: a simulator killed for 20 s
    left no line of it in the events (a 3 a.m. drive)."""
    clock, ingest, session = world()
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    session.tick()

    def lines() -> list[str]:
        return [ln.text for ln in session.log.lines() if ln.kind == "scheduler"]

    assert lines() == []
    ingest.handle(TOPIC, sched(False, started, clock), clock())
    for _ in range(4):  # its will is believed once WILL_BURST_S old
        clock.advance(1.0)
        session.tick()
    (gone,) = lines()
    assert gone.startswith("scheduler slurm-bridge offline (heard ")
    clock.advance(20.0)
    ingest.handle(TOPIC, sched(True, clock(), clock), clock())
    session.tick()
    assert lines()[1:] == ["scheduler slurm-bridge back, 24s after it went"]
    clock.advance(5.0)
    session.tick()
    assert len(lines()) == 2


def test_a_seek_back_from_inside_its_outage_says_no_return():
    """The outage's note was not in a replay's snapshot: seeking back out of it said
    "scheduler slurm-bridge back, 0s after it went" (a review)."""
    clock, ingest, session = world()
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    session.tick()
    before = session.snapshot()
    ingest.handle(TOPIC, sched(False, started, clock), clock())
    for _ in range(4):
        clock.advance(1.0)
        session.tick()
    assert session._sched_gone is not None
    session.restore(before)
    clock.advance(1.0)
    session.tick()
    assert [ln.text for ln in session.log.lines() if ln.kind == "scheduler"] == []


async def test_the_consoles_own_lines_are_kept_for_events_and_a_later_console(tmp_path):
    """The scheduler's going, a gap, a job that runs again: only the console that saw them
    said them, and `fleetdeck events` the next morning showed none (a drill)."""
    from tests.conftest import run_cli

    clock, ingest, session = world()
    await session.open_store(tmp_path / "store.db")
    started = clock()
    ingest.handle(TOPIC, sched(True, started, clock), clock())
    session.tick()
    ingest.handle(TOPIC, sched(False, started, clock), clock())
    for _ in range(4):
        clock.advance(1.0)
        session.tick()
    await session.flush()
    await session.close()
    res = run_cli("events", "--db", str(tmp_path / "store.db"), "--kind", "scheduler",
                  "--since", "1970-01-01T00:00", "--json")
    assert res.returncode == 0, res.stderr
    (row,) = [r for r in json.loads(res.stdout) if r.get("kind") == "scheduler"]
    assert row["node"] == "(console)"  # no node id can be it
    assert row["message"].startswith("scheduler slurm-bridge offline (heard ")

    later = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await later.open_store(tmp_path / "store.db")
    try:
        lines = [ln for ln in later.log.lines() if ln.kind == "scheduler"]
        assert [(ln.source, ln.text) for ln in lines] == [("console", row["message"])]
        assert "console" not in later.state.nodes
    finally:
        await later.close()


def test_the_scheduler_gone_has_one_place_in_the_overview_and_in_status():
    """The overview put "scheduler … offline" first and `status` after every node's incident
    (an idle node with a port down came first): one order for both (a review). First after a
    fleet's silence: while it is gone every job state is as of then and no drain or restart
    is answered; so whether its jobs read running (error) or none do (warn)."""
    from fleetdeck.console.rows import top_problems

    for running in (True, False):
        idle = "gpu0004"
        session = scheduler_dies(JobState.R if running else JobState.CD,
                                 faults={idle: port_down()})
        problems, _ = top_problems(session.state)
        shown = [p.node for p in problems]
        said = [i["key"] for i in fleet_summary(session.state, session.clock())["incidents"]]
        assert shown == ["scheduler", idle], shown
        assert said == ["scheduler", f"node:{idle}"], said


def test_a_lagging_scheduler_heard_live_counts_at_once_though_it_never_speaks_again():
    """A bridge that publishes its birth once (no heartbeat), on a host whose clock is 2 min
    behind, heard while this console's connection was up: no replay (retained messages come
    only as a console subscribes), so online at once, as a one-shot status reading it
    retained says (a review: offline for ever)."""
    clock, ingest, session = world()
    scheduler_lived_then_died(clock, ingest, session, beats=4)
    lag = 120.0
    birth = sched(True, clock() - lag - 10, clock, ts=clock() - lag)
    ingest.handle(TOPIC, birth, clock())
    clock.advance(5.0)
    session.tick()
    out = fleet_summary(session.state, clock())
    assert out["scheduler"]["online"] is True and not scheduler_incidents(out)
    _, fresh_ingest, fresh = world()
    fresh_ingest.handle(TOPIC, birth, fresh.clock())
    fresh.tick()
    assert fleet_summary(fresh.state, fresh.clock())["scheduler"]["online"] is True
