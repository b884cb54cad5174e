"""What a newcomer run found: log lines over the screen, "every node reports healthy" of an
empty fleet, the replay's state cut off at 80 columns, the command line's help, a resume of a
node that is not drained, command keys that did nothing in a read-only console, the history
chart's y axis, and an offline node's last figures shown as live."""

import io
import itertools
import logging

from tests.tui.conftest import SIZE, World
from tests.tui.test_views import text_of


def notices(app) -> list[str]:
    """The notifications as the operator reads them (their markup rendered)."""
    from textual.content import Content

    return [Content.from_markup(n.message).plain if n.markup else n.message
            for n in app._notifications]


async def test_log_records_go_to_the_log_file_and_notices_not_the_terminal(tmp_path):
    terminal = io.StringIO()
    handler = logging.StreamHandler(terminal)  # what setup_logging installs, on stderr
    root = logging.getLogger()
    root.addHandler(handler)
    log_path = tmp_path / "state" / "console.log"
    try:
        world = World()
        world.app.log_path = log_path
        async with world.app.run_test(size=SIZE) as pilot:
            world.tick()
            await pilot.pause()
            # The connection's own records: the header says it; a toast every minute covered
            # the last-events panel while the broker was down (a 3 a.m. drive). Counted and
            # written to the file, not shown, and they do not use up the logger's notice.
            from fleetdeck.transport import LINK_STATE

            logging.getLogger("fleetdeck.transport").warning(
                "connection refused, retrying in 2.0 s", extra=LINK_STATE)
            await pilot.pause()
            assert not any("connection refused" in n for n in notices(world.app))
            logging.getLogger("fleetdeck.transport").warning(
                "cannot reach the MQTT broker at 127.0.0.1:1 [x] retrying in 1.0 s")
            await pilot.pause()
            assert terminal.getvalue() == ""
            shown = notices(world.app)
            assert any("cannot reach the MQTT broker" in n and "[x]" in n for n in shown), shown
            assert world.app.log_notices is not None and world.app.log_notices.count == 2
        assert "WARNING fleetdeck.transport: cannot reach" in log_path.read_text()
        assert "connection refused, retrying" in log_path.read_text()
        # The terminal is the shell's again: records go where they went before.
        logging.getLogger("fleetdeck.transport").warning("after")
        assert "after" in terminal.getvalue()
    finally:
        root.removeHandler(handler)


async def test_an_empty_fleet_is_not_called_healthy():
    from fleetdeck.brokerurl import parse_broker_url
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp

    # A broker that is not there: the feed exists and never connects.
    app = FleetdeckApp(cluster="demo", url=parse_broker_url("mqtt://127.0.0.1:1"),
                       auto_tick=False, audit=MemoryAudit())
    async with app.run_test(size=(80, 24)) as pilot:
        app.tick()
        await pilot.pause(0.3)
        app.tick()
        await pilot.pause()
        text = text_of(app)
        assert "every node reports healthy" not in text
        # "not connected to the broker (connecting)" until the first attempt fails, then why.
        assert ("Top problems unknown: not connected to the broker" in text
                or "Top problems unknown: cannot reach the MQTT broker" in text), text


async def test_no_nodes_without_a_broker_is_not_called_healthy():
    world = World()  # no feed (as a replay), nothing received
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "every node reports healthy" not in text
        assert "Top problems unknown: no node in what this console has seen yet" in text


async def test_replay_state_fits_an_80_column_header(tmp_path):
    import shutil

    from fleetdeck.console.tui.replay_app import ReplayApp
    from tests.conftest import REPO

    fixture = REPO / "fixtures" / "xid79.jsonl.gz"
    # The console's R names its recordings so; its cluster is the fixture's, "demo" is not.
    path = tmp_path / "fleetdeck-demo-20260125T151223.jsonl.gz"
    shutil.copy(fixture, path)
    shutil.copy(fixture.with_name(fixture.name + ".idx"), path.with_name(path.name + ".idx"))
    app = ReplayApp(path, speed=1.0)
    app.auto_tick = False
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.seek_to("5")
        await pilot.pause()
        top = text_of(app).splitlines()[0]
        assert "replay 04:02:26 UTC +5s/35s x1 playing" in top, top
        await pilot.press("p")
        await pilot.pause()
        top = text_of(app).splitlines()[0]
        assert "PAUSED" in top, top
        assert "demo-20260125T151223" in top, top


async def test_command_line_answers_say_what_is_missing(world):
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("colon", *"foo", "enter")
        await pilot.pause()
        unknown = notices(world.app)[-1]
        assert "unknown command ':foo'" in unknown
        assert ":ctx [NAME]" in unknown and ":resume HOSTLIST" in unknown, unknown
        for typed, needs in (("drain", "needs a host list"), ("resume", "needs a host list"),
                             ("restart", "needs a job id")):
            await pilot.press("colon", *typed, "enter")
            await pilot.pause()
            said = notices(world.app)[-1]
            assert f"':{typed}' {needs}" in said, said
            assert "unknown command" not in said
        assert "gpu[0001-0004]" in notices(world.app)[-2]  # an example, shown whole


async def test_resume_of_a_node_that_is_not_drained_says_so(world):
    async with world.app.run_test(size=(80, 24)) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("colon", *"resume gpu0001", "enter")
        await pilot.pause()
        text = text_of(world.app)
        assert "Resume 1 node: gpu0001?" in text
        assert "not drained: gpu0001" in " ".join(text.split()), text


async def test_command_keys_in_a_read_only_console_say_it_is_read_only(ro_world):
    world = ro_world
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.press("2")
        world.tick()
        await pilot.pause()
        footer = text_of(world.app).splitlines()[-1]
        assert "Drain" not in footer  # still not offered
        await pilot.press("r")
        await pilot.pause()
        said = notices(world.app)
        assert said and "read-only" in said[-1] and "r (drain) is off" in said[-1], said
        await pilot.press("3")
        await pilot.pause()
        await pilot.press("r")
        await pilot.pause()
        assert "r (restart) is off" in notices(world.app)[-1]
        world.app.run_command_line(":drain gpu0001")
        await pilot.pause()
        assert "drain is off" in notices(world.app)[-1]
        before = len(notices(world.app))
        await pilot.press("1", "u")  # no command on u in the overview: nothing to refuse
        await pilot.pause()
        assert len(notices(world.app)) == before
        assert not world.app.tracker.requests


async def test_history_clock_chart_title_fits_and_its_axis_is_evenly_labelled(tmp_path):
    import re

    from fleetdeck.console.store import Store, TickRows
    from fleetdeck.console.tui.history_view import ChartBox
    from tests.tui import test_history_view as th

    world = World()
    world.populate()
    last = int(world.clock() // 60)
    gpu, ports = [], []
    for minute in range(last - 30, last):
        for g in range(8):  # clocks from 345 to 1980 MHz: the newcomer's chart
            clock = 345.0 + (1980 - 345) * ((minute + g) % 5) / 4
            gpu.append((th.NODE, g, minute, 60, 90.0, 50.0, 400.0, clock, 1))
    db = tmp_path / "history.db"
    store = await Store.open(db)
    try:
        await store.write_rows(TickRows(gpu=gpu, ports=ports))
    finally:
        await store.close()
    world.app.stores[world.app.cluster] = db
    async with world.app.run_test(size=(80, 24)) as pilot:
        view = await th.open_history(world, pilot)
        box = view.query_one("#chart-clock", ChartBox)
        box.scroll_visible(animate=False, top=True)
        await pilot.pause(0.3)
        assert box.query_one(".chart-values").size.height == 1  # "7:…" not on a line of its own
        lines = text_of(world.app).splitlines()
        top = next(i for i, ln in enumerate(lines) if "SM clock (min)" in ln) + 1
        bottom = next(i for i in range(top + 1, len(lines)) if "└" in lines[i])
        canvas = lines[top + 1:bottom]
        labelled = [(i, float(m.group(1))) for i, ln in enumerate(canvas)
                    if (m := re.match(r"\s*([\d.]+)┤", ln))]
        assert labelled[0][0] == 0 and labelled[-1][0] == len(canvas) - 1, canvas  # both ends
        rows = {b[0] - a[0] for a, b in itertools.pairwise(labelled)}
        steps = {b[1] - a[1] for a, b in itertools.pairwise(labelled)}
        assert len(labelled) >= 3 and len(rows) == 1 and len(steps) == 1, canvas
        assert labelled[0][1] >= 1980 and labelled[-1][1] <= 345, labelled


async def test_a_silent_nodes_figures_are_marked_last_known(world):
    from fleetdeck.console.tui.screens.nodes import NodesScreen

    others = world.fleet.names[1:]
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(60):  # a minute without a word from gpu0001
            world.fleet.telemetry(world.ingest, names=others)
            world.tick(1)
        await pilot.pause()
        st = world.app.state.nodes["gpu0001"]
        assert st.stale or st.online is False
        status = next(ln for ln in text_of(world.app).splitlines() if "enter: detail" in ln)
        assert "gpu0001 gpu0 leaf00 rack r00  last known 60s ago: util" in status, status
        await pilot.press("2")
        world.fleet.telemetry(world.ingest, names=others)
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, NodesScreen)
        table = screen.table
        table.move_to_key("gpu0002")  # the cursor's own style off the rows compared
        await pilot.pause()

        def figure_styles(node: str) -> list[bool]:
            y = table.rows.index(node) - table.top + 1
            return [bool(seg.style and seg.style.italic)
                    for seg in table.render_line(y) if "%" in seg.text]

        assert figure_styles("gpu0001") == [True], "UTIL of a silent node not marked"
        assert figure_styles("gpu0005") == [False]
        await pilot.press("colon", *"node gpu0001", "enter")
        await pilot.pause()
        assert "figures below: last known, not live" in text_of(world.app)


async def test_node_detail_of_a_stale_node_renders(world):
    others = world.fleet.names[1:]
    async with world.app.run_test(size=SIZE) as pilot:
        for _ in range(60):
            world.fleet.telemetry(world.ingest, names=others)
            world.tick(1)
        assert world.app.state.nodes["gpu0001"].stale
        await pilot.press("colon", *"node gpu0001", "enter")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        assert "gpu0001  alloc*  stale  last telemetry 60.5s ago" in text_of(world.app)


async def test_node_detail_of_a_node_not_heard_by_this_console_does_not_say_never():
    """"last telemetry never" of a node the store knew from before this console started read
    as a node that never reported (a 3 a.m. drive)."""
    world = World()
    world.fleet.birth(world.ingest)
    others = world.fleet.names[1:]
    async with world.app.run_test(size=SIZE) as pilot:
        world.fleet.telemetry(world.ingest, names=others)
        world.tick(1)
        await pilot.press("colon", *"node gpu0001", "enter")
        await pilot.pause()
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "last telemetry none since this console started (h: its history)" in text
        assert "last telemetry never" not in text


async def test_a_console_cut_off_from_its_broker_says_its_figures_are_old(world):
    """Drill: with the broker gone, the overview said "none: every node reports healthy"."""
    from tests.tui.fleet import port_down

    # A failed node under job 41: work at stake, whatever the console's own connection.
    world.fleet.telemetry(world.ingest, job={n: "41" for n in world.fleet.names[:4]},
                          faults={"gpu0002": port_down("mlx5_ib5")})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        world.app.state.lose_sight(world.clock())
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "Top problems unknown: no data since" in text
        assert "lost its broker connection" in text
        # The figures are greyed (they looked live); the top problems saying why are not.
        screen = world.app.screen
        assert screen.query_one("#grid").has_class("-cut-off")
        assert not screen.query_one("#problems").has_class("-cut-off")
        assert not screen.query_one("#header").has_class("-cut-off")
        await pilot.press("6")
        await pilot.pause()
        text = text_of(world.app)
        assert "no data: the connection to the broker is lost" in text
        assert "1 losing work now" in text  # gpu0002 under job 41; not the console's own
        assert world.app.screen.query(".-cut-off")
        world.app.state.regain_sight(world.clock())
        world.tick()
        await pilot.pause()
        assert not world.app.screen.query(".-cut-off")


async def test_a_second_loss_soon_after_a_return_says_its_own_start(world):
    """Lost, back 10 s, lost again 20 s later (within the agents' 30 s grace, one outage for
    staleness): "no data since" named the first loss's time, 30 s before the data stopped."""
    from fleetdeck.console.judgements import utc_hms

    async with world.app.run_test(size=SIZE) as pilot:
        state = world.app.state
        first = world.clock()
        state.lose_sight(first)
        world.clock.advance(10)
        state.regain_sight(world.clock())
        world.clock.advance(20)
        world.tick()
        second = world.clock()
        state.lose_sight(second)
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert f"no data since {utc_hms(second)}" in text, text
        assert utc_hms(first) not in text
        await pilot.press("6")
        await pilot.pause()
        assert "no data: the connection to the broker is lost" in text_of(world.app)


async def test_a_views_key_again_closes_the_node_detail_left_open_on_it(world):
    """4, enter (a detail over the fabric view), 2, 4 showed the detail again, and 4 once more
    did nothing: a view's key shows the view itself, the first time (a 3 a.m. drive read the
    detail kept under the overview's lit tab as the overview gone wrong)."""
    from fleetdeck.console.tui.screens.fabric import FabricScreen
    from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        world.app.open_node("gpu0009")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        assert isinstance(world.app.screen, FabricScreen)
        world.app.open_node("gpu0009")
        await pilot.pause()
        await pilot.press("4")  # the view's key on its own detail: the view
        await pilot.pause()
        assert isinstance(world.app.screen, FabricScreen)


async def test_the_header_says_what_needs_attention_before_the_routine_figures(world):
    """At 80 columns the header's end is cut: "cmds 1 open" and "● RECORDING" went with it."""
    async with world.app.run_test(size=(80, 24)) as pilot:
        world.tick()
        await pilot.pause()
        world.app.session.drain(["gpu0001"], "x")
        header = world.app.header_text(world.clock())
        assert "cmds 1 open" in header
        assert header.index("cmds 1 open") < header.index("upd ") < header.index("op alice")


async def test_a_store_that_cannot_be_opened_is_said_for_as_long_as_the_console_runs(tmp_path):
    """``console --db`` on a path that cannot be opened showed one toast, and then nothing
    said history was not being kept: the header says it, and the events log has why."""
    from fleetdeck.brokerurl import parse_broker_url
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.tui.app import FleetdeckApp
    from tests.conftest import eventually

    app = FleetdeckApp(cluster="demo", url=parse_broker_url("mqtt://127.0.0.1:1"),
                       auto_tick=False, audit=MemoryAudit(),
                       store_path=tmp_path / "no-such-dir" / "sub" / "x.db")
    (tmp_path / "no-such-dir").write_text("a file where a directory should be")
    async with app.run_test(size=(160, 48)) as pilot:
        await eventually(lambda: "history" in app.session.problems, 10, message="open failed")
        for _ in range(3):
            app.tick()
            await pilot.pause(0.1)
        assert "NO HISTORY (store: see events)" in app.header_text(app.clock())
        assert any("history not kept" in line.text for line in app.session.log.lines())


async def test_a_mistyped_environment_variable_is_said_in_the_timeline(monkeypatch):
    """Said on stderr before the screen took the terminal, where no one reads it."""
    monkeypatch.setenv("FLEETDECK_BROKR", "mqtt://127.0.0.1:1")
    world = World()
    async with world.app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        said = [ln.text for ln in world.app.session.log.lines() if ln.severity == "warn"]
        assert said == ["$FLEETDECK_BROKR is not a fleetdeck setting (did you mean "
                        "FLEETDECK_BROKER?); it is ignored."]


async def test_a_node_typed_without_its_zero_padding_names_the_node_meant():
    """`:drain gpu1`, `:resume gpu1`, `:node gpu1` for gpu0001 (a tired operator at 3 a.m.)
    read "unknown nodes: gpu1" and "no node named gpu1": the CLI and the console say the node
    to type."""
    world = World()
    world.populate()
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        for line, said in ((":drain gpu[1-2]", "unknown nodes: gpu[1-2] (did you mean "
                                               "gpu[0001-0002]?)"),
                           (":resume gpu1", "unknown nodes: gpu1 (did you mean gpu0001?)"),
                           (":node gpu1", "no node named gpu1 (did you mean gpu0001?)"),
                           # A job id typed as 'job41' names the job meant; one from memory,
                           # the running jobs (the CLI's restart-job says the same).
                           (":restart job41", "unknown job job41: the scheduler has published "
                                              "no such job on cluster 't' (did you mean "
                                              "41?)"),
                           (":restart 999", "unknown job 999: the scheduler has published no "
                                            "such job on cluster 't' (running there: 41)")):
            world.app.run_command_line(line)
            await pilot.pause()
            assert notices(world.app)[-1] == said
        assert not world.app.tracker.requests


async def test_a_cut_burst_is_in_the_header_and_no_fleet_is_called_healthy_under_it():
    """Drill: with max_queued_messages 10 the console came up with 34 of 64 nodes, the
    overview said "every node reports healthy", and the cut was said only in the events
    view (``RetainedBurst._note_burst_cut``)."""
    world = World()
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        assert "every node reports healthy" in text_of(world.app)
        world.app.session.burst.burst_cut = (9, 24)
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
        assert "every node reports healthy" not in text
        assert ("Top problems none among the 24 nodes listed: the broker dropped part of its "
                "retained messages at connect (9 of 24 nodes came without their status)") in text
        assert "NODES UNLISTED? (9 cut at connect)" in world.app.header_text(world.clock())


async def test_the_command_lines_drain_refuses_a_name_no_node_can_have_as_the_cli_does(world):
    """``:drain gpu+`` (an MQTT wildcard) read "unknown nodes: gpu+" where ``fleetdeck drain
    gpu+`` said why no node can have it (a CLI fuzz round): both use one parser now."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.populate()
        world.tick()
        await pilot.pause()
        for typed, said in ((":drain gpu0001,gpu+", "node name 'gpu+' may only hold letters"),
                            (":resume gpu/0001", "node name 'gpu/0001' may only hold"),
                            (":drain gpu\x1b0001", "node name 'gpu\\x1b0001' may only hold")):
            world.app.run_command_line(typed)
            await pilot.pause()
            shown = notices(world.app)[-1]
            assert said.partition("'")[0] in shown and "may only hold" in shown, shown
            assert "\x1b" not in shown and "unknown nodes" not in shown, shown
            assert said in world.audit.records[-1].detail
        assert [r.outcome for r in world.audit.records] == ["refused"] * 3
        assert not world.app.tracker.requests


async def test_the_command_lines_drain_takes_a_spaced_hostlist_as_the_cli_does(world):
    """``:drain gpu[0001, 0002]`` reached the one parser as ``gpu[0001,,0002]`` (its words
    joined by commas) and read "bad hostlist ...: empty range", where ``fleetdeck drain
    'gpu[0001, 0002]'`` drained both."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.populate()
        world.tick()
        await pilot.pause()
        world.app.run_command_line(":drain gpu[0001, 0002]")
        await pilot.pause()
        assert not [n for n in notices(world.app) if "bad hostlist" in n], notices(world.app)
        assert not [r for r in world.audit.records if r.outcome == "refused"]
        assert "Drain 2 nodes" in text_of(world.app.screen), text_of(world.app.screen)
