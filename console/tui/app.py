"""The operator console: header, fleet summary and a live node table.

Data flow: LiveFeed (MQTT, in this loop) -> Ingest (validate, latest per node) -> on each tick
FleetState.apply -> widgets redraw what is visible. Nothing here runs per MQTT message.
"""

import asyncio
import time
from collections.abc import Callable

from rich.markup import escape
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Footer, Static

from console.health import VERDICT_ORDER, Verdict
from console.ingest import Ingest
from console.live import LiveFeed
from console.rows import node_row
from console.state import FleetState
from console.tui.node_table import NodeTable, header_text
from fleetdeck.brokerurl import BrokerURL

VERDICT_COLOUR = {
    "ok": "$success", "degraded": "$warning", "failed": "$error", "stale": "$text-muted",
    "offline": "$error",
}


class HeaderBar(Static):
    DEFAULT_CSS = """
    HeaderBar { height: 1; background: $panel; color: $text; padding: 0 1; }
    """


class SummaryBar(Static):
    DEFAULT_CSS = """
    SummaryBar { height: 1; padding: 0 1; }
    """


class ColumnHeader(Static):
    DEFAULT_CSS = """
    ColumnHeader { height: 1; color: $text-muted; text-style: bold; }
    """


class FleetdeckApp(App[int]):
    TITLE = "fleetdeck"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+z", "toggle_unhealthy", "Unhealthy only"),
    ]

    def __init__(
        self,
        *,
        cluster: str,
        url: BrokerURL | None = None,
        broker_label: str = "",
        tick_s: float = 0.5,
        read_only: bool = False,
        operator: str = "operator",
        ingest: Ingest | None = None,
        clock: Callable[[], float] = time.time,
        connect: bool = True,
    ) -> None:
        super().__init__()
        self.cluster = cluster
        self.url = url
        self.broker_label = broker_label
        self.tick_s = tick_s
        self.read_only = read_only
        self.operator = operator
        self.clock = clock
        self.ingest = ingest or Ingest(cluster)
        self.state = FleetState(cluster, self.ingest.malformed)
        self.feed = LiveFeed(url, self.ingest, client_id=f"fd-console-{id(self):x}",
                             clock=clock) if url is not None and connect else None
        self.unhealthy_only = False
        self.tick_ms = 0.0
        self._stop = asyncio.Event()

    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield SummaryBar(id="summary")
        with Vertical():
            yield ColumnHeader(header_text(), id="columns")
            yield NodeTable(id="nodes")
        yield Footer()

    def on_mount(self) -> None:
        if self.feed is not None:
            self.run_feed()
        self.set_interval(self.tick_s, self.tick)
        self.query_one(NodeTable).focus()
        self.tick()

    @work(exclusive=True, group="feed", exit_on_error=False)
    async def run_feed(self) -> None:
        assert self.feed is not None
        await self.feed.run(self._stop)

    async def on_unmount(self) -> None:
        self._stop.set()

    def tick(self) -> None:
        """Apply what arrived since the last tick and redraw. Public so tests can drive it."""
        t0 = time.perf_counter()
        now = self.clock()
        self.state.apply(self.ingest.take_batch(), now)
        nodes = self.state.worst_first()
        if self.unhealthy_only:
            nodes = [n for n in nodes if n.verdict is not Verdict.OK]
        self.query_one(NodeTable).set_rows([node_row(n, now) for n in nodes])
        self.query_one(HeaderBar).update(self._header(now))
        self.query_one(SummaryBar).update(self._summary())
        self.tick_ms = (time.perf_counter() - t0) * 1000

    def _header(self, now: float) -> str:
        mode = escape("[R]" if self.read_only else "[RW]")
        if self.feed is None:
            conn = "[$text-muted]no broker[/]"
        else:
            c = self.feed.conn
            colour = {"connected": "$success", "connecting": "$warning"}.get(c.state, "$error")
            conn = f"[{colour}]{c.state}[/]"
            if c.state != "connected" and c.detail:
                conn += f" ({escape(c.detail)})"
        broker = f"{self.broker_label} {self.url}" if self.broker_label else str(self.url or "")
        last = self.state.last_update
        age = "never" if last is None else f"{max(0.0, now - last):.1f}s ago"
        malformed = self.state.malformed.total
        bad = f"[$error]malformed {malformed}[/]" if malformed else "malformed 0"
        return (f"[b]fleetdeck[/] {self.cluster}  {mode}  broker {escape(broker)} {conn}  "
                f"update {age}  {bad}  op {escape(self.operator)}")

    def _summary(self) -> str:
        t = self.state.totals()
        parts = [f"[b]{t.nodes}[/] nodes"]
        for verdict in sorted(Verdict, key=lambda v: VERDICT_ORDER[v]):
            n = t.by_verdict[verdict.value]
            if n:
                parts.append(f"[{VERDICT_COLOUR[verdict.value]}]{verdict.value} {n}[/]")
        gpus_missing = t.gpus - t.gpus_present
        parts.append(f"GPUs {t.gpus_present}/{t.gpus}"
                     + (f" [$error]({gpus_missing} missing)[/]" if gpus_missing else ""))
        down = t.ib_ports - t.ib_ports_up
        parts.append(f"IB ports down [{'$error' if down else '$success'}]{down}[/]/{t.ib_ports}")
        if t.draining or t.drained:
            parts.append(f"draining {t.draining} drained {t.drained}")
        if self.unhealthy_only:
            parts.append("[$warning](unhealthy only)[/]")
        return "  ".join(parts)

    def action_toggle_unhealthy(self) -> None:
        self.unhealthy_only = not self.unhealthy_only
        self.tick()


def run_console(url: BrokerURL, cluster: str, *, tick_s: float = 0.5, read_only: bool = False,
                operator: str = "operator", broker_label: str = "") -> int:
    app = FleetdeckApp(cluster=cluster, url=url, broker_label=broker_label, tick_s=tick_s,
                       read_only=read_only, operator=operator)
    app.run()
    return 0
