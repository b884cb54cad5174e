"""How the fleet reads in tables: Slurm-style node state, node/job/fabric rows, drain reasons,
per-GPU cell codes for the fleet grid. Pure text and numbers, no styling, so the TUI, the CLI and
tests share one definition (and none of it imports textual)."""

import heapq
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import islice
from typing import Any

import msgspec

from fleetdeck.console.commands import fmt_duration, jobs_by_node
from fleetdeck.console.health import VERDICT_ORDER, Finding, Severity, Verdict, reason_line
from fleetdeck.console.incidents import (
    Incident,
    acted_on,
    common_causes,
    job_faults,
    not_ok_sorted,
    silences,
)
from fleetdeck.console.interruptions import cause_label
from fleetdeck.console.judgements import (
    NO_LINK,
    PORT_FLAPPING,
    PORT_GONE,
    FailedJob,
    LeafGroup,
    SuspectSwitch,
    bad_ports,
    erroring_ports,
    failed_job,
    failed_under,
    finding_rank,
    findings_worst_first,
    held_up_by_switch,
    held_up_text,
    job_reason,
    leaf_groups,
    leaf_of,
    nodes_wanted_text,
    not_stepping,
    not_stepping_text,
    own_findings,
    own_job,
    port_rail,
    scheduler_down,
    scheduler_gone,
    shown_eta_s,
    sick_nodes,
    step_quiet,
    step_quiet_text,
    straggler,
    suspect_switches,
    utc_at,
    utc_hms,
    worst_first,
)
from fleetdeck.console.state import FAILING_STATES, HOLDING_NODES, FleetState, NodeState
from fleetdeck.hostlist import HostlistError, compress, expand, looks_like_hostlist, natural_key
from fleetdeck.protocol import wire2
from fleetdeck.protocol.fast import IbPortSample
from fleetdeck.protocol.messages import NOT_SAVED, DrainInfo, DrainState, JobStatus

# --- fleet revision -----------------------------------------------------------------------------

FleetRevision = tuple[int, int, int]
"""(nodes, sum of ``NodeState.revision``, sum of ``NodeState.shape_rev``)."""


def fleet_revision(state: FleetState) -> FleetRevision:
    """A signature that changes whenever any node's data or shape changed (the state counts
    every bump; both counters only grow), so equal signatures mean nothing changed and views
    can skip fleet-wide work that would cost tens of milliseconds."""
    return len(state.nodes), state.revisions, state.shape_revisions




# --- node state ---------------------------------------------------------------------------------


def slurm_state(st: NodeState) -> str:
    """sinfo's short state: ``idle``, ``alloc``, ``mix``, ``drng``, ``drain``, ``down`` and the
    ``*`` suffix for not responding (stale telemetry)."""
    # An operator's drain shows on a node that is also down, as sinfo's "drain*": "down*"
    # hid that a powered-off node had been drained (a review).
    # One that talks unread responds (its deltas come): no "*" (``NodeState.unread_talking``).
    silent = (st.stale and not st.unread_talking) or st.online is False
    if st.drain.state is DrainState.DRAINING:
        return "drng*" if silent else "drng"
    if st.drain.state is DrainState.DRAINED:
        return "drain*" if silent else "drain"
    if st.online is False and not st.job_stepping:
        return "down*"
    # A silent agent whose job steps on: allocated and not responding, "alloc*" (sinfo), not a
    # down node (a 3 a.m. drive).
    t = st.sample  # its header: no rows built for this
    if t is not None and t.job is not None:
        gpus = st.gpus_expected or wire2.rows_of(t)[0]
        base = "mix" if 0 < t.job.ranks_on_node < gpus else "alloc"
    else:
        base = "alloc" if st.job_stepping else "idle"
    return base + ("*" if silent else "")


def drain_unsaved(d: DrainInfo) -> str:
    """What an operator reads of a drain (or resume) the agent could not save ('' when it
    did): its acks said so to the console that sent it alone (docs/reliability.md)."""
    if not d.unsaved:
        return ""
    if d.state is DrainState.NONE:
        # The agent carries it on an undrained node only where its state file still holds a
        # drain: "none not saved …: an agent restart forgets it" read as harmless.
        return (f"resume {NOT_SAVED} ({d.unsaved}): an agent restart brings back the drain "
                "it saved")
    return f"{d.state.value} {NOT_SAVED} ({d.unsaved}): an agent restart forgets it"


def drain_reason(d: DrainInfo) -> str:
    """Slurm's rendering: ``Reason=disk full [alice@2026-01-25T15:12:23]``."""
    if d.state is DrainState.NONE:
        return ""
    when = "" if d.since_ts is None else "@" + utc_at(d.since_ts / 1000).strftime(
        "%Y-%m-%dT%H:%M:%S")
    who = d.requested_by or "?"
    return f"Reason={d.reason or '(none)'} [{who}{when}]"


# --- node rows ----------------------------------------------------------------------------------


UNKNOWN = -math.inf
"""A metric no GPU reported: sorts after every reading (temperatures can be negative)."""


class NodeRow(msgspec.Struct, frozen=True, gc=False):
    """One node's line of the node list. A ``gc=False`` Struct (strings and numbers: in no
    cycle): a text filter builds one for every node and the list keeps them, 16,384 objects
    the console's periodic GC sweep walked (docs/performance.md, "The sweep walks the state
    alone")."""

    node: str
    verdict: str
    state: str
    gpus: str
    util: str
    temp: str
    power: str
    ib: str
    job: str
    gaps: str
    age: str
    reasons: str
    # numeric sort keys
    util_v: float = UNKNOWN
    temp_v: float = UNKNOWN
    power_v: float = UNKNOWN
    age_v: float = math.inf
    verdict_v: int = 0
    """``health_rank``: lowest first."""
    place: str = ""
    """``place_of``: no column, what the ``/`` filter reads besides them. Built with the row
    (once per sample), not per filter pass: 16,384 of them took 11 ms."""


NODE_COLUMNS: list[tuple[str, str, int]] = [
    # (header, NodeRow attribute, width; 0 = the rest of the line)
    ("NODE", "node", 10),
    ("STATE", "state", 6),
    ("HEALTH", "verdict", 8),
    ("GPUS", "gpus", 4),
    ("UTIL", "util", 4),
    ("TEMP", "temp", 5),
    ("POWER", "power", 6),
    ("IB", "ib", 3),
    ("JOBS", "job", 8),
    ("AGE", "age", 4),
    ("REASONS", "reasons", 0),
]

SORT_KEYS: dict[str, Callable[[NodeRow], object]] = {
    "node": lambda r: r.node,
    "state": lambda r: (r.state, r.node),
    "verdict": lambda r: (r.verdict_v, r.node),
    "gpus": lambda r: (r.gpus, r.node),
    "util": lambda r: (metric_sort_value("util", r.util_v), r.node),
    "temp": lambda r: (metric_sort_value("temp", r.temp_v), r.node),
    "power": lambda r: (metric_sort_value("power", r.power_v), r.node),
    "ib": lambda r: (r.ib, r.node),
    "job": lambda r: (r.job == "", r.job, r.node),
    "age": lambda r: (-r.age_v if math.isfinite(r.age_v) else -1e18, r.node),
    "gaps": lambda r: (r.gaps, r.node),
    "reasons": lambda r: (r.reasons == "", r.reasons, r.node),
}


METRIC_COLUMNS = ("util", "temp", "power")
"""Node-list columns whose sort key is a number from the latest sample (``metrics``)."""


def metrics(st: NodeState) -> tuple[float, float, float]:
    """(mean util %, hottest °C, total W) over the node's present GPUs; UNKNOWN where none.

    What the UTIL/TEMP/POWER columns show and sort by, without building a row: re-sorting
    16,384 nodes by a metric after a tick reads these, not formatted rows. Computed once per
    sample (``NodeState.metered``): the console's session reads them as it applies a sample,
    while its columns are in the CPU's cache (``ConsoleSession._record_history``); a read
    of 16,384 nodes' samples later, scattered over memory, cost ~80 ms."""
    s = st.sample
    if st.metered_for is s and s is not None:
        return st.metered
    out = _metrics_of(s) if s is not None else (UNKNOWN, UNKNOWN, UNKNOWN)
    st.metered_for, st.metered = s, out
    return out


def meter_columns(st: NodeState, present: Sequence[bool], utils: Sequence[float | None],
                  temps: Sequence[float | None],
                  powers: Sequence[float | None]) -> tuple[float, float, float]:
    """``metrics`` of the node's current sample from GPU columns its caller has read already
    (``ConsoleSession._record_history`` shares them with the sparkline ring), kept as
    ``metrics`` keeps them."""
    out = metrics_of_columns(present, utils, temps, powers)
    st.metered_for, st.metered = st.sample, out
    return out


def _metrics_of(s: wire2.Sample) -> tuple[float, float, float]:
    if type(s) is wire2.Pending and not s.built:
        # A quiet sample's columns: re-sorting 16,384 nodes by a metric must not build the
        # rows of every one of them (wire2.Pending).
        return metrics_of_columns(s.gpu_column("present"), s.gpu_column("util_pct"),
                                  s.gpu_column("temp_c"), s.gpu_column("power_w"))
    return _metrics_of_rows((g.present, g.util_pct, g.temp_c, g.power_w)
                            for g in wire2.full(s).gpus)


def metrics_of_columns(present: Sequence[bool], utils: Sequence[float | None],
                       temps: Sequence[float | None],
                       powers: Sequence[float | None]) -> tuple[float, float, float]:
    """``metrics`` of a sample given as its GPU columns (row order)."""
    if utils and all(present) and None not in utils and None not in temps and (
            None not in powers):
        # Every GPU present and reporting (a healthy node): C-level sums, ~3x the loop's
        # speed, for the node list's re-read of 16,384 nodes under a stream.
        return sum(utils) / len(utils), max(temps), sum(powers)  # type: ignore[arg-type,type-var,return-value]
    return _metrics_of_rows(zip(present, utils, temps, powers, strict=True))


def _metrics_of_rows(gpus: Iterable[tuple[Any, ...]]) -> tuple[float, float, float]:
    # One pass, no lists: the node list computes this for every node after each tick.
    util_sum = power_sum = 0.0
    n_util = n_power = 0
    temp_v = UNKNOWN
    hot: float | None = None
    for present, util, temp, power in gpus:
        if not present:
            continue
        v = util
        if v is not None:
            util_sum += v
            n_util += 1
        v = temp
        if v is not None and (hot is None or v > hot):
            hot = v
        v = power
        if v is not None:
            power_sum += v
            n_power += 1
    if hot is not None:
        temp_v = hot
    return (util_sum / n_util if n_util else UNKNOWN, temp_v,
            power_sum if n_power else UNKNOWN)


def node_row(st: NodeState, now: float, jobs: list[str] | None = None) -> NodeRow:
    util_v, temp_v, power_v = metrics(st)
    util = "-" if util_v == UNKNOWN else f"{util_v:3.0f}%"
    temp = "-" if temp_v == UNKNOWN else f"{temp_v:3.0f}°"
    power = "-" if power_v == UNKNOWN else f"{power_v / 1000:4.1f}kW"
    age_v = math.inf if st.last_rx is None else max(0.0, now - st.last_rx)
    age = "-" if st.last_rx is None else _short_age(age_v)
    job_ids = jobs if jobs is not None else ([st.job_id] if st.job_id else [])
    return NodeRow(
        node=st.node_id,
        verdict=verdict_text(st),
        state=slurm_state(st),
        gpus=f"{st.gpus_present}/{st.gpus_expected}",
        util=util,
        temp=temp,
        power=power,
        ib=ib_text(st),
        job=",".join(job_ids),
        gaps=str(st.seq_gaps) if st.seq_gaps else "",
        age=age,
        reasons=reasons_text(st),
        util_v=util_v, temp_v=temp_v, power_v=power_v, age_v=age_v,
        verdict_v=health_rank(st),
        place=place_of(st),
    )


def ib_text(st: NodeState) -> str:
    up, ports = st.ib_ports_up, st.ib_ports
    return f"{up}/{ports}" if ports != up else str(up)


def reasons_text(st: NodeState) -> str:
    """The first three findings, worst first as everywhere (``findings_worst_first``), and
    how many more: a fourth was dropped without a word (an SRE drill's ECC node read three of
    its four, the row remap pending left out)."""
    found = st.all_findings
    if len(found) > 1:  # a row per node: none or one, the most of them, is not sorted
        found = findings_worst_first(st, found)
    more = f" (+{len(found) - 3} more)" if len(found) > 3 else ""
    return "; ".join(map(reason_line, found[:3])) + more


def node_sort_key(st: NodeState, key: str, jobs: list[str] | None = None) -> tuple[object, ...]:
    """What ``SORT_KEYS[key]`` gives for this node's row, without building the row: the first
    re-sort of 16,384 nodes by a column would otherwise format every row (~0.8 s).
    ``age`` sorts by when the node was last heard, which orders as age does at any time."""
    return (node_sort_value(st, key, jobs), st.node_id)


METRIC_SORT_STEP = {"util": 5.0, "temp": 2.0, "power": 25.0}
"""Sorting by a live metric sorts by steps of this much (%, °C, W), then by name: nodes at
94-99 % swapped places every second and the selected row jumped 12 -> 15 -> 6 -> 20 (an
operator's walkthrough)."""


METRIC_SORT_UNIT = {"util": "%", "temp": "°C", "power": "W"}


def sort_step_said(key: str) -> str:
    """``5 % steps`` for a sort by a live metric (``METRIC_SORT_STEP``), else '': said beside
    the sort, as 95 % above 99 % (one step, then by name) looked like a bug (a walk-through)."""
    step = METRIC_SORT_STEP.get(key)
    return "" if step is None else f"{step:g} {METRIC_SORT_UNIT[key]} steps"


def metric_sort_value(key: str, value: float) -> float:
    """Highest first, in ``METRIC_SORT_STEP`` steps; an unknown value last."""
    if value == UNKNOWN:
        return -value
    step = METRIC_SORT_STEP[key]
    return -(value // step) * step


def health_rank(st: NodeState) -> int:
    """HEALTH's sort value, lowest first: the worst verdict first and, of one verdict, the
    nodes no one has acted on before those drained or draining (in hand), as the incidents and
    the top problems put what no one has acted on first (``incidents.acted_on``). Sorted by
    the verdict alone, a failed node drained an hour ago came above a failed one no one had
    touched whenever its name came first."""
    return -2 * VERDICT_ORDER[st.verdict] - (st.drain.state is DrainState.NONE)


def health_order(nodes: Iterable[NodeState]) -> list[NodeState]:
    """``nodes`` in HEALTH's order (``health_rank``, then id): the node list's sorted by HEALTH,
    and ``status``'s node table and ``--json`` nodes, which sorted by the verdict alone (a
    drained failed node above an untouched one whenever its name came first)."""
    return sorted(nodes, key=lambda st: (health_rank(st), st.node_id))


def node_sort_value(st: NodeState, key: str, jobs: list[str] | None = None) -> Any:
    """``node_sort_key`` without the node id that breaks ties: a stable sort of nodes already
    in id order by this gives the same order at a fraction of the cost (no tuple per node, no
    tuple comparisons: ``NodesScreen._order``)."""
    if key in METRIC_COLUMNS:
        return metric_sort_value(key, metrics(st)[METRIC_COLUMNS.index(key)])
    if key == "verdict":
        return health_rank(st)
    if key == "state":
        return slurm_state(st)
    if key == "gpus":
        return f"{st.gpus_present}/{st.gpus_expected}"
    if key == "ib":
        return ib_text(st)
    if key == "job":
        job = ",".join(jobs if jobs is not None else ([st.job_id] if st.job_id else []))
        return (job == "", job)
    if key == "age":
        return st.last_rx if st.last_rx is not None else -math.inf
    if key == "gaps":
        return str(st.seq_gaps) if st.seq_gaps else ""
    if key == "reasons":
        reasons = reasons_text(st)
        return (reasons == "", reasons)
    return 0


def waiting(st: NodeState) -> bool:
    return st.waiting


def verdict_text(st: NodeState) -> str:
    """The verdict as shown: ``waiting`` before the first telemetry, else the verdict."""
    return st.verdict_shown


def _short_age(s: float) -> str:
    if s < 100:
        return f"{s:.0f}s"
    if s < 6000:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.0f}h"


def place_of(st: NodeState) -> str:
    """Where a node stands, ``leaf643 rack2569``, from its birth's topology, as the overview's
    grid names it: a name that does not say its kind gets it (``rack r04``); "" without one."""
    topo = st.birth.topology if st.birth is not None else None
    if topo is None:
        return ""
    parts = [name if name.startswith(kind) else f"{kind} {name}"
             for kind, name in (("leaf", topo.leaf), ("rack", topo.rack)) if name]
    return " ".join(parts)


class NodeFilter:
    """``/`` filter text: a hostlist (``gpu[0010-0020]``) or a regex over the whole row; ``!``
    in front inverts it (k9s ``/!``). An invalid regex falls back to a plain substring."""

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self.invert = self.text.startswith("!")
        body = self.text[1:] if self.invert else self.text
        self.hosts: frozenset[str] | None = None
        self.regex: re.Pattern[str] | None = None
        self.error = ""
        if not body:
            return
        if looks_like_hostlist(body):
            try:
                self.hosts = frozenset(expand(body))
                return
            except HostlistError as err:
                self.error = str(err)
        try:
            self.regex = re.compile(body, re.IGNORECASE)
        except re.error as err:
            self.error = f"bad regex ({err}); matching text"
            self.regex = re.compile(re.escape(body), re.IGNORECASE)

    @property
    def active(self) -> bool:
        return self.hosts is not None or self.regex is not None

    @cached_property
    def reading(self) -> str:
        """How the text was read, for the view to say: ``gpu00[34]`` is Slurm's hostlist
        ``gpu0034``, not a regex class, and a filter that matched nothing read as nothing.
        Worked out once per filter: the view's info line asks on every refresh, and a
        hostlist of the whole fleet takes a sort and a compress."""
        if self.hosts is not None:
            names = compress(sorted(self.hosts))
            body = self.text[1:] if self.invert else self.text
            # The names only where they say more than the text: a job's drill-down read
            # "filter gpu[0001-0008] (hostlist gpu[0001-0008])", the same list twice.
            shown = ("" if names == body else names if len(names) <= 40
                     else f"{len(self.hosts)} names")
            how = f"hostlist {shown}".rstrip()
        elif self.regex is not None and not self.error:
            how = "regex"
        else:
            return ""
        # A leading '!' is easy to miss in the echoed text: say the rows are those NOT matching.
        return f"all but {how}" if self.invert else how

    def matches(self, key: str, haystack: str) -> bool:
        if self.hosts is not None:
            hit = key in self.hosts
        elif self.regex is not None:
            hit = self.regex.search(haystack) is not None
        else:
            return True
        return hit != self.invert

    def match_row(self, row: NodeRow) -> bool:
        """The row's leaf and rack too (``NodeRow.place``), which no column shows: the grid's
        line names them ("gpu10273 gpu0 leaf643 rack2569"), and ``/rack2569`` or ``/leaf601``
        (a suspect switch's group) matched no node (a 16,384-node drive)."""
        if self.hosts is not None:
            return self.matches(row.node, "")
        hay = " ".join((row.node, row.state, row.verdict, row.job, row.reasons, row.place))
        return self.matches(row.node, hay)

    def match_job(self, row: "JobRow", nodes: Iterable[str]) -> bool:
        """The jobs view's ``/``, as the nodes view's: a regex over its row (id, name, user,
        squeue state, nodes and what holds it up), a hostlist the jobs on any of those nodes
        (``nodes``: the job's own, uncompressed), ``!`` the others. '/' there did nothing, while
        the overview's and the nodes view's footers teach it (a newcomer's run)."""
        if self.hosts is not None:
            return (not self.hosts.isdisjoint(nodes)) != self.invert
        hay = " ".join((row.job_id, row.name, row.user, row.state, row.nodes, row.held_up,
                        row.quiet, row.reason))
        return self.matches(row.job_id, hay)


# --- fleet grid ---------------------------------------------------------------------------------


class Cell:
    """Per-GPU cell codes of the fleet grid (index into the grid's style palette)."""

    OK = 0
    IDLE = 1
    DEGRADED = 2
    FAILED = 3
    STALE = 4
    OFFLINE = 5
    DRAINED = 6
    DRAINING = 7
    MISSING = 8
    EMPTY = 9
    RAIL_FAILED = 10
    """The GPU is sound; its rail's InfiniBand port (docs/domain.md §1) has a fault that drains
    the node."""
    RAIL_DEGRADED = 11
    """The GPU is sound, its rail's InfiniBand port is erroring."""
    OUT = 12
    """The GPU is sound and idle on a node failed for something else (another GPU fell off the
    bus, an IB port): it cannot take work, so it is not drawn as free (``GpuUse.out``)."""
    NO_GPU = 13
    """A node that has no GPUs and expects none (a storage or CPU node, ``agent --source
    sysfs``: ``gpu_less``): its cells are the grid's column, not GPUs."""
    HEAT0 = 14
    """HEAT0 … HEAT0 + HEAT_LEVELS - 1: metric buckets, low to high."""


HEAT_LEVELS = 8
METRIC_RANGE = {"util": (0.0, 100.0), "temp": (30.0, 90.0), "power": (60.0, 700.0)}
_GPU_RE = re.compile(r"gpu(\d+)")


def _finding_gpus(f: Finding) -> list[int]:
    return [int(m) for m in _GPU_RE.findall(f.component)]


_METRIC_COLUMN = {"util": "util_pct", "temp": "temp_c", "power": "power_w"}


def port_gpus(st: NodeState, component: str, n: int) -> list[int]:
    """The GPUs (of ``n``) a port finding's component (``mlx5_ib3:1``) is drawn on and named
    under: its rail's GPU (``judgements.port_rail``: the birth's affinity, else the number in
    the HCA's name, docs/real-nodes.md "GPU ↔ HCA affinity"), else all of them (``ib``, a
    name without a number, a rail past the node's GPUs). One mapping for the cells and the
    status line: under ``--source sysfs`` (no affinity) a failing mlx5_ib3:1 marked all eight
    cells while only gpu3's line named it, and a port of an HCA not named ``mlx5_*`` was on
    no line (a review)."""
    rail = port_rail(st, component.split(":", maxsplit=1)[0])
    return [rail] if rail is not None and 0 <= rail < n else list(range(n))


def gpu_less(st: NodeState) -> bool:
    """A node that expects no GPUs and sends none (``health.gpus_expected`` is 0 for an agent
    with no GPU reader, docs/real-nodes.md): there is no GPU to be missing. Its eight cells
    were drawn as eight missing GPUs, red, on a node that read ok (a fault drill)."""
    if st.gpus_expected or (st.birth is None and st.digest is None):
        return False
    return st.sample is None or wire2.rows_of(st.sample)[0] == 0


def _cells_of(st: NodeState) -> int:
    """How many cells the grid draws for a node: its expected GPUs, else those it sends, else
    eight (the grid's column)."""
    return st.gpus_expected or (wire2.rows_of(st.sample)[0] if st.sample is not None else 0) or 8


def gpu_findings(st: NodeState, gpu: int) -> list[Finding]:
    """What the grid's status line says of one GPU cell: the node's findings about that GPU,
    its own rail's port and the node as a whole, its own before its suspect switch's. The line
    read "node failed  F1 behind suspect switch leaf01-r4: the link faults of mlx5_ib4:1 are the
    switch's" of gpu0014's gpu3, ↯ for its own flapping mlx5_ib3:1 (N2, N5), which it left out
    as another component's (a 3 a.m. drive). A port finding is the cell's when ``gpu_cells``
    draws it there (``port_gpus``). A G14 (named by uuid) is the line of the cells past the
    GPUs the node sends: they are drawn missing for it since the node counts against the 8 it
    had, and gpu7's "x" read only its rail's N8, or nothing, with gpu3's G14 on no line (a
    review: NVML renumbers, so the lost GPU is the last cell, ``health._gpus_gone``)."""
    name = f"gpu{gpu}"
    n = _cells_of(st)
    sent = wire2.rows_of(st.sample)[0] if st.sample is not None else n
    mine = [f for f in st.all_findings
            if f.component in ("", name) or name in f.component.split(",")
            or (f.rule == "G14" and gpu >= sent)
            or (f.rule.startswith("N") and not _finding_gpus(f)
                and gpu in port_gpus(st, f.component, n))]
    return sorted(mine, key=lambda f: (st.switch_owns(f) or f.rule == "F1", finding_rank(f)))


def node_findings(st: NodeState) -> list[Finding]:
    """What the grid's status line says of a node without GPUs (``gpu_less``): all its
    findings, in ``gpu_findings``' order. In rule order, a storage node failed for a port
    read a warning of another port first, and the drain finding that failed it was cut off
    (a review)."""
    return sorted(st.all_findings,
                  key=lambda f: (st.switch_owns(f) or f.rule == "F1", finding_rank(f)))


def gpu_cells(st: NodeState, metric: str = "health") -> tuple[int, ...]:
    """One code per GPU of a node (8 on an ND H100 v5), in index order."""
    n = _cells_of(st)
    if st.online is False:
        return (Cell.OFFLINE,) * n
    if st.stale:
        # One that talks unread is waiting (``NodeState.unread_talking``), drawn as a node
        # not heard yet: its last sample, if any, is not what it is now.
        return (Cell.EMPTY if st.unread_talking else Cell.STALE,) * n
    t = st.sample
    if t is None:
        return (Cell.EMPTY,) * n
    if gpu_less(st):
        return _gpu_less_cells(st, n) if metric == "health" else (Cell.NO_GPU,) * n
    cells = [Cell.MISSING] * n
    attr = _METRIC_COLUMN.get(metric, "present")
    # index -> (present, the metric's value): from the columns of a quiet sample whose rows
    # are not built (the grid reads every node of a 16,384-node fleet), else from the rows.
    if type(t) is wire2.Pending and not t.built:
        samples = {i: (p, v) for i, p, v in zip(t.gpu_column("index"), t.gpu_column("present"),
                                                 t.gpu_column(attr), strict=True)}
    else:
        samples = {g.index: (g.present, getattr(g, attr)) for g in wire2.full(t).gpus}
    if metric in METRIC_RANGE:
        lo, hi = METRIC_RANGE[metric]
        for i in range(n):
            g = samples.get(i)
            if g is None or not g[0]:
                continue
            v = g[1]
            if v is None:
                cells[i] = Cell.EMPTY
                continue
            k = int((min(hi, max(lo, v)) - lo) / (hi - lo) * (HEAT_LEVELS - 1) + 0.5)
            cells[i] = Cell.HEAT0 + k
        return tuple(cells)
    # Busy GPUs of a failed node still run its job (shown busy); idle ones are out: a failed
    # XID-79 node's seven sound GPUs read as free capacity (an operator's walkthrough).
    base = (Cell.OK if t.job is not None
            else Cell.OUT if st.verdict is Verdict.FAILED else Cell.IDLE)
    if st.drain.state is DrainState.DRAINED:
        base = Cell.DRAINED
    elif st.drain.state is DrainState.DRAINING:
        base = Cell.DRAINING
    for i in range(n):
        g = samples.get(i)
        if g is not None and g[0]:
            cells[i] = base
    if not st.findings:
        return tuple(cells)
    for f in st.effective_findings:  # ports behind a suspect switch are the switch's
        if f.rule == "F1":
            continue
        code = Cell.FAILED if f.severity is Severity.DRAIN else Cell.DEGRADED
        if f.rule == "G1":
            continue  # missing GPUs already show as MISSING
        idx = _finding_gpus(f)
        if not idx and f.rule.startswith("N"):
            # A port's fault is drawn on the GPU it serves, in a shape of its own: the GPU
            # is sound (the header's failed GPUs do not count it), its rail is not.
            code = Cell.RAIL_FAILED if f.severity is Severity.DRAIN else Cell.RAIL_DEGRADED
            idx = port_gpus(st, f.component, n)
        for i in idx:
            if 0 <= i < n and _CELL_RANK[code] < _CELL_RANK.get(cells[i], 9):
                cells[i] = code
    return tuple(cells)


def _gpu_less_cells(st: NodeState, n: int) -> tuple[int, ...]:
    """A GPU-less node's column: its drain, and its ports' faults on their rails (as on a GPU
    node, ``port_gpus``); nothing of GPUs."""
    base = (Cell.DRAINED if st.drain.state is DrainState.DRAINED
            else Cell.DRAINING if st.drain.state is DrainState.DRAINING else Cell.NO_GPU)
    cells = [base] * n
    for f in st.effective_findings:
        if f.rule == "F1":
            continue
        drain = f.severity is Severity.DRAIN
        port = f.rule.startswith("N")
        code = ((Cell.RAIL_FAILED if drain else Cell.RAIL_DEGRADED) if port
                else Cell.FAILED if drain else Cell.DEGRADED)
        for i in port_gpus(st, f.component, n) if port else range(n):
            if _CELL_RANK[code] < _CELL_RANK.get(cells[i], 9):
                cells[i] = code
    return tuple(cells)


_CELL_RANK = {Cell.MISSING: 0, Cell.FAILED: 1, Cell.RAIL_FAILED: 2, Cell.DEGRADED: 3,
              Cell.RAIL_DEGRADED: 4}
"""Which finding a GPU's cell shows when several touch it: the GPU's own fault before its rail's,
drain before degrade."""


# --- problems -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    node: str
    verdict: Verdict
    state: str
    text: str


def hung_jobs(state: FleetState) -> list[tuple[JobStatus, float]]:
    """The jobs judged hung (``judgements.not_stepping``) as of the last judgement, each with
    how long it has not stepped: the top problems' rows of them, and the count their heading
    says however many rows fit."""
    now = state.judged_at
    return [(job, quiet) for job in state.jobs.values()
            if (quiet := not_stepping(job, state, now)) is not None]


def top_problems(state: FleetState, limit: int = 10,
                 suspects: list[SuspectSwitch] | None = None) -> tuple[list[Problem], int]:
    """A fleet's silence and a gone scheduler first, suspected switches (their nodes are
    symptoms), hung jobs and failed ones, then the worst nodes with their reasons, a suspected
    switch with no job on its nodes among them after those that stop a running job; returns
    (problems, how many nodes in total). ``suspects``: when the caller has
    ``suspect_switches(state)`` already."""
    problems, total, _ = top_problems_cut(state, limit, suspects)
    return problems, total


def top_problems_cut(state: FleetState, limit: int = 10,
                     suspects: list[SuspectSwitch] | None = None
                     ) -> tuple[list[Problem], int, int]:
    """``top_problems`` and how many rows there are in all, ``limit`` or not: the overview says
    how many it left out ("… 10 more"), where its three rows under "11 nodes need attention"
    read as the whole list (a 3 a.m. drive on 1,024 nodes)."""
    if suspects is None:
        suspects = suspect_switches(state)
    leaves = leaf_groups(suspects)
    back = leaf_groups(suspects, recovered=True)
    switches: list[Problem] = []
    recovered: list[Problem] = []
    # A suspect switch with no job on its nodes loses capacity, not work: after the failed
    # nodes that stop a running job, as the incidents view and `status` have it ("what loses
    # work now", docs/architecture.md "Worst first"); the overview put it above a failed
    # node whose job stood still (a 3 a.m. drive on 256 nodes).
    idle: list[Problem] = []
    rank = worst_first(state)
    holding = {n for job in state.jobs.values() if job.state.value in HOLDING_NODES
               for n in job.nodes}

    def no_work(nodes: Iterable[str]) -> bool:
        return not any(n in holding or ((st := state.nodes.get(n)) is not None
                                        and own_job(st, state) is not None) for n in nodes)
    for sw in suspects:
        leaf = (back if sw.recovered else leaves).get(sw.leaf)
        if leaf is not None and not leaf.holds(sw):
            leaf = None  # a rail of its leaf that dropped apart from the group's: its own
        if sw.recovered:
            # A recovered switch works: degraded (its ports erred within N2's window), and
            # nothing to do, so after the failed nodes no one has acted on yet (it held the
            # top row for the hour, above a hung job: a 3 a.m. drive). Its leaf group's rail
            # switches back together are one row, as they were while down.
            if leaf is None:
                recovered.append(Problem(sw.switch, Verdict.DEGRADED, "switch", sw.text))
            elif sw is leaf.switches[0]:
                recovered.append(Problem(leaf.leaf, Verdict.DEGRADED, "leaf",
                                         leaf.text.removeprefix(f"{leaf.leaf}: ")))
        elif leaf is None:
            (idle if no_work(sw.nodes) else switches).append(
                Problem(sw.switch, Verdict.FAILED, "switch", sw.text))
        elif sw is leaf.switches[0]:
            # Its rail switches failing together are one problem, as they are one incident.
            (idle if no_work(leaf.nodes) else switches).append(
                Problem(leaf.leaf, Verdict.FAILED, "leaf",
                        leaf.text.removeprefix(f"{leaf.leaf}: ")))
    # A hung job stops its GPUs as a failed node does, with every node reading healthy: the
    # overview said "none: every node reports healthy" under it (a 3 a.m. drive).
    now = state.judged_at
    for job, quiet in hung_jobs(state):
        switches.append(Problem(f"job {job.job_id}", Verdict.FAILED, "hung",
                                not_stepping_text(job, quiet, now)))
    nodes = state.nodes
    # A node whose only trouble is its suspect switch's is under the switch's row, not a row of
    # its own: fifteen "behind switch …, which recovered: nothing to do on the node" rows hid
    # a throttled straggler, and "17 nodes need attention" counted them (a 3 a.m. drive).
    # Nor is one that talks unread (``NodeState.unread_talking``): its health is unknown.
    bad = [st for n in not_ok_sorted(state) if (st := nodes.get(n)) is not None
           and st.verdict is not Verdict.OK and not st.unread_talking
           and not (st.behind_switch and not st.liveness and not own_findings(st))]
    # Racks that fell silent together are one row each, or one for the fleet, as the
    # incidents view has them: a killed simulator listed 48 rows of "agent offline (Last
    # Will)" with the line that names the cause only under 6 (a 3 a.m. drive). The fleet's
    # first (it explains the rest); a rack's after the switches and hung jobs; one whose
    # every node is drained (in hand: a rack powered off for maintenance) stays its nodes'
    # rows, which sort last.
    grouped: set[str] = set()
    # A rack's or a job's row, by its nodes: where a job that failed on one of them is said,
    # as its incident says it (``incidents._failed_job_incident``).
    group_row: dict[str, int] = {}
    fleet: list[Problem] = []
    for inc in silences(state):
        if acted_on(state, inc):
            continue
        loudest = max((nodes[n].verdict for n in inc.nodes), key=lambda v: VERDICT_ORDER[v])
        if inc.kind == "fleet":
            fleet.append(Problem("fleet", loudest, "silent", inc.title))
        else:
            group_row.update(dict.fromkeys(inc.nodes, len(switches)))
            switches.append(Problem(inc.key.removeprefix("rack:"), loudest, "silent",
                                    inc.title))
        grouped.update(inc.nodes)
    # Nodes that failed together in one job are one row, as they are one incident: three
    # rows of "XID 79" with no job named hid that they were one job's (an SRE drill).
    for inc in job_faults(state, taken=grouped):
        if acted_on(state, inc):
            continue
        jid = inc.jobs[0]
        group_row.update(dict.fromkeys(inc.nodes, len(switches)))
        switches.append(Problem(f"job {jid}", Verdict.FAILED, "nodes",
                                inc.title.removeprefix(f"job {jid}: ")))
        grouped.update(inc.nodes)
    # Many nodes saying one warning alike are one row, as they are one incident, after the
    # failed nodes no one has acted on (with a recovered switch's: nothing to do on the nodes):
    # 2,048 agents that could not read their kernel log filled every row with one line, the
    # node with a port down behind them (a review). A node with a fault of its own keeps its row.
    for inc in common_causes(state, bad, {}, grouped, keep=False):
        if not inc.folded or acted_on(state, inc):
            continue
        recovered.append(Problem(f"{len(inc.nodes)} nodes", Verdict.DEGRADED, "alike",
                                 inc.title))
        grouped.update(inc.folded)
    # The scheduler gone is an incident of its own, first after the fleet's silence: with every
    # node healthy the overview said "none: every node reports healthy" while its jobs read
    # running for ever and `status` put "scheduler … offline" at the top (a fault audit).
    gone = scheduler_gone(state)
    if gone is not None:
        fleet.append(Problem("scheduler", Verdict.FAILED if gone.jobs else Verdict.DEGRADED,
                             "sched", gone.text))
    # A failed job waiting for its restart loses work now, as a hung one does, in the order
    # `status` has its incident ("Worst first"): on its node's row where that node's fault is
    # what failed it (`status` says the two on one line), else a row of its own; one that
    # lapsed (``FailedJob.lapsed``) last. The overview said nothing of a job an XID 48 failed
    # while `status` put it first (a review).
    lapsed: list[Problem] = []
    # A node's row in ``switches`` once a failed job is on it: a node that failed two jobs
    # said the first only, the second a row of its own, where its incident says both (a
    # helper's audit).
    folded: dict[str, int] = {}
    rack_jobs: dict[int, list[str]] = {}
    in_bad = {st.node_id: st for st in bad}
    for job in sorted((j for j in state.jobs.values() if j.state.value in FAILING_STATES),
                      key=lambda j: j.job_id):
        failed = failed_job(job, state)
        if failed is None:
            continue
        what = failed.text.removeprefix(f"job {job.job_id} ")
        if failed.lapsed:
            lapsed.append(Problem(f"job {job.job_id}", Verdict.DEGRADED, "failed", what))
            continue
        # On each failing node's row, as each one's incident says it (the second node's row
        # read only its XID: a review).
        under = failed_under(failed, state)
        rows = {group_row[n] for n in under if n in group_row}
        homes = [n for n in under if n in in_bad and n not in grouped]
        if not homes and not rows:
            switches.append(Problem(f"job {job.job_id}", Verdict.FAILED, "failed", what))
            continue
        for i in sorted(rows):
            row = switches[i]
            if row.state == "silent":
                # Before the rack's title, which ran past an 80-column overview's edge (the
                # row's columns say the rack and its silence already); its reason is the
                # rack's silence, said on the incident.
                rack_jobs.setdefault(i, []).append(failed.head)
            else:
                # The job's own row of nodes that failed together: what it is now, said.
                switches[i] = replace(row, text=failed.said_on(row.text))
        for home in homes:
            at = folded.get(home)
            if at is not None:
                switches[at] = replace(switches[at], text=f"{switches[at].text}; {failed.text}")
                continue
            st = in_bad[home]
            folded[home] = len(switches)
            switches.append(Problem(home, st.verdict, slurm_state(st),
                                    f"{_findings_text(st)}; {failed.text}"))
    for at, heads in rack_jobs.items():
        switches[at] = replace(switches[at], text="; ".join([*heads, switches[at].text]))
    switches = fleet + switches
    total = len(bad)
    if grouped or folded:
        bad = [st for st in bad if st.node_id not in grouped and st.node_id not in folded]
    in_all = len(switches) + len(idle) + len(bad) + len(recovered) + len(lapsed)
    switches = switches[:limit]
    limit = max(0, limit - len(switches))
    # A node already draining or drained is in hand: after the ones no one has acted on (a
    # drained node kept its place among "4 nodes need attention" above new ones: a
    # newcomer's run); what stops a running job first (``worst_first``).
    worst = heapq.nsmallest(limit, bad, key=rank)
    out = []
    for st in worst:
        in_hand, warning, not_losing = rank(st)[:3]
        if idle and (in_hand or warning or not_losing):
            out += idle
            idle = []
        # After the failed (and offline) nodes no one has acted on: OFFLINE sorts above
        # FAILED, so a test of FAILED alone put the switch first (a review).
        if recovered and (VERDICT_ORDER[st.verdict] < VERDICT_ORDER[Verdict.FAILED]
                          or st.drain.state is not DrainState.NONE):
            out += recovered
            recovered = []
        out.append(Problem(st.node_id, st.verdict, slurm_state(st), _findings_text(st)))
    return (switches + out + idle + recovered + lapsed)[:len(switches) + limit], total, in_all


def top_problems_heading(nodes: int, switches: int, hung: int, sched: bool = False,
                         failed: int = 0) -> str:
    """What the top problems hold: "2 nodes need attention, 1 switch" (the nodes behind a
    switch with nothing of their own are its, not counted; ``top_problems``)."""
    def plural(n: int, word: str, words: str = "") -> str:
        return f"{n} {word if n == 1 else (words or word + 's')}"

    parts = []
    if sched:
        parts.append("scheduler offline")
    if nodes or not (switches or hung or sched or failed):
        parts.append(f"{plural(nodes, 'node')} {'needs' if nodes == 1 else 'need'} attention")
    if switches:
        parts.append(plural(switches, "switch", "switches"))
    if hung:
        parts.append(f"{plural(hung, 'job')} hung")
    if failed:
        parts.append(f"{plural(failed, 'job')} failed")
    if not nodes and (hung or sched or failed) and not switches:
        parts.append("every node healthy")
    return ", ".join(parts)


def top_problems_said(state: FleetState, problems: list[Problem], total: int,
                      suspects: list[SuspectSwitch]) -> str:
    """The top problems' heading for ``top_problems``' rows (``problems``, ``total``): every
    suspect switch and every hung job, as the fabric panel, the jobs view and ``status --json``
    count them, not those on the rows that fit (below 40 terminal rows the overview lists
    three: "3 switches" of four, "1 job hung" of two; reviews of newcomers' runs)."""
    sched = any(p.state == "sched" for p in problems)
    failed = sum(1 for p in problems if p.state == "failed" and p.verdict is Verdict.FAILED)
    return top_problems_heading(total, len(suspects), len(hung_jobs(state)), sched, failed)


def _findings_text(st: NodeState) -> str:
    """A node's row in the top problems: its first three findings (worst first, as its row in
    the nodes view and ``status`` list them), and how many more."""
    found = findings_worst_first(st)
    return "; ".join(map(reason_line, found[:3])) + (f" (+{len(found) - 3})"
                                                      if len(found) > 3 else "")


# --- jobs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobRow:
    job_id: str
    name: str
    user: str
    state: str
    progress: float
    """0..1"""
    step: str
    step_time: str
    eta: str
    nodes: str
    checkpoint: str
    straggler: str
    reason: str
    sick: str = ""
    """The worst of its nodes that stall it now (``judgements.sick_nodes``), '' when none."""
    sick_count: int = 0
    sick_switch: str = ""
    """The suspect switch that ``sick`` leads with, when every node in it is behind a suspect
    switch with no fault of its own (``judgements.held_up_by_switch``); '' when one has."""
    straggler_apart: bool = False
    """It has a straggler, on a node other than ``sick``'s (said on its own)."""
    held_up: str = ""
    """What holds the job up, for one column: ``sick`` first (it stops the job; a straggler
    only slows it), then ``stalled``, then the straggler when that is another node."""
    stalled: str = ""
    """A running job whose step stopped advancing (``judgements.not_stepping``)."""
    quiet: str = ""
    """A running job whose step has stood still a while, not hung yet (``judgements.step_quiet``):
    said, not alarmed."""
    failed: str = ""
    """A job that ended failed and waits for its restart (``judgements.failed_job``), as
    `status` lists it: "failed on gpu0002 (…); drain gpu0002, then restart-job 41 …"."""
    failed_lapsed: bool = False
    """``failed`` is no longer work lost now (``FailedJob.lapsed``): said, sorted after."""
    failed_where: str = ""
    """``failed`` without the scheduler's reason, for a line under one that says ``reason``
    (the overview's jobs panel): "failed on gpu0014; drain gpu0014, then restart-job …"."""
    failed_on: str = ""
    """The nodes a failed job failed on as a hostlist, '' when none: those its reason names
    (``FailedJob.nodes``) and those that failed with it (``FailedJob.struck``), what enter
    opens for it in the jobs view, as it holds no node of its own."""


def progress_bar(frac: float, width: int) -> str:
    frac = min(1.0, max(0.0, frac))
    eighths = "▏▎▍▌▋▊▉"
    full = int(frac * width)
    rem = int((frac * width - full) * 8)
    bar = "█" * full + (eighths[rem - 1] if rem and full < width else "")
    return bar.ljust(width, "·")


def job_row(job: JobStatus, state: FleetState, now: float) -> JobRow:
    sick = sick_nodes(job, state)
    slow = straggler(job, state)
    sick_line = held_up = held_up_text(sick)
    apart = slow is not None and all(s.node != slow.node for s in sick)
    if slow is not None and apart:
        held_up = f"{held_up}; straggler {slow.text}" if held_up else slow.text
    quiet = not_stepping(job, state, now)
    stalled = still = ""
    standing = None  # ``step_quiet``: None for a job not running, or hung
    if quiet is None and job.state.value == "R":
        standing = step_quiet(job, state, now)
        if standing is not None:
            still = step_quiet_text(job, standing, now, state.job_step_delta.get(job.job_id))
    if quiet is not None:
        # Before a straggler (it only slows the job), after a node that stops it (the cause).
        stalled = not_stepping_text(job, quiet, now)
        held_up = (f"{sick_line}; {stalled}" if sick else stalled) + (
            f"; straggler {slow.text}" if slow is not None and apart else "")
    ended = failed_job(job, state) if job.state.value in FAILING_STATES else None
    failed = "" if ended is None else failed_text(ended)
    failed_where = "" if ended is None else failed_text(ended, with_reason=False)
    if failed:
        held_up = failed  # it holds no node: nothing else holds it up
    if job.state.value in HOLDING_NODES and scheduler_down(state):
        # Its state is the dead scheduler's last word, not news (docs/protocol.md).
        stale = f"scheduler offline: as of {utc_hms(job.ts / 1000)}"
        held_up = f"{stale}; {held_up}" if held_up else stale
    frac = min(1.0, job.step / job.total_steps) if job.total_steps else 0.0
    ckpt = "-"
    if job.last_checkpoint_ts is not None:
        ckpt = f"{job.last_checkpoint_step} ({fmt_duration(now - job.last_checkpoint_ts / 1000)})"
    elif job.last_checkpoint_step:
        ckpt = str(job.last_checkpoint_step)
    return JobRow(
        job_id=job.job_id, name=job.name, user=job.user, state=job.state.value, progress=frac,
        step=f"{job.step}/{job.total_steps}" if job.total_steps else str(job.step),
        step_time="-" if job.step_time_ms is None else f"{job.step_time_ms / 1000:.2f}s",
        # A hung job's ETA is its last word, frozen, and so is one whose step stands still:
        # it reads "-" as a stalled one's does (``shown_eta_s``, as status --json says it).
        eta=("-" if (eta := shown_eta_s(job, state, now, quiet, standing)) is None
             else fmt_duration(eta)),
        nodes=compress(job.nodes) if job.nodes else "-",
        checkpoint=ckpt, straggler="" if slow is None else slow.short,
        reason=_pending_reason(job, state),
        sick=sick_line, sick_count=len(sick), straggler_apart=apart,
        sick_switch=held_up_by_switch(sick),
        held_up=held_up, stalled=stalled, quiet=still, failed=failed,
        failed_lapsed=ended is not None and bool(ended.lapsed), failed_where=failed_where,
        # Every node it failed on: the reason names the rank that died first, and enter opened
        # gpu0002 alone of a job whose action said "drain gpu[0001-0002], then restart-job".
        failed_on=(compress({*ended.nodes, *ended.struck})
                   if ended is not None and (ended.nodes or ended.struck) else ""),
    )


def failed_text(failed: FailedJob, with_reason: bool = True) -> str:
    """A failed job's line without its id, then what brings it back: the jobs view's HELD UP,
    the overview's jobs panel and `status`'s "jobs held up" say it alike. ``with_reason``
    False: without the scheduler's reason, for a line under one that says it."""
    what = failed.text if with_reason else failed.head + (
        f"; {failed.lapsed}" if failed.lapsed else "")
    return f"{what.removeprefix(f'job {failed.job_id} ')}; {failed.action}"


def _pending_reason(job: JobStatus, state: FleetState) -> str:
    """The scheduler's reason, with how many nodes a pending job waits for (NODES read "-")
    and whether it can ever start here."""
    reason = job_reason(job)
    wants = nodes_wanted_text(job, state)
    if not wants:
        return reason
    return f"{reason}: {wants}" if reason else wants


JOB_STATE_ORDER = {"R": 0, "CG": 1, "RQ": 2, "PD": 3, "NF": 4, "F": 5, "CA": 6, "CD": 7}


def sorted_jobs(state: FleetState) -> list[JobStatus]:
    return sorted(state.jobs.values(),
                  key=lambda j: (JOB_STATE_ORDER.get(j.state.value, 9), j.job_id))


def jobs_to_act_on_first(rows: Iterable[JobRow]) -> list[JobRow]:
    """Jobs a node holds up first (a failed node stops one), then those with a straggler (it
    slows one), then by state and id: the overview's jobs panel and the jobs view in one
    order (the jobs view listed a straggler's job above one a failed node stopped, under an
    overview that had them the other way round: a newcomer's run)."""
    return sorted(rows, key=lambda r: (*job_urgency(bool(r.sick), bool(r.stalled),
                                                    bool(r.failed and not r.failed_lapsed),
                                                    bool(r.straggler)),
                                       JOB_STATE_ORDER.get(r.state, 9), r.job_id))


def job_urgency(sick: bool, stalled: bool, failed: bool, straggler: bool) -> tuple[bool, ...]:
    """Jobs to act on first, one order for the jobs view, the overview's jobs panel and
    `status`'s "jobs held up": a node stops it, it stopped stepping, it failed and waits for
    its restart (work lost now, as its incident is: docs/architecture.md, "Worst first"),
    then a straggler slows it."""
    return (not sick, not stalled, not failed, not straggler)


# --- fabric -------------------------------------------------------------------------------------

IB_UNIT = "Gb/s"
"""InfiniBand's one unit, for link rates and throughput alike: a port's rate is 400 Gb/s (NDR,
as sysfs and ibstat say it), and its traffic is read against that, so the live tables, the
history charts and the CLI all speak gigabits per second. Telemetry and the store keep
bytes/s (what the sysfs data counters count)."""
IB_SCALE = 8e-9
"""bytes/s to Gb/s."""


def gbit_text(gbit: float) -> str:
    """Gb/s without the unit (the header says it): ``200`` (a decimal is noise against a
    400 Gb/s link), ``7.5`` below 10, ``<0.1`` for a trickle, which never reads as idle."""
    if gbit >= 10:
        return f"{gbit:.0f}"
    if 0 < gbit < 0.05:
        return "<0.1"
    return f"{gbit:.1f}"


def ib_throughput_text(bytes_per_s: float | None) -> str:
    """A port's throughput (telemetry's bytes/s) in :data:`IB_UNIT`, as :func:`gbit_text`."""
    return "-" if bytes_per_s is None else gbit_text(bytes_per_s * IB_SCALE)


def ib_rate_text(rate_gbps: float | None) -> str:
    """A port's link rate in :data:`IB_UNIT`, without the unit: ``400``."""
    return "-" if rate_gbps is None else f"{rate_gbps:g}"


class PortRow(msgspec.Struct, frozen=True, gc=False):
    """A port that is not ok, as the fabric view's port table shows it. Strings only, so in
    no reference cycle: not tracked by the GC, as ``_FabricNode`` that holds it."""

    leaf: str
    node: str
    port: str
    status: str
    state: str
    phys: str
    rate: str
    errors: str
    detail: str


@dataclass(frozen=True, slots=True)
class LeafRow:
    leaf: str
    nodes: int
    ports: int
    up: int
    down: int
    flapping: int
    erroring: int
    hint: str
    recovered: bool = False
    """Every switch the hint names came back (``SuspectSwitch.recovered``): said, not alarmed."""
    brief: str = ""
    """``hint`` switch first and short (``SuspectSwitch.short``), for the leaf table's cell:
    the sentence, cut at 100 columns, lost the switch's name (a walk-through)."""

    @property
    def silent(self) -> int:
        """Ports of nodes not heard now (offline, stale, no telemetry yet): neither up nor
        down as far as anyone knows; "UP 120" of 128 said nothing of the other 8."""
        return self.ports - self.up - self.down - self.flapping - self.erroring


ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "rcv_errors",
                  "xmit_discards", "local_link_integrity_errors",
                  "excessive_buffer_overrun_errors", "rnr_nak_retry_err")


def port_error_text(p: IbPortSample) -> str:
    parts = []
    for name in ERROR_COUNTERS:
        v = getattr(p, name, None)
        d = p.d.get(name, 0)
        if v:
            parts.append(f"{name}={v}" + (f"(+{d})" if d else ""))
    return " ".join(parts)


@dataclass
class _LeafAgg:
    nodes: int = 0
    ports: int = 0
    up: int = 0
    down: int = 0
    flapping: int = 0
    erroring: int = 0


_NodePorts = tuple[int, int, list[tuple[str, IbPortSample]]]
"""(ports, up, [(status, port) for ports that are not ok])"""


def _node_ports(st: NodeState) -> _NodePorts:
    t = st.sample
    if t is None or st.stale or st.online is False:
        return st.ib_ports, 0, []
    bad = bad_ports(st)
    ports = wire2.rows_of(t)[1]  # a healthy node's quiet sample: no rows built for this
    return ports, ports - len(bad), bad


def _due(pending: dict[str, None], log: list[str], start: int, limit: int | None,
         nodes: dict[str, NodeState], counted: dict[str, Any]) -> list[str]:
    """The node ids a cache visits now: the shape log's entries from ``start`` and the nodes
    born since and not counted yet, joined to what an earlier call left pending (each id
    once, however often it changed), at most ``limit`` of them; the rest stays pending."""
    if start < len(log):
        pending.update(dict.fromkeys(log[start:]))
    if len(counted) != len(nodes):  # born since, not judged yet: no shape logged
        pending.update(dict.fromkeys(nodes.keys() - counted.keys()))
    if limit is None or len(pending) <= limit:
        out = list(pending)
        pending.clear()
        return out
    out = list(islice(pending, limit))
    for node_id in out:
        del pending[node_id]
    return out


class _FabricNode(msgspec.Struct, frozen=True, gc=False):
    """One node's part of the fabric tables.

    Not tracked by the GC: ``FabricCache.parts`` holds one per node (16,384 objects and
    147,456 references the periodic full collection walked, bench/tui_sweep.py), and with
    them untracked the dict itself leaves the collector's view (docs/performance.md, "Frozen
    garbage: the GC sweep"). It holds strings, numbers and ``PortRow``s (strings), so it can
    be in no reference cycle."""

    leaf: str
    ports: int
    up: int
    down: int
    flapping: int
    erroring: int
    rows: tuple[PortRow, ...]
    ib: bool
    """It has IB findings: its port counters move with every sample, so it is summarised
    again on every refresh."""


def _fabric_node(st: NodeState) -> _FabricNode:
    leaf = leaf_of(st)
    ports, up, bad = _node_ports(st)
    down = flapping = erroring = 0
    rows = []
    for status, p in bad:
        if status in NO_LINK:
            down += 1
        elif status == PORT_FLAPPING:
            flapping += 1
        else:
            erroring += 1
        comp = f"{p.dev}:{p.port}"
        detail = "; ".join(f.text for f in st.findings if f.component == comp)
        rows.append(PortRow(
            leaf=leaf, node=st.node_id, port=comp, status=status, state=p.state or "?",
            phys=p.phys_state or "?", rate=ib_rate_text(p.rate_gbps),
            errors=port_error_text(p), detail=detail,
        ))
    if st.findings and st.sample is not None and not st.stale and st.online is not False and (
            ports < st.ib_ports):
        # Heard from, and short of the ports its birth and its SKU say (N1 "0/8 IB ports
        # found", N8): ``status`` and the overview count those as down (``port_use``), and the
        # leaf read "0 ports" of such a node, then "8 silent" once it went quiet.
        missing = st.ib_ports - ports
        ports += missing
        down += missing
        rows.extend(_missing_port_rows(st, leaf))
    ib = any(f.rule.startswith("N") for f in st.findings) if st.findings else False
    return _FabricNode(leaf, ports, up, down, flapping, erroring, tuple(rows), ib)


def _missing_port_rows(st: NodeState, leaf: str) -> list[PortRow]:
    """The fabric's rows of ports a heard node lacks: each its N1/N8 names that its sample
    does not report, else its SKU's N1 ("0/8 IB ports found") as one row. Without them the
    port table said "every IB port is ACTIVE/LinkUp without errors" under a leaf "down 8"."""
    t = st.telemetry
    reported = {f"{p.dev}:{p.port}" for p in t.ib_ports} if t is not None else set()
    found = [f for f in st.findings if f.rule in ("N1", "N8") and f.component not in reported]
    named = [f for f in found if f.component != "ib"]
    return [PortRow(leaf=leaf, node=st.node_id, port=f.component, status=PORT_GONE, state="-",
                    phys="-", rate="", errors="", detail=f.text)
            for f in named or found]


@dataclass
class FabricCache:
    """Each node's part of the fabric tables and their sums per leaf, kept up to date from the
    state's shape log as ``CountsCache`` is: a refresh visits the nodes whose shape changed
    (or that were born again) since the last one and those with IB findings, not the fleet
    (a pass over 16,384 nodes was 29 ms with every summary cached, bench/fabric_views.py).
    A port that goes down or errors always raises an N finding, which changes the shape."""

    parts: dict[str, _FabricNode] = field(default_factory=dict)
    leaves: dict[str, _LeafAgg] = field(default_factory=dict)
    ib: set[str] = field(default_factory=set)
    bad: dict[str, tuple[PortRow, ...]] = field(default_factory=dict)
    """Nodes with ports that are not ok -> their port rows."""
    pending: dict[str, None] = field(default_factory=dict)
    """Nodes logged but not visited yet (a ``limit`` stopped the last catch-up)."""
    seen: int = -1
    state_id: int = -1

    def add(self, node_id: str, part: _FabricNode, sign: int) -> None:
        agg = self.leaves.get(part.leaf)
        if agg is None:
            agg = self.leaves[part.leaf] = _LeafAgg()
        agg.nodes += sign
        agg.ports += sign * part.ports
        agg.up += sign * part.up
        agg.down += sign * part.down
        agg.flapping += sign * part.flapping
        agg.erroring += sign * part.erroring
        if sign > 0:
            self.parts[node_id] = part
            if part.ib:
                self.ib.add(node_id)
            if part.rows:
                self.bad[node_id] = part.rows
        else:
            if not agg.nodes:
                del self.leaves[part.leaf]
            self.ib.discard(node_id)
            self.bad.pop(node_id, None)

    def catch_up(self, state: FleetState, limit: int | None = None) -> None:
        """Visit what changed since the last call (at most ``limit`` nodes: the rest next
        time), and the nodes with IB findings."""
        nodes = state.nodes
        log, base = state.shape_log, state.shape_log_base
        parts = self.parts
        if self.state_id != state.serial or self.seen < base:
            parts.clear()
            self.leaves, self.ib, self.bad, self.pending = {}, set(), {}, {}
            self.state_id = state.serial
            visit: Iterable[str] = list(nodes)
        else:
            visit = _due(self.pending, log, self.seen - base, limit, nodes, parts)
            if self.ib:
                due = set(visit)
                visit.extend(n for n in self.ib if n not in due)
            for node_id in visit:
                old = parts.pop(node_id, None)
                if old is not None:
                    self.add(node_id, old, -1)
        for node_id in visit:
            st = nodes.get(node_id)
            if st is not None:
                self.add(node_id, _fabric_node(st), 1)
        self.seen = base + len(log)


def fabric(state: FleetState, cache: FabricCache | None = None
           ) -> tuple[list[LeafRow], list[PortRow]]:
    """Leaves (worst first) and the ports that are not ok, grouped by leaf switch; with
    ``cache``, only what changed since the cache last summed is visited."""
    if cache is None:
        cache = FabricCache()
    cache.catch_up(state)
    leaves = cache.leaves
    bad_ports = [row for rows in cache.bad.values() for row in rows]
    rows = []
    switches = suspect_switches(state)
    groups = leaf_groups(switches)
    back = leaf_groups(switches, recovered=True)
    by_leaf: dict[str, list[SuspectSwitch]] = {}
    failing: set[str] = set()
    for sw in switches:
        by_leaf.setdefault(sw.leaf, []).append(sw)
        if not sw.recovered:
            failing.add(sw.leaf)
    for leaf, agg in leaves.items():
        said = leaf_judgements(by_leaf.get(leaf, []), groups.get(leaf), back.get(leaf))
        hint = "; ".join(j.text for j in said)
        rows.append(LeafRow(leaf, agg.nodes, agg.ports, agg.up, agg.down, agg.flapping,
                            agg.erroring, hint, recovered=bool(hint) and leaf not in failing,
                            brief="; ".join(j.short for j in said)))
    # Leaves in number order (leaf99 before leaf100), as the matrix draws them.
    rows.sort(key=lambda r: (-(r.down + r.flapping + r.erroring), natural_key(r.leaf)))
    bad_ports.sort(key=lambda p: (natural_key(p.leaf), p.status not in NO_LINK, p.node, p.port))
    return rows, bad_ports


def leaf_judgements(switches: list[SuspectSwitch], group: LeafGroup | None,
                    back: LeafGroup | None) -> list[SuspectSwitch | LeafGroup]:
    """What the fabric view's hint says of one leaf group: its failing rail switches as one
    when two or more fail at once (``group``), and its recovered ones likewise (``back``):
    ``leaf_groups``, as the overview and the incidents say it. A whole leaf group down said
    "16 ports on 16 nodes fail together: suspect leaf switch leaf02-r0, …" eight times over,
    cut off after the third (a replay drill)."""
    parts: list[SuspectSwitch | LeafGroup] = [group] if group is not None else []
    parts += [sw for sw in switches
              if not sw.recovered and (group is None or not group.holds(sw))]
    parts += [back] if back is not None else []
    parts += [sw for sw in switches
              if sw.recovered and (back is None or not back.holds(sw))]
    return parts


# --- helpers ------------------------------------------------------------------------------------


def node_rows(state: FleetState, now: float, ids: Iterable[str] | None = None) -> list[NodeRow]:
    by_node = jobs_by_node(state)
    nodes = state.nodes
    keys = nodes.keys() if ids is None else [i for i in ids if i in nodes]
    return [node_row(nodes[k], now, by_node.get(k, [])) for k in keys]


# --- events -------------------------------------------------------------------------------------


# --- overview counts ----------------------------------------------------------------------------


@dataclass
class FleetCounts:
    nodes: int = 0
    states: dict[str, int] = field(default_factory=dict)
    """By sinfo base state (idle, alloc, mix, drng, drain, down) plus ``stale`` for ``*``."""
    verdicts: dict[str, int] = field(default_factory=dict)
    gpus: int = 0
    gpus_in_use: int = 0
    gpus_free: int = 0
    gpus_failed: int = 0
    """Missing, or with a fault of their own (``state.GpuUse``: a node failed for an IB port
    puts its sound GPUs out, not failed)."""
    gpus_waiting: int = 0
    """On nodes that have sent no telemetry yet: not known, so neither free nor failed."""
    gpus_out: int = 0
    """Sound but unusable: drained, draining, down, stale, or on a node failed for something
    other than the GPU."""
    ports: int = 0
    ports_down: int = 0
    """Down on nodes heard from (``state.PortUse``)."""
    ports_erroring: int = 0
    """Up on nodes heard from, with error findings (N2-N5) or flapping; not the down ones."""
    ports_unknown: int = 0
    """On silent nodes, or nodes with no telemetry yet: their last sample is no word on now."""
    ports_waiting: int = 0
    """Of ``ports_unknown``, those on nodes born and not silent that have sent no telemetry
    yet (``NodeState.waiting``): the fabric panel called them "silent" (a newcomer's set-up,
    agents at --interval 10)."""
    talking_unread: int = 0
    """``Totals.talking_unread``, kept as these counts are (a ``totals`` pass per refresh
    cost ~40 ms at 4,096 nodes)."""
    jobs: dict[str, int] = field(default_factory=dict)


_Contribution = tuple[str, bool, str, int, int, int, int, int, int, int, int, int, int, bool,
                      int]


def _contribution(st: NodeState) -> _Contribution:
    state = slurm_state(st)
    stale = state.endswith("*")
    base = state.rstrip("*")
    expected = st.gpus_expected or (wire2.rows_of(st.sample)[0] if st.sample else 0)
    use = st.gpu_use()
    ports = st.port_use()
    return (base, stale, verdict_text(st), expected, use.in_use, use.free, use.failed, use.out,
            st.ib_ports, ports.down, erroring_ports(st), use.waiting, ports.unknown,
            st.unread_talking, ports.unknown if st.waiting else 0)


@dataclass
class CountsCache:
    """Per-node contributions and their sums, kept up to date from the state's shape log: a
    refresh costs the nodes whose shape changed since the last one, not the fleet (at 65,536
    nodes a full pass is ~0.4 s of Python)."""

    contrib: dict[str, _Contribution] = field(default_factory=dict)
    sums: list[int] = field(default_factory=lambda: [0] * 12)
    states: dict[str, int] = field(default_factory=dict)
    verdicts: dict[str, int] = field(default_factory=dict)
    seen: int = -1
    """Position in the state's shape log consumed so far (-1: never counted)."""
    state_id: int = -1
    """The ``FleetState.serial`` counted (a replay that seeks back starts a new state)."""
    pending: dict[str, None] = field(default_factory=dict)
    """Nodes logged but not counted yet (a ``limit`` stopped the last call)."""

    def add(self, contrib: _Contribution, sign: int) -> None:
        base, stale, verdict = contrib[0], contrib[1], contrib[2]
        states, verdicts, sums = self.states, self.verdicts, self.sums
        states[base] = states.get(base, 0) + sign
        if stale:
            states["stale"] = states.get("stale", 0) + sign
        verdicts[verdict] = verdicts.get(verdict, 0) + sign
        for i, v in enumerate(contrib[3:]):
            sums[i] += sign * v


def fleet_counts(state: FleetState, cache: CountsCache | None = None,
                 limit: int | None = None) -> FleetCounts:
    """Counts over the fleet; with ``cache``, only the nodes whose shape changed since the
    cache last counted are visited (with ``limit``, at most that many: the counts are then
    partly those of a moment ago, and the next call goes on)."""
    c = FleetCounts(nodes=len(state.nodes))
    if cache is None:
        cache = CountsCache()
    log, base = state.shape_log, state.shape_log_base
    nodes = state.nodes
    if cache.state_id != state.serial or cache.seen < base:
        cache.contrib.clear()
        cache.sums, cache.states, cache.verdicts, cache.pending = [0] * 12, {}, {}, {}
        cache.state_id = state.serial
        for node_id, node in nodes.items():
            contrib = cache.contrib[node_id] = _contribution(node)
            cache.add(contrib, 1)
    else:
        for node_id in _due(cache.pending, log, cache.seen - base, limit, nodes, cache.contrib):
            old = cache.contrib.pop(node_id, None)
            if old is not None:
                cache.add(old, -1)
            st = nodes.get(node_id)
            if st is not None:
                contrib = cache.contrib[node_id] = _contribution(st)
                cache.add(contrib, 1)
    cache.seen = base + len(log)
    (c.gpus, c.gpus_in_use, c.gpus_free, c.gpus_failed, c.gpus_out, c.ports, c.ports_down,
     c.ports_erroring, c.gpus_waiting, c.ports_unknown, c.talking_unread,
     c.ports_waiting) = cache.sums
    states = {k: v for k, v in cache.states.items() if v}
    verdicts = {k: v for k, v in cache.verdicts.items() if v}
    c.states = states
    c.verdicts = verdicts
    jobs: dict[str, int] = {}
    for job in state.jobs.values():
        jobs[job.state.value] = jobs.get(job.state.value, 0) + 1
    c.jobs = jobs
    return c


@dataclass
class Summaries:
    """The fleet-wide tables of the overview and the fabric view, kept by the session and
    caught up a bounded part of the shape log every tick (``catch_up``): a view switched to
    after thousands of nodes changed shape (an outage's end) finds them counted, instead of
    counting them all before its first paint (127-141 ms at 16,384 nodes,
    bench/console_scale.py); the views finish what is left when they read them."""

    counts: CountsCache = field(default_factory=CountsCache)
    fabric: FabricCache = field(default_factory=FabricCache)

    def catch_up(self, state: FleetState, limit: int) -> None:
        fleet_counts(state, self.counts, limit)
        self.fabric.catch_up(state, limit)

    @property
    def pending(self) -> int:
        """Nodes logged and not visited yet by one table or the other."""
        return max(len(self.counts.pending), len(self.fabric.pending))


# --- incidents and interruptions ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IncidentRow:
    key: str
    severity: str
    kind: str
    age: str
    nodes: str
    """The incident's nodes as a hostlist."""
    count: int
    jobs: str
    title: str
    action: str
    losing_work: bool = False
    """``Incident.losing_work``."""


def incident_age(inc: Incident, now: float) -> str:
    """The AGE column: how long ago the incident began, as of ``now``."""
    return _short_age(max(0.0, now - inc.since))


def incident_row(inc: Incident, now: float) -> IncidentRow:
    return IncidentRow(inc.key, inc.severity, inc.kind, incident_age(inc, now),
                       compress(inc.nodes) if inc.nodes else "-", len(inc.nodes),
                       ",".join(inc.jobs) or "-", inc.title, inc.action_for(views=True),
                       inc.losing_work)


def interruption_text(rep: dict[str, Any], short: bool = False) -> str:
    """One line of ``ConsoleSession.interruption_report``: count by cause, GPU-hours lost,
    the effective training time ratio, and where the figures come from. ``short``: the
    GPU-hours in fewer words, for a narrow line (the incidents view's top line was cut at 160
    columns: a 3 a.m. drive)."""
    where = "store, 7 d" if rep.get("source") == "store" else "this session"
    n = int(rep.get("interruptions", 0))
    by_cause = rep.get("by_cause", {})
    causes = ", ".join(f"{cause_label(c)} {int(v['count'])}" for c, v in by_cause.items()
                       if v["count"])
    ettr = rep.get("effective_training_time_ratio")
    if n == 0:
        return f"no job interruptions ({where})"
    text = f"{n} job interruption{'' if n == 1 else 's'} ({where})"
    if causes:
        text += f": {causes}"
    text += "; ETTR " + ("-" if ettr is None else f"{float(ettr):.1%}")
    lost, run = float(rep.get('lost_gpu_hours', 0.0)), float(rep.get('job_gpu_hours', 0.0))
    if short:
        return text + f" ({lost:.1f} of {run:.1f} GPU-h lost)"
    text += (f" ({lost:.1f} GPU-h of work since their checkpoints lost, of {run:.1f} GPU-h "
             "run)")
    return text
