"""The node detail's trend columns say how far apart their samples are: "trends: last 16
samples" left their time scale to guess, 16 s in the demo or 160 s at a site's 10 s interval
(a newcomer's run)."""

from tests.tui.conftest import World
from tests.tui.test_views import open_first_node


async def first_node_detail() -> tuple[str, float]:
    """The first node's detail at 160x48, and that node's sample interval."""
    world = World()
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        text = await open_first_node(world, pilot)
    return text, world.app.state.nodes["gpu0001"].interval_s


async def test_the_gpu_table_says_the_trends_sample_spacing():
    text, every = await first_node_detail()
    line = next(ln for ln in text.splitlines() if "trends: last" in ln)
    assert line.rstrip().endswith(f"samples, {every:g} s apart"), line


async def test_the_port_table_says_over_what_its_error_deltas_are():
    """"ERRORS (+delta)" read `symbol_error=15889(+305)` without saying over what the +305
    was: the agent's last interval (a newcomer's run, set against N4's 10/s)."""
    text, every = await first_node_detail()
    header = next(ln for ln in text.splitlines() if ln.split()[:2] == ["PORT", "STATE"])
    assert header.rstrip().endswith(f"ERRORS (+in {every:g} s)"), header
