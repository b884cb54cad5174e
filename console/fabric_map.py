"""The fabric as a picture: every rail switch (``leaf03-r5``) against the nodes under it, one
port state per (node, rail), and the same data summed per switch for the overview.

ND H100 v5 fabrics are rail-optimised (judgements.py): HCA ``mlx5_ibK`` of every node of a leaf
group goes to that group's rail-K switch. So a leaf group is a block of ``rails`` rows (one per
switch) by its nodes (one column each), and a failing switch is one row of a block going bad
while the rows above and below stay ok; a bad cable is a single cell.

``plan`` lays the blocks out for a given size: several blocks side by side per band, and when
the fleet does not fit, cells that stand for several nodes (then several leaf groups) and show
the worst state among them. Domain only: text and numbers, the TUI draws the plan.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, is_

import msgspec

from fleetdeck.console.health import Severity
from fleetdeck.console.judgements import (
    NO_LINK,
    PORT_ERRORING,
    PORT_FLAPPING,
    LeafGroup,
    SuspectSwitch,
    bad_ports,
    leaf_groups,
    leaf_of,
    port_rail,
    suspect_switches,
)
from fleetdeck.console.state import FleetState, NodeState
from fleetdeck.hostlist import compress, natural_key
from fleetdeck.protocol.fast import IbPortSample

_BIRTH = attrgetter("birth")


class Port:
    """Port-state codes of matrix cells, worse is higher (a cell shows its worst member)."""

    NONE = 0
    """No such port: the node has no HCA on that rail."""
    OK = 1
    WAITING = 2
    """Born, no telemetry yet: state not known."""
    SILENT = 3
    """Offline or stale: the last state is no longer the current one."""
    ERRORS = 4
    """Errors rising at a low rate (N4, a warning)."""
    ERRORING = 5
    """Errors at a rate that drains (N2, N3) or a degraded link (N1 while up)."""
    FLAPPING = 6
    DOWN = 7


PORT_NAMES = {Port.NONE: "none", Port.OK: "ok", Port.WAITING: "waiting", Port.SILENT: "silent",
              Port.ERRORS: "errors", Port.ERRORING: "erroring", Port.FLAPPING: "flapping",
              Port.DOWN: "down"}
BAD = Port.ERRORS
"""Codes from here up are ports that are not ok."""
_DRAIN_RATE_RULES = frozenset({"N1", "N2", "N3"})


# What the layout caches hold per node (the births, a node's place, each leaf group's members)
# is out of the GC's view: msgspec Structs with ``gc=False`` (numbers, strings and tuples of
# those: in no reference cycle) and tuples of them, which the collector untracks, as it then
# untracks a dict of them in a full collection. As lists and tracked dataclasses they were
# ~82,000 references the periodic full collection followed at 16,384 nodes (two lists of the
# births, the members, the healthy map: bench/tui_sweep.py; docs/performance.md, "Frozen
# garbage: the GC sweep").


class BadPort(msgspec.Struct, frozen=True, gc=False):
    rail: int
    code: int
    port: str
    """``dev:port``"""
    text: str
    """Its findings, ``; ``-joined."""


class NodeFabric(msgspec.Struct, frozen=True, gc=False):
    """One node's place in the fabric and the state of its ports."""

    leaf: str
    rails: tuple[int, ...]
    """Rails of its HCAs (from the birth's GPU affinity), in order."""
    silent: int
    """``Port.OK`` when live; ``WAITING`` or ``SILENT`` when its ports are not known now."""
    bad: tuple[BadPort, ...] = ()


def _rails(st: NodeState) -> tuple[int, ...]:
    """The rails of a node's HCAs: from the birth's inventory, else from its telemetry."""
    rails: set[int] = set()
    if st.birth is not None:
        rails.update(r for inv in st.birth.ib_ports
                     if (r := port_rail(st, inv.dev)) is not None)
    if not rails and (t := st.telemetry) is not None:
        rails.update(r for p in t.ib_ports if (r := port_rail(st, p.dev)) is not None)
    return tuple(sorted(rails))


def _drain_rate(st: NodeState, p: IbPortSample) -> bool:
    """Whether an erroring port errs at a rate that drains (N1-N3, or N4 escalated), not only
    at N4's warning rate."""
    comp = f"{p.dev}:{p.port}"
    # N4 drains too once its episodes escalate (three in an hour).
    return any((f.rule in _DRAIN_RATE_RULES or (f.rule == "N4" and f.severity is Severity.DRAIN))
               and f.component == comp for f in st.findings)


def node_fabric(st: NodeState) -> NodeFabric:
    t = st.telemetry
    if st.online is False or st.stale:
        silent = Port.SILENT
    elif t is None:
        silent = Port.WAITING
    else:
        silent = Port.OK
    bad = []
    for status, p in bad_ports(st):
        rail = port_rail(st, p.dev)
        if rail is None:
            continue
        comp = f"{p.dev}:{p.port}"
        if status in NO_LINK:
            code = Port.DOWN
        elif status == PORT_FLAPPING:
            code = Port.FLAPPING
        else:
            code = Port.ERRORING if _drain_rate(st, p) else Port.ERRORS
        text = "; ".join(f.text for f in st.findings if f.component == comp)
        bad.append(BadPort(rail, code, comp, text))
    return NodeFabric(leaf_of(st), _rails(st), silent, tuple(bad))


@dataclass
class FabricMap:
    """Every node's ports by leaf group and rail, and the suspected switches."""

    leaves: list[str]
    """Leaf groups, sorted."""
    members: dict[str, tuple[str, ...]]
    """Leaf group -> its nodes, sorted."""
    rails: list[int]
    """Every rail any node has, sorted."""
    nodes: dict[str, NodeFabric]
    """Each node as it is when all its ports are ok (from its birth)."""
    suspects: dict[str, str]
    """Suspected switch -> the judgement's text."""
    overrides: dict[str, NodeFabric] = field(default_factory=dict)
    """Nodes that are not all ok now: a bad port, or silent, or waiting."""
    recovered: frozenset[str] = frozenset()
    """Of ``suspects``, the switches whose ports are all up again (``SuspectSwitch.recovered``):
    not marked as failing, said as recovered."""

    def node(self, node: str) -> NodeFabric | None:
        return self.overrides.get(node) or self.nodes.get(node)

    def code(self, node: str, rail: int) -> int:
        nf = self.node(node)
        if nf is None or rail not in nf.rails:
            return Port.NONE
        for b in nf.bad:
            if b.rail == rail:
                return b.code
        return nf.silent

    def port(self, node: str, rail: int) -> BadPort | None:
        nf = self.node(node)
        if nf is None:
            return None
        return next((b for b in nf.bad if b.rail == rail), None)


@dataclass
class FabricMapCache:
    """The fleet's layout as of the births it was made from, and the summaries of the nodes
    that needed one of their own (kept while their signature holds)."""

    births: tuple[object, ...] = ()
    leaves: list[str] = field(default_factory=list)
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rails: list[int] = field(default_factory=list)
    healthy: dict[str, NodeFabric] = field(default_factory=dict)
    special: dict[str, tuple[tuple[object, ...], NodeFabric]] = field(default_factory=dict)


def fabric_map(state: FleetState, cache: FabricMapCache | None = None) -> FabricMap:
    """Every node's ports by leaf group and rail. The layout (leaf groups, members, rails) is
    rebuilt only when a node is added or sends a new birth; then a pass that costs a few
    attribute reads per healthy node: only a node with findings, silent or waiting gets a
    summary of its own (kept while its shape is unchanged and it has no IB findings: a port
    that goes down or errors always raises an N finding, and the counters of a port that has
    one move with every sample)."""
    cache = cache if cache is not None else FabricMapCache()
    nodes = state.nodes
    births = tuple(map(_BIRTH, nodes.values()))
    if len(births) != len(cache.births) or not all(map(is_, births, cache.births)):
        cache.births = births
        groups: dict[str, list[str]] = {}
        healthy: dict[str, NodeFabric] = {}
        rail_sets: set[tuple[int, ...]] = set()
        shared: dict[tuple[str, tuple[int, ...]], NodeFabric] = {}
        for node_id, st in nodes.items():
            leaf, rails = leaf_of(st), _rails(st)
            nf = shared.get((leaf, rails))
            if nf is None:
                nf = shared[(leaf, rails)] = NodeFabric(leaf, rails, Port.OK)
            healthy[node_id] = nf
            rail_sets.add(rails)
            groups.setdefault(leaf, []).append(node_id)
        members = {leaf: tuple(sorted(group)) for leaf, group in groups.items()}
        # In number order: the matrix's blocks (and cells of several groups) run leaf01,
        # leaf02 … leaf1024, not leaf01, leaf10, leaf100, leaf1000 (a 16,384-node drive).
        leaves = sorted(members, key=natural_key)
        cache.leaves, cache.members, cache.healthy = leaves, members, healthy
        cache.rails = sorted({r for rs in rail_sets for r in rs})
        cache.special = {}
    overrides: dict[str, NodeFabric] = {}
    special = cache.special
    for node_id, st in nodes.items():
        if not (st.findings or st.stale or st.online is False or st.sample is None):
            continue
        ib = any(f.rule.startswith("N") for f in st.findings) if st.findings else False
        sig = (st.shape_rev, st.revision if ib else -1, st.stale, st.online,
               st.sample is None)
        hit = special.get(node_id)
        if hit is None or hit[0] != sig:
            hit = special[node_id] = (sig, node_fabric(st))
        nf = hit[1]
        if nf.bad or nf.silent != Port.OK:
            overrides[node_id] = nf
    judged = suspect_switches(state)
    suspects = {sw.switch: sw.text for sw in judged}
    recovered = frozenset(sw.switch for sw in judged if sw.recovered)
    return FabricMap(cache.leaves, cache.members, cache.rails, cache.healthy, suspects,
                     overrides, recovered)


# --- per switch (the overview's fabric panel) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class SwitchRow:
    switch: str
    leaf: str
    rail: int
    ports: int
    down: int
    flapping: int
    erroring: int
    """Erroring at any rate."""
    nodes: tuple[str, ...]
    """Nodes with a bad port on this switch."""
    suspect: str
    """The judgement's text when the switch is suspected, else ''."""
    recovered: bool = False
    """Suspected, but its ports are all up again (``SuspectSwitch.recovered``)."""
    low_rate: int = 0
    """Of ``erroring``, the ports with errors at a low rate only (N4, a warning: the matrix's
    ``Port.ERRORS``), not at a rate that drains."""
    rails: int = 1
    """Rail switches the row stands for: more than one for a leaf group's (``leaf_grouped``)."""

    @property
    def port_name(self) -> str:
        """Its worst port, as the matrix names a cell (``PORT_NAMES``)."""
        if self.down:
            return PORT_NAMES[Port.DOWN]
        if self.flapping:
            return PORT_NAMES[Port.FLAPPING]
        return PORT_NAMES[Port.ERRORS if self.low_rate == self.erroring else Port.ERRORING]

    @property
    def failing(self) -> bool:
        """Suspected and not recovered: what is marked as a failing switch."""
        return bool(self.suspect) and not self.recovered

    @property
    def bad(self) -> int:
        return self.down + self.flapping + self.erroring


@dataclass
class SwitchSummary:
    switches: int
    """Rail switches in the fleet (leaf groups x rails)."""
    rows: list[SwitchRow] = field(default_factory=list)
    """Switches with a bad port, suspected first, then by bad ports."""
    leaves: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    """Leaf group -> (its nodes, its rails), in name order."""
    failing_leaves: dict[str, LeafGroup] = field(default_factory=dict)
    """Leaf groups with two or more failing rail switches (``judgements.leaf_groups``)."""
    recovered_leaves: dict[str, LeafGroup] = field(default_factory=dict)
    """Leaf groups with two or more rail switches recovered (``leaf_groups``, ``recovered``)."""


@dataclass
class SwitchHealthCache:
    """The fleet's shape (ports per switch) as of the births it was counted from: counted
    again only when a node is added or sends a new birth."""

    births: tuple[object, ...] = ()
    shapes: dict[str, dict[tuple[int, ...], int]] = field(default_factory=dict)
    leaf: dict[str, str] = field(default_factory=dict)
    leaves: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)


def switch_health(state: FleetState, suspects: Sequence[SuspectSwitch] | None = None,
                  cache: SwitchHealthCache | None = None) -> SwitchSummary:
    """The rail switches with bad ports, suspected first, then by bad ports; what the
    overview shows. Cheap enough to follow every change of a 16,384-node fleet: the shape is
    recounted only when births change, and ports are looked at only on nodes with findings;
    ``suspects`` when the caller has them already (``suspect_switches``)."""
    if suspects is None:
        suspects = suspect_switches(state)
    cache = cache if cache is not None else SwitchHealthCache()
    nodes = state.nodes
    births = tuple(map(_BIRTH, nodes.values()))
    if len(births) != len(cache.births) or not all(map(is_, births, cache.births)):
        cache.births = births
        cache.shapes = {}
        cache.leaf = {}
        for node_id, st in nodes.items():
            leaf = cache.leaf[node_id] = leaf_of(st)
            per = cache.shapes.setdefault(leaf, {})
            rails = _rails(st)
            per[rails] = per.get(rails, 0) + 1
        cache.leaves = {leaf: (sum(per.values()), tuple(sorted({r for rs in per for r in rs})))
                        for leaf, per in sorted(cache.shapes.items(),
                                                key=lambda kv: natural_key(kv[0]))}
    shapes = cache.shapes
    agg: dict[str, tuple[str, int, list[int], list[str]]] = {}
    for st in nodes.values():
        if not st.findings:
            continue
        leaf = cache.leaf[st.node_id]
        for status, p in bad_ports(st):
            rail = port_rail(st, p.dev)
            if rail is None:
                continue
            sw = f"{leaf}-r{rail}"
            got = agg.get(sw)
            if got is None:
                got = agg[sw] = (leaf, rail, [0, 0, 0, 0], [])
            counts = got[2]
            counts[0 if status in NO_LINK else 1 if status == PORT_FLAPPING else 2] += 1
            if status == PORT_ERRORING and not _drain_rate(st, p):
                counts[3] += 1
            if st.node_id not in got[3]:
                got[3].append(st.node_id)
    out = SwitchSummary(sum(len(rails) for _n, rails in cache.leaves.values()),
                        leaves=cache.leaves, failing_leaves=leaf_groups(list(suspects)),
                        recovered_leaves=leaf_groups(list(suspects), recovered=True))
    judged = {sw.switch: sw for sw in suspects}
    for sw, (leaf, rail, (down, flap, err, low), bad_nodes) in agg.items():
        ports = sum(n for rs, n in shapes[leaf].items() if rail in rs)
        j = judged.get(sw)
        out.rows.append(SwitchRow(sw, leaf, rail, ports, down, flap, err,
                                  tuple(sorted(bad_nodes)), "" if j is None else j.text,
                                  j is not None and j.recovered, low))
    out.rows.sort(key=lambda r: (not r.failing, r.suspect == "", -r.bad, -r.down,
                              natural_key(r.switch)))
    return out


def leaf_grouped(summary: SwitchSummary) -> list[SwitchRow]:
    """The summary's rail switches of each failing leaf group (``failing_leaves``, one
    incident) merged into one row named after the group (``leaf02-r*``), where the first of
    them stood, and those recovered together (``recovered_leaves``) likewise: a whole leaf
    group down filled the overview's panel with a row per rail of the same nodes, and again
    once it was back."""
    def group_of(r: SwitchRow) -> dict[str, LeafGroup]:
        if r.failing:
            return summary.failing_leaves
        return summary.recovered_leaves if r.recovered else {}

    def in_group(r: SwitchRow) -> bool:
        # A rail of its leaf that dropped apart from the group's is a row of its own.
        leaf = group_of(r).get(r.leaf)
        return leaf is not None and any(sw.switch == r.switch for sw in leaf.switches)

    groups: dict[tuple[str, bool], list[SwitchRow]] = {}
    for r in summary.rows:
        if in_group(r):
            groups.setdefault((r.leaf, r.recovered), []).append(r)
    out: list[SwitchRow] = []
    for r in summary.rows:
        group = groups.get((r.leaf, r.recovered)) if in_group(r) else None
        if group is None:
            out.append(r)
        elif r is group[0]:
            out.append(SwitchRow(
                f"{r.leaf}-r*", r.leaf, -1, sum(g.ports for g in group),
                sum(g.down for g in group), sum(g.flapping for g in group),
                sum(g.erroring for g in group),
                tuple(sorted({n for g in group for n in g.nodes})),
                group_of(r)[r.leaf].text, r.recovered,
                sum(g.low_rate for g in group), len(group)))
    return out


# --- the matrix, laid out for a size ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Column:
    """One cell column: the nodes it stands for (one, several of a leaf group, or the nodes of
    several leaf groups)."""

    leaves: tuple[str, ...]
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Block:
    """Columns drawn side by side without a gap: one leaf group, or (grouped by leaf) a run of
    cells that each stand for several leaf groups."""

    label: str
    leaves: tuple[str, ...]
    columns: tuple[Column, ...]


@dataclass
class MatrixPlan:
    rails: list[int]
    bands: list[list[Block]]
    """Blocks side by side; each band is a header line then one line per rail."""
    cell_width: int
    """1 or 2 characters per cell (2: the glyph and a space, when there is room)."""
    per_cell: int
    """Nodes per cell (1: one node each); with ``groups_per_cell`` > 1, a whole group each."""
    groups_per_cell: int = 1
    grouped: bool = False
    """Cells of whole leaf groups, in blocks of ``BLOCK_CELLS``."""

    @property
    def lines(self) -> int:
        return len(self.bands) * (1 + len(self.rails))

    def describe(self) -> str:
        """What a cell stands for, said on screen when it is more than one port."""
        if self.groups_per_cell > 1:
            return f"a cell is one rail of {self.groups_per_cell} leaf groups (worst shown)"
        if self.grouped:
            return "a cell is one switch, all its nodes (worst shown)"
        if self.per_cell > 1:
            return f"a cell is up to {self.per_cell} nodes of one switch (worst shown)"
        return "a cell is one port"


GAP = 1
"""Before every block: a space, or the mark of a suspected switch on its row."""


def label_width(rails: Sequence[int]) -> int:
    """``r7`` and a space: the rail label in front of every line."""
    return len(f"r{max(rails, default=0)}") + 1


def _chunks(seq: Sequence[str], k: int) -> list[tuple[str, ...]]:
    return [tuple(seq[i:i + k]) for i in range(0, len(seq), k)]


def _bands(widths: list[int], usable: int) -> list[list[int]]:
    """Block indices per band: as many blocks side by side as the width takes."""
    bands: list[list[int]] = []
    x = 0
    for i, w in enumerate(widths):
        if bands and x + GAP + w <= usable:
            bands[-1].append(i)
            x += GAP + w
        else:
            bands.append([i])
            x = GAP + w
    return bands


def plan(fm: FabricMap, width: int, height: int) -> MatrixPlan:
    """The densest-needed layout that fits ``width`` x ``height``: one cell per port, two
    characters wide when there is room; else one; else cells of 2, 4, 8 … nodes of a leaf
    group; else cells of several whole leaf groups. Whatever the size, a plan is returned (it
    scrolls when even that does not fit)."""
    rails = fm.rails or [0]
    per_band = 1 + len(rails)
    usable = max(8, width - label_width(rails))
    max_bands = max(1, height // per_band)
    biggest = max((len(fm.members[leaf]) for leaf in fm.leaves), default=1)
    tries: list[tuple[int, int]] = [(2, 1)]
    k = 1
    while True:
        tries.append((1, k))
        if k >= biggest:
            break
        k *= 2
    sizes = [len(fm.members[leaf]) for leaf in fm.leaves]
    for cw, k in tries:
        # Widths first (arithmetic); the blocks are built only for the layout chosen.
        widths = [max(-(-n // k) * cw, min(len(leaf), 6) if cw == 2 else 1)
                  for leaf, n in zip(fm.leaves, sizes, strict=True)]
        if max(widths, default=0) + GAP > usable:
            continue
        bands = _bands(widths, usable)
        if len(bands) <= max_bands:
            blocks = [Block(leaf, (leaf,), tuple(Column((leaf,), c)
                                                  for c in _chunks(fm.members[leaf], k)))
                      for leaf in fm.leaves]
            return MatrixPlan(rails, [[blocks[i] for i in band] for band in bands], cw, k)
    # Whole leaf groups per cell: blocks of BLOCK_CELLS cells, as many bands as fit.
    cells = max_bands * max(1, usable // (GAP + BLOCK_CELLS)) * BLOCK_CELLS
    g = max(1, -(-len(fm.leaves) // cells))
    groups = _chunks(fm.leaves, g)
    cols = [Column(gs, tuple(n for leaf in gs for n in fm.members[leaf])) for gs in groups]
    blocks = [Block(c[0].leaves[0], tuple(x for col in c for x in col.leaves), tuple(c))
              for c in (cols[i:i + BLOCK_CELLS] for i in range(0, len(cols), BLOCK_CELLS))]
    widths = [len(b.columns) for b in blocks]
    bands = _bands(widths, usable)
    return MatrixPlan(rails, [[blocks[i] for i in band] for band in bands], 1, biggest, g,
                      grouped=True)


BLOCK_CELLS = 8
"""Cells per block once a cell is several leaf groups (a gap every 8 keeps them countable)."""


def block_width(block: Block, cw: int) -> int:
    """Characters a block takes: its cells, and with wide cells at least a short name of its
    group (the header line names it)."""
    return max(len(block.columns) * cw, min(len(block.label), 6) if cw == 2 else 1)


def column_codes(fm: FabricMap, column: Column, rails: Sequence[int]) -> tuple[int, ...]:
    """The worst state among the column's nodes on each rail (``rails`` order). Nodes with the
    same rails share one tuple, so a column costs a look at each node, not at each port."""
    by_rails: dict[tuple[int, ...], int] = {}
    overlay: list[tuple[int, int]] = []
    for node in column.nodes:
        nf = fm.node(node)
        if nf is None:
            continue
        if by_rails.get(nf.rails, -1) < nf.silent:
            by_rails[nf.rails] = nf.silent
        if nf.bad:
            overlay.extend((b.rail, b.code) for b in nf.bad)
    index = {r: i for i, r in enumerate(rails)}
    codes = [Port.NONE] * len(rails)
    for rs, silent in by_rails.items():
        for r in rs:
            i = index.get(r)
            if i is not None and codes[i] < silent:
                codes[i] = silent
    for r, code in overlay:
        i = index.get(r)
        if i is not None and codes[i] < code:
            codes[i] = code
    return tuple(codes)


def worst_node(fm: FabricMap, column: Column, rail: int) -> str | None:
    """The node a cell opens: its worst port on ``rail`` (the first by name among equals)."""
    best: tuple[int, str] | None = None
    for node in column.nodes:
        c = fm.code(node, rail)
        if c != Port.NONE and (best is None or c > best[0]):
            best = (c, node)
    return None if best is None else best[1]


def suspected(fm: FabricMap, column: Column, rail: int) -> str:
    """The text of the failing suspected switch this cell belongs to, else '' (a recovered
    one: ``recovered``)."""
    for leaf in column.leaves:
        sw = f"{leaf}-r{rail}"
        text = fm.suspects.get(sw)
        if text and sw not in fm.recovered:
            return text
    return ""


def recovered(fm: FabricMap, column: Column, rail: int) -> str:
    """The text of the recovered switch this cell belongs to (``SuspectSwitch.recovered``),
    else ''."""
    for leaf in column.leaves:
        sw = f"{leaf}-r{rail}"
        if sw in fm.recovered:
            return fm.suspects[sw]
    return ""


def nodes_text(nodes: Iterable[str]) -> str:
    return compress(list(nodes))
