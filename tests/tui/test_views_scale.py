"""Views over large fleets: metric sorts that follow new samples, and the grid's jumps (worst
node, next leaf, next rack), driven with real keys through Pilot."""

from typing import Any

from fleetdeck.console.health import Verdict
from fleetdeck.console.node_order import LIVE_HOLD_S
from fleetdeck.console.rows import Cell, gpu_cells
from fleetdeck.console.tui.fleet_grid import FleetGrid
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.protocol.messages import Topology
from tests.tui.conftest import SIZE, World
from tests.tui.fleet import port_down


def _replace(obj: Any, **changes: Any) -> Any:
    """A changed copy of a telemetry object (pydantic model or msgspec Struct)."""
    if hasattr(obj, "model_copy"):
        return obj.model_copy(update=changes)
    import msgspec

    return msgspec.structs.replace(obj, **changes)


def util_of(v: float):
    def apply(tel):
        return _replace(tel, gpus=[_replace(g, util_pct=v) for g in tel.gpus])
    return apply


def gpu_missing(index: int):
    def apply(tel):
        return _replace(tel, gpus=[_replace(g, present=False) if g.index == index else g
                                   for g in tel.gpus])
    return apply


def expected_by_util(util: dict[str, float]) -> list[str]:
    """Busiest first in 5 % steps, then by name (``rows.METRIC_SORT_STEP``)."""
    from fleetdeck.console.rows import metric_sort_value

    return sorted(util, key=lambda n: (metric_sort_value("util", util[n]), n))


def row_text(table: Any, y: int) -> str:
    return "".join(seg.text for seg in table.render_line(y))


async def test_sort_by_util_follows_new_samples():
    n = 2048
    world = World(n)
    fleet = world.fleet
    fleet.birth(world.ingest)
    util = {name: float((i * 37) % 101) for i, name in enumerate(fleet.names)}
    fleet.telemetry(world.ingest, faults={name: util_of(v) for name, v in util.items()})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, NodesScreen)
        while screen.sort_key != "util":  # o steps through the columns
            await pilot.press("o")
            await pilot.pause()
        assert list(screen.shown) == expected_by_util(util)
        # New samples for a few hundred nodes: some go to the top, some to the bottom.
        moved = fleet.names[100:400]
        for i, name in enumerate(moved):
            util[name] = 100.0 if i % 2 else 0.0
        before = screen.shown
        fleet.telemetry(world.ingest, names=moved,
                        faults={name: util_of(util[name]) for name in moved})
        world.tick()
        await pilot.pause()
        # Only samples moved: the order holds for a moment (LIVE_HOLD_S), the rows show the
        # new values; then it follows them.
        assert screen.shown == before
        nodes = world.app.state.nodes
        assert [screen.row(nodes[n]).util_v for n in moved] == [util[n] for n in moved]
        world.tick(LIVE_HOLD_S)
        await pilot.pause()
        want = expected_by_util(util)
        assert list(screen.shown) == want
        assert list(screen.table.rows) == want
        # The cursor stays on its node wherever it moved; at the top the leader shows.
        await pilot.press("home")
        await pilot.pause()
        top = row_text(screen.table, 1)  # line 0 is the header
        assert top.split()[0] == want[0] and "100%" in top
        # Reversed, the least busy node leads.
        await pilot.press("O")
        await pilot.pause()
        assert list(screen.shown) == want[::-1]


async def test_worst_jumps_to_the_failed_node_then_the_next_worst(world):
    world.fleet.telemetry(world.ingest, names=["gpu0020"], faults={"gpu0020": gpu_missing(5)})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        nodes = world.app.state.nodes
        assert nodes["gpu0020"].verdict is Verdict.FAILED
        order = grid.worst()
        assert order[0] == "gpu0020"
        assert {nodes[n].verdict for n in order[1:]} == {Verdict.DEGRADED}
        await pilot.press("w")
        await pilot.pause()
        assert (grid.current_node, grid.cursor_gpu) == ("gpu0020", 5)
        assert gpu_cells(nodes["gpu0020"])[5] == Cell.MISSING
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == order[1]
        await pilot.press("W")
        await pilot.pause()
        assert grid.current_node == "gpu0020"
        assert "gpu0020 gpu5" in world.app.screen.query_one("#grid-status").render().plain


async def test_page_by_leaf_and_rack():
    world = World(256)
    fleet = world.fleet
    for i, name in enumerate(fleet.names):  # 32 nodes per leaf, 8 per rack, in name order
        fleet.src(name).topology = Topology(rack=f"r{i // 8:02d}", leaf=f"leaf{i // 32:02d}")
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        assert grid.current_node == "gpu0001"

        async def press(key: str) -> str | None:
            await pilot.press(key)
            await pilot.pause()
            return grid.current_node

        assert await press("right_curly_bracket") == "gpu0033"  # leaf01's first node
        # The line under the grid says where the jump landed: the rows do not follow leaves.
        status = world.app.screen.query_one("#grid-status")
        assert "gpu0033 gpu0 leaf01 rack r04 " in status.render().plain
        assert await press("right_curly_bracket") == "gpu0065"
        for _ in range(10):  # into leaf02, past its first node
            await press("l")
        assert grid.current_node == "gpu0066"
        assert await press("left_curly_bracket") == "gpu0065"  # the start of this leaf
        assert await press("left_curly_bracket") == "gpu0033"  # then the previous one
        assert await press("right_parenthesis") == "gpu0041"  # next rack
        assert "gpu0041 gpu2 leaf01 rack r05 " in status.render().plain
        assert await press("left_parenthesis") == "gpu0033"
        for _ in range(7):
            await press("right_curly_bracket")
        assert grid.current_node == "gpu0225"  # the last leaf: } stays there
        assert await press("right_curly_bracket") == "gpu0225"


async def test_slash_finds_the_rack_and_the_leaf_the_grid_names():
    """The line under the grid names the cursor node's leaf and rack ("leaf643 rack2569"), and
    the top problems a suspect switch's group (leaf601-r3): ``/rack2569`` and ``/leaf601``
    listed no node, the list's columns having neither (a 16,384-node drive)."""
    world = World(256)
    fleet = world.fleet
    for i, name in enumerate(fleet.names):  # 16 nodes per leaf, 4 per rack, as the simulator
        fleet.src(name).topology = Topology(rack=f"rack{i // 4 + 1:03d}",
                                            leaf=f"leaf{i // 16 + 1:02d}")
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        for key in ("right_curly_bracket", "right_parenthesis"):
            await pilot.press(key)
        await pilot.pause()
        status = world.app.screen.query_one("#grid-status").render().plain
        assert "gpu0021 gpu0 leaf02 rack006 " in status
        await pilot.press("slash", *"rack006", "enter")
        world.tick()
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, NodesScreen)
        assert sorted(screen.shown) == ["gpu0021", "gpu0022", "gpu0023", "gpu0024"]
        await pilot.press("slash", *"leaf02", "enter")
        world.tick()
        await pilot.pause()
        assert sorted(screen.shown) == [f"gpu{i:04d}" for i in range(17, 33)]


async def test_every_sort_column_orders_as_its_rows_do(world):
    """The node list sorts from the node (rows are only built for lines on screen): for every
    column, the same order as sorting the formatted rows."""
    from fleetdeck.console.commands import jobs_by_node
    from fleetdeck.console.rows import NODE_COLUMNS, SORT_KEYS, node_row, node_sort_key

    world.fleet.telemetry(world.ingest, names=["gpu0020"], faults={"gpu0020": gpu_missing(5)})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        state = world.app.state
        jobs = jobs_by_node(state)
        now = world.clock()
        for _title, key, _w in NODE_COLUMNS:
            if key == "age":
                continue  # rows hold the age at one instant; the node sorts by last heard
            by_row = sorted(state.nodes, key=lambda n, k=key: SORT_KEYS[k](
                node_row(state.nodes[n], now, jobs.get(n, []))))
            by_node = sorted(state.nodes, key=lambda n, k=key: node_sort_key(
                state.nodes[n], k, jobs.get(n, [])))
            assert by_node == by_row, key
        await pilot.press("2")
        await pilot.pause()
        screen = world.app.screen
        assert isinstance(screen, NodesScreen)
        screen.sort_key = "reasons"
        await pilot.pause()
        want = sorted(state.nodes, key=lambda n: SORT_KEYS["reasons"](
            node_row(state.nodes[n], now, jobs.get(n, []))))
        assert list(screen.shown) == want
        assert "gpu0020" in want[:5]  # the nodes with reasons first


async def test_a_down_port_marks_its_rails_gpu_not_a_failed_gpu(world):
    """A port fault drains the node, but the GPU behind the port is sound: its cell has the rail's
    own glyph, and the header's failed GPUs do not count it."""
    world.fleet.telemetry(world.ingest, names=["gpu0007"],
                          faults={"gpu0007": port_down("mlx5_ib2")})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        st = world.app.state.nodes["gpu0007"]
        assert st.verdict is Verdict.FAILED
        affinity = {p.dev: p.gpu_affinity for p in st.birth.ib_ports}
        cells = gpu_cells(st)
        assert cells[affinity["mlx5_ib2"]] == Cell.RAIL_FAILED
        assert Cell.FAILED not in cells and Cell.DEGRADED not in cells
        assert world.app.state.totals().gpus_use.failed == 0


async def test_a_failed_nodes_sound_idle_gpus_are_out_not_free_and_busy_ones_busy(world):
    """A GPU fell off the bus: the node is failed, its seven sound GPUs cannot take work.
    Idle, they read as free capacity (□) beside the header's "out" count; they show ⊟, as the
    header counts them. Under a job they still run it and stay busy (■)."""
    faults = {"gpu0020": gpu_missing(5), "gpu0021": gpu_missing(2)}
    world.fleet.telemetry(world.ingest, names=["gpu0020", "gpu0021"], faults=faults,
                          job={"gpu0021": "41"})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        nodes = world.app.state.nodes
        idle, busy = nodes["gpu0020"], nodes["gpu0021"]
        assert idle.verdict is busy.verdict is Verdict.FAILED
        assert idle.sample.job is None and busy.sample.job is not None
        assert gpu_cells(idle) == (Cell.OUT,) * 5 + (Cell.MISSING,) + (Cell.OUT,) * 2
        assert gpu_cells(busy) == (Cell.OK,) * 2 + (Cell.MISSING,) + (Cell.OK,) * 5
        assert idle.gpu_use().out == 7 and idle.gpu_use().free == 0
        assert "⊟out" in world.app.screen.query_one("#legend").render().plain


async def test_worst_from_a_sick_node_the_cursor_stands_on_jumps_to_the_worst(world):
    """The cursor on a degraded node (paged there with ``)``, or gpu0001, where it starts,
    behind a suspect switch), ``w`` went on to the node after it in the worst-first order, a
    node behind a recovered switch, not to the failed one (a 3 a.m. drive): ``w`` goes to the
    worst unless it follows a ``w``/``W``."""
    world.fleet.telemetry(world.ingest, names=["gpu0020"], faults={"gpu0020": gpu_missing(5)})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        order = grid.worst()
        assert order[0] == "gpu0020" and len(order) >= 3
        grid.move_to(grid.node_ids.index(order[1]))  # a degraded node, not the worst
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == "gpu0020"
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == order[1]  # again: the next worst
        grid.move_to(grid.node_ids.index(order[2]))
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == "gpu0020"


async def test_the_grid_status_line_names_the_cell_s_own_rail_port_before_its_switch(world):
    """gpu0014's gpu3 read ↯ for its own flapping mlx5_ib3:1, and the line under the grid said
    "node failed  F1 behind suspect switch leaf01-r4: the link faults of mlx5_ib4:1 are the
    switch's" and nothing of mlx5_ib3:1 (a 3 a.m. drive): the cell's own rail port first."""
    both = port_down("mlx5_ib2")
    world.tick(1.0)
    world.fleet.telemetry(world.ingest, faults={
        "gpu0009": lambda t: port_down("mlx5_ib3")(both(t)), "gpu0013": both,
        "gpu0017": both, "gpu0021": both})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        st = world.app.state.nodes["gpu0009"]
        assert st.verdict is Verdict.FAILED and st.behind_switch == "leaf00-r2"
        grid = world.app.screen.query_one(FleetGrid)
        grid.move_to(grid.node_ids.index("gpu0009"), 3)
        await pilot.pause()
        line = world.app.screen.query_one("#grid-status").render().plain
        assert "node failed  N1 mlx5_ib3:1: DOWN/Polling" in line, line


def test_the_grid_cells_and_their_status_line_map_a_port_to_the_same_gpu():
    """With no GPU affinity in the birth (``--source sysfs`` pairs none), a failing
    mlx5_ib3:1 marked all eight cells ↯ while only gpu3's status line named it, and a port of
    an HCA not named ``mlx5_*`` was on no cell's line (a review): both follow the port's rail
    (``rows.port_gpus``)."""
    from msgspec.structs import replace

    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.rows import gpu_findings
    from fleetdeck.console.state import FleetState
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    names = {"mlx5_ib5": "hfi1_5"}  # an HCA of another vendor's naming
    node = FakeNode()
    birth = node.birth()
    birth = birth.model_copy(update={"ib_ports": [
        p.model_copy(update={"gpu_affinity": None, "dev": names.get(p.dev, p.dev)})
        for p in birth.ib_ports]})
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, birth, Kind.BIRTH)
    for _ in range(2):
        t = node.telemetry()
        ports = [replace(p, dev=names.get(p.dev, p.dev), state="DOWN", phys_state="Polling")
                 if p.dev in ("mlx5_ib3", "mlx5_ib5")
                 else replace(p, dev=names.get(p.dev, p.dev)) for p in t.ib_ports]
        node.feed(ingest, replace(t, ib_ports=ports), Kind.TELEMETRY)
        state.apply(ingest.take_batch(), node.now)
    st = state.nodes["gpu0001"]
    assert st.verdict is Verdict.FAILED, st.all_findings
    cells = gpu_cells(st)
    rail = {i for i, c in enumerate(cells) if c in (Cell.RAIL_FAILED, Cell.RAIL_DEGRADED)}
    assert rail == {3, 5}, cells
    for gpu in range(8):
        named = {f.component for f in gpu_findings(st, gpu) if f.rule.startswith("N")}
        assert named == ({"mlx5_ib3:1"} if gpu == 3 else {"hfi1_5:1"} if gpu == 5 else set()), (
            gpu, named)


async def test_grid_w_after_a_worse_node_appeared_goes_to_it():
    """The overview's w, as the fabric view's: a node failed since the last w is the next
    stop, not the one after where w had left the cursor."""
    from tests.tui.fleet import throttled

    world = World()
    fleet = world.fleet
    fleet.birth(world.ingest)
    fleet.telemetry(world.ingest, faults={"gpu0003": throttled(3), "gpu0005": throttled(1)})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        await pilot.press("w")
        await pilot.pause()
        first = grid.current_node
        assert first in ("gpu0003", "gpu0005")
        fleet.telemetry(world.ingest, faults={"gpu0003": throttled(3), "gpu0005": throttled(1),
                                              "gpu0007": port_down()})
        world.tick()
        await pilot.pause()
        assert grid.worst()[0] == "gpu0007", grid.worst()
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == "gpu0007"


async def test_grid_w_goes_on_when_a_node_it_passed_got_better():
    """A node w had passed that recovers is no reason to start over: w went back to the
    second worst, seen already, each time the head of the order changed (a review)."""
    from tests.tui.fleet import throttled

    world = World()
    fleet = world.fleet
    fleet.birth(world.ingest)
    faults = {"gpu0003": port_down(), "gpu0005": throttled(1), "gpu0007": throttled(2),
              "gpu0009": throttled(3)}
    fleet.telemetry(world.ingest, faults=faults)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        order = grid.worst()
        assert order[0] == "gpu0003", order
        for _ in range(3):
            await pilot.press("w")
            await pilot.pause()
        assert grid.current_node == order[2]
        faults.pop("gpu0003")  # the worst, passed already, recovers
        fleet.telemetry(world.ingest, faults=faults)
        world.tick()
        await pilot.pause()
        assert "gpu0003" not in grid.worst()
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == order[3], (grid.current_node, order)


async def test_the_grid_status_line_of_a_gpu_less_node_names_what_failed_it_first():
    """A storage node (``--source sysfs``: no GPUs, none expected) failed for a port that is
    down; its status line took its findings in rule order, two warnings of other ports first,
    and the finding that failed it was cut off the line (a review). Worst first, as a GPU
    cell's line (``rows.gpu_findings``)."""
    import msgspec

    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for
    from tests.helpers import FakeNode
    from tests.tui.fleet import CLUSTER

    world = World(4)
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    node = FakeNode("stor0001", cluster=CLUSTER, t0=world.clock())
    birth = node.birth().model_copy(update={"source": "sysfs", "gpus": [], "gpus_expected": 0})
    tel = node.telemetry(advance=0.0)
    ports = list(tel.ib_ports)
    # Two ports whose receive-error counters saturated (N6, a warning each) sort before the
    # port that is down (N1, what fails the node) in rule order.
    for i in (0, 1):
        ports[i] = msgspec.structs.replace(ports[i], rcv_errors=0xFFFF)
    ports[3] = msgspec.structs.replace(ports[3], state="DOWN", phys_state="Polling")
    tel = msgspec.structs.replace(tel, gpus=[], ib_ports=ports)
    world.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, node.node_id), codec.encode(birth),
                        world.clock())
    world.ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, node.node_id), codec.encode(tel),
                        world.clock())
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        st = world.app.state.nodes["stor0001"]
        assert st.verdict is Verdict.FAILED
        assert [f.rule for f in st.all_findings][:2] == ["N6", "N6"], st.all_findings
        grid = world.app.screen.query_one(FleetGrid)
        grid.move_to(grid.node_ids.index("stor0001"), 0)
        await pilot.pause()
        line = world.app.screen.query_one("#grid-status").render().plain
        assert "stor0001 no GPUs" in line, line
        assert "node failed  N1 mlx5_ib3:1: DOWN/Polling; N6 mlx5_ib0:1" in line, line


async def test_worst_goes_first_to_a_failed_node_that_stops_a_job_as_the_top_problems_do():
    """``w`` went to a failed idle node with more findings before a failed node that held up
    a running job, which the incidents view put first: the grid and the top problems share
    one worst-first order (``rows.worst_first``; a newcomer's run)."""
    from fleetdeck.console.rows import top_problems
    from tests.tui.fleet import job_status, publish_job

    world = World()
    world.fleet.birth(world.ingest)
    publish_job(world.ingest, job_status("41", ["gpu0006", "gpu0007"], world.clock),
                world.clock)

    def two_down(t):
        return port_down("mlx5_ib5")(port_down("mlx5_ib2")(t))

    world.fleet.telemetry(world.ingest, job={"gpu0006": "41", "gpu0007": "41"},
                          faults={"gpu0001": two_down, "gpu0006": port_down("mlx5_ib3")})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        problems, _ = top_problems(world.app.state)
        assert grid.worst() == [p.node for p in problems] == ["gpu0006", "gpu0001"]
        await pilot.press("w")
        await pilot.pause()
        assert grid.current_node == "gpu0006"


async def test_worst_and_the_top_problems_keep_one_order_while_a_port_flaps():
    """Two failed idle nodes swapped places in the top problems each time a flapping port of
    one came down and back up (its N1 one more finding, then one less), and ``w`` went to the
    one the list had just put second (a 3 a.m. drive on 256 nodes): the order is the domain's
    (``judgements.worst_first``), the older failure first, whatever finding comes and goes."""
    from fleetdeck.console.rows import top_problems

    world = World()
    world.fleet.birth(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        grid = world.app.screen.query_one(FleetGrid)
        first = {"gpu0001": port_down("mlx5_ib2")}
        later = {**first, "gpu0010": port_down("mlx5_ib3")}
        for faults in (first, first, first, later, later):
            world.fleet.telemetry(world.ingest, faults=faults)
            world.tick(1.0)
        # gpu0010's flapping port on mlx5_ib5 down (one more finding), up, down again.
        both = lambda t: port_down("mlx5_ib5")(port_down("mlx5_ib3")(t))  # noqa: E731
        for flap in (port_down("mlx5_ib3"), both, both, port_down("mlx5_ib3"), both):
            world.fleet.telemetry(world.ingest, faults={**first, "gpu0010": flap})
            world.tick(1.0)
            await pilot.pause()
            problems, _ = top_problems(world.app.state)
            assert [p.node for p in problems] == grid.worst() == ["gpu0001", "gpu0010"], (
                [p.text for p in problems])
            grid.move_to(grid.node_ids.index("gpu0005"))
            await pilot.press("w")
            await pilot.pause()
            assert grid.current_node == "gpu0001"


async def test_a_failed_node_that_stops_a_job_comes_before_an_idle_suspect_switch():
    """The overview put a suspect switch whose nodes held no job (their jobs requeued
    elsewhere) above a failed node that stopped a running job, where the incidents view and
    `status` put the node first ("what loses work now"; a 3 a.m. drive on 256 nodes): one
    order for all three."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.rows import top_problems
    from tests.console.test_judgements import xid
    from tests.tui.fleet import job_status, publish_job

    world = World()
    world.fleet.birth(world.ingest)
    publish_job(world.ingest, job_status("42", ["gpu0007", "gpu0008"], world.clock),
                world.clock)
    down = port_down("mlx5_ib2")
    world.fleet.telemetry(world.ingest, job={"gpu0007": "42", "gpu0008": "42"},
                          faults={"gpu0007": xid(2, 79),
                                  **{n: down for n in ("gpu0001", "gpu0005", "gpu0009",
                                                       "gpu0013")}})
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        state = world.app.state
        problems, _ = top_problems(state)
        said = [inc.nodes for inc in incidents(state)]
        assert [p.state for p in problems][:2] == ["alloc", "switch"], problems
        assert said[0] == ["gpu0007"] and len(said[1]) == 4, said


async def test_g_and_G_on_the_grid_go_to_the_first_and_last_node():
    """As in every list: 16,384 nodes are 1,024 rows of grid, and G did nothing (a 16,384-node
    drive)."""
    world = World(256)
    world.fleet.birth(world.ingest)
    world.fleet.telemetry(world.ingest)
    async with world.app.run_test(size=SIZE) as pilot:
        world.tick()
        await pilot.pause()
        grid = world.app.screen.query_one(FleetGrid)
        await pilot.press("G")
        await pilot.pause()
        assert (grid.current_node, grid.cursor_gpu) == ("gpu0256", 7)
        assert "gpu0256 gpu7 " in world.app.screen.query_one("#grid-status").render().plain
        await pilot.press("g")
        await pilot.pause()
        assert (grid.current_node, grid.cursor_gpu) == ("gpu0001", 0)
        await pilot.press("end")
        await pilot.press("home")
        await pilot.pause()
        assert grid.current_node == "gpu0001"
