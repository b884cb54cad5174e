"""Keys typed in one burst, as an operator types ':drain gpu0003⏎' in one motion, as a paste or
tmux send-keys deliver them, and as a loaded machine queues them: each key is posted at once,
before the app has handled the one before. Textual routes a key to what has focus when the app
reads it, so the keys after ':' or '/' went to the old view (and its bindings), and a second
Enter reached a closed modal and took the console down."""

from textual import events
from textual.keys import _character_to_key
from textual.widgets import Input

from fleetdeck.console.tui.modals import CommandLine, DrainScreen, RestartScreen
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from tests.tui.conftest import SIZE, World, pilot_until
from tests.tui.test_command_flows import sent
from tests.tui.test_views import text_of


def burst(app, text: str) -> None:
    """Every key of ``text`` posted to the app at once ('⏎' is Enter)."""
    for ch in text:
        if ch == "⏎":
            app.post_message(events.Key("enter", "\r"))
        else:
            app.post_message(events.Key(_character_to_key(ch), ch))


async def test_a_command_typed_in_one_burst_reaches_the_command_line(world: World) -> None:
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        burst(world.app, ":drain gpu0003⏎")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain form")
        screen = world.app.screen
        assert isinstance(screen, DrainScreen), type(screen).__name__
        assert screen.radius.targets == ["gpu0003"]


async def test_keys_after_the_enter_do_not_join_the_command(world: World) -> None:
    """What follows Enter is not part of the command ('gpu0003bad'), nor typed into the drain
    form unread: the form is there to be read before it is answered."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        burst(world.app, ":drain gpu0003⏎bad DIMM⏎")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain form")
        await pilot.pause(0.3)  # the keys after the Enter reach it, and are dropped
        screen = world.app.screen
        assert isinstance(screen, DrainScreen), type(screen).__name__
        assert screen.radius.targets == ["gpu0003"]
        assert not world.published  # nothing sent without a reason typed into the form


async def test_a_double_enter_runs_the_command_once_and_does_not_crash(world: World) -> None:
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(world.app.screen, CommandLine)
        for ch in "nodes":
            await pilot.press(ch)
        burst(world.app, "⏎⏎")  # the second reached the closed command line: ScreenStackError
        await pilot_until(pilot, lambda: isinstance(world.app.screen, NodesScreen),
                          "the nodes view")
        await pilot.pause(0.3)  # the second Enter reaches the closed command line
        assert isinstance(world.app.screen, NodesScreen)
        assert world.app.is_running
        world.tick()
        await pilot.pause()
        assert "gpu0001" in text_of(world.app)


async def test_a_filter_typed_in_one_burst_reaches_the_filter_box(world: World) -> None:
    """'/' then the filter at once: the keys went to the table, whose 'r' drains and 'u'
    resumes; '/' and ':' inside the box are characters (a regex, a port name)."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        nodes = world.app.screen
        assert isinstance(nodes, NodesScreen)
        burst(world.app, "/gpu000[1-3]|r:u/x")
        await pilot_until(pilot, lambda: nodes.filter.text == "gpu000[1-3]|r:u/x",
                          "the filter typed")
        assert world.app.screen is nodes  # no drain form, no command line
        assert nodes.filter.text == "gpu000[1-3]|r:u/x"
        burst(world.app, "⏎")
        await pilot_until(pilot, lambda: not nodes.query_one("#filter").display,
                          "the filter box closed")
        assert nodes.focused is nodes.table  # the keys after it go to the table again
        burst(world.app, "/")
        await pilot_until(pilot, lambda: nodes.focused is nodes.query_one("#filter"),
                          "the filter box open again")
        assert nodes.query_one("#filter").value == "gpu000[1-3]|r:u/x"  # to edit, as before


async def test_a_key_typed_straight_after_a_view_key_acts_on_the_new_view(world: World) -> None:
    """'2' then 'r' at once: 'r' acts on the nodes view (its drain of the node under the nodes
    view's cursor), not on the overview it left, whose grid has a cursor of its own; and a
    filter typed at once after that reaches the nodes view's box."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        burst(world.app, "2r")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain form")
        screen = world.app.screen
        assert isinstance(screen, DrainScreen), type(screen).__name__
        nodes = world.app.screen_stack[-2]
        assert isinstance(nodes, NodesScreen)
        assert screen.radius.targets == nodes.targets() == ["gpu0003"]
        await pilot.press("escape")
        await pilot.pause()
        burst(world.app, "/gpu0002⏎")
        await pilot_until(pilot, lambda: nodes.filter.text == "gpu0002", "the filter typed")
        assert world.app.screen is nodes


async def test_the_drain_reason_is_what_the_box_held_at_the_enter(world: World) -> None:
    """A reason, Enter and a view key in one burst: the audit read the box after the '3' had
    gone into it ("reason-xyz3", a newcomer's run). The reason is the box at the Enter."""
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        burst(world.app, ":drain gpu0003⏎")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, DrainScreen),
                          "the drain form")
        await pilot.pause()
        burst(world.app, "reason-xyz⏎3")
        await pilot_until(pilot, lambda: bool(world.published), "the drain sent")
        await pilot.pause(0.3)
        await world.app.session.flush()
        assert [c.args.reason for c in sent(world)] == ["reason-xyz"]
        assert world.audit.records[-1].why == "reason-xyz"


async def test_a_reason_typed_straight_after_r_reaches_the_dialog(world: World) -> None:
    """``r`` and the reason in one motion: ``r`` ran only once it had gone round the table,
    and the reason's keys went to the table (a 3 a.m. drive): the box stayed empty. It is the
    same for the drain of the nodes view and of a node's detail, and a job's restart."""
    async def reason_reaches(pilot, reason: str, form: type) -> None:
        burst(world.app, "r" + reason)
        await pilot_until(pilot, lambda: isinstance(world.app.screen, form)
                          and world.app.screen.query_one("#reason", Input).value == reason,
                          f"'{reason}' in the {form.__name__}")
        await pilot.press("escape")
        await pilot.pause()

    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        await reason_reaches(pilot, "flapping ib3 OPS-102", DrainScreen)
        world.app.open_node("gpu0003")
        await pilot_until(pilot, lambda: isinstance(world.app.screen, NodeDetailScreen),
                          "the node's detail")
        await reason_reaches(pilot, "bad DIMM", DrainScreen)
        await pilot.press("3")
        await pilot.pause()
        await reason_reaches(pilot, "hung OPS-7", RestartScreen)
        assert not world.published  # typed, not sent: Enter was not pressed
