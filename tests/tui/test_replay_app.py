"""The console over a recording: same views, read-only, with pause, step, seek, speed and
event navigation (Pilot, against a real recorded fixture)."""

import time
from types import SimpleNamespace

from textual import events

from fleetdeck.console import replay
from fleetdeck.console.replay import run_headless
from fleetdeck.console.summary import fleet_summary
from fleetdeck.console.tui import replay_app
from fleetdeck.console.tui.replay_app import ReplayApp
from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.conftest import REPO, eventually
from tests.tui.conftest import SETTLE_S, pilot_until
from tests.tui.test_views import text_of

FIXTURE = REPO / "fixtures" / "xid79.jsonl.gz"


def frozen_wall(monkeypatch) -> list[float]:
    """The replay console's wall clock, moved by the test alone (``wall[0] += s``): a replay
    plays on by the wall time between its ticks, which a loaded CI machine stretches."""
    wall = [1000.0]
    monkeypatch.setattr(replay_app, "time", SimpleNamespace(monotonic=lambda: wall[0],
                                                           perf_counter=time.perf_counter))
    return wall


async def test_replay_controls_move_through_the_recording(monkeypatch):
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()  # let the first tick (on mount) run
        p = app.player
        assert app.read_only
        assert "[R]" in app.header_text(p.clock())
        app.seek_to("5")
        await settle(pilot, app)
        # Landed on 5 s, and no wall time passed since to play on by.
        assert abs(p.position - (p.start + 5)) < 1e-6
        assert all(n.verdict.value == "ok" for n in app.state.nodes.values())
        app.seek_to("+25")  # past the XID 79 at ~12 s
        await settle(pilot, app)
        assert app.state.nodes["gpu0006"].verdict.value == "failed"
        app.seek_to("-25")  # backwards: from the nearest snapshot of the session
        await settle(pilot, app)
        assert app.state.nodes["gpu0006"].verdict.value == "ok"
        await pilot.press("p")
        assert p.paused
        before = p.position
        app.tick()
        assert p.position == before  # paused
        await pilot.press("right_square_bracket")
        await settle(pilot, app)
        assert p.position > before
        await pilot.press("plus")
        await pilot.press("plus")
        assert p.speed == 5.0
        # Steps both ways on one ladder: from x100, halving never came back to x1 (a replay
        # audit).
        for _ in range(10):
            await pilot.press("plus")
        assert p.speed == 100.0
        seen = []
        for _ in range(10):
            await pilot.press("minus")
            seen.append(p.speed)
        assert seen == [50.0, 20.0, 10.0, 5.0, 2.0, 1.0, 0.5, 0.5, 0.5, 0.5]
        await pilot.press("n")
        await settle(pilot, app)
        assert p.position > before


async def test_seeking_back_shows_what_playing_straight_there_shows(monkeypatch):
    """Found in a UX audit: after a seek, the suspect switch and the nodes' N2 findings behind
    it were gone. Seeking back with ':seek' and '[' shows what a straight replay to the same
    instant shows."""
    frozen_wall(monkeypatch)
    path = REPO / "fixtures" / "leaf_switch.jsonl.gz"
    app = ReplayApp(path, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        app.seek_to("30")
        app.seek_to("-10")
        for _ in range(3):
            await pilot.press("left_square_bracket")
        await settle(pilot, app)
        assert abs(p.position - (p.start + 18.5)) < 1e-6
        run = run_headless(path, until=18.5)
        now = p.clock()
        shown = fleet_summary(app.state, now, log=app.event_log.lines())
        straight = fleet_summary(run.session.state, now, log=run.session.log.lines())
        assert shown == straight
        assert [sw["switch"] for sw in shown["suspect_switches"]] == [
            f"leaf02-r{i}" for i in range(8)]
        assert "N2" in {f.rule for f in app.state.nodes["gpu0012"].all_findings}


async def test_replay_has_no_drain_or_resume():
    """Replay is read-only: where a live console drains ('r') or resumes ('u') the node under
    the cursor, a replay shows no such keys, opens no form and requests nothing."""
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.seek_to("+25")  # gpu0006 failed (XID 79): the node an operator would drain
        await settle(pilot, app)
        await pilot.press("2")
        await pilot.pause()
        nodes = app.screen
        assert isinstance(nodes, NodesScreen)
        assert app.state.nodes["gpu0006"].verdict.value == "failed"
        nodes.table.move_to_key("gpu0006")
        assert nodes.targets() == ["gpu0006"]
        footer = text_of(app).splitlines()[-1]
        assert "Filter" in footer and "Pause" in footer  # the nodes view's keys, in replay
        assert "Drain" not in footer and "Resume" not in footer
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("u")
        await pilot.pause()
        assert app.screen is nodes  # no drain form, no confirmation
        app.run_command_line(":drain gpu0006")  # nor by the command line
        await pilot.pause()
        assert app.screen is nodes
        assert not app.tracker.requests


async def test_replay_moves_with_the_wall_clock_not_with_each_tick(monkeypatch):
    """A backlog's slices are ticks a few ms apart: each moved the recording by a whole tick,
    so a replay with a backlog ran many times faster than its speed. The recording now moves
    by the wall time between ticks, at the player's speed."""
    # Ten ticks back to back took more than 0.25 s of real time on a loaded CI machine (each
    # one paints), and moved the replay that much: the wall clock is the test's.
    wall = frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        app.seek_to("5")
        while p.seeking or p.busy:  # a loaded machine lands a seek in more than one slice
            app.tick()
        app.tick()
        before = p.position
        for _ in range(10):  # back to back, as a backlog's slices
            app.tick()
        assert p.position == before, "ten ticks moved it by their count, not the clock"
        wall[0] += 0.3
        app.tick()
        # A starved tick may leave part of it owed to the slices after it (Player.behind).
        await pilot_until(pilot, lambda: not (p.busy or p.behind), "the replay caught up")
        assert abs(p.position - before - 0.3) < 1e-6


async def settle(pilot, app: ReplayApp) -> None:
    """Until the Player has nothing left to do (its slices run between the loop's turns)."""
    await pilot_until(pilot, lambda: not app.player.busy, "the seek to land", interval=0.005)
    await pilot.pause()


def straight_to(path, app: ReplayApp) -> None:
    """What the console shows is what a straight replay to its position shows."""
    p = app.player
    assert p.ticks == p.ticks_until(p.position)  # on a tick of straight play
    run = run_headless(path, until=p.position - p.start)
    now = p.clock()
    assert fleet_summary(app.state, now, log=app.event_log.lines()) == fleet_summary(
        run.session.state, now, log=run.session.log.lines())


async def test_a_long_seek_goes_on_in_slices_and_stops_or_turns_cleanly(monkeypatch):
    """A seek does a slice of the Player's work at a time, the loop's other work in between:
    the header says where it goes and how far it got, and keys work meanwhile. Escape stops
    it on a tick of straight play, 'p' stops it there and pauses, and another ':seek' turns
    it (a relative one from where it was going). Wherever it lands, the console shows what a
    straight replay to there shows."""
    # A piece of work per slice, a message read per piece: seeks long enough to act on.
    monkeypatch.setattr(replay, "SLICE_S", 0.0)
    monkeypatch.setattr(replay, "READ_CHECK", 1)
    path = REPO / "fixtures" / "leaf_switch.jsonl.gz"
    app = ReplayApp(path, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        app.seek_to("30")
        assert p.seeking
        await pilot.pause(0.02)
        assert "seeking to 04:02:51 …" in text_of(app)
        # Keys are live meanwhile: the nodes view comes up while the seek goes on.
        # (Pilot.press would wait until the app is idle, that is until the seek landed.)
        app._driver.send_message(events.Key("2", "2"))
        await eventually(lambda: isinstance(app.screen, NodesScreen), SETTLE_S, 0.01,
                         "the nodes view during the seek")
        assert p.seeking
        await pilot.press("escape")
        await settle(pilot, app)
        assert not p.seeking and p.start < p.position < p.start + 30
        assert "seeking" not in text_of(app)
        straight_to(path, app)

        app.seek_to("25")
        await pilot.pause(0.02)
        await pilot.press("p")  # stops it where it got, and pauses
        await settle(pilot, app)
        assert p.paused and not p.seeking and "PAUSED" in text_of(app)
        straight_to(path, app)

        app.seek_to("20")
        await pilot.pause(0.02)
        app.seek_to("-5")  # from where it was going: 15 s
        await pilot.press("left_square_bracket")  # and a step back from there
        await settle(pilot, app)
        assert abs(p.position - (p.start + 14.5)) < 1e-6
        straight_to(path, app)


async def test_help_lists_the_replay_keys():
    """``?`` in a replay lists its own keys (pause, step, events, speed, seek) first: the
    help listed only the live console's, and `]`, `[`, `+`, `-` are not in the footer."""
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        from fleetdeck.console.tui.modals import HelpScreen
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(str(w.render()) for w in app.screen.query("Static"))
        assert "Replay" in text and ":seek -30" in text and "p pause/play" in text
        assert text.index("Replay") < text.index("Views")
        assert "read-only" in text


async def test_a_recording_that_began_mid_run_says_what_its_console_judged(tmp_path):
    """The header's judged_at_start is told when the replay opens, once: the replay's own
    mount handler called the console's again, which started its tick timer twice."""
    import gzip
    import json

    lines = gzip.decompress(FIXTURE.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    head["judged_at_start"] = [{"node": "gpu0046", "verdict": "failed",
                                "findings": ["N3 mlx5_ib6:1: 53021 symbol errors/h (> 120/h)"]}]
    rec = tmp_path / "mid.jsonl"
    rec.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    app = ReplayApp(rec, speed=1.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert sum("its console judged 1 node(s) not ok" in m for m in said) == 1, said
        assert any("gpu0046 failed: N3" in m for m in said)
        assert len(app._timers) == 1, app._timers  # the tick, started once


async def test_the_judged_at_start_note_fits_a_small_screen(tmp_path):
    """At 80x24 the note with three findings was a toast 12 rows tall, over half the node
    detail, for 20 s (a fresh-clone walk-through): there it is three lines of node names; a
    large screen keeps the whole note."""
    import gzip
    import json

    from textual.widgets._toast import Toast, ToastRack

    lines = gzip.decompress(FIXTURE.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    head["judged_at_start"] = [
        {"node": f"gpu{46 + i:04d}", "verdict": "failed",
         "findings": ["N3 mlx5_ib6:1: 53021 symbol errors/h (> 120/h)",
                      "N2 mlx5_ib6:1: link downed 3 times in the last hour"]}
        for i in range(18)]
    rec = tmp_path / "mid.jsonl"
    rec.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    for size, rows in (((80, 24), 5), ((160, 48), 12)):
        app = ReplayApp(rec, speed=1.0)
        app.auto_tick = False
        async with app.run_test(size=size, notifications=True) as pilot:
            await pilot.pause()
            rack = app.screen.get_child_by_type(ToastRack)
            await pilot_until(pilot, lambda r=rack: any(w.region.height for w in r.query(Toast)),
                              "the toast")
            (toast,) = rack.query(Toast)
            (said,) = [n.message for n in app._notifications]
            assert "its console judged 18 node(s) not ok" in said, said
            assert toast.region.height <= rows, (size, toast.region, said)
            if size == (80, 24):
                assert "gpu0046, gpu0047, gpu0048 +15" in said, said
                assert "replay --headless --summary-json" in said, said
            else:
                assert "gpu0046 failed: N3" in said, said


async def test_a_damaged_recording_says_so_in_the_console(monkeypatch, tmp_path):
    """A truncated recording played to its cut and said "done", malformed 0, nothing on exit
    (a newcomer's run), where the headless replay said so on stderr with exit 1."""
    frozen_wall(monkeypatch)
    cut = tmp_path / "cut.jsonl.gz"
    data = FIXTURE.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    app = ReplayApp(cut, speed=1.0)
    app.auto_tick = False
    notes: list[str] = []
    monkeypatch.setattr(app, "notify", lambda text, **_kw: notes.append(str(text)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.seek_to("60")
        await settle(pilot, app)
        app.tick()
        await pilot.pause()
        assert any("damaged part(s) of the recording (it is truncated)" in n for n in notes), notes
        assert "1 damaged" in app.link_text(app.clock())
    assert app.damage_on_exit().startswith("skipped 1 damaged part(s) of the recording")


async def test_the_header_says_the_position_as_a_utc_clock_time_and_spans(monkeypatch):
    """'replay 46.5/150.0s x1 PAUSED' (and 'replay 51445.0/172680.0s' two days in) left the
    clock time the views and ':seek' speak in to be worked out by hand, and 'upd 0.0s ago'
    beside PAUSED read as data still coming (an SRE's run)."""
    frozen_wall(monkeypatch)
    for size in ((80, 24), (160, 48)):
        app = ReplayApp(FIXTURE, speed=1.0)
        app.auto_tick = False
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            app.seek_to("5")
            await settle(pilot, app)
            top = text_of(app).splitlines()[0]
            assert "replay 04:02:26 UTC +5s/35s x1 playing" in top, (size, top)
            if size[0] > 80:
                assert "upd 0.0s ago" in top, top
            await pilot.press("p")
            await settle(pilot, app)
            top = text_of(app).splitlines()[0]
            assert "replay 04:02:26 UTC +5s/35s x1 PAUSED" in top, (size, top)
            assert "upd" not in top, top
            p = app.player
            # Two days of recording: spans in days and hours, not 172680.0 s.
            end, p.end = p.end, p.start + 172_680
            assert "UTC +14h17m/1d23h x1" in app.link_text(p.start + 51_445)
            p.end = end


async def test_a_seek_outside_the_recording_says_where_it_landed(monkeypatch):
    """`:seek 999` landed at the end and `:seek 04:00` (before the start) too, read as
    tomorrow, without a word (an SRE's run)."""
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        app.run_command_line(":seek 04:00")
        await settle(pilot, app)
        assert p.position == p.start
        app.run_command_line(":seek 999")
        await settle(pilot, app)
        assert p.position == p.end
        said = [n.message for n in app._notifications]
        # Its ends as the header says them, to the nearest second (cut to the second, the
        # end read 04:02:55 under a header at 04:02:56: a newcomer's run).
        assert said[:2] == ["seek: 04:00 is before the recording (04:02:21 to 04:02:56): at "
                            "its start",
                            "seek: 999 is after the recording (04:02:21 to 04:02:56): at its "
                            "end"]
        assert said[2:] == [END_NOTICE], said


END_NOTICE = ("end of the recording (04:02:56 UTC, 35s in): p plays it again from the start; "
              "\\[ or :seek -30 looks back")


async def test_a_step_moves_the_header_and_a_clock_seek_reads_its_tick(monkeypatch):
    """In whole seconds every other ']' (half a second) left the header as it was, and
    ':seek 04:02:30' read 04:02:29: its tick, 04:02:29.99, was cut to the second (a replay
    drill)."""
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("p")
        app.seek_to("10")
        await settle(pilot, app)
        tops = [text_of(app).splitlines()[0]]
        for _ in range(2):
            await pilot.press("right_square_bracket")
            await settle(pilot, app)
            tops.append(text_of(app).splitlines()[0])
        assert [t.split(" UTC ")[1].split("/")[0] for t in tops] == ["+10s", "+10.5s", "+11s"]
        assert len(set(tops)) == 3, tops
        app.seek_to("04:02:30")
        await settle(pilot, app)
        assert "replay 04:02:30 UTC +9s/35s" in text_of(app).splitlines()[0]


async def test_the_end_of_the_recording_is_said_and_p_plays_it_again(monkeypatch):
    """It stopped with "done" and "upd 0.0s ago" in the header and not a word, and 'p' there
    toggled "done" to PAUSED and back with nothing moving; ':seek end' was refused (a replay
    drill)."""
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        app.run_command_line(":seek end")
        await settle(pilot, app)
        assert p.position == p.end and p.done
        top = text_of(app).splitlines()[0]
        assert "+35s/35s x1 done" in top and "upd" not in top, top
        assert [n.message for n in app._notifications] == [END_NOTICE]
        assert "replay 04:02:56 UTC" in top, top  # the notice's end, as the header says it
        app.run_command_line(":seek 04:02:56")  # the time the header shows: no "after" note
        await settle(pilot, app)
        assert [n.message for n in app._notifications] == [END_NOTICE]
        app.run_command_line(":seek start")
        await settle(pilot, app)
        assert p.position == p.start
        app.run_command_line(":seek end")
        await settle(pilot, app)
        await pilot.press("p")
        await settle(pilot, app)
        assert p.position < p.start + 1 and not p.paused and not p.done
        # Said once per arrival at the end.
        assert [n.message for n in app._notifications] == [END_NOTICE, END_NOTICE]
        # A bad seek: the domain's one sentence, which names the ends with the rest (the app
        # glued "…, nor start or end" onto it: a review).
        app.run_command_line(":seek soon")
        await pilot.pause()
        assert [n.message for n in app._notifications if n.message.startswith("seek:")] == [
            "seek: 'soon' is not seconds (90, +10, -30), a span (2h, +1h30m), a UTC clock time "
            "(04:02:30, 2026-12-05T04:02), start, end or a node (gpu0005: its next recorded "
            "event)"]


async def test_seek_to_a_node_goes_to_its_next_recorded_event(monkeypatch):
    """An SRE's post-mortem: "jump to when gpu0006 failed" had no way but 'n' through every
    other node's events, and ':seek gpu0006' was refused as no time. It goes to the tick that
    shows the node's next recorded event (the XID 79 at ~12 s), past its last one back to its
    first, and says where it landed; a node with no event, or no node, says so and stays."""
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        await pilot.press("p")
        app.run_command_line(":seek gpu0006")
        await settle(pilot, app)
        node = app.state.nodes["gpu0006"]
        assert any(e.kind == "xid" for e in app.event_log.lines() if e.source == "gpu0006")
        # The tick that applies the XID, no later: the tick before does not show it.
        landed = p.position
        assert landed == p.shown_at(p.node_events["gpu0006"][0])
        assert p.paused and "XID 79" in " ".join(f.text for f in node.all_findings)
        said = [str(n.message) for n in app._notifications]
        assert any("gpu0006's next recorded event at" in m for m in said), said
        app.seek_to("end")
        await settle(pilot, app)
        app.seek_to("gpu0006")  # none after the end: back at its first, and it says so
        await settle(pilot, app)
        assert p.position == landed
        assert any("no later one: back at its first" in str(n.message)
                   for n in app._notifications)
        app.seek_to("gpu0001")  # never said anything: no move
        app.seek_to("gpu9999")  # no such node: refused, the node form in the sentence
        await settle(pilot, app)
        assert p.position == landed
        said = [str(n.message) for n in app._notifications]
        assert any("gpu0001 has no recorded event" in m for m in said), said
        assert any("'gpu9999' is not seconds" in m and "or a node (gpu0005" in m for m in said)


async def test_t_in_the_events_view_goes_to_the_time_of_the_line_under_the_cursor(monkeypatch):
    """Found at the recording's end, "gpu0006 verdict ok -> failed" was to be typed back as
    ':seek 04:02:33' (a replay UX run), and a verdict change is in no recording for ':seek
    gpu0006' to find. 't' on a line goes to the tick that shows it: a verdict's own tick (the
    one before shows the node ok), an agent's event the tick that received it."""
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        await pilot.press("p")
        app.seek_to("end")
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        assert "To its time" in text_of(app).splitlines()[-1]
        view = app.screen
        rows = view.rows
        verdict = next(i for i, (_s, ln) in enumerate(rows)
                       if ln.kind == "verdict" and ln.source == "gpu0006"
                       and ln.text.startswith("ok -> failed"))
        view.table.action_cursor_to(verdict)
        when = rows[verdict][1].ts
        await pilot.press("t")
        await settle(pilot, app)
        assert p.position == when and p.paused
        assert app.state.nodes["gpu0006"].verdict.value == "failed"
        app.seek_to("-0.5")  # the tick before it: not failed yet
        await settle(pilot, app)
        assert app.state.nodes["gpu0006"].verdict.value != "failed"
        # Every line: the tick that first shows it (an interruption is dated by the
        # scheduler's time, an XID by the agent's clock, before the tick that received them).
        app.seek_to("end")
        await settle(pilot, app)
        lines = [ln for _s, ln in view.rows]
        assert {"xid", "verdict", "interruption"} <= {ln.kind for ln in lines}
        for line in lines:
            app.seek_to("end")
            await settle(pilot, app)
            await pilot.pause()
            view.table.action_cursor_to(next(i for i, (_s, ln) in enumerate(view.rows)
                                             if ln == line))
            await pilot.press("t")
            await pilot_until(pilot, lambda: not p.busy and app._sought is None, "landed")
            assert line in list(app.event_log.lines()), line
            landed = p.position
            app.seek_to("-0.5")
            await settle(pilot, app)
            assert line not in list(app.event_log.lines()), (line, landed - p.start)


async def test_after_t_the_cursor_is_on_the_line_it_went_to(monkeypatch):
    """'t' on a verdict line at the recording's end went back to its tick, but the timeline
    put back there is numbered anew (``EventLog.renumber_after``): the cursor kept its row
    number, on another line, and a second 't' or enter acted on that one (a review)."""
    frozen_wall(monkeypatch)
    app = ReplayApp(FIXTURE, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        p = app.player
        await pilot.press("p")
        app.seek_to("end")
        await settle(pilot, app)
        await pilot.press("5")
        await pilot.pause()
        view = app.screen
        rows = view.rows
        verdict = next(i for i, (_s, ln) in enumerate(rows)
                       if ln.kind == "verdict" and ln.source == "gpu0006"
                       and ln.text.startswith("ok -> failed"))
        line = rows[verdict][1]
        view.table.action_cursor_to(verdict)
        await pilot.press("t")
        await pilot_until(pilot, lambda: not p.busy and app._sought is None, "landed")
        await pilot.pause()
        view.update_body(p.position)
        row = view.table.current_row
        assert row is not None and row[1] == line, (row, line)


async def test_seek_to_a_node_heard_later_or_retired_says_it_has_no_event(monkeypatch, tmp_path):
    """':seek gpu0002' of a node the recording names but the replay has not heard yet (born
    later), or ':seek gpu0003' of one retired since, read "'gpu0002' is not seconds (90, ...)
    or a node", as if no such node were in the recording (a review); a node in none of it
    still gets that sentence."""
    from fleetdeck.console.recording import RecordingWriter
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    frozen_wall(monkeypatch)
    t0 = 1_800_000_000.0
    nodes = [FakeNode(f"gpu000{i}", cluster="later", t0=t0) for i in range(1, 4)]
    path = tmp_path / "later.jsonl"
    w = RecordingWriter(path, "later", source="test", started=t0)
    for i in range(0, 11):
        for f in nodes:
            if (f.node_id == "gpu0002" and i < 6) or (f.node_id == "gpu0003" and i > 3):
                continue
            f.now = t0 + i
            if i == (6 if f.node_id == "gpu0002" else 0):
                w.write(t0 + i, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
                w.write(t0 + i, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
            w.write(t0 + i, f.topic(Kind.TELEMETRY), codec.encode(f.telemetry(advance=0)))
    w.write(t0 + 3.5, nodes[2].topic(Kind.BIRTH), b"", 1, True)  # retired
    w.close()
    app = ReplayApp(path, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("p")
        assert "gpu0002" not in app.state.nodes
        app.seek_to("gpu0002")
        app.seek_to("end")
        await settle(pilot, app)
        assert "gpu0003" not in app.state.nodes
        app.seek_to("gpu0003")
        app.seek_to("gpu0009")
        await pilot.pause()
        said = [str(n.message) for n in app._notifications if str(n.message).startswith("seek")]
        assert any("gpu0002 has no recorded event" in m for m in said), said
        assert any("gpu0003 has no recorded event" in m for m in said), said
        assert any("'gpu0009' is not seconds" in m for m in said), said


async def test_a_seeks_landing_is_painted_when_its_one_shot_timer_is_lost(monkeypatch):
    """A seek's last slice, when long (SLICE_S / 2 or more), leaves its paint to a one-shot
    timer (``_show_when_idle``), and Textual 8.2's one-shot timer can end without calling back
    on a loaded host (docs/reliability.md, "The console's tick"): the replay's own tick paints
    the landing then, a tick on; nothing waits for that timer."""
    monkeypatch.setattr(replay, "SLICE_S", 0.0)  # a piece of work per slice
    app = ReplayApp(REPO / "fixtures" / "leaf_switch.jsonl.gz", speed=1.0)
    work = app.player.work

    def long_work() -> None:
        work()
        time.sleep(replay_app.SLICE_S)  # each slice long: the landing's paint is the timer's

    monkeypatch.setattr(app.player, "work", long_work)
    lost: list[bool] = []
    set_timer = ReplayApp.set_timer

    def losing(self, delay, callback=None, **kwargs):
        if getattr(callback, "__name__", "") == "_show_when_idle" and not lost:
            lost.append(True)
            return set_timer(self, 3600, None)  # never calls back
        return set_timer(self, delay, callback, **kwargs)

    monkeypatch.setattr(ReplayApp, "set_timer", losing)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("p")
        assert app.player.paused
        app.seek_to("10")
        await settle(pilot, app)
        assert lost
        await pilot_until(pilot, lambda: "+10s/" in text_of(app), "the landing painted")
