"""The fabric view's matrix of rail switches x nodes, driven with real keys through Pilot: the
suspected switch stands out, the cursor lands on the right node and port, enter opens it, a big
fleet is grouped (and says so), the states read at any colour depth, the tables stay reachable.
"""

import pytest
from rich.color import ColorSystem

from fleetdeck.console.fabric_map import PORT_NAMES, Port, fabric_map, plan
from fleetdeck.console.tui.fabric_matrix import FabricMatrix
from fleetdeck.console.tui.screens.fabric import FabricScreen
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.theme import PORT_GLYPHS
from fleetdeck.protocol.messages import Topology
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import port_down
from tests.tui.test_views import text_of
from tests.tui.test_views_scale import _replace


def line_of(matrix: FabricMatrix, y: int) -> str:
    return "".join(seg.text for seg in matrix.render_line(y))


def slow_link(dev: str):
    """A port that stays up at half its rate (N1 while up: erroring, at a rate that drains)."""
    def apply(tel):
        return _replace(tel, ib_ports=[_replace(p, rate_gbps=200.0) if p.dev == dev else p
                                       for p in tel.ib_ports])
    return apply


async def open_fabric(world: World, pilot, size=SIZE) -> FabricScreen:
    world.tick()
    await pilot.pause()
    await pilot.press("4")
    await pilot.pause()
    screen = world.app.screen
    assert isinstance(screen, FabricScreen)
    return screen


async def test_suspected_switch_row_stands_out_and_w_lands_on_its_port(world):
    # The world: mlx5_ib2 (rail 2) down on gpu0009, gpu0013, gpu0017, all under leaf00.
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        assert matrix.has_focus
        lines = [line_of(matrix, y) for y in range(matrix.plan.lines)]
        assert lines[0].split() == ["leaf00", "leaf01", "leaf02", "leaf03"]
        rail2 = lines[3]
        assert rail2.startswith("r2 ▶")  # the mark of a suspected switch, then its ports
        down = PORT_GLYPHS["down"]
        # leaf00's nodes in name order: gpu0001 0005 0009 0013 0017 0021
        assert rail2[4:].split()[:6] == ["■", "■", down, down, down, "■"]
        assert rail2.count(down) == 3 and "▶" not in "".join(lines[1:3] + lines[4:])
        row = list(matrix.render_line(3))
        marked = [s for s in row if s.text == down]
        assert all(s.style.bgcolor == matrix._style("suspect").bgcolor for s in marked)
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")
        status = screen.query_one("#matrix-status").render().plain
        assert "leaf00-r2" in status and "gpu0009 mlx5_ib2:1 down" in status
        assert "suspected switch" in status
        # The switch is one stop (its only problem here: w comes back to it); the arrows
        # walk its row.
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")
        await pilot.press("right")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0013", "mlx5_ib2:1")
        await pilot.press("enter")
        await pilot.pause()
        detail = world.app.screen
        assert isinstance(detail, NodeDetailScreen) and detail.node_id == "gpu0013"


async def test_cursor_keys_walk_nodes_and_rails_to_a_port(world):
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        assert matrix.selected_port() == ("gpu0001", "")
        await pilot.press("right", "right", "down", "down")
        await pilot.pause()
        column, rail = matrix.cursor()
        assert (column.nodes, rail) == (("gpu0009",), 2)
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")
        await pilot.press("right", "right", "right", "right")  # past leaf00's last node
        await pilot.pause()
        column, rail = matrix.cursor()
        assert column.leaves == ("leaf01",) and rail == 2
        await pilot.press("right_curly_bracket")  # next leaf group
        await pilot.pause()
        assert matrix.cursor()[0].nodes == ("gpu0003",)  # leaf02's first node
        for _ in range(12):  # past the last leaf group: said, not silent (a newcomer's run)
            await pilot.press("right_curly_bracket")
        await pilot.pause()
        assert "last leaf group" in [str(n.message) for n in world.app._notifications]
        for _ in range(12):
            await pilot.press("left_curly_bracket")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        assert world.app.screen.node_id == "gpu0001"


async def test_a_single_erroring_port_is_not_a_suspected_switch(world):
    world.fleet.telemetry(world.ingest, names=["gpu0006"],
                          faults={"gpu0006": slow_link("mlx5_ib5")})
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        fm = screen.map
        assert fm is not None and fm.code("gpu0006", 5) == Port.ERRORING
        assert set(fm.suspects) == {"leaf00-r2"}
        matrix = screen.matrix
        rail5 = line_of(matrix, 6)
        assert rail5.startswith("r5  ")  # no mark
        assert PORT_GLYPHS["erroring"] in rail5
        await pilot.press("w", "w", "w", "w")  # three down ports of the switch first, then it
        await pilot.pause()
        assert matrix.selected_port()[0] == "gpu0006"


@pytest.mark.parametrize(("size", "words"), [((160, 48), "a cell is up to 8 nodes"),
                                             ((80, 24), "a cell is one switch")])
async def test_a_big_fleet_is_grouped_and_says_so(size, words):
    world = World(2048)
    fleet = world.fleet
    for i, name in enumerate(fleet.names):  # 32 nodes per leaf group, in name order
        fleet.src(name).topology = Topology(rack=f"r{i // 8:02d}", leaf=f"leaf{i // 32:02d}")
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest, faults={"gpu1000": port_down("mlx5_ib6")})
    async with world.app.run_test(size=size) as pilot:
        screen = await open_fabric(world, pilot, size)
        matrix = screen.matrix
        assert matrix.plan.lines <= matrix.size.height, "the whole fabric fits"
        # Its words wrap where the legend fits two lines (80 columns).
        assert words in " ".join(text_of(world.app).split())
        # The one down port still shows in the cell that holds it (worst state wins).
        assert matrix.move_to_node("gpu1000", 6)
        await pilot.pause()
        column, _rail = matrix.cursor()
        assert len(column.nodes) > 1 and "gpu1000" in column.nodes
        assert matrix.codes(column)[matrix.plan.rails.index(6)] == Port.DOWN
        assert matrix.selected_port() == ("gpu1000", "mlx5_ib6:1")


def test_plan_fits_16384_nodes_by_grouping():
    """The layout alone (no app): 16,384 nodes in 1,024 leaf groups on a 160x48 screen."""
    from fleetdeck.console.fabric_map import FabricMap, NodeFabric

    rails = tuple(range(8))
    members = {f"leaf{g:04d}": [f"gpu{g * 16 + i:05d}" for i in range(16)] for g in range(1024)}
    nodes = {n: NodeFabric(leaf, rails, Port.OK) for leaf, ns in members.items() for n in ns}
    fm = FabricMap(sorted(members), members, list(rails), nodes, {})
    p = plan(fm, 158, 36)
    assert p.lines <= 36 and p.groups_per_cell > 1
    covered = [n for band in p.bands for b in band for c in b.columns for n in c.nodes]
    assert covered == sorted(nodes)  # every node in exactly one cell, in order
    assert plan(fm, 158, 2000).groups_per_cell == 1  # room enough: one group per block


SYSTEMS = {"truecolor": ColorSystem.TRUECOLOR, "256": ColorSystem.EIGHT_BIT,
           "16": ColorSystem.STANDARD}
STATES = [Port.OK, Port.WAITING, Port.SILENT, Port.ERRORS, Port.ERRORING, Port.FLAPPING,
          Port.DOWN]


@pytest.mark.parametrize("system", list(SYSTEMS), ids=list(SYSTEMS))
async def test_port_states_read_by_glyph_and_colour(world, system):
    glyphs = [PORT_GLYPHS[PORT_NAMES[c]] for c in STATES]
    assert len(set(glyphs)) == len(STATES), "glyphs alone tell every state apart"
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix

        def colour(code: int):
            c = matrix._code_style(code).color
            return None if c is None else c.downgrade(SYSTEMS[system]).get_truecolor()

        for a, b in ((Port.OK, Port.ERRORING), (Port.OK, Port.DOWN),
                     (Port.ERRORING, Port.DOWN), (Port.OK, Port.SILENT)):
            assert colour(a) != colour(b), f"{PORT_NAMES[a]}/{PORT_NAMES[b]} at {system}"
        text = text_of(world.app)
        for c in STATES:
            assert PORT_GLYPHS[PORT_NAMES[c]] in text  # the legend names each


async def test_tables_stay_reachable_with_tab(world):
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        assert screen.stacked and screen.leaf_table.display and screen.port_table.display
        await pilot.press("tab")
        assert screen.leaf_table.has_focus
        await pilot.press("tab")
        assert screen.port_table.has_focus
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(world.app.screen, NodeDetailScreen)
        assert world.app.screen.node_id == "gpu0009"
    # Too short for both: the matrix and the tables are pages; tab turns them.
    world = World(256)
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=(60, 20)) as pilot:
        screen = await open_fabric(world, pilot, (60, 20))
        assert not screen.stacked
        assert screen.matrix.display and not screen.leaf_table.display
        await pilot.press("tab")
        await pilot.pause()
        assert screen.leaf_table.has_focus and not screen.matrix.display
        assert "LEAF" in text_of(world.app)
        await pilot.press("tab", "tab")
        await pilot.pause()
        assert screen.matrix.has_focus and screen.matrix.display


def test_fabric_map_follows_the_fleet(world):
    world.app.session.tick()
    fm = fabric_map(world.app.state)
    assert fm.leaves == ["leaf00", "leaf01", "leaf02", "leaf03"] and fm.rails == list(range(8))
    assert [fm.code(n, 2) for n in fm.members["leaf00"]] == [
        Port.OK, Port.OK, Port.DOWN, Port.DOWN, Port.DOWN, Port.OK]
    assert fm.port("gpu0009", 2).port == "mlx5_ib2:1"


async def test_a_refresh_works_out_again_only_the_cells_of_nodes_that_moved(monkeypatch):
    """Under a stream the fabric view gets a new map every tick; a cell's state is worked out
    again only when one of its nodes moved (a port going down, then back up), so its paint
    costs what changed, not the fleet (bench/console_scale.py). What shows is as before."""
    from fleetdeck.console.tui import fabric_matrix as fm_mod

    world = World(2048)
    fleet = world.fleet
    for i, name in enumerate(fleet.names):
        fleet.src(name).topology = Topology(rack=f"r{i // 8:02d}", leaf=f"leaf{i // 32:02d}")
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest)
    worked: list[tuple[str, ...]] = []
    real = fm_mod.column_codes

    def counted(fm, column, rails):
        worked.append(column.nodes)
        return real(fm, column, rails)

    monkeypatch.setattr(fm_mod, "column_codes", counted)
    async with world.app.run_test(size=(160, 48)) as pilot:
        screen = await open_fabric(world, pilot, (160, 48))
        matrix = screen.matrix
        assert matrix.move_to_node("gpu1000", 6)
        await pilot.pause()
        column, _rail = matrix.cursor()
        rail6 = matrix.plan.rails.index(6)
        assert matrix.codes(column)[rail6] == Port.OK
        for fault, code in ((port_down("mlx5_ib6"), Port.DOWN), (None, Port.OK)):
            worked.clear()
            fleet.telemetry(world.ingest, faults={"gpu1000": fault} if fault else {})
            world.tick()
            await pilot.pause()
            assert matrix.codes(column)[rail6] == code
            assert worked == [column.nodes], "cells whose nodes did not move were worked out"
            drawn = "".join(line_of(matrix, y) for y in range(matrix.size.height))
            assert (PORT_GLYPHS["down"] in drawn) == (code == Port.DOWN)


async def test_a_node_replaced_in_its_leaf_group_is_drawn_under_its_own_name():
    """The matrix's plan follows the leaf groups' members, not only their counts: a node that
    leaves a group as another joins it (a sharded collector's hand-off, a node renamed) keeps
    the count, and the cells must show the node that is there."""
    from fleetdeck.console.fabric_map import FabricMap

    world = World(64)
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix, fm = screen.matrix, screen.map
        leaf = fm.leaves[0]
        gone = fm.members[leaf][0]
        members = {group: list(names) for group, names in fm.members.items()}
        members[leaf] = sorted([n for n in members[leaf] if n != gone] + ["gpu9999"])
        nodes = dict(fm.nodes)
        nodes["gpu9999"] = nodes.pop(gone)
        matrix.set_map(FabricMap(fm.leaves, members, fm.rails, nodes, fm.suspects, {}))
        drawn = {n for band in matrix.plan.bands for b in band for c in b.columns
                 for n in c.nodes}
        assert "gpu9999" in drawn and gone not in drawn


async def test_w_stops_once_at_a_suspected_switch_then_goes_to_the_next_problem(world):
    """A dead rail switch's ports stood between the operator and a slow link elsewhere: w
    walked every port behind the switch first (16 presses in the demo)."""
    world.fleet.telemetry(world.ingest, names=["gpu0002"],
                          faults={"gpu0002": slow_link("mlx5_ib6")})
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")  # the switch first
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0002", "mlx5_ib6:1")
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")  # and round again


async def test_w_visits_each_of_two_suspected_switches_on_one_rail(world):
    """One band holds four leaf groups: the once-per-switch stop keyed by band and rail
    skipped a second suspected switch on the same rail (review)."""
    down = port_down("mlx5_ib2")
    world.fleet.telemetry(world.ingest, names=["gpu0002", "gpu0006", "gpu0010"],
                          faults={n: down for n in ("gpu0002", "gpu0006", "gpu0010")})
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        seen = []
        for _ in range(3):
            await pilot.press("w")
            await pilot.pause()
            seen.append(matrix.selected_port())
        assert seen == [("gpu0009", "mlx5_ib2:1"), ("gpu0002", "mlx5_ib2:1"),
                        ("gpu0009", "mlx5_ib2:1")], seen


async def test_the_leaf_table_counts_the_silent_ports_of_nodes_not_heard(world):
    """An offline node's ports are neither up nor down as far as anyone knows: the leaf row
    read "UP 40" of 48 and said nothing of the other 8 (a review of the fabric view)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER

    agent = world.fleet.agents["gpu0002"]
    world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0002"),
                        codec.encode(agent.status(online=False)), world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        by_leaf = {r.leaf: r for r in screen.leaves}
        gone = by_leaf[world.app.state.nodes["gpu0002"].birth.topology.leaf]
        assert gone.silent == 8 and gone.up == gone.ports - 8
        assert all(r.silent == 0 for r in screen.leaves if r is not gone)
        await pilot.press("tab")
        await pilot.pause()
        assert "SILENT" in text_of(world.app)


async def test_w_from_a_bad_port_the_cursor_was_moved_to_goes_to_the_worst(world):
    """With the cursor moved onto a bad port (the arrows, or enter back from a node), w went on
    to the problem after it, past the suspected switch, as if it were a second w (a 3 a.m.
    drive): w goes to the worst unless it follows a w/W."""
    world.fleet.telemetry(world.ingest, names=["gpu0002", "gpu0004"],
                          faults={"gpu0002": slow_link("mlx5_ib6"),
                                  "gpu0004": slow_link("mlx5_ib7")})
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        order = matrix.bad_cells()
        assert len(order) == 3
        matrix.band, matrix.cell, matrix.rail_index = order[1]  # a slow link, not the worst
        second = matrix.selected_port()
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")  # the switch first
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == second


async def test_w_after_a_switch_died_goes_to_it_not_on_from_where_it_was():
    """The demo: w had reached gpu0035's flapping port; minutes later leaf04-r5 died, and the
    next w, back in the fabric view, went to gpu0046's erroring port past the suspected switch
    the README says w finds first (a newcomer run)."""
    world = World()
    fleet = world.fleet
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest, faults={"gpu0002": port_down("mlx5_ib6"),
                                          "gpu0003": slow_link("mlx5_ib5")})
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0002", "mlx5_ib6:1")
        await pilot.press("1")  # elsewhere, while rail 2's switch of leaf00 dies
        await pilot.pause()
        fleet.telemetry(world.ingest, faults={
            "gpu0002": port_down("mlx5_ib6"), "gpu0003": slow_link("mlx5_ib5"),
            "gpu0009": port_down(), "gpu0013": port_down(), "gpu0017": port_down()})
        world.tick()
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        assert set(matrix.map.suspects) == {"leaf00-r2"}
        await pilot.press("w")
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0009", "mlx5_ib2:1")
        await pilot.press("w")  # and on from there, as before
        await pilot.pause()
        assert matrix.selected_port() == ("gpu0002", "mlx5_ib6:1")


async def test_a_silent_fleet_s_ports_are_not_said_to_be_up(world):
    """Every agent stopped: the port table said "every IB port is ACTIVE/LinkUp without
    errors" and the line above it "0 not ok", of 192 ports no one had heard for a while (a
    newcomer's run, a simulator stopped under a console)."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.tui.fleet import CLUSTER

    for name, agent in world.fleet.agents.items():
        world.ingest.handle(topic_for(CLUSTER, Kind.STATUS, name),
                            codec.encode(agent.status(online=False)), world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        silent = sum(r.silent for r in screen.leaves)
        assert silent == sum(r.ports for r in screen.leaves) and not screen.ports
        text = text_of(world.app)
        assert "ACTIVE/LinkUp" not in text, text
        assert f"{silent} silent" in text, text


async def test_leaf_groups_run_in_number_order_past_leaf99():
    """Leaf names the fleet makes up are not padded to one width (the simulator's run leaf01 …
    leaf1024): at 16,384 nodes the matrix's blocks read leaf01, leaf1012, leaf112 … leaf20,
    string order, and ``}`` went from leaf01 to leaf10 (a 16,384-node drive). 1,024 nodes in
    128 groups of 8 have the same names past leaf99."""
    world = World(1024)
    fleet = world.fleet
    for i, name in enumerate(fleet.names):
        fleet.src(name).topology = Topology(rack=f"r{i // 4:03d}", leaf=f"leaf{i // 8 + 1:02d}")
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest, faults={"gpu1000": port_down("mlx5_ib6")})
    want = [f"leaf{g:02d}" for g in range(1, 129)]
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        labels = [b.label for band in matrix.plan.bands for b in band]
        assert labels == want
        assert screen.map.leaves == want
        await pilot.press("right_curly_bracket")  # to the next leaf group's first cell
        await pilot.pause()
        assert matrix.cursor_block().label == "leaf02"
        # The leaf table: the bad one first, then the healthy ones in the matrix's order.
        rows = [r.leaf for r in screen.leaves]
        assert rows[0] == "leaf125" and rows[1:] == [g for g in want if g != "leaf125"]


async def test_leaf_groups_past_leaf99_are_numbered_in_a_narrow_block():
    """2,048 nodes in 128 leaf groups of 16 at 160 columns: a block is 2 cells (8 nodes each)
    and its header the group's number, which from leaf100 on read "l…" (a 3 a.m. drive). Read
    as a ruler now: the whole number where the hundreds begin, and on each band's first
    block, then its last two digits."""
    world = World(2048)
    fleet = world.fleet
    for i, name in enumerate(fleet.names):
        fleet.src(name).topology = Topology(rack=f"r{i // 4:03d}", leaf=f"leaf{i // 16 + 1:02d}")
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        screen = await open_fabric(world, pilot)
        matrix = screen.matrix
        p = matrix.plan
        assert p.cell_width == 1 and p.per_cell == 8
        headers = [line_of(matrix, b * (1 + len(p.rails))) for b in range(len(p.bands))]
        said: list[int] = []
        for band, header in zip(p.bands, headers, strict=True):
            assert "…" not in header, header
            labels = header.split()
            # Where a block's number took the room before it, two labels run together.
            tokens = [t for label in labels for t in ((label[:2], label[2:])
                      if len(label) == 5 else (label,))]
            assert len(tokens) == len(band), header
            for block, token in zip(band, tokens, strict=True):
                number = block.label.removeprefix("leaf")
                assert number.endswith(token), (block.label, token, header)
                said.append(number if token == number else "")
        assert "100" in said and "" in said
        firsts = [band[0].label.removeprefix("leaf") for band in p.bands]
        assert all(f in said for f in firsts), (firsts, headers)
