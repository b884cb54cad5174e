"""Drain / resume / restart from the UI: confirmation, publish, lifecycle, audit, read-only."""

import pytest

from fleetdeck.console.commands import Phase
from fleetdeck.console.tui.modals import ConfirmScreen, DrainScreen, RestartScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import AckResult, Command, CommandOp, DrainMode, DrainState
from tests.tui.conftest import SIZE, open_view
from tests.tui.test_views import text_of


async def open_nodes(world, pilot):
    return await open_view(world, pilot, "2", NodesScreen)


def sent(world) -> list[Command]:
    return [codec.decode(Command, p) for _k, _s, p in world.published]


async def test_drain_done_when_drained_observed(world):
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_nodes(world, pilot)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("r")
        await pilot.pause()
        modal = world.app.screen
        assert isinstance(modal, DrainScreen)
        text = text_of(world.app)
        assert "Drain 1 node: gpu0002" in text
        assert "gpu0002 (job 41, 8 GPUs)" in text and "job 41 alice" in text
        # a reason is required
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)
        assert "a reason is required" in text_of(world.app)
        await pilot.press(*"XID 79 gpu3", "enter")
        await pilot.pause()
        await world.app.session.flush()
        assert not isinstance(world.app.screen, DrainScreen)
        [cmd] = sent(world)
        assert world.published[0][:2] == ("cmd", "gpu0002")
        assert cmd.op is CommandOp.DRAIN and cmd.args.reason == "XID 79 gpu3"
        assert cmd.args.mode is DrainMode.FINISH and cmd.issued_by == "alice"
        req = world.app.tracker.requests[cmd.cmd_id.rsplit(".", 1)[0]]
        assert req.phase is Phase.REQUESTED
        assert world.audit.records[-1].outcome == "requested"
        assert world.audit.records[-1].why == "XID 79 gpu3"
        world.fleet.ack(world.ingest, cmd.cmd_id, "gpu0002", AckResult.ACCEPTED, "drain (finish)")
        world.fleet.status(world.ingest, "gpu0002", DrainState.DRAINING, "XID 79 gpu3", "alice",
                           cmd.cmd_id)
        world.tick()
        assert req.phase is Phase.ACKNOWLEDGED and req.targets[0].detail == "DRAINING"
        await pilot.pause()
        assert "drng" in text_of(world.app)
        world.fleet.status(world.ingest, "gpu0002", DrainState.DRAINED, "XID 79 gpu3", "alice",
                           cmd.cmd_id)
        world.tick()
        assert req.phase is Phase.DONE
        assert world.audit.records[-1].outcome == "done"
        await pilot.press("5")
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "requested drain gpu0002" in text and "done (DRAINED)" in text
        # The reason stands apart from the counts: "…: requested 1 reason: X" read "1 reason".
        assert "requested 1; reason: XID 79 gpu3" in text, text


async def test_drain_rejected(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0006"])
        await pilot.pause()
        await pilot.press(*"maintenance", "enter")
        await pilot.pause()
        await world.app.session.flush()
        [cmd] = sent(world)
        world.fleet.ack(world.ingest, cmd.cmd_id, "gpu0006", AckResult.REJECTED,
                        "a reason is required")
        world.tick()
        req = next(iter(world.app.tracker.requests.values()))
        assert req.phase is Phase.REJECTED
        rec = world.audit.records[-1]
        assert rec.outcome == "rejected" and "a reason is required" in rec.detail


async def test_drain_times_out(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0007"])
        await pilot.pause()
        await pilot.press(*"x", "enter")
        await pilot.pause()
        await world.app.session.flush()
        world.tick(5)
        req = next(iter(world.app.tracker.requests.values()))
        assert req.phase is Phase.REQUESTED
        world.tick(6)
        assert req.phase is Phase.TIMED_OUT
        assert world.audit.records[-1].outcome == "timed_out"


async def test_a_hung_nodes_time_out_toast_says_the_whole_sentence(world):
    """A drain whose node went silent: its toast ended "…its agent is hung or cut )" (cut at
    120 characters inside the sentence) while the audit log had "…cut off and never
    answered" (a drill)."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0007"])
        await pilot.pause()
        await pilot.press(*"x", "enter")
        await pilot.pause()
        await world.app.session.flush()
        for _ in range(12):  # no telemetry, no acknowledgement: the node goes stale (H1)
            world.tick(1)
            await pilot.pause()
        req = next(iter(world.app.tracker.requests.values()))
        assert req.phase is Phase.TIMED_OUT
        detail = world.audit.records[-1].detail
        assert detail.endswith("its agent is hung or cut off and never answered"), detail
        toasts = [str(n.message) for n in world.app._notifications]
        timed_out = [t for t in toasts if t.startswith("drain gpu0007: timed out")]
        assert timed_out and timed_out[-1].endswith(f"({detail})"), toasts


def test_clip_words_cuts_between_words():
    from fleetdeck.console.commands import clip_words

    text = "its agent is hung or cut off and never answered"
    assert clip_words(text, 100) == text
    assert clip_words(text, 27) == "its agent is hung or cut…"
    assert clip_words(text, 24) == "its agent is hung or cut…"  # a whole word up to the end
    assert clip_words("(H1 no telemetry", 5) == "(H1…"
    assert clip_words("gpu[0001-0400],gpu[0600-0900]", 10) == "gpu[0001-…"


async def test_bulk_drain_needs_typed_confirmation_and_now_mode(world):
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_nodes(world, pilot)
        await pilot.press("slash", *"gpu[0001-0010]", "enter")
        world.tick()
        await pilot.press("home")
        for _ in range(10):
            await pilot.press("space")
        assert len(nodes.table.marks) == 10
        await pilot.press("r")
        await pilot.pause()
        modal = world.app.screen
        assert isinstance(modal, DrainScreen) and modal.radius.needs_typed_confirmation
        assert "type drain 10 to confirm" in text_of(world.app)
        # The chosen mode reads without colour: ● chosen, ○ not.
        assert "●▌ finish" in text_of(world.app) and "○▌ now" in text_of(world.app)
        await pilot.click("#mode-now")
        await pilot.pause()
        assert modal.mode is DrainMode.NOW and modal.radius.gpu_hours_at_risk > 0
        assert "○▌ finish" in text_of(world.app) and "●▌ now" in text_of(world.app)
        modal.query_one("#reason").value = "rack power work"
        modal.query_one("#confirm").value = "drain 9"
        modal.submit()
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)  # wrong phrase
        modal.query_one("#confirm").value = "drain 10"
        modal.query_one("#confirm").focus()
        await pilot.press("enter")
        await pilot.pause()
        await world.app.session.flush()
        cmds = sent(world)
        assert len(cmds) == 10 and {c.args.mode for c in cmds} == {DrainMode.NOW}
        assert {c.target for c in cmds} == {f"gpu{i:04d}" for i in range(1, 11)}
        assert nodes.table.marks == set()


async def test_resume_flow(world):
    world.fleet.status(world.ingest, "gpu0008", DrainState.DRAINED, "old", "bob")
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_nodes(world, pilot)
        nodes.table.move_to_key("gpu0008")
        await pilot.press("u")
        await pilot.pause()
        assert isinstance(world.app.screen, ConfirmScreen)
        assert "Resume 1 node: gpu0008?" in text_of(world.app)
        await pilot.press("enter")  # focus is on the Resume button
        await pilot.pause()
        await world.app.session.flush()
        [cmd] = sent(world)
        assert cmd.op is CommandOp.RESUME
        world.fleet.ack(world.ingest, cmd.cmd_id, "gpu0008", AckResult.DONE, "returned")
        world.tick()
        req = next(iter(world.app.tracker.requests.values()))
        assert req.phase is Phase.ACKNOWLEDGED  # status still says drained
        world.fleet.status(world.ingest, "gpu0008", DrainState.NONE)
        world.tick()
        assert req.phase is Phase.DONE


async def test_restart_job_flow_and_timeout(world):
    from tests.tui.fleet import job_status, publish_job

    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        world.tick()
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(world.app.screen, RestartScreen)
        text = text_of(world.app)
        assert "Restart job 41?" in text and "16.0 GPU-h" in text
        # A reason is required: `r` and a stray Enter requeued a running job.
        await pilot.press("enter")
        await pilot.pause()
        await world.app.session.flush()
        assert isinstance(world.app.screen, RestartScreen) and not world.published
        assert "a reason is required to restart a job" in text_of(world.app)
        await pilot.press(*"hung OPS-7", "enter")
        await pilot.pause()
        await world.app.session.flush()
        assert not isinstance(world.app.screen, RestartScreen)
        kind, subject, payload = world.published[0]
        assert (kind, subject) == ("sched_cmd", "")
        cmd = codec.decode(Command, payload)
        assert cmd.op is CommandOp.RESTART_JOB and cmd.args.job == "41"
        assert cmd.args.reason == "hung OPS-7"
        assert world.audit.records[-1].why == "hung OPS-7"
        world.fleet.ack(world.ingest, cmd.cmd_id, "sched", AckResult.ACCEPTED,
                        op=CommandOp.RESTART_JOB)
        world.tick()
        req = next(iter(world.app.tracker.requests.values()))
        assert req.phase is Phase.ACKNOWLEDGED
        publish_job(world.ingest, job_status("41", world.fleet.names[:4], world.clock,
                                             requeues=1), world.clock)
        world.tick()
        assert req.phase is Phase.DONE
        # a second restart that nobody answers times out
        world.app.request_restart("41")
        await pilot.pause()
        await pilot.press(*"again", "enter")
        await pilot.pause()
        await world.app.session.flush()
        world.tick(11)
        assert world.audit.records[-1].outcome == "timed_out"


async def test_publish_failure_is_reported(world):
    async def broken(kind, subject, payload):
        raise ConnectionError("not connected to the broker")

    world.app.session.publisher = broken
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_resume(["gpu0001"])
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await world.app.session.flush()
        req = next(iter(world.app.tracker.requests.values()))
        # A broker blip must not lose the command: it stays open and is retried...
        assert req.phase is Phase.REQUESTED
        assert any("cannot send resume now" in line.text for _seq, line in world.app.event_log)
        # ...until its deadline, which names why it never went out.
        world.tick(11.0)
        assert req.phase is Phase.TIMED_OUT and "not connected" in req.targets[0].detail
        assert [r.outcome for r in world.audit.records] == ["requested", "timed_out"]


async def test_read_only_has_no_mutating_keys_or_palette_entries(ro_world):
    app = ro_world.app
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        ro_world.tick()
        await pilot.pause()
        text = text_of(app)
        assert "[R]" in text and "[RW]" not in text
        assert "Drain" not in text.splitlines()[-1]  # footer
        await pilot.press("r")
        await pilot.press("u")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen)
        app.request_drain(["gpu0001"])
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen) and ro_world.published == []
        from fleetdeck.console.tui.palette import FleetCommands

        provider = FleetCommands(app.screen)
        names = [text for text, _c, _h in provider._static() + provider._dynamic("gpu0001")]
        assert "node: open gpu0001" in names
        assert not any("drain" in n or "resume" in n or "restart" in n for n in names)


async def test_palette_entries(world):
    from fleetdeck.console.tui.palette import FleetCommands

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        provider = FleetCommands(world.app.screen)
        views = [t for t, _c, _h in provider._static() if t.startswith("view: ")]
        assert views == [f"view: {v}" for v in ("overview", "nodes", "jobs", "fabric", "events",
                                                "incidents")]  # every view of 1-6
        names = [t for t, _c, _h in provider._dynamic("drain gpu0012")]
        assert "node: drain gpu0012" in names
        assert "job: restart 41" in [t for t, _c, _h in provider._dynamic("job 41")]
        # A pending job is not offered a restart it would be refused (a newcomer's run).
        from fleetdeck.protocol.messages import JobState
        from tests.tui.fleet import job_status, publish_job

        publish_job(world.ingest, job_status("43", [], world.clock, state=JobState.PD),
                    world.clock)
        world.tick()
        assert not [t for t, _c, _h in provider._dynamic("job 43") if "43" in t]
        hits = [h async for h in provider.search("node: drain gpu0012")]
        assert any(h.text == "node: drain gpu0012" for h in hits)
        # choosing it opens the drain form
        next(c for t, c, _h in provider._dynamic("gpu0012") if t == "node: drain gpu0012")()
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)


async def test_quit_asks_while_a_command_is_open(world):
    from fleetdeck.console.tui.modals import QuitScreen

    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_nodes(world, pilot)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("r")
        await pilot.pause()
        await pilot.press(*"fan", "enter")
        await pilot.pause()
        await world.app.session.flush()
        [cmd] = sent(world)
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(world.app.screen, QuitScreen)
        text = text_of(world.app)
        assert "1 command still open: quit anyway? y/n" in text
        assert "drain gpu0002: requested" in text
        await pilot.press("n")  # stays, and the command is still followed
        await pilot.pause()
        assert world.app.is_running and not isinstance(world.app.screen, QuitScreen)
        req = world.app.tracker.requests[cmd.cmd_id.rsplit(".", 1)[0]]
        assert req.phase is Phase.REQUESTED
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert req.phase is Phase.ABANDONED
        assert world.audit.records[-1].outcome == "abandoned"
    assert world.app.return_code == 0


async def test_quit_says_a_drain_whose_node_is_draining_is_draining(world):
    """The quit question listed a drain whose node was DRAINING (its job running to completion
    first) as "acknowledged", as if the node had not begun to drain; the events said
    DRAINING."""
    from fleetdeck.console.tui.modals import QuitScreen

    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_nodes(world, pilot)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("r")
        await pilot.pause()
        await pilot.press(*"fan", "enter")
        await pilot.pause()
        await world.app.session.flush()
        [cmd] = sent(world)
        world.fleet.ack(world.ingest, cmd.cmd_id, "gpu0002", AckResult.ACCEPTED, "drain (finish)")
        world.tick()
        await pilot.press("q")
        await pilot.pause()
        assert "drain gpu0002: acknowledged" in text_of(world.app)  # not draining yet
        await pilot.press("n")
        world.fleet.status(world.ingest, "gpu0002", DrainState.DRAINING, "fan", "alice",
                           cmd.cmd_id)
        world.tick()
        await pilot.pause()
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(world.app.screen, QuitScreen)
        text = text_of(world.app)
        assert "drain gpu0002: draining (its jobs run to completion first)" in text, text
        assert "acknowledged" not in text


async def test_quit_without_open_commands_asks_nothing(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("q")
        await pilot.pause()
        assert not world.app.is_running
    assert world.app.return_code == 0


def test_a_session_without_its_broker_says_a_command_would_not_go_out():
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.console.session import ConsoleSession

    session = ConsoleSession("t", url=BrokerURL("127.0.0.1", 1))  # never connected
    assert session.cannot_send_now().startswith("not connected to the broker now")
    assert "within 10 s" in session.cannot_send_now()
    assert ConsoleSession("t").cannot_send_now() == ""  # no broker at all: a replay, tests


async def test_the_drain_and_restart_dialogs_say_first_when_the_broker_is_down(world):
    """With the broker down the drain was confirmed and only then said "cannot send drain
    now" (an SRE drill): the dialog says it before the operator confirms."""
    why = "not connected to the broker now (connection refused): this is sent only if …"
    world.app.session.cannot_send_now = lambda: why
    async with world.app.run_test(size=SIZE) as pilot:
        await open_nodes(world, pilot)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)
        assert "not connected to the broker now" in text_of(world.app)
        await pilot.press("escape")
        await pilot.pause()
        world.app.request_resume(["gpu0003"])
        await pilot.pause()
        assert isinstance(world.app.screen, ConfirmScreen)
        assert "not connected to the broker now" in text_of(world.app)


async def test_a_console_ended_by_a_signal_gives_its_open_commands_an_outcome(world):
    """A SIGTERM, or a dropped ssh session's SIGHUP, left the audit at "requested" with nothing
    after it (an SRE drill); q asks and records "abandoned". Whatever ends the console, an
    open command is recorded abandoned, with the signal."""
    async with world.app.run_test(size=SIZE) as pilot:
        await open_nodes(world, pilot)
        world.app.request_drain(["gpu0002"])
        await pilot.pause()
        await pilot.press(*"xid 79", "enter")
        await pilot.pause()
        await world.app.session.flush()
        assert world.audit.records[-1].outcome == "requested"
        world.app._stopped_by = "SIGTERM"  # as _on_stop_signal notes it, before app.exit
        world.app.exit(None, 143)
    last = world.audit.records[-1]
    assert last.outcome == "abandoned" and "(SIGTERM)" in last.detail, last


async def test_a_drain_resumed_while_draining_closes_superseded_with_a_warning(world):
    """The demo's drain of gpu0012 (finish), then its resume: "cmds 1 open" stayed in the
    header for minutes, until a later drain of the node closed the first as done (a newcomer
    run). Superseded, in the warning colour: the operator undid it, nothing failed."""
    async with world.app.run_test(size=SIZE) as pilot:
        nodes = await open_nodes(world, pilot)
        nodes.table.move_to_key("gpu0002")
        await pilot.press("r")
        await pilot.pause()
        await pilot.press(*"planned swap", "enter")
        await pilot.pause()
        await world.app.session.flush()
        [cmd] = sent(world)
        req = world.app.tracker.requests[cmd.cmd_id.rsplit(".", 1)[0]]
        world.fleet.ack(world.ingest, cmd.cmd_id, "gpu0002", AckResult.ACCEPTED, "drain (finish)")
        world.fleet.status(world.ingest, "gpu0002", DrainState.DRAINING, "planned swap", "alice",
                           cmd.cmd_id)
        world.tick()
        await pilot.pause()
        assert "cmds 1 open" in text_of(world.app)
        # Resumed (from this console or another): the agent's status has no drain again.
        world.fleet.status(world.ingest, "gpu0002", DrainState.NONE)
        world.tick()
        await pilot.pause()
        assert req.phase is Phase.SUPERSEDED, (req.phase, req.targets[0].detail)
        assert world.audit.records[-1].outcome == "superseded"
        assert "cmds 1 open" not in text_of(world.app)
        [toast] = [n for n in world.app._notifications if "superseded" in str(n.message)]
        assert toast.severity == "warning", toast
        assert "resumed before it drained" in str(toast.message)


async def test_an_open_drain_dialog_follows_its_target_going_offline(world):
    """A 2026-12-07 drill: the dialog opened on a healthy node still said "ok, nothing found on
    it" 10 s after the node's agent died, with no word of the time-out to come, and the drain
    typed into it timed out. The dialog takes its radius again while open."""
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.conftest import pilot_until
    from tests.tui.fleet import CLUSTER

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0006"])
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)
        assert "cannot acknowledge" not in text_of(world.app)
        agent = world.fleet.agents["gpu0006"]
        world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0006"),
                            codec.encode(agent.status(online=False)), world.clock())
        for _ in range(6):
            world.fleet.telemetry(world.ingest,
                                  names=[n for n in world.fleet.names if n != "gpu0006"])
            world.tick(1)
        assert world.app.state.nodes["gpu0006"].online is False
        await pilot_until(pilot, lambda: "cannot acknowledge" in text_of(world.app),
                          "the open dialog to say the offline target cannot acknowledge")
        assert isinstance(world.app.screen, DrainScreen)
        assert "gpu0006" in text_of(world.app) and "offline" in text_of(world.app)


async def test_an_open_drain_dialog_takes_its_radius_again_only_when_a_target_moved(
        world, monkeypatch):
    """The dialog asks for its radius each second, and a radius reads the whole fleet (45 ms
    at 16,384 nodes: a stall each second while the reason is typed, a review). It is taken
    again when a target's shape moved, not when other nodes' samples came."""
    from fleetdeck.console.tui import app as app_module
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER

    taken = []
    real = app_module.blast_radius

    def counted(*args, **kwargs):
        taken.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(app_module, "blast_radius", counted)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0006"])
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, DrainScreen)
        first = len(taken)
        for _ in range(3):
            world.fleet.telemetry(world.ingest)
            world.tick(1)
            screen._refresh_radius()
        assert len(taken) == first, taken
        agent = world.fleet.agents["gpu0006"]
        world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0006"),
                            codec.encode(agent.status(online=False)), world.clock())
        world.tick(1)
        screen._refresh_radius()
        assert len(taken) == first + 1, taken
        assert "offline" in text_of(world.app)


def retire_under_dialog(world, node: str) -> None:
    """``fleetdeck retire`` of ``node`` as a console hears it (its retained birth cleared)."""
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER

    world.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, node), b"", world.clock())
    world.tick()
    assert node not in world.app.state.nodes


async def test_a_drain_confirmed_after_its_target_was_retired_is_refused_not_sent(world):
    """The same drill: the target retired (its retained birth cleared by `fleetdeck retire`)
    while the dialog was open; the drain typed into it went out and timed out, "the node was
    never heard from". It is refused as at the dialog's opening, nothing sent."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0006"])
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)
        retire_under_dialog(world, "gpu0006")
        await pilot.press(*"maintenance", "enter")
        await pilot.pause()
        await world.app.session.flush()
        assert not isinstance(world.app.screen, DrainScreen)
        assert sent(world) == []
        rec = world.audit.records[-1]
        assert rec.outcome == "refused" and "retired or forgotten" in rec.detail, rec


async def test_an_open_drain_dialog_takes_a_slow_radius_less_often(world, monkeypatch):
    """The radius reads the whole fleet: 45 ms at 16,384 nodes for one target. Taken each
    second, an open dialog stalled the loop that long each second under the reason being typed
    (``RADIUS_REFRESH_SHARE``)."""
    import asyncio
    import time
    from typing import Any

    from fleetdeck.console.tui import app as app_module

    real = app_module.blast_radius
    taken: list[float] = []

    def slow_radius(*args: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        time.sleep(0.2)  # as a radius of a fleet a few times 16,384 nodes
        out = real(*args, **kw)
        taken.append(time.perf_counter() - t0)
        return out

    monkeypatch.setattr(app_module, "blast_radius", slow_radius)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0006"])
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)
        opened, at_open = time.perf_counter(), len(taken)
        await asyncio.sleep(3.5)
        spent = sum(taken[at_open:])
        assert spent / (time.perf_counter() - opened) <= 0.05, taken
        assert isinstance(world.app.screen, DrainScreen)


async def test_a_resume_confirmed_after_its_target_was_retired_is_refused_not_sent(world):
    """As a drain's: the target retired while the resume dialog was open, and the resume went
    out to a node no one hears from (its time-out "never heard from"). Refused, nothing sent."""
    world.fleet.status(world.ingest, "gpu0008", DrainState.DRAINED, "old", "bob")
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_resume(["gpu0008"])
        await pilot.pause()
        assert isinstance(world.app.screen, ConfirmScreen)
        retire_under_dialog(world, "gpu0008")
        await pilot.press("enter")  # focus is on the Resume button
        await pilot.pause()
        await world.app.session.flush()
        assert not isinstance(world.app.screen, ConfirmScreen)
        assert sent(world) == []
        rec = world.audit.records[-1]
        assert rec.what == "resume" and rec.outcome == "refused", rec
        assert "gpu0008: retired or forgotten while the dialog was open" in rec.detail, rec


async def confirm_restart(pilot, world) -> None:
    """The restart dialog's reason typed and confirmed, and what it sends sent."""
    await pilot.press(*"hung OPS-7", "enter")
    await pilot.pause()
    await world.app.session.flush()


async def confirm_restart_refused(world, pilot):
    """``confirm_restart``, refused: the dialog closed, nothing sent; its audit record."""
    await confirm_restart(pilot, world)
    assert not isinstance(world.app.screen, RestartScreen)
    assert world.published == []
    rec = world.audit.records[-1]
    assert rec.what == "restart_job" and rec.outcome == "refused", rec
    return rec


@pytest.mark.parametrize("then", ["completed", "withdrawn"])
async def test_a_restart_confirmed_after_its_job_ended_is_refused_not_sent(world, then):
    """The job completed (or its status was withdrawn) while the restart dialog was open: the
    restart typed into it went to the scheduler, which rejects a job with nothing to restart,
    where the dialog's opening refuses it. Refused as at the opening, nothing sent."""
    from fleetdeck.protocol.messages import JobState
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER, job_status, publish_job

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_restart("41")
        await pilot.pause()
        assert isinstance(world.app.screen, RestartScreen)
        if then == "completed":
            publish_job(world.ingest, job_status("41", world.fleet.names[:4], world.clock,
                                                 state=JobState.CD), world.clock)
        else:
            world.ingest.handle(topic_for(CLUSTER, Kind.JOB, "41"), b"", world.clock())
            world.tick()
            world.tick(6)  # withdrawn once no status of it came for JOB_CLEAR_CONFIRM_S
            assert "41" not in world.app.state.jobs
        world.tick()
        rec = await confirm_restart_refused(world, pilot)
        assert rec.detail.startswith("changed while the dialog was open: "), rec
        assert ("job 41 is CD (completed)" if then == "completed" else "job 41") in rec.detail
        assert rec.why == "hung OPS-7", rec


async def test_a_restart_confirmed_after_its_job_was_requeued_and_runs_again_is_refused(world):
    """The job was requeued (the scheduler, another operator) and ran again while the restart
    dialog was open: running, it passed, and the restart requeued the new run, one the
    operator never saw. Refused, nothing sent; a job that only moved on is still restarted."""
    from tests.tui.fleet import job_status, publish_job

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_restart("41")
        await pilot.pause()
        assert isinstance(world.app.screen, RestartScreen)
        rerun = job_status("41", world.fleet.names[:4], world.clock, step=410, requeues=1,
                           started_offset_s=20)
        publish_job(world.ingest, rerun, world.clock)
        world.tick()
        rec = await confirm_restart_refused(world, pilot)
        assert rec.detail == (
            "changed while the dialog was open: job 41 was requeued and runs again (requeues "
            "0 -> 1, at step 410): restart it again only if this run is held up too; nothing "
            "sent"), rec
        # Opened on the new run, its steps moving on meanwhile: sent.
        world.app.request_restart("41")
        await pilot.pause()
        publish_job(world.ingest, rerun.model_copy(
            update={"step": 420, "ts": int(world.clock() * 1000) + 1}), world.clock)
        world.tick()
        await confirm_restart(pilot, world)
        assert world.published, world.audit.records[-1]



async def test_an_open_drain_dialog_refreshes_its_radius_when_textual_drops_one_shot_timers(
        world, monkeypatch):
    """Textual 8.2's one-shot timer skips its only call when its task's two clock reads are
    more than its delay apart (a loaded host): the dialog's refresh was a chain of them, and
    one lost ended the chain (docs/reliability.md, "The console's tick"). Here the dialog's
    every one-shot timer is lost."""
    import asyncio

    refreshed: list[bool] = []
    monkeypatch.setattr(DrainScreen, "set_timer", lambda self, *a, **k: None)
    monkeypatch.setattr(DrainScreen, "_refresh_radius",
                        lambda self: (refreshed.append(True), self._refresh_later()))
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        world.app.request_drain(["gpu0006"])
        await pilot.pause()
        assert isinstance(world.app.screen, DrainScreen)
        await asyncio.sleep(2.5)
        assert refreshed, "the radius was never taken again"


def test_an_open_drain_dialogs_refresh_keeps_its_pace_when_the_interval_is_late(monkeypatch):
    """The refresh was due a second after the last radius was taken, with 50 ms to spare for
    the interval's jitter: one interval call 60 ms late (a loaded host) put the next due after
    the interval's next call, which skipped it, and the radius was taken every 2 s, not each
    second (``RADIUS_REFRESH_S``)."""
    from typing import Any

    from fleetdeck.console.tui import modals

    clock = [0.0]
    monkeypatch.setattr(modals.time, "perf_counter", lambda: clock[0])
    taken: list[float] = []
    radius: Any = object()

    def take(_mode: DrainMode) -> Any:
        taken.append(clock[0])
        return radius

    screen = DrainScreen(take)
    screen._refresh_later()  # as on mount
    for at in (1.06, 2.0, 3.0, 4.0):  # the interval's calls: the first one late
        clock[0] = at
        screen._refresh_if_due()
    assert taken == [0.0, 1.06, 2.0, 3.0, 4.0]
