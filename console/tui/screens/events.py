"""Events: a live, filterable log of node events (XID, links, drains) and console commands."""

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Input

from fleetdeck.console.eventlog import EventLine
from fleetdeck.console.judgements import utc_hms
from fleetdeck.console.tui.line_table import Column, LineTable
from fleetdeck.console.tui.screens.base import FilteredView, filter_said
from fleetdeck.console.tui.text import Part, fit_parts

KIND_CELLS = len("ib_port_state")
"""The longest kind the agents and the console send (docs/protocol.md): at 80 columns the
KIND column cut it to "ib_port_st…", the kind a filter is typed from."""
EVENT_COLUMNS = [
    Column("TIME", "ts", 8), Column("SOURCE", "source", 10, grow=24),
    Column("KIND", "kind", KIND_CELLS, grow=32), Column("SEV", "severity", 5),
    Column("MESSAGE", "text", 0, min=30),
]
SEV_STYLE = {"error": "error", "warn": "warn", "done": "done", "info": "text"}
Row = tuple[int, EventLine]


class EventsScreen(FilteredView):
    FILTER_BOX = "event-filter"
    VIEW = "events"
    BINDINGS = [
        Binding("slash", "filter", "Filter", priority=True),  # see action_filter
        Binding("c", "commands", "Commands only"),
        Binding("enter", "open", "Node", show=False),
        Binding("t", "to_time", "To its time"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.commands_only = False
        self.rows: list[Row] = []
        self._seen_seq = -1
        self._key = ("", False)
        self._went_to: EventLine | None = None
        """The line ``t`` went to, for the cursor once the replay shows it (``update_body``)."""

    def compose_body(self) -> ComposeResult:
        yield LineTable(EVENT_COLUMNS, key=lambda r: str(r[0]), cells=_cells, style=_style,
                        id="event-table")
        yield Input(placeholder="filter events: regex over source, kind, severity and text; "
                    "!inverse", id="event-filter")

    def on_mount(self) -> None:
        self.query_one("#event-filter", Input).display = False
        self.table.focus()

    @property
    def table(self) -> LineTable[Row]:
        return self.query_one("#event-table", LineTable)

    def update_body(self, now: float) -> None:
        app = self.fleet
        key = (self.filter.text, self.commands_only)
        if app.event_seq == self._seen_seq and key == self._key:
            return
        self._seen_seq, self._key = app.event_seq, key
        rows = []
        f = self.filter
        for seq, line in reversed(app.event_log):
            if self.commands_only and line.kind not in COMMAND_LINES:  # not its other notes
                continue
            if f.active and not f.matches(line.source, line.haystack()):
                continue
            rows.append((seq, line))
        # Newest first by time, as the header says: a node's event (the agent's clock) can
        # arrive after the verdict it caused (the tick's), and read 13:41:33 under 13:41:32.
        rows.sort(key=lambda r: (r[1].ts, r[0]), reverse=True)
        self.rows = rows
        table = self.table
        if f.active:
            table.empty_text = "no events match"
        elif self.commands_only and len(app.event_log):
            # "no events yet" under "0/66 events" read as a broken view (a newcomer's run).
            table.empty_text = ("no command yet: none from this console, and no node said it "
                                "was drained or resumed (c: every event)")
        else:
            table.empty_text = "no events yet"
        # On the newest row, the cursor follows the newest (tail -f): a view left at the top
        # and opened again later showed its old top row deep down the list. Moved down, it
        # stays on its entry while new ones arrive above.
        follow = table.cursor == 0
        table.set_rows(rows)
        went = self._went_to
        if went is not None:
            # The timeline a seek back puts in place is numbered anew (``EventLog.renumber_
            # after``): the cursor kept its row number, on another line, and the next t or
            # enter acted on that one (a review). Onto the line once the replay shows it.
            at = next((i for i, (_seq, line) in enumerate(rows) if line == went), None)
            if at is not None:
                self._went_to = None
                table.action_cursor_to(at)
                return
        if follow and table.cursor != 0:
            table.action_cursor_to(0)

    def info(self) -> str:
        shown = f"{len(self.rows)}/{len(self.fleet.event_log)}"
        # Short and filtered, the numbers alone (the tab says what they count): room for the
        # filter that hides the rest.
        parts: list[Part] = [(f"{shown} events, newest first",
                              shown if self.filter.active else f"{shown} events", 0)]
        parts += filter_said(self.filter)
        if self.commands_only:
            parts.append(("[$warning]commands only[/] (c)", "[$warning]commands only[/]", 0))
        # As the other views say what enter opens: here nothing did (a UX pass). A short line
        # gives it up whole, where at 100 columns it was cut ("enter:…", a 3 a.m. drive).
        return fit_parts(parts, self.info_room(), hint="[$text-muted]enter: its node[/]")

    def action_commands(self) -> None:
        self.commands_only = not self.commands_only
        self.fleet.refresh_view()

    def action_open(self) -> None:
        row = self.table.current_row
        if row is None:
            return
        line = row[1]
        # A command's or a note's line names its nodes: open the first one it concerns.
        node = next((n for n in (line.source, *line.nodes) if n in self.fleet.state.nodes), None)
        if node is not None:
            self.fleet.open_node(node)
        else:
            self.notify(f"no node to open: this {line.kind} line concerns no node this "
                        "console knows", severity="warning", timeout=3)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # A replay goes to a line's time (``ReplayApp.seek_line``); a live console has none
        # but now.
        return action != "to_time" or callable(getattr(self.fleet, "seek_line", None))

    def action_to_time(self) -> None:
        row = self.table.current_row
        seek = getattr(self.fleet, "seek_line", None)
        if row is not None and seek is not None:
            self._went_to = row[1]
            seek(row[1])

    @on(LineTable.Selected, "#event-table")
    def _selected(self, event: LineTable.Selected) -> None:
        self.action_open()


COMMAND_LINES = frozenset({"command", "drain"})
"""What ``c`` keeps: this console's commands, and every node's word that it was drained or
resumed, whoever asked (``fleetdeck drain`` from a terminal, another console): 'c' listed
only this console's own, and a CLI drain was found only among all the events (a newcomer's
run)."""


def _cells(r: Row) -> tuple[str, ...]:
    line = r[1]
    return (utc_hms(line.ts), line.source, line.kind, line.severity, line.text)


def _style(r: Row) -> str:
    return SEV_STYLE.get(r[1].severity, "text")
