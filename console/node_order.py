"""The node list's order by any column, kept between re-sorts (issue 12: a re-sort of 16,384
nodes within 100 ms on 2 cores).

``NodeOrder.ids(state, key, jobs)`` is the fleet's node ids in ``rows.node_sort_key`` order
(ascending; the caller filters and reverses). What a re-sort would redo every time is kept:

* the ids in id order (the tie-break of every column), until a node is born or forgotten;
* each column's sort values, one per node, recomputed only for the nodes whose ``revision`` or
  ``shape_rev`` moved since (the same signature the node list's row cache trusts; HEALTH
  follows ``shape_rev`` alone, so new samples of a healthy fleet leave it as it is);
* each column's order (a permutation of the id-ordered nodes), until its values change.

A column's values are built by one list comprehension for the whole fleet, not by a
per-node call that dispatches on the column (``rows.node_sort_value``), and sorted as
indices: a stable sort of the id-ordered nodes by a flat value is ``node_sort_key``'s
(value, id) order without a tuple per node. Pure: no textual, testable on its own.

Everything kept per node is a tuple (ids, nodes, signatures, values, orders), never a list:
their items are strings, numbers, tuples of those or ``NodeState`` (gc=False), so the GC stops
tracking a tuple once a collection has looked at it, while a list stays tracked for good and
the periodic full sweep (``fleetdeck/runtime.py`` ``sweep``) followed each of its items, a
cache miss each: at 16,384 nodes the lists kept here were ~5 of 16,384 items walked every
sweep (issue 12's 50 ms stall). Values read in place are read into a copy, then frozen.
"""

import math
from collections.abc import Callable, Sequence
from operator import is_
from typing import Any

from fleetdeck.console.commands import jobs_by_node
from fleetdeck.console.rows import (
    METRIC_COLUMNS,
    health_rank,
    ib_text,
    metric_sort_value,
    metrics,
    node_sort_value,
    reasons_text,
    slurm_state,
)
from fleetdeck.console.state import FleetState, NodeState

Jobs = dict[str, list[str]]

LIVE_HOLD_S = 2.0
"""With a clock given, a column read from the samples (metrics, age, IB text, ...) is read
again at most this often while only samples moved (no node's shape, no member changed): under
a 1 Hz stream every node's sample moves every second, and reading and sorting 16,384 nodes'
values on every refresh of the node list took ~90 ms (bench/console_scale.py under its feed).
The rows keep showing their latest values; only their order waits, as k9s's refresh does."""
HOLD_MIN_NODES = 2048
"""Fleets smaller than this re-read and re-sort a live column on every refresh: it costs a few
ms, and an order that waits shows rows out of order for a moment."""
READ_CHUNK = 4096
"""With a clock given, a refresh (the same column asked again) that finds more nodes moved is
read at most this many nodes per call, those whose shape moved first (~20 ms of metrics at
16,384 nodes): the others keep their values of a moment ago until the following calls, which
go on at once (``held``). A re-sort by another column reads all it needs at once."""

_EMPTY_LAST = frozenset({"job", "reasons"})
"""Columns whose ``node_sort_value`` is ``(text == "", text)``: the nodes with text first, by
text, then those without in id order. Kept as the text alone and sorted in two parts (a tuple
per node and tuple comparisons cost several times a string's)."""
_SHAPE_ONLY = frozenset({"verdict"})
"""Columns that change only with the node's shape (``FleetState.judge`` bumps ``shape_rev`` with
every new verdict and drain state, which HEALTH sorts by): a healthy fleet's samples leave their
order as it was, without a pass over the nodes. REASONS is not one: a sample's findings show
before the judgement pass."""


def _gpus(st: NodeState) -> str:
    return f"{st.gpus_present}/{st.gpus_expected}"


def _age(st: NodeState) -> float:
    return st.last_rx if st.last_rx is not None else -math.inf


def _gaps(st: NodeState) -> str:
    return str(st.seq_gaps) if st.seq_gaps else ""


_VALUE: dict[str, Callable[[NodeState], Any]] = {
    "verdict": health_rank,
    "state": slurm_state,
    "gpus": _gpus,
    "ib": ib_text,
    "age": _age,
    "reasons": reasons_text,
    "gaps": _gaps,
}
"""The flat sort value of each node-only column (``reasons``: the text, see _EMPTY_LAST)."""


class _Column:
    __slots__ = ("order", "partial", "read_at", "revisions", "revs", "shape_revisions",
                 "shapes", "source", "values")

    def __init__(self) -> None:
        self.values: tuple[Any, ...] = ()
        self.revs: tuple[int, ...] | None = None
        """Each node's ``revision`` when its value was computed (None: not read)."""
        self.shapes: tuple[int, ...] = ()
        self.revisions = -1
        self.shape_revisions = -1
        """``FleetState.revisions``/``shape_revisions`` when last brought up to date."""
        self.order: tuple[str, ...] | None = None
        self.source: tuple[Any, ...] | None = None
        """For UTIL/TEMP/POWER: the shared metrics tuple the values were taken from."""
        self.read_at = float("-inf")
        """The clock when the values were last read for moved revisions (``LIVE_HOLD_S``)."""
        self.partial = False
        """Some moved values are still to be read (``READ_CHUNK``)."""


class NodeOrder:
    """What the node list's re-sorts keep between calls (one per node list)."""

    def __init__(self) -> None:
        self._members: tuple[int, int, int] = (-1, -1, -1)
        self._ids: tuple[str, ...] = ()
        self._nodes: tuple[NodeState, ...] = ()
        self._revs: tuple[int, tuple[int, ...]] = (-1, ())
        self._shapes: tuple[int, tuple[int, ...]] = (-1, ())
        self._columns: dict[str, _Column] = {}
        self._jobs: Jobs | None = None
        self._job_order: tuple[str, ...] | None = None
        self._now: float | None = None
        self._last_key = ""
        self._same_key = False
        self.held = False
        """The last ``ids`` kept an order that new samples have moved (``LIVE_HOLD_S``): ask
        again later even if nothing else changes."""

    def ids(self, state: FleetState, key: str, jobs: Jobs | None = None,
            now: float | None = None) -> tuple[str, ...]:
        """Node ids in ``node_sort_key(st, key, jobs.get(id, []))`` order (``jobs``: for the
        JOBS column, ``jobs_by_node(state)`` when not given). With ``now`` (a clock in
        seconds) and a fleet of HOLD_MIN_NODES or more, an order that only new samples would
        change is kept up to ``LIVE_HOLD_S``.
        The tuple is shared with later calls."""
        self._now = now if len(state.nodes) >= HOLD_MIN_NODES else None
        self._same_key = key == self._last_key  # a refresh, not the operator's re-sort
        self._last_key = key
        self.held = False
        self._sync(state)
        if key == "node":
            return self._ids
        if key == "job":
            return self._jobs_order(jobs if jobs is not None else jobs_by_node(state))
        col = self._column(state, key)
        if col.order is None:
            col.order = self._sort(col.values, key in _EMPTY_LAST)
        return col.order

    # --- what changed -------------------------------------------------------------------------

    def _sync(self, state: FleetState) -> None:
        """Start again from the fleet's ids when a node was born, forgotten or replaced."""
        nodes = state.nodes
        # A node is born with a revision bump or forgotten with a shape-log entry; a replay
        # that seeks starts a new state (serial). Unchanged, the same nodes are held.
        members = (state.serial, len(nodes), state.shape_log_base + len(state.shape_log))
        if members == self._members:
            return
        self._members = members
        if len(nodes) == len(self._nodes) and all(map(is_, map(nodes.get, self._ids),
                                                      self._nodes)):
            return
        self._ids = tuple(sorted(nodes))
        self._nodes = tuple([nodes[n] for n in self._ids])
        self._revs = self._shapes = (-1, ())
        self._columns.clear()
        self._job_order = None

    def _signatures(self, state: FleetState,
                    revs: bool) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
        """Every node's ``revision`` (when ``revs``) and ``shape_rev``, in id order, read once
        per change of the fleet's counters whichever columns ask."""
        if self._shapes[0] != state.shape_revisions:
            self._shapes = (state.shape_revisions, tuple([st.shape_rev for st in self._nodes]))
        if not revs:
            return None, self._shapes[1]
        if self._revs[0] != state.revisions:
            self._revs = (state.revisions, tuple([st.revision for st in self._nodes]))
        return self._revs[1], self._shapes[1]

    def _column(self, state: FleetState, key: str) -> _Column:
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = _Column()
        if key in METRIC_COLUMNS:
            # One pass gives all three (``metrics``): util, temp and power share it.
            m = self._refresh(state, self._columns.setdefault("metrics", _Column()), metrics)
            if col.source is not m.values:  # a new tuple whenever a value changed
                i = METRIC_COLUMNS.index(key)
                col.values = tuple([metric_sort_value(key, v[i]) for v in m.values])
                col.source, col.order = m.values, None
            return col
        value = _VALUE.get(key)
        if value is None:  # a column this module has no flat value for: rows' own
            return self._refresh(state, col, lambda st: node_sort_value(st, key))
        return self._refresh(state, col, value, revs=key not in _SHAPE_ONLY)

    def _refresh(self, state: FleetState, col: _Column, value: Callable[[NodeState], Any],
                 revs: bool = True) -> _Column:
        """Bring ``col``'s values up to date: only the nodes whose signature moved."""
        if col.shape_revisions == state.shape_revisions and (
                not revs or col.revisions == state.revisions):
            return col  # no node changed at all since (a healthy fleet's samples: verdict)
        now = self._now
        if now is not None:
            if (not col.partial and col.shape_revisions == state.shape_revisions
                    and col.values and now - col.read_at < LIVE_HOLD_S):
                self.held = True
                return col  # only samples moved, and the values were read a moment ago
            col.read_at = now
        col.shape_revisions, col.revisions = state.shape_revisions, state.revisions
        now_revs, now_shapes = self._signatures(state, revs)
        nodes = self._nodes
        if len(col.values) != len(nodes) or (revs and col.revs is None):
            stale: list[int] | None = None
        else:
            stale = _moved(now_shapes, col.shapes, now_revs, col.revs)
            if not stale:
                col.revs, col.shapes, col.partial = now_revs, now_shapes, False
                return col
            if (now is not None and self._same_key and len(stale) > READ_CHUNK
                    and now_revs is not None and col.revs is not None):
                # A refresh (not a re-sort) that finds more nodes moved than one call reads:
                # those whose shape moved first, READ_CHUNK now, the rest on the next calls.
                old_shapes = col.shapes
                shaped = [i for i in stale if now_shapes[i] != old_shapes[i]]
                if shaped:
                    stale = shaped + [i for i in stale if now_shapes[i] == old_shapes[i]]
                values = list(col.values)
                revs_read = list(col.revs)
                shapes_read = list(old_shapes)
                for i in stale[:READ_CHUNK]:
                    values[i] = value(nodes[i])
                    revs_read[i] = now_revs[i]
                    shapes_read[i] = now_shapes[i]
                col.values, col.revs = tuple(values), tuple(revs_read)
                col.shapes = tuple(shapes_read)
                col.revisions = col.shape_revisions = -1
                col.partial, col.order = True, None
                self.held = True
                return col
        col.partial = False
        if stale is None or 2 * len(stale) > len(nodes):
            col.values = tuple(map(value, nodes))
        else:
            values = list(col.values)
            for i in stale:
                values[i] = value(nodes[i])
            col.values = tuple(values)
        col.revs, col.shapes, col.order = now_revs, now_shapes, None
        return col

    def _jobs_order(self, jobs: Jobs) -> tuple[str, ...]:
        # A node's JOBS text comes from the job map alone (the caller's, rebuilt when a node or
        # a job changed): kept while it is the same map.
        if self._job_order is None or jobs is not self._jobs:
            self._jobs = jobs
            empty: list[str] = []
            self._job_order = self._sort([",".join(jobs.get(n, empty)) for n in self._ids],
                                         True)
        return self._job_order

    def _sort(self, values: Sequence[Any], empty_last: bool) -> tuple[str, ...]:
        ids = self._ids
        if empty_last:
            # (text == "", text): the nodes with text by text, then the rest (equal values)
            # in id order.
            with_text = [i for i, v in enumerate(values) if v]
            with_text.sort(key=values.__getitem__)
            return tuple([ids[i] for i in with_text]
                         + [ids[i] for i, v in enumerate(values) if not v])
        order = sorted(range(len(ids)), key=values.__getitem__)
        return tuple([ids[i] for i in order])


def _moved(shapes: tuple[int, ...], old_shapes: tuple[int, ...], revs: tuple[int, ...] | None,
           old_revs: tuple[int, ...] | None) -> list[int]:
    """Positions whose shape (or, given, revision) differs."""
    if revs is None or old_revs is None:
        if shapes == old_shapes:
            return []
        return [i for i, (a, b) in enumerate(zip(shapes, old_shapes, strict=True)) if a != b]
    if shapes == old_shapes and revs == old_revs:
        return []
    return [i for i, (a, b, c, d) in enumerate(zip(revs, old_revs, shapes, old_shapes,
                                                   strict=True))
            if a != b or c != d]
