"""The fleet grid reads without colour: every cell state has its own glyph, and its colours stay
apart where a 256-colour terminal (tmux's default) used to merge them.

The grid is rendered by the real widget in the real app and theme; its segments' colours are
then downgraded the way the terminal driver does for a 256- or 16-colour terminal."""

import pytest
from rich.color import ColorSystem
from rich.segment import Segment

from fleetdeck.console.rows import HEAT_LEVELS, Cell
from fleetdeck.console.tui.fleet_grid import GLYPHS, HEAT_GLYPHS, LEGEND
from tests.tui.conftest import World
from tests.tui.test_views import text_of

STATES = [Cell.OK, Cell.IDLE, Cell.DEGRADED, Cell.FAILED, Cell.DRAINING, Cell.DRAINED,
          Cell.STALE, Cell.OFFLINE, Cell.MISSING, Cell.EMPTY, Cell.RAIL_FAILED,
          Cell.RAIL_DEGRADED, Cell.OUT, Cell.NO_GPU]
NAMES = {Cell.OK: "busy", Cell.IDLE: "idle", Cell.DEGRADED: "degraded", Cell.FAILED: "failed",
         Cell.DRAINING: "draining", Cell.DRAINED: "drained", Cell.STALE: "stale",
         Cell.OFFLINE: "offline", Cell.MISSING: "missing", Cell.EMPTY: "waiting",
         Cell.RAIL_FAILED: "IB fault", Cell.RAIL_DEGRADED: "IB warn", Cell.OUT: "out",
         Cell.NO_GPU: "no GPU"}
SYSTEMS = {"truecolor": ColorSystem.TRUECOLOR, "256": ColorSystem.EIGHT_BIT,
           "16": ColorSystem.STANDARD}
# The pairs a new user could not tell apart at 256 colours, and degraded/failed (one red at 16).
CONFUSED = [(Cell.OK, Cell.IDLE), (Cell.DEGRADED, Cell.DRAINING), (Cell.FAILED, Cell.OFFLINE),
            (Cell.DEGRADED, Cell.FAILED), (Cell.DRAINING, Cell.DRAINED),
            (Cell.STALE, Cell.EMPTY)]


def cells_of(strips: list[list[Segment]]) -> list[tuple[str, object]]:
    """(glyph, style) of every grid cell, in order (the label and the gaps skipped)."""
    out = []
    for segs in strips:
        for seg in segs[1:]:
            out.extend((ch, seg.style) for ch in seg.text if ch != " ")
    return out


async def render_states(codes: list[int], metric: str = "health") -> dict[int, tuple[str, object]]:
    """Render one node per code (all eight GPUs in that state) with the real grid."""
    world = World(n=len(codes))
    world.populate()
    by_node = dict(zip(world.fleet.names, codes, strict=True))
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.grid
        grid.metric = metric
        grid.codes = lambda st: (by_node[st.node_id],) * 8
        grid.blur()
        await pilot.pause()
        lines = (len(codes) + grid.per_line - 1) // grid.per_line
        strips = [list(grid.render_line(y)) for y in range(lines)]
    cells = cells_of(strips)
    assert len(cells) == 8 * len(codes)
    return {code: cells[8 * i] for i, code in enumerate(codes)}


def colour(style, system: ColorSystem):
    c = style.color
    return None if c is None else c.downgrade(system).get_truecolor()


@pytest.mark.parametrize("system", list(SYSTEMS), ids=list(SYSTEMS))
async def test_every_state_has_its_own_glyph_at_any_colour_depth(system):
    seen = await render_states(STATES)
    glyphs = [seen[c][0] for c in STATES]
    assert glyphs == [GLYPHS[c] for c in STATES]
    assert len(set(glyphs)) == len(STATES), "glyphs alone must tell every state apart"
    pairs = {(seen[c][0], colour(seen[c][1], SYSTEMS[system])) for c in STATES}
    assert len(pairs) == len(STATES)
    dim = colour(seen[Cell.STALE][1], ColorSystem.TRUECOLOR)
    assert dim is not None and max(dim) < 200, "stale cells must be dim, not white"


@pytest.mark.parametrize("system", list(SYSTEMS), ids=list(SYSTEMS))
async def test_colours_that_merged_at_256_stay_apart(system):
    seen = await render_states(STATES)
    for a, b in CONFUSED:
        ca, cb = colour(seen[a][1], SYSTEMS[system]), colour(seen[b][1], SYSTEMS[system])
        assert ca != cb, f"{NAMES[a]} and {NAMES[b]} share a colour at {system}"


async def test_metric_buckets_are_heights():
    codes = [Cell.HEAT0 + i for i in range(HEAT_LEVELS)]
    seen = await render_states(codes, metric="util")
    assert "".join(seen[c][0] for c in codes) == HEAT_GLYPHS


async def test_legend_shows_each_glyph_with_its_word():
    assert [NAMES[c] for c, _label in LEGEND] == [label for _c, label in LEGEND]
    world = World()
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        text = text_of(world.app)
    for code, label in LEGEND:
        assert f"{GLYPHS[code]}{label}" in text
    # The real fleet: busy nodes (job 41), idle ones, a throttled GPU, downed ports' GPUs (the
    # three ports hang off one rail switch, so the switch is blamed and they read degraded).
    grid_lines = [line for line in text.splitlines() if line.startswith(" gpu00")]
    body = "".join(grid_lines)
    for code in (Cell.OK, Cell.IDLE, Cell.DEGRADED):
        assert GLYPHS[code] in body


async def test_cursor_keeps_the_glyph_under_it():
    world = World()
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.grid
        assert grid.has_focus
        first = list(grid.render_line(0))
        assert first[1].text == GLYPHS[Cell.OK]  # gpu0001 gpu0 is busy (job 41)
        assert first[1].style.reverse


async def test_table_styles_resolve_theme_colours():
    """Alpha and "auto" theme colours ($boost, $text-muted, $text-disabled) resolve against the
    background: the header is not white on white, muted and stale rows are not plain text."""
    world = World()
    world.populate()
    async with world.app.run_test(size=(160, 48)) as pilot:
        world.tick()
        await pilot.press("2")
        await pilot.pause()
        table = world.app.screen.table
        header = table._style("header")
        assert header.color != header.bgcolor
        text, muted, stale = (table._style(n).color for n in ("text", "muted", "stale"))
        assert len({text, muted, stale}) == 3
        assert table._style("cursor").color is None  # the row keeps its verdict colour
        row = list(table.render_line(1))  # the cursor row: gpu0003, degraded (sorted first)
        assert row[1].style.color == table._style("degraded").color
        assert row[1].style.bgcolor == table._style("cursor").bgcolor


async def test_no_color_is_honoured(monkeypatch):
    """NO_COLOR turns the console monochrome (Textual's filter; nothing here forces colour) and
    the grid still tells every state apart by glyph."""
    from textual.filter import Monochrome

    monkeypatch.setenv("NO_COLOR", "1")
    seen = await render_states(STATES)
    assert len({seen[c][0] for c in STATES}) == len(STATES)
    world = World()
    world.populate()
    assert world.app.no_color
    assert any(isinstance(f, Monochrome) for f in world.app._filters)
    async with world.app.run_test(size=(100, 30)) as pilot:  # every view draws (it crashed)
        for key in ("1", "2", "enter", "escape", "3", "4", "5", "question_mark"):
            world.tick()
            await pilot.press(key)
            await pilot.pause()
            assert "fleetdeck" in text_of(world.app)


def test_the_helps_glyph_lists_use_the_dot_only_as_a_glyph():
    """``·`` is a stale node's cell (and a silent port's in the fabric matrix): the help's
    glyph lists used it as a separator too ("? waiting for telemetry · ↯ IB fault", "? waiting
    · ▶ suspected switch"), so a reader took the "· stale" beside them for a separator and a
    word without a glyph (a 3 a.m. drive)."""
    from fleetdeck.console.tui.modals import HELP

    assert GLYPHS[Cell.STALE] == "·"
    shapes = [g for g in GLYPHS.values() if not g.isascii()]
    lists = [line for line in HELP.splitlines() if sum(g in line for g in shapes) >= 3]
    assert len(lists) >= 3, lists
    for line in lists:
        for after in line.split("·")[1:]:
            assert after.startswith((" stale", " silent")), line
