"""Many clusters in one console (issue 15): ``--cluster a,b`` watches each through its own
console core; ``status`` prints one summary per cluster plus their sum, and the console's
contexts switch every view (and every command) to the chosen cluster.

Two simulated clusters run against one real Mosquitto; one of them gets a real fault."""

import dataclasses
import json
import re
import time

import pytest
from textual.content import Content

from fleetdeck.console.commands import Phase
from fleetdeck.console.contexts import ContextError, parse_clusters
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.screens.clusters import ClustersScreen
from fleetdeck.console.tui.screens.node_detail import NodeDetailScreen
from fleetdeck.console.tui.screens.nodes import NodesScreen
from fleetdeck.protocol.messages import DrainState
from tests.conftest import eventually, run_cli, spawn, stop_process
from tests.test_cli_tables import piped

pytestmark = pytest.mark.needs("mosquitto")


def test_cluster_lists_are_checked():
    assert parse_clusters("east,west") == ["east", "west"]
    assert parse_clusters(" east , west ") == ["east", "west"]
    for bad, words in (("east,,west", "empty cluster name"), ("east,east", "named twice"),
                       ("", "at least one"), ("east,we st", "may only hold")):
        with pytest.raises(ContextError, match=words.split()[0]):
            parse_clusters(bad)


def test_bad_cluster_list_is_one_sentence():
    res = run_cli("status", "--cluster", "east,,west", "--broker", "mqtt://127.0.0.1:1")
    assert res.returncode == 2
    assert "empty cluster name" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("console", "--cluster", "east,west", "--db", "/tmp/x.db",
                  "--broker", "mqtt://127.0.0.1:1")
    assert res.returncode != 0 and "--db names one store" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.fixture
def two_clusters(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sims = [spawn("sim", "--broker", url, "--cluster", name, "--nodes", str(n), "--seed", "3",
                  "--prefix", prefix, "--jobs", "0", log=tmp_path / f"{name}.log")
            for name, n, prefix in (("east", 4, "ea"), ("west", 6, "we"))]
    try:
        deadline = time.monotonic() + 40
        while True:  # a GPU off the bus on one node of west
            res = run_cli("inject", "--broker", url, "--cluster", "west", "xid79",
                          "node=we0002", "gpu=3", "--wait", "2")
            if res.returncode == 0 or time.monotonic() > deadline:
                break
        assert res.returncode == 0, res.stderr
        yield url
    finally:
        for sim in sims:
            stop_process(sim)


def test_status_per_cluster_and_combined(two_clusters):
    res = run_cli("status", "--broker", two_clusters, "--cluster", "east,west,north",
                  "--wait", "3", "--json")
    # north has no node: its entry says so and the exit status is 2, the others are answered.
    assert res.returncode == 2, res.stderr
    assert res.stdout, res.stderr
    out = json.loads(res.stdout)
    by_name = {c["cluster"]: c for c in out["clusters"]}
    assert list(by_name) == ["east", "west", "north"]
    assert "no node of cluster 'north'" in by_name["north"]["error"]
    assert by_name["east"]["totals"]["nodes"] == 4
    assert by_name["west"]["totals"]["nodes"] == 6
    assert {n["id"] for n in by_name["west"]["nodes"]} == {f"we{i:04d}" for i in range(1, 7)}
    sick = next(n for n in by_name["west"]["nodes"] if n["id"] == "we0002")
    assert sick["verdict"] == "failed"
    combined = out["combined"]
    assert combined["nodes"] == 10 and combined["cluster"] == "east,west"
    assert combined["by_verdict"]["failed"] == 1 and combined["attention"] >= 1
    assert combined["top_incident"].startswith("west: ")
    assert "fleetdeck status: no node of cluster 'north'" in res.stderr

    table = piped("status", "--broker", two_clusters, "--cluster", "east,west", "--wait", "3")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split()[0] == "CLUSTER"
    # Worst first: west (a failed node) above east, then the sum.
    assert [ln.split()[0] for ln in lines[1:4]] == ["west", "east", "all"]
    assert "we0002 failed" in lines[1] and lines[3].split()[1] == "10"  # one line each

    # A cluster gone dark keeps its row, first (it was only a red line under the table).
    table = piped("status", "--broker", two_clusters, "--cluster", "east,north", "--wait", "3")
    assert table.returncode == 2, table.stderr
    lines = table.stdout.splitlines()
    assert lines[1].split()[:3] == ["north", "?", "?"], lines
    assert "no node of cluster 'north'" in lines[1]
    assert [ln.split()[0] for ln in lines[2:4]] == ["east", "all"], lines


async def test_console_contexts_switch_views_and_commands(two_clusters, tmp_path):
    from fleetdeck.brokerurl import parse_broker_url

    app = FleetdeckApp(cluster="east", contexts=["west"], url=parse_broker_url(two_clusters),
                       audit_path=tmp_path / "audit.jsonl", operator="ctx-test")
    async with app.run_test(size=(160, 48)) as pilot:
        await eventually(lambda: len(app.sessions["east"].state.nodes) == 4
                         and len(app.sessions["west"].state.nodes) == 6, 30,
                         message="both clusters' nodes")
        assert "east" in app.header_text(app.clock())
        # A node detail of east left open on the overview (the app keeps it for reuse).
        app.open_node("ea0001")
        await pilot.pause()
        east_detail = app.screen
        assert isinstance(east_detail, NodeDetailScreen)
        await pilot.press("0")
        await eventually(lambda: isinstance(app.screen, ClustersScreen), 10)
        screen = app.screen
        assert isinstance(screen, ClustersScreen)
        await eventually(lambda: [r.cluster for r in screen.rows][:2] == ["west", "east"]
                         and screen.rows[0].by_verdict["failed"] == 1, 20,
                         message="west first, with its failed node")
        assert screen.rows[-1].nodes == 10  # the sum of both
        # The not-ok count is both clusters', said before the context, not after it, where
        # it read as the context's own (a newcomer run).
        info = Content.from_markup(screen.info()).plain
        attention = sum(r.attention for r in screen.rows[:2])
        assert attention >= 1, screen.rows
        assert info.startswith(f"2 clusters, {attention} node{'s' * (attention != 1)} not ok "
                               "in all  context east  "), info

        # :ctx west, then the nodes view lists west's nodes only.
        await pilot.press("colon", *"ctx west", "enter")
        await eventually(lambda: app.active == "west", 10)
        await pilot.press("2")
        await eventually(lambda: isinstance(app.screen, NodesScreen)
                         and set(app.screen.shown)
                         == {f"we{i:04d}" for i in range(1, 7)}, 10,
                         message="the nodes view shows west")
        assert "west" in app.header_text(app.clock())
        # Nothing of east's detail is kept under west's name: west's node in a new one.
        assert not east_detail.is_attached
        app.open_node("we0002")
        await pilot.pause()
        assert isinstance(app.screen, NodeDetailScreen) and app.screen is not east_detail
        assert app.screen.node_id == "we0002" and app.screen.is_attached
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, NodesScreen)

        # A drain from this context goes to west's node (and west's agent obeys).
        req = app.session.drain(["we0005"], "ctx test")
        await eventually(lambda: req.phase is Phase.DONE, 30, message="drain done in west")
        assert app.sessions["west"].state.nodes["we0005"].drain.state is DrainState.DRAINED
        assert "we0005" not in app.sessions["east"].state.nodes

        # An unknown context is refused in words, and nothing switches.
        await pilot.press("colon", *"ctx nowhere", "enter")
        await pilot.pause()
        assert app.active == "west"


def test_a_cluster_nobody_publishes_to_says_so():
    """"0 nodes … connected" read as fine for a cluster name nobody publishes to (a
    newcomer's run: --cluster demo,east,nowhere)."""
    from fleetdeck.console.contexts import cluster_row
    from fleetdeck.console.state import FleetState

    row = cluster_row(FleetState("nowhere"), connection="connected")
    assert row.nodes == 0 and row.top_incident.startswith("no node heard yet")
    # Its zeros are unknowns: listed first, as `status` lists it (a newcomer's run).
    from fleetdeck.console.contexts import worst_first

    busy = cluster_row(FleetState("demo"), connection="connected")
    busy = dataclasses.replace(busy, nodes=8, by_verdict={"failed": 1, "ok": 7})
    assert row.unheard and not busy.unheard
    assert [r.cluster for r in worst_first([busy, row])] == ["nowhere", "demo"]


def test_a_cluster_watched_too_briefly_says_its_waiting_nodes(two_clusters):
    """``status --cluster demo,prod --wait 1`` against the demo read "demo 64 nodes, ok 0,
    fail 0, 0/512 usable", with no column for the 64 nodes not judged yet, and prod's error
    kept them from being named on stderr (a newcomer's run; README: "is named on stderr")."""
    res = piped("status", "--broker", two_clusters, "--cluster", "east,north", "--wait", "0.1")
    assert res.returncode == 2, res.stderr
    lines = res.stdout.splitlines()
    head = lines[0].split()
    assert "WAIT" in head, lines[0]
    east = next(ln.split() for ln in lines[1:4] if ln.split()[0] == "east")
    counts = dict(zip(head[1:head.index("WAIT") + 1], map(int, east[1:head.index("WAIT") + 1]),
                      strict=True))
    # Every node is in one column: the counts add up to NODES.
    assert sum(v for k, v in counts.items() if k != "NODES") == counts["NODES"] == 4, counts
    assert counts["WAIT"] > 0, lines  # nothing judged in a tenth of a second
    assert "no node of cluster 'north'" in res.stderr
    # The nodes not judged yet are named, as many as WAIT counts (some of the four may send a
    # sample within the tenth of a second on a quick host): silent ones, and any that sent
    # deltas but no keyframe yet.
    said = re.findall(r"(\d+) nodes? \(ea[^)]*\) sent (?:no telemetry|telemetry deltas)",
                      res.stderr)
    assert said and sum(map(int, said)) == counts["WAIT"], (res.stderr, counts)
    assert "their health is unknown" in res.stderr, res.stderr


@pytest.mark.parametrize("width", [80, 120])
def test_several_clusters_table_cuts_the_top_incident_never_a_count(width):
    """On a terminal, rich took from every column alike: at 80 columns the counts read "8…"
    and "81…" (whole columns went) while the long root-cause line kept its room, against the
    table's own rule that TOP INCIDENT is the one cell worth cutting."""
    import io

    from rich.console import Console

    from fleetdeck.console.cli.status import render_clusters
    from fleetdeck.console.contexts import ClusterRow, combined

    def row(name: str, n: int, top: str) -> ClusterRow:
        return ClusterRow(name, n, {"ok": n - 20, "degraded": 12, "failed": 7, "waiting": 1},
                          8 * n, 8 * n, 8 * n, 8 * n - 90, 0, 0, 13, 14, 3, top,
                          gpus_usable=8 * n - 20)

    top = ("16 ports on 16 nodes fail together: suspect leaf switch leaf04-r5, not the nodes "
           "(gpu[0049-0064])")
    rows = [row("prod-east", 1024, top), row("demo", 64, "")]
    out = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    render_clusters(rows, combined(rows), out, [("lab", "connection refused")])
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert lines[0].split()[:12] == ["CLUSTER", "NODES", "OK", "DEGR", "FAIL", "STALE", "OFFL",
                                     "WAIT", "GPUS", "USABLE", "IB", "UP"]
    assert all(len(line) <= width for line in lines)
    counts = {line.split()[0]: line.split()[1:12] for line in lines[1:5]}
    assert counts["prod-east"] == ["1024", "1004", "12", "7", "0", "0", "1", "8172/8192",
                                   "8102/8192", "13/14", "3"]
    assert counts["all"][:2] == ["1088", "1048"] and counts["lab"] == ["?"] * 11
    assert not any("…" in cell for cells in counts.values() for cell in cells)
    # The root cause is said, cut to the room left, beside the counts or under them.
    assert any("16 ports on 16 nodes fail" in line and "…" in line for line in lines)


def _read_tables(lines: list[str]) -> dict[str, dict[str, str]]:
    """Each cluster's cells by heading, over every table a header line starts (cut by the
    header's own column starts: headings hold spaces, 'GPUS USABLE')."""
    import re

    cells: dict[str, dict[str, str]] = {}
    starts: list[tuple[str, int]] = []
    for line in lines:
        if not line.strip() or line == "TOP INCIDENT" or line.startswith("  "):
            starts = [] if line == "TOP INCIDENT" or line.startswith("  ") else starts
            continue
        if line.startswith("CLUSTER"):
            starts = [(m.group(), m.start()) for m in re.finditer(r"\S+(?: \S+)*", line)]
            continue
        if starts:
            ends = [s for _, s in starts[1:]] + [len(line)]
            said = {h: line[s:e].strip() for (h, s), e in zip(starts, ends, strict=True)}
            cells.setdefault(said.pop("CLUSTER"), {}).update(said)
    return cells


def test_several_clusters_with_16k_nodes_read_every_count_whole_at_80_columns():
    """At 80 columns a 16,384-node cluster's counts (131052/131072 GPUs) need 84 columns: each
    count column kept its width and the line was cut at the right edge with nothing to say so,
    JOBS R read "13/1" and INC was gone. The counts are split over two tables, health then
    capacity, each led by CLUSTER, and every one reads whole."""
    import io

    from rich.console import Console

    from fleetdeck.console.cli.status import render_clusters
    from fleetdeck.console.contexts import ClusterRow, combined

    def row(name: str, n: int, top: str) -> ClusterRow:
        return ClusterRow(name, n, {"ok": n - 20, "degraded": 12, "failed": 7, "waiting": 1},
                          8 * n, 8 * n, 8 * n, 8 * n - 90, 0, 0, 13, 14, 3, top,
                          gpus_usable=8 * n - 20)

    top = ("16 ports on 16 nodes fail together: suspect leaf switch leaf04-r5, not the nodes "
           "(gpu[0049-0064])")
    rows = [row("prod-east", 16384, top), row("prod-west", 4096, "")]
    for width in (80, 60, 40):
        out = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
        render_clusters(rows, combined(rows), out, [("lab", "connection refused")])
        lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
        assert all(len(line) <= width for line in lines), (width, lines)
        cells = _read_tables(lines)
        assert cells["prod-east"] | {"TOP INCIDENT": ""} == {
            "NODES": "16384", "OK": "16364", "DEGR": "12", "FAIL": "7", "STALE": "0",
            "OFFL": "0", "WAIT": "1", "GPUS USABLE": "131052/131072",
            "IB UP": "130982/131072", "JOBS R": "13/14", "INC": "3", "TOP INCIDENT": ""}, lines
        assert cells["all"]["JOBS R"] == "26/28" and cells["all"]["INC"] == "6", lines
        assert cells["all"]["GPUS USABLE"] == "163800/163840", lines
        assert set(cells["lab"].values()) - {"connection refused"} == {"?"}, lines
        # The root cause is still said, cut to the room left, beside the counts or under them.
        assert any("16 ports on" in line and "…" in line for line in lines), lines
    # Where the counts fit, one line per cluster, as before.
    out = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    render_clusters(rows, combined(rows), out)
    lines = out.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert sum(line.startswith("CLUSTER") for line in lines) == 1, lines
    assert _read_tables(lines)["prod-east"]["JOBS R"] == "13/14", lines
