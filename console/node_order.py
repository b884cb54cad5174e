"""The node list's order by any column, kept between re-sorts (issue 12: a re-sort of 16,384
nodes within 100 ms on 2 cores).

``NodeOrder.ids(state, key, jobs)`` is the fleet's node ids in ``rows.node_sort_key`` order
(ascending; the caller filters and reverses). What a re-sort would redo every time is kept:

* the ids in id order (the tie-break of every column), until a node is born or forgotten;
* each column's sort values, one per node, recomputed only for the nodes whose ``revision`` or
  ``shape_rev`` moved since (the same signature the node list's row cache trusts);
* each column's order (a permutation of the id-ordered nodes), until its values change.

A column's values are built by one list comprehension for the whole fleet, not by a
per-node call that dispatches on the column (``rows.node_sort_value``), and sorted as
indices: a stable sort of the id-ordered nodes by a flat value is ``node_sort_key``'s
(value, id) order without a tuple per node. Pure: no textual, testable on its own.
"""

import math
from collections.abc import Callable, Sequence
from operator import is_
from typing import Any

from fleetdeck.console.health import VERDICT_ORDER
from fleetdeck.console.rows import (
    METRIC_COLUMNS,
    ib_text,
    metrics,
    node_sort_value,
    reasons_text,
    slurm_state,
)
from fleetdeck.console.state import FleetState, NodeState

Jobs = dict[str, list[str]]

_EMPTY_LAST = frozenset({"job", "reasons"})
"""Columns whose ``node_sort_value`` is ``(text == "", text)``: the nodes with text first, by
text, then those without in id order. Kept as the text alone and sorted in two parts (a tuple
per node and tuple comparisons cost several times a string's)."""
_NODE_COLUMN_VALUES = frozenset({"verdict", "state", "gpus", "ib", "age", "reasons", "gaps"})
"""Columns whose value follows from the node alone (its revision and shape signature)."""


def _minus_verdict(st: NodeState) -> int:
    return -VERDICT_ORDER[st.verdict]


def _gpus(st: NodeState) -> str:
    return f"{st.gpus_present}/{st.gpus_expected}"


def _age(st: NodeState) -> float:
    return st.last_rx if st.last_rx is not None else -math.inf


def _gaps(st: NodeState) -> str:
    return str(st.seq_gaps) if st.seq_gaps else ""


_VALUE: dict[str, Callable[[NodeState], Any]] = {
    "verdict": _minus_verdict,
    "state": slurm_state,
    "gpus": _gpus,
    "ib": ib_text,
    "age": _age,
    "reasons": reasons_text,
    "gaps": _gaps,
}
"""The flat sort value of each node-only column (``reasons``: the text, see _EMPTY_LAST)."""


class _Column:
    __slots__ = ("order", "revs", "shapes", "values")

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.revs: list[int] = []
        self.shapes: list[int] = []
        self.order: list[str] | None = None


class NodeOrder:
    """What the node list's re-sorts keep between calls (one per node list)."""

    def __init__(self) -> None:
        self._serial = -1
        self._ids: list[str] = []
        self._nodes: list[NodeState] = []
        self._sig: tuple[int, int, int, int] = (-1, -1, -1, -1)
        self._revs: list[int] = []
        self._shapes: list[int] = []
        self._columns: dict[str, _Column] = {}
        self._jobs: Jobs | None = None
        self._job_order: list[str] | None = None

    def ids(self, state: FleetState, key: str, jobs: Jobs) -> list[str]:
        """Node ids in ``node_sort_key(st, key, jobs.get(id, []))`` order. The list is shared
        with later calls: read it, never change it."""
        self._sync(state)
        if key == "node":
            return self._ids
        if key == "job":
            return self._jobs_order(jobs)
        col = self._column(key)
        if col.order is None:
            col.order = self._sort(col.values, key in _EMPTY_LAST)
        return col.order

    # --- what changed -------------------------------------------------------------------------

    def _sync(self, state: FleetState) -> None:
        """Bring the id order and the nodes' signatures up to date with ``state``."""
        nodes = state.nodes
        sig = (len(nodes), state.revisions, state.shape_revisions, state.serial)
        if sig == self._sig:
            return  # nothing changed anywhere: every kept column stands (the idle case)
        self._sig = sig
        held = self._nodes
        if (state.serial != self._serial or len(nodes) != len(held)
                or not all(map(is_, map(nodes.get, self._ids), held))):
            # Born, forgotten or replaced (a replay that seeks starts a new state): from the
            # start, in id order.
            self._serial = state.serial
            self._ids = sorted(nodes)
            self._nodes = [nodes[n] for n in self._ids]
            self._columns.clear()
            self._job_order = None
        current = self._nodes
        self._revs = [st.revision for st in current]
        self._shapes = [st.shape_rev for st in current]

    def _stale(self, col: _Column) -> list[int] | None:
        """Positions whose node changed since ``col`` was computed; None: all of them."""
        revs, shapes = self._revs, self._shapes
        if len(col.revs) != len(revs):
            return None
        if col.revs == revs and col.shapes == shapes:
            return []
        changed = [i for i, (a, b, c, d) in enumerate(zip(revs, col.revs, shapes, col.shapes,
                                                          strict=True))
                   if a != b or c != d]
        return None if 2 * len(changed) > len(revs) else changed

    def _column(self, key: str) -> _Column:
        col = self._columns.get(key)
        if col is None:
            col = self._columns[key] = _Column()
        if key in METRIC_COLUMNS:
            # One pass gives all three (``metrics``): util, temp and power share it.
            m = self._refresh(self._columns.setdefault("metrics", _Column()), metrics)
            if col.order is None or col.revs is not m.revs:
                i = METRIC_COLUMNS.index(key)
                col.values = [-v[i] for v in m.values]
                col.revs, col.shapes, col.order = m.revs, m.shapes, None
            return col
        value = _VALUE.get(key)
        if value is None:  # a column this module has no flat value for: rows' own
            return self._refresh(col, lambda st: node_sort_value(st, key))
        return self._refresh(col, value)

    def _refresh(self, col: _Column, value: Callable[[NodeState], Any]) -> _Column:
        stale = self._stale(col)
        if stale == []:
            return col
        nodes = self._nodes
        if stale is None:
            col.values = list(map(value, nodes))
        else:
            values = col.values = list(col.values)  # a new list: the old one may be in use
            for i in stale:
                values[i] = value(nodes[i])
        col.revs, col.shapes, col.order = self._revs, self._shapes, None
        return col

    def _jobs_order(self, jobs: Jobs) -> list[str]:
        # A node's JOBS text comes from the job map alone (the caller's, rebuilt when a node or
        # a job changed): kept while it is the same map.
        if self._job_order is None or jobs is not self._jobs:
            self._jobs = jobs
            empty: list[str] = []
            self._job_order = self._sort([",".join(jobs.get(n, empty)) for n in self._ids],
                                         True)
        return self._job_order

    def _sort(self, values: Sequence[Any], empty_last: bool) -> list[str]:
        ids = self._ids
        if empty_last:
            # (text == "", text): the nodes with text by text, then the rest (equal values)
            # in id order.
            with_text = [i for i, v in enumerate(values) if v]
            with_text.sort(key=values.__getitem__)
            return [ids[i] for i in with_text] + [ids[i] for i, v in enumerate(values) if not v]
        order = sorted(range(len(ids)), key=values.__getitem__)
        return [ids[i] for i in order]
