"""The console's timeline: node events as they arrive plus the console's own command lines.

Entries carry the node ids they concern, so a node's timeline is a lookup, never a parse of the
display text (bulk drains name a hostlist, not each node).
"""

from collections import deque
from collections.abc import Container, Iterator
from typing import Protocol

import msgspec

from fleetdeck.protocol.messages import Event

EVENT_LOG = 5000
"""Entries kept; the store keeps the rest."""
RETIRE_KIND = "retire"
"""The kind of the console's line that says nodes were retired (``fleetdeck retire``)."""


CONSOLE_NODE_KINDS = frozenset({"verdict", "inventory"})
"""Lines the console makes of a node itself, dated by the tick that made them."""


class Note(Protocol):
    """How a part of the console core says a line of the console's own in the timeline
    (``ConsoleSession.note``: ``keep`` keeps it in the store too)."""

    def __call__(self, text: str, *, severity: str = "info", nodes: tuple[str, ...] = (),
                 kind: str = "console", keep: bool = False, ts: float | None = None) -> None: ...


class EventLine(msgspec.Struct, frozen=True, gc=False):
    """One line of the timeline. A ``gc=False`` Struct: it holds numbers, strings and a tuple
    of strings, so it can be in no reference cycle, and the 5,000 kept lines are nothing the
    console's periodic GC sweep walks (docs/performance.md, "The sweep walks the state
    alone")."""

    ts: float
    source: str
    """The node id, ``sched``, or ``console`` for the console's own commands."""
    kind: str
    severity: str
    """info | warn | error | done"""
    text: str
    nodes: tuple[str, ...] = ()
    """Every node this entry concerns (the source node for node events, each target for
    commands)."""
    ref: str = ""
    """On a replay's line of a recorded operator's request: its request (``request_of``), to
    find what the recording holds of it besides the line (its re-sends: ``replay_headless``).
    '' on every other line."""

    def haystack(self) -> str:
        return f"{self.source} {self.kind} {self.severity} {self.text}"

    def concerns(self, node: str) -> bool:
        return node in self.nodes

    def from_agent(self, nodes: Container[str]) -> bool:
        """Said by a node's agent (an event it published, dated by the agent), not a line the
        console made of a node itself (a verdict, an inventory change: dated by the tick that
        made it), nor one of its own (``source`` "console", the scheduler's). A replay seeks
        the two kinds differently (``Player.line_at``)."""
        return self.source in nodes and self.kind not in CONSOLE_NODE_KINDS


def event_text(ev: Event) -> str:
    """An event's line: its component, then its message, which may name the component itself
    (the simulator's and the kernel's often do: "gpu5: volatile DBE 1")."""
    if not ev.component or ev.message.startswith(f"{ev.component}:"):
        return ev.message
    return f"{ev.component}: {ev.message}"


def event_line(ev: Event) -> EventLine:
    return EventLine(ev.ts / 1000, ev.node, ev.kind, ev.severity.value, event_text(ev),
                     (ev.node,))


class EventLog:
    """Bounded, append-only; ``seq`` counts every entry ever added so views can diff on it."""

    def __init__(self, size: int = EVENT_LOG) -> None:
        self._lines: deque[tuple[int, EventLine]] = deque(maxlen=size)
        self.seq = 0

    def add(self, line: EventLine) -> None:
        self.seq += 1
        self._lines.append((self.seq, line))

    def clear(self) -> None:
        self._lines.clear()
        self.seq += 1  # views holding a diff position must redraw

    def renumber_after(self, seq: int) -> None:
        """Number the entries on from ``seq`` (a timeline put back in place of a later one,
        ``ConsoleSession.restore``): ``seq`` moves past any value views saw before."""
        shift = seq + 1
        self._lines = deque(((n + shift, line) for n, line in self._lines),
                            maxlen=self._lines.maxlen)
        self.seq += shift

    def __iter__(self) -> Iterator[tuple[int, EventLine]]:
        return iter(self._lines)

    def __reversed__(self) -> Iterator[tuple[int, EventLine]]:
        return reversed(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def lines(self) -> Iterator[EventLine]:
        """The entries, oldest first, without their sequence numbers."""
        return (line for _seq, line in self._lines)

    def retired(self, node: str) -> EventLine | None:
        """The console's line that said ``node`` was retired (``ConsoleSession._note_retired``),
        the newest, or None: a node not in the state was retired, or is not known (yet). Read
        from the timeline, so a replay's seek and a context's own log answer for themselves;
        a retire older than the kept lines (``EVENT_LOG``) reads as not known."""
        for _seq, line in reversed(self._lines):
            if line.kind == RETIRE_KIND and line.source == "console" and node in line.nodes:
                return line
        return None

    def for_node(self, node: str, last: int = 500) -> list[EventLine]:
        """Console entries (commands) and verdict changes about ``node`` among the newest
        ``last`` entries: what the console said of the node, beside the node's own events
        (a node detail said "no events from this node yet" while the incident listed its
        "ok -> degraded (G12)")."""
        out: list[EventLine] = []
        for i, (_seq, line) in enumerate(reversed(self._lines)):
            if i >= last:
                break
            if (line.source == "console" or line.kind == "verdict") and line.concerns(node):
                out.append(line)
        out.reverse()
        return out
