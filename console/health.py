"""Health rules: a node's verdict and the reasons for it.

Rule ids and thresholds are those of docs/architecture.md ("Health rules"), whose table names the
source of each (DCGM health watches, Azure's aznhc ND H100 v5 checks, NVIDIA NVSentinel). A
``drain`` severity makes the node ``failed`` (drain recommended; the operator confirms), ``warn``
makes it ``degraded``.
"""

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache, reduce
from operator import or_
from typing import NamedTuple, NoReturn

import msgspec

from fleetdeck.protocol import ib_counters, wire2, xids
from fleetdeck.protocol.fast import Birth, DigestPort, GpuSample, IbPortSample, Telemetry
from fleetdeck.protocol.messages import XIDS_WINDOW_S
from fleetdeck.protocol.thermal import (
    TEMP_CLEAR_C,
    TEMP_WARN_C,
    THROTTLE_BITS,
    THROTTLE_HOLD_MS,
    THROTTLE_HOLD_S,
    THROTTLE_IDLE_HOLD_MS,
    follow_uuids,
    gpu_uuids,
    thermal_sample,
    throttle_hold,
)


class Verdict(StrEnum):
    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"
    STALE = "stale"
    OFFLINE = "offline"


VERDICT_SEVERITY = {Verdict.FAILED: "error", Verdict.OFFLINE: "error",
                    Verdict.STALE: "warn", Verdict.DEGRADED: "warn"}
"""How a change to a verdict shows in the timeline and ``fleetdeck events`` (back to ok:
info)."""

UNSEEN_CHANGE = "first heard so: it changed while this console did not hear the node"
"""Said of a change to failed or degraded the console did not see happen (``Transition.seen``
False: after a silence, an agent restart or the console's own start). Its time is when the
console heard it, not when the node failed (docs/architecture.md)."""


def verdict_text(old: str | None, new: Verdict, reasons: Sequence[str], seen: bool = True) -> str:
    """A verdict change as the timeline and ``fleetdeck events`` say it: "ok -> failed (G1, G2)"
    (a node's first verdict: "new -> …")."""
    why = f" ({', '.join(reasons)})" if reasons else ""
    text = f"{old or 'new'} -> {new.value}{why}"
    if not seen and old and new in (Verdict.FAILED, Verdict.DEGRADED):
        text += f"; {UNSEEN_CHANGE}"
    return text


class Severity(StrEnum):
    WARN = "warn"
    DRAIN = "drain"
    INFO = "info"


VERDICT_ORDER = {
    Verdict.OK: 0, Verdict.DEGRADED: 1, Verdict.STALE: 2, Verdict.FAILED: 3, Verdict.OFFLINE: 4
}
"""Worst last: sorting by this puts the nodes that need an operator at the bottom (or reversed,
at the top)."""


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    component: str
    text: str

    def __str__(self) -> str:
        where = f"{self.component}: " if self.component else ""
        return f"{self.rule} {where}{self.text}"


class _NoFindings(list[Finding]):
    """An empty findings list that refuses to change: the one ``NO_FINDINGS``."""

    __slots__ = ()

    def _refuse(self, *_args: object, **_kw: object) -> NoReturn:
        raise TypeError("NO_FINDINGS is shared by every node: assign a new list instead")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse

    def __reduce__(self) -> str:
        return "NO_FINDINGS"  # unpickled (a replay's snapshot) as the one shared object


NO_FINDINGS: list[Finding] = _NoFindings()
"""A node's findings or liveness when it has none (nearly every node, nearly always): one list
for the whole fleet. A per-node empty list was two more objects each GC sweep walked at
16,384 nodes (docs/performance.md, "Fewer objects for the GC to walk"). It is a list (``==
[]``, ``+``), and mutating it raises: the findings are replaced, never changed in place."""


# XID classes of rules G2/G3 (fleetdeck/protocol/xids.py, docs/domain.md §4).
XID_DRAIN = xids.DRAIN
XID_WARN = xids.WARN
XID_WINDOW_MS = XIDS_WINDOW_S * 1000
"""aznhc counts an XID for 2 h; agents report every XID of that window (``GpuSample.xids``)."""

EXPECTED_GPUS = 8
NVLINKS = 18
# TEMP_WARN_C, TEMP_CLEAR_C and the throttle's hold: fleetdeck/protocol/thermal.py (the agent
# applies them too, for what a console that started since missed).
TEMP_SLOWDOWN_C = 89.0
TEMP_SHUTDOWN_C = 92.0  # the GPU powers off (H100 nvidia-smi -q; docs/domain.md)
ROW_REMAP_UNC_LIMIT = 512
SRAM_CORR_LIMIT = 10_000
PCIE_REPLAY_PER_MIN = 31  # Gen5 x16
PCIE_HOLD_MS = 60_000
"""G11 holds this long after the last sample over ``PCIE_REPLAY_PER_MIN``: a replay rate
about the line, counted over a sliding minute, crossed it every few seconds, and a GPU at
31/min read ok/degraded 42 times in 6 min (a fault drill: ``inject pcie_replay per_min=31``),
each a timeline line and a store row. As G12 holds a throttle (docs/architecture.md)."""
NVLINK_CRC_DRAIN_PER_S = 100.0
THROTTLE_UNPROVEN = "clears after a minute of work without throttling"
"""Said by a G12 held for an idle GPU (``judgements.recommended_action`` reads it)."""
IB_RATE_GBPS = 400.0
"""N1's link rate when a birth states none: NDR, an ND H100 v5's (docs/domain.md)."""
LINK_RULES = frozenset({"N1", "N2", "N5"})
"""Port rules a failing switch explains on every port behind it: the link went down."""
SYMBOL_RULES = frozenset({"N3", "N4", "N6"})
"""Port rules of a signal's quality: a switch's only when they are on enough of its nodes
(``judgements.SuspectSwitch.link_only``)."""
SYMBOL_ERR_PER_HOUR = 120
SYMBOL_ERR_PER_S = 10.0
LER_PER_MIN = 5
N4_ESCALATE = 3
"""NVSentinel: this many degradation episodes (N4) of one port within an hour escalate to a
drain: a link that keeps coming back to the warning is bad, not unlucky."""
N4_HOLD_MS = 60_000
"""How long N4's "receive errors increasing" holds after the counter last grew."""
CARRIER_LOSSES_24H = 5
FATAL_IB_COUNTERS = ib_counters.FATAL
FATAL_WINDOW_S = float(ib_counters.ERRORS_WINDOW_S)
"""How long an increment of a fatal IB counter keeps the node failed (NVSentinel latches it)."""

# v2 columns (docs/protocol.md) that no rule and no counter history reads: a delta that changes
# only these (and the QUIET_CHECKED ones) leaves a healthy node healthy (``still_quiet``). An
# allowlist, so a field added to the samples counts as read by the rules until it is put here;
# tests/console/test_quiet_apply.py sets each to hostile values and holds the rules to that.
BENIGN_GPU_COLUMNS = frozenset({
    "util_pct", "mem_util_pct", "fb_used_mib", "fb_total_mib", "mem_temp_c", "power_w",
    "power_limit_w", "energy_j", "sm_clock_mhz", "mem_clock_mhz", "sm_clock_max_mhz",
    "power_violation_ns", "pstate", "pcie_gen", "pcie_width", "ecc.sbe_vol", "ecc.sbe_agg",
    "ecc.dbe_agg", "row_remap.correctable",
})
BENIGN_PORT_COLUMNS = frozenset({
    "state_id", "phys_state_id", "width", "lid", "sm_lid", "xmit_bytes_total",
    "rcv_bytes_total", "xmit_Bps", "rcv_Bps", "xmit_pkts_total", "rcv_pkts_total",
    "rcv_remote_phys_errors", "xmit_discards", "xmit_wait", "local_ack_timeout_err", "d",
})
QUIET_CHECKED_GPU_COLUMNS = frozenset({"temp_c", "clock_event_reasons"})
"""Read by a rule and moving on most samples: checked on the sample itself (``still_quiet``)."""


def combine(findings: list[Finding]) -> Verdict:
    if any(f.severity is Severity.DRAIN for f in findings):
        return Verdict.FAILED
    if any(f.severity is Severity.WARN for f in findings):
        return Verdict.DEGRADED
    return Verdict.OK


# --- counter history --------------------------------------------------------------------------

# The per-port and per-GPU histories are msgspec Structs with ``gc=False``: 16,384 nodes hold
# ~400,000 of them, and as tracked objects they were a third of what the console's periodic
# full collection walks (docs/performance.md, "Frozen garbage: the GC sweep"). They hold only
# numbers, strings, tuples and deques of those, so they can be in no reference cycle.


class Window(msgspec.Struct, gc=False):
    """Sum of counter increments over a sliding time window.

    ``items`` exists only while the window holds increments: an empty deque is ~600 B, and
    16,384 nodes hold 24 windows each, nearly all empty (issue 12: RSS at 16,384 nodes)."""

    span_ms: int
    items: deque[tuple[int, int]] | None = None
    total: int = 0

    @classmethod
    def of(cls, span_s: float) -> "Window":
        return cls(int(span_s * 1000))

    def add(self, ts_ms: int, delta: int) -> None:
        if delta > 0:
            if self.items is None:
                self.items = deque()
            self.items.append((ts_ms, delta))
            self.total += delta
        self.expire(ts_ms)

    def expire(self, now_ms: int) -> None:
        items = self.items
        if items is None:
            return
        while items and items[0][0] < now_ms - self.span_ms:
            self.total -= items.popleft()[1]
        if not items:
            self.items = None


PORT_COUNTERS = (*FATAL_IB_COUNTERS, "symbol_error", "link_error_recovery", "rcv_errors")
_SYM, _LER, _RCV = len(FATAL_IB_COUNTERS), len(FATAL_IB_COUNTERS) + 1, len(FATAL_IB_COUNTERS) + 2
_ALL_ONES = tuple(ib_counters.ALL_ONES[n] if n in ib_counters.NARROW else -1
                  for n in PORT_COUNTERS)
_SYMBOL_ALL_ONES = ib_counters.ALL_ONES["symbol_error"]


def _saturated(counters: tuple[int | None, ...]) -> tuple[str, ...]:
    """The watched counters that read their all-ones value: they count nothing more."""
    return tuple(name for name, value, top in zip(PORT_COUNTERS, counters, _ALL_ONES,
                                                  strict=True) if value == top)


class PortHistory(msgspec.Struct, gc=False):
    last_fatal_ms: dict[str, int]
    symbol_hour: Window
    ler_minute: Window
    rcv_err_last_ms: int | None = None
    symbol_rate: float = 0.0
    counters: tuple[int | None, ...] | None = None
    """The watched counters (PORT_COUNTERS) of the previous sample."""
    n4_last_ms: int | None = None
    """Sample time N4 last held (an episode runs until it has not for N4_HOLD_MS)."""
    episodes: Window | None = None
    """Starts of N4 episodes in the last hour (N4_ESCALATE of them drain)."""
    saturated: tuple[str, ...] = ()
    """Watched counters at their all-ones value now (N6): errors past it are not counted."""
    watched_ms: int = 0
    """Sample time this console first saw the port: a window younger than its span holds
    less than its span's count (``watched_text``)."""
    first_sample_ms: int = 0
    """Sample time of this console's first sample of the port (0: none yet): how long its
    counters have been watched here, whatever the store put back (``watched_ms``)."""
    symbol_fast_ms: int | None = None
    """Sample time of the last sample whose symbol error rate was over ``SYMBOL_ERR_PER_S``:
    N4 holds its warning ``N4_HOLD_MS`` after it (``symbol_held``), as it does receive errors.
    A storm about the line at its start read ok/degraded every other second for ~10 s before
    N3's hour failed the node (a fault audit)."""
    storm_hour: int = 0
    """Symbol errors in the hour before ``symbol_error`` saturated while N3 held, 0 if it did
    not: a storm that goes on no longer moves the counter, so N3 holds with this figure while
    the counter stays saturated instead of expiring an hour later (docs/architecture.md)."""

    def n4(self, now_ms: int) -> bool:
        """Whether a warning-level N4 condition holds now."""
        return (self.symbol_rate > SYMBOL_ERR_PER_S or self.ler_minute.total > LER_PER_MIN
                or (self.rcv_err_last_ms is not None
                    and now_ms - self.rcv_err_last_ms <= N4_HOLD_MS))

    def symbol_held(self, now_ms: int) -> bool:
        """Whether N4's symbol-rate warning holds at ``now_ms`` (``symbol_fast_ms``)."""
        fast = self.symbol_fast_ms
        return fast is not None and now_ms - fast <= N4_HOLD_MS

    def escalated(self) -> int:
        """N4 episodes in the last hour when they are enough to drain, else 0."""
        total = self.episodes.total if self.episodes is not None else 0
        return total if total >= N4_ESCALATE else 0

    def track_episodes(self, now_ms: int) -> bool:
        """Count an N4 episode when one starts; True while this needs later samples (an
        episode runs, or the hour still holds one)."""
        last = self.n4_last_ms
        if self.n4(now_ms):
            # A rate hovering at its threshold drops under it for a sample now and then: that
            # is one episode going on, not a new one each time it comes back.
            if last is None or now_ms - last > N4_HOLD_MS:
                if self.episodes is None:
                    self.episodes = Window.of(3600)
                self.episodes.add(now_ms, 1)
            self.n4_last_ms = last = now_ms
        if self.episodes is not None:
            self.episodes.expire(now_ms)
            if self.episodes.items is None:
                self.episodes = None
        if last is not None and now_ms - last > N4_HOLD_MS:
            self.n4_last_ms = last = None
        return last is not None or self.episodes is not None


class PortPast(NamedTuple):
    """What the rules that outlive a port's fault read of its past (``judgements``:
    ``held_only_since``, whether a job is held up, and a switch that recovered): from this
    console's ``PortHistory``, or from the owning collector's, as its digest carries it
    (``Digest.ports``, docs/protocol.md "Digests"). One rule, fed from either source: a console
    on digests had no history, and said nothing held a job up while a link flapped."""

    fatal_ms: int | None = None
    """When a fatal counter (N2) last moved."""
    symbol_ms: int | None = None
    """The newest symbol error in the hour (N3)."""
    first_ms: int = 0
    """The first sample of the port watched (0: none yet)."""
    storm: bool = False
    """``PortHistory.storm_hour``: N3 holds on a counter a storm saturated."""
    saturated: bool = False
    """``symbol_error`` at its all-ones value (N6): no new error can be seen."""

    @classmethod
    def of(cls, h: PortHistory) -> "PortPast":
        items = h.symbol_hour.items
        return cls(max(h.last_fatal_ms.values(), default=None),
                   items[-1][0] if items else None, h.first_sample_ms, bool(h.storm_hour),
                   "symbol_error" in h.saturated)

    @classmethod
    def of_digest(cls, p: DigestPort) -> "PortPast":
        """From a digest's port (``digest._port_with_past`` fills it): an older collector's
        has none, read as no history, as before."""
        blind = p.symbols_blind
        return cls(p.fatal_ms, p.symbol_ms, p.first_ms, blind is not None, blind == "saturated")


class GpuHistory(msgspec.Struct, gc=False):
    pcie_minute: Window
    nvlink_err_last_ms: int | None = None
    crc_rate: float = 0.0
    thermal_grew: bool = False
    counters: tuple[int | None, ...] | None = None
    """(nvlink replay, recovery, crc_flit, crc_data, pcie replay, thermal violation ns)."""
    throttled_ms: int | None = None
    """Sample time of the last sample that throttled (G12 holds for THROTTLE_HOLD_S after)."""
    throttled_reasons: int = 0
    """Its clock-event reasons (what the held G12 names)."""
    throttled_thermal: bool = False
    """A sample of the held throttle was the GPU's cooling's (``thermal.thermal_sample``):
    sticky, lowered when the hold ends; only the last sample's bits cleared a thermal throttle
    followed by a power-brake sample in a minute on an idle GPU (a review)."""
    proven_ms: int | None = None
    """Since a throttle: sample time of the first of the current run of busy, unthrottled
    samples (``BUSY_UTIL_PCT``); None while idle or throttling. G12 clears once this run is
    THROTTLE_HOLD_S long."""
    hot_ms: int | None = None
    """Sample time of the last reading at or above TEMP_WARN_C while G13 holds; None once a
    reading fell below TEMP_CLEAR_C (or the GPU reported no temperature while present: one
    that fell off the bus keeps it, ``GONE_HOT``)."""
    hot_c: float = 0.0
    """The hottest reading of the G13 hold ``hot_ms`` dates."""
    watched_ms: int = 0
    """Sample time this console first saw the GPU (as ``PortHistory.watched_ms``)."""
    pcie_over_ms: int | None = None
    """Sample time of the last sample whose replay count was over ``PCIE_REPLAY_PER_MIN``
    while G11 holds (``PCIE_HOLD_MS``); None once the hold ran out."""
    pcie_peak: int = 0
    """The highest count of the G11 hold ``pcie_over_ms`` dates, since its first count over the
    line however long ago (what the held G11 says, as its peak)."""


def _hold_pcie(gh: GpuHistory, agent_minute: int, now: int) -> bool:
    """Date G11's hold by this sample: whether it still holds (the node is to be judged
    again, its hold ends with time)."""
    count = max(agent_minute, gh.pcie_minute.total)
    if count > PCIE_REPLAY_PER_MIN:
        held = gh.pcie_over_ms is not None
        gh.pcie_peak = max(gh.pcie_peak, count) if held else count
        gh.pcie_over_ms = now
        return True
    if gh.pcie_over_ms is not None and now - gh.pcie_over_ms > PCIE_HOLD_MS:
        gh.pcie_over_ms, gh.pcie_peak = None, 0
    return gh.pcie_over_ms is not None


def watched_text(watched_ms: int, now_ms: int, span_s: int) -> str:
    """'' once the console has watched a counter for a whole window's span, else how long it
    has ("4 s", "12 min"): a count over a shorter watch is no rate per span. A one-shot
    ``status`` watches 3.5 s, and "186 symbol errors/h" there was ~720,000/h (SRE drill)."""
    seen_s = (now_ms - watched_ms) // 1000
    if seen_s >= span_s:
        return ""
    # Coarse steps: the text is the finding's, and a new text is a new digest and repaint
    # of the node (every second for an hour was one per node per tick).
    if seen_s < 10:
        return f"{max(1, seen_s)} s"
    return f"{seen_s // 10 * 10} s" if seen_s < 60 else f"{seen_s // 60} min"


def _delta(new: int | None, old: int | None) -> int:
    if new is None or old is None or new < old:
        return 0  # unknown, or the counter was reset (agent restart, reboot, GPU reset)
    return new - old


_DEVS: dict[tuple[str, ...], frozenset[str]] = {}
"""A birth's IB devices -> one frozenset for every node that has them (a fleet has a handful of
shapes): a frozenset a node was one more object each GC sweep walked (issue 12)."""


def _devs_of(birth: Birth) -> frozenset[str]:
    key = tuple(p.dev for p in birth.ib_ports)
    devs = _DEVS.get(key)
    if devs is None:
        if len(_DEVS) > 1024:
            _DEVS.clear()  # device names come from the network: never grow without bound
        devs = _DEVS[key] = frozenset(key)
    return devs


class NodeHistory(msgspec.Struct, gc=False, eq=False):
    """What the rules need beyond the latest sample: deltas and windows per port and GPU.

    Runs for every node on every tick, so the common case — counters unchanged since the last
    sample — costs one tuple comparison per port and GPU.

    A Struct with ``gc=False`` (``eq=False``: compared by identity, as before): it holds
    numbers, a birth, a shared frozenset and dicts of ``gc=False`` histories, so it can be in
    no reference cycle, and a history a node was one more object each GC sweep walked
    (docs/performance.md, "Fewer objects for the GC to walk").
    """

    # Only the two numbers of the previous sample the deltas need, not the sample: holding
    # it kept two samples per node alive and made each update free one (issue 12).
    prev_bd_seq: int | None = None
    prev_ts: int = 0
    prev_seq: int = 0
    ports: dict[str, PortHistory] = {}
    gpus: dict[int, GpuHistory] = {}
    # Two fields, not a (birth, devices) tuple: a tuple holding a frozenset stays in the
    # GC's view, and the set is shared by every node of the same ports (``_DEVS``).
    _inv_birth: Birth | None = None
    _inv_devs: frozenset[str] = frozenset()
    _uuids: dict[int, str] | None = None
    """index -> the last uuid a birth gave at it ('' never): whose history ``gpus`` holds."""
    settled: bool = False
    """Every rate zero, no window holds anything, no thermal growth: what an ``update``
    with unchanged counters would leave, so ``advance`` need not visit ports and GPUs."""
    known: "KnownInventory | None" = None
    """The fullest inventory this node's births gave (``remember_inventory``): what G14 and
    N8 judge a later birth against."""
    shrunk: "tuple[Finding, ...]" = ()
    """G14/N8 of the latest birth: what it lacks of ``known`` (``evaluate`` adds them)."""
    ib_rate: float = IB_RATE_GBPS
    """The link rate N1 wants of this node's ports: what its birth states (``birth_ib_rate``)."""

    def recall_port_minute(self, dev: str, minute: int, symbol_errors: int, link_downed: int,
                           watched_from_ms: int) -> None:
        """Put back one minute of a port's errors from the store (a restarted console; call
        minute by minute, oldest first, before its first sample): what N2 and N3 count over
        the hour. Without it a restarted collector forgot a flap of ten minutes before and
        reported the node ok as soon as its link was up (SRE drill). The counters' baselines
        come with the first sample, as always: increments while no console ran are not
        seen here (the agent's own hour, ``errors_1h``, has them unless it restarted too)."""
        h = self.ports.get(dev)
        if h is None:
            h = self.ports[dev] = PortHistory({}, Window.of(3600), Window.of(60),
                                              watched_ms=watched_from_ms)
        h.watched_ms = min(h.watched_ms, watched_from_ms)
        end_ms = (minute + 1) * 60_000 - 1  # the latest the minute's errors can have been
        if link_downed > 0:
            h.last_fatal_ms["link_downed"] = max(h.last_fatal_ms.get("link_downed", 0), end_ms)
        if symbol_errors > 0:
            h.symbol_hour.add(end_ms, symbol_errors)
        self.settled = False

    def forget_port_windows(self) -> None:
        """Forget the port errors the hour-long rules hold (N2's fatal counters, N3's symbol
        errors, N4's episodes): an operator returned the node to service, so what they held
        was repaired. The counters' baselines stay, so an error after this counts at once."""
        for h in self.ports.values():
            h.last_fatal_ms.clear()
            h.symbol_hour = Window.of(3600)
            h.ler_minute = Window.of(60)
            h.rcv_err_last_ms = None
            h.symbol_rate = 0.0
            h.symbol_fast_ms = None
            h.n4_last_ms = None
            h.episodes = None
            h.storm_hour = 0  # a saturated counter still says so (N6) until it is cleared
        self.settled = False

    def forget_port_errors_before(self, ts_ms: int) -> bool:
        """A resume heard only as its event (it happened while no console ran; the status
        change that makes ``forget_port_windows`` was never seen): forget the hour-long
        errors older than it — those the store put back (N2's fatal counters, N3's symbol
        errors) — and keep any newer. Whether anything was forgotten."""
        forgot = False
        for h in self.ports.values():
            old = [n for n, ts in h.last_fatal_ms.items() if ts < ts_ms]
            for name in old:
                del h.last_fatal_ms[name]
            items = h.symbol_hour.items
            if items and items[0][0] < ts_ms:
                kept = deque(item for item in items if item[0] >= ts_ms)
                h.symbol_hour = Window(h.symbol_hour.span_ms, kept or None,
                                       sum(n for _, n in kept))
                forgot = True
            forgot = forgot or bool(old)
        if forgot:
            self.settled = False
        return forgot

    def inventory(self, birth: Birth) -> None:
        """A birth's GPUs: samples name a GPU by index only, so each GPU's history follows
        its uuid. One the birth shows at another index (NVML renumbered the rest after one
        dropped off PCIe, docs/real-nodes.md; two GPUs swapped between slots) takes its history
        there; one absent from the birth with another at its index was replaced, and its
        history (thermal holds G12/G13, windows, counters' baselines) is forgotten: the new
        GPU was held degraded up to an hour after the repair, with the advice to drain the
        node. Compared with the last uuid known at each index, not the last birth's: a
        rebooted node's first birth often has no GPUs (its inventory hung, the agent's
        stand-in), and the replacement went unseen. An unknown uuid ('') keeps the history
        where it is, as before (the agent's rule, agents/windows.py ``ThermalHolds.inventory``),
        unless a GPU known at another index moved to that index: the history was not its own
        (it inherited it only when it had none of its own, a review). A uuid the birth lists
        at two indices, or an index listed with two uuids, is unknown (``gpu_uuids``)."""
        self.remember_inventory(birth)
        uuids = {i: u for i, u in gpu_uuids((g.index, g.uuid) for g in birth.gpus).items() if u}
        if not uuids:
            return
        known = self._uuids
        if known is None:
            self._uuids = uuids
            return
        if known == uuids:
            return
        gpus = self.gpus
        if gpus:
            followed = follow_uuids(known, uuids, gpus)
            if followed is not None:
                gpus.clear()
                gpus.update(followed)
                self.settled = False
        self._uuids = {i: u for i, u in known.items() if u not in uuids.values()} | uuids

    def remember_inventory(self, birth: Birth, *, rate: bool = True) -> None:
        """Judge a birth's inventory against the fullest one known (``inventory_shrink``):
        a birth of each agent session, or one the store kept (``Store.restore``). ``rate``:
        take N1's link rate from it too; not from a stored one when the node's live birth is
        held (a store opened after the births were heard: ``STORE_WAIT_S``, a store opened
        later), whose older rate would replace the one the agent states now."""
        self.known, self.shrunk = inventory_shrink(self.known, birth)
        if rate:
            self.ib_rate = birth_ib_rate(birth)
        self.settled = False

    def advance(self, t: wire2.Sample) -> None:
        """``update`` for a sample whose watched counters equal the previous sample's (a v2
        delta that moved only benign columns, docs/protocol.md): only the clock moves."""
        if not self.settled:
            self.update(wire2.full(t))
            return
        self.prev_bd_seq, self.prev_ts, self.prev_seq = t.bdSeq, t.ts, t.seq

    def inventory_devs(self, birth: Birth) -> frozenset[str]:
        """The birth's IB devices, computed once per birth."""
        if self._inv_birth is not birth:
            self._inv_birth, self._inv_devs = birth, _devs_of(birth)
        return self._inv_devs

    def update(self, t: Telemetry) -> None:
        prev_bd = self.prev_bd_seq
        # A new agent session restarts counters' baselines (its first sample has seq 1).
        fresh = prev_bd is None or (prev_bd != t.bdSeq and t.seq <= 1)
        # A new agent process: a new session whose seq went back (each agent counts from 1;
        # a reconnect of the same agent goes on counting, and keeps its proving run). Not only
        # at seq 1: telemetry is QoS 0, and a lost first sample left the proving minute
        # running here while the restarted agent's began again (a review).
        restarted = prev_bd != t.bdSeq and t.seq <= self.prev_seq
        dt_s = max(0.001, (t.ts - self.prev_ts) / 1000) if prev_bd is not None else t.interval_s
        self.prev_bd_seq, self.prev_ts, self.prev_seq = t.bdSeq, t.ts, t.seq
        now = t.ts
        settled = True
        for p in t.ib_ports:
            key = port_key(p)
            h = self.ports.get(key)
            if h is None:
                h = self.ports[key] = PortHistory({}, Window.of(3600), Window.of(60),
                                                  watched_ms=now)
            cur = (p.link_downed, p.excessive_buffer_overrun_errors,
                   p.local_link_integrity_errors, p.rnr_nak_retry_err, p.symbol_error,
                   p.link_error_recovery, p.rcv_errors)
            old = h.counters
            if cur != old:
                # An equal tuple keeps the one held: the GC untracks a tuple of numbers at the
                # first collection that looks at it, and one made every second per port was
                # frozen before any did, ~half the references a sweep followed at 16,384
                # nodes (docs/performance.md, "Counters kept while they stand still").
                h.counters = cur
            if old is None:
                h.first_sample_ms = now
            if cur != old:
                h.saturated = _saturated(cur)
                if h.storm_hour and cur[_SYM] != _SYMBOL_ALL_ONES:
                    h.storm_hour = 0  # cleared (perfquery -R, reboot): it counts again
            if fresh or old is None or cur == old:
                h.symbol_rate = 0.0
                if h.symbol_hour.items:
                    h.symbol_hour.expire(now)
                if h.ler_minute.items:
                    h.ler_minute.expire(now)
                if h.symbol_hour.items or h.ler_minute.items:
                    settled = False
                if (h.n4_last_ms is not None or h.episodes is not None) and h.track_episodes(now):
                    settled = False
                continue
            settled = False
            for i, name in enumerate(FATAL_IB_COUNTERS):
                if _delta(cur[i], old[i]) > 0:
                    h.last_fatal_ms[name] = now
            sym = _delta(cur[_SYM], old[_SYM])
            h.symbol_hour.add(now, sym)
            h.symbol_rate = sym / dt_s
            if h.symbol_rate > SYMBOL_ERR_PER_S:
                h.symbol_fast_ms = now  # n4() holds too: the node is not settled before it ends
            if (sym and cur[_SYM] == _SYMBOL_ALL_ONES
                    and h.symbol_hour.total > SYMBOL_ERR_PER_HOUR):
                h.storm_hour = h.symbol_hour.total
            h.ler_minute.add(now, _delta(cur[_LER], old[_LER]))
            if _delta(cur[_RCV], old[_RCV]) > 0:
                h.rcv_err_last_ms = now
            h.track_episodes(now)
        for g in t.gpus:
            gh = self.gpus.get(g.index)
            if gh is None:
                gh = self.gpus[g.index] = GpuHistory(Window.of(60), watched_ms=now)
            temp = g.temp_c
            if temp is not None and temp >= TEMP_WARN_C:
                gh.hot_c = temp if gh.hot_ms is None else max(gh.hot_c, temp)
                gh.hot_ms = now
                settled = False  # the next reading may clear it
            elif gh.hot_ms is not None:
                if not g.present and now - gh.hot_ms <= THROTTLE_IDLE_HOLD_MS:
                    # Off the bus, it reads no temperature: its heat before is why it may have
                    # gone (``GONE_HOT``), kept as long as a throttle of an idle GPU is.
                    settled = False
                elif temp is None or temp < TEMP_CLEAR_C:
                    gh.hot_ms = None
                else:
                    settled = False
            if restarted:
                # A restarted agent restarts the run of work that proves a throttled GPU, as
                # its restored holds do (``ThermalHolds.restore``): status (the agent's hold)
                # and the TUI (this one) disagreed up to a minute (a review).
                gh.proven_ms = None
            reasons = g.clock_event_reasons
            if reasons and reasons & THROTTLE_BITS:
                gh.throttled_thermal = ((gh.throttled_ms is not None and gh.throttled_thermal)
                                        or thermal_sample(reasons, False))
                gh.throttled_ms, gh.throttled_reasons, gh.proven_ms = now, reasons, None
            elif gh.throttled_ms is not None:
                _prove(gh, g.util_pct, g.present, now)
                settled = False  # the hold ends with time and load, not a counter
            nv = g.nvlink
            gcur = (nv.replay, nv.recovery, nv.crc_flit, nv.crc_data, g.pcie_replay_total,
                    g.thermal_violation_ns)
            gold = gh.counters
            if gcur != gold:
                gh.counters = gcur  # as a port's (above)
            if fresh or gold is None or gcur == gold:
                gh.crc_rate = 0.0
                gh.thermal_grew = False
                if gh.pcie_minute.items:
                    gh.pcie_minute.expire(now)
                    settled = settled and not gh.pcie_minute.items
                if (gh.pcie_over_ms is not None or g.pcie_replay_1m) and _hold_pcie(
                        gh, g.pcie_replay_1m or 0, now):
                    settled = False
                continue
            settled = False
            if _delta(gcur[0], gold[0]) + _delta(gcur[1], gold[1]) > 0:
                gh.nvlink_err_last_ms = now
            gh.crc_rate = (_delta(gcur[2], gold[2]) + _delta(gcur[3], gold[3])) / dt_s
            gh.pcie_minute.add(now, _delta(gcur[4], gold[4]))
            _hold_pcie(gh, g.pcie_replay_1m or 0, now)
            grew = gh.thermal_grew = _delta(gcur[5], gold[5]) > 0
            if grew:
                gh.throttled_thermal = True
                if gh.throttled_ms != now:
                    gh.throttled_ms, gh.throttled_reasons, gh.proven_ms = now, reasons or 0, None
        self.settled = settled


def _prove(gh: GpuHistory, util: float | None, present: bool, now: int) -> None:
    """A throttled GPU's hold after its last throttle (``thermal.throttle_hold``, the rule the
    agent applies for ``throttled_last_ts`` too)."""
    last = gh.throttled_ms
    assert last is not None
    gh.throttled_ms, gh.proven_ms = throttle_hold(last, gh.throttled_thermal, gh.proven_ms,
                                                  util, now, present)
    if gh.throttled_ms is None:
        gh.throttled_thermal = False


# --- rules ------------------------------------------------------------------------------------


GPU_READER_SAYS = "the agent's GPU reader says:"
_GPU_READERS = ("nvml", "nvidia-smi", "nvsmi", "gpu", "nvidia")


def reader_error(birth: Birth | None, t: Telemetry) -> str:
    """What the agent says of its GPU reader (the sample's errors, else its birth's), or ''.
    The sample's first: a birth's "Unable to determine the device handle" for one lost GPU
    was quoted while nvidia-smi hung at every sample (a real-node audit)."""
    said: list[str] = [*t.agent.errors, *(birth.errors if birth is not None else ())]
    for e in said:
        if any(w in e.lower() for w in _GPU_READERS):
            return e if len(e) <= 160 else e[:159] + "…"
    return ""


BLIND_RULE = "A1"
"""What the agent says it cannot read, that a rule needs (docs/architecture.md, "Health
rules"): its kernel log (G2/G3's XIDs, N5's carrier losses), a port's error counters (N2-N4).
Without it a node whose agent read nothing of them read plain ``ok`` (a real-node drill)."""
BLIND_STEP = "fix the agent's access: it is blind to"
KERNEL_LOG_SAYS = "kernel log: "
"""How the agent's errors name its kernel log's (agents/real/source.py)."""
KERNEL_LOG_LATE = " MiB unread behind its end "
"""How a log file's follower says it reads a flood late (agents/real/kernel_log.py,
``FileFollower``): it skips none, so its XIDs come late, not never; no A1."""
KERNEL_LOG_LOST = " MiB lost at a truncation in place"
"""How a log file's follower says lines it will never read (agents/real/kernel_log.py,
``LOST_AT_TRUNCATION``): a gap in what it saw, not blindness; A1 says so, with its own step."""
KERNEL_LOG_GAP = "the agent lost part of its kernel log"
LOST_STEP = "look in the rotated copy of its kernel log for the Xid lines the agent lost"
_BLIND_COUNTER_RE = re.compile(
    r"/infiniband/(?P<dev>[^/\s]+)/ports/(?P<port>\d+)/(?P<dir>counters|hw_counters)"
    r"(?:/(?P<file>[^/:\s]+))?: (?P<why>.+)$")
_RULE_COUNTERS = {
    "counters": frozenset({"symbol_error", "link_error_recovery", "link_downed",
                           "port_rcv_errors", "local_link_integrity_errors",
                           "excessive_buffer_overrun_errors"}),
    "hw_counters": frozenset({"rnr_nak_retry_err"}),
}
"""The sysfs files N2-N4 read (agents/real/sysfs_ib.py ``COUNTER_FIELDS``): garbage in another
(``port_xmit_data``) costs a rate, not a rule."""


def _short(text: str, n: int = 160) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def blind_findings(errors: Sequence[str]) -> tuple[Finding, ...]:
    """A1, from the agent's errors (a sample's ``agent.errors``): what it cannot see, once per
    thing. ``warn``: the node is not known bad, but it is not known good either. Cached: a node
    whose agent says the same errors at every sample is read once."""
    return _blind(errors if type(errors) is tuple else tuple(errors))


@lru_cache(maxsize=1024)
def _blind(errors: tuple[str, ...]) -> tuple[Finding, ...]:
    out: list[Finding] = []
    log = next((e for e in errors if e.startswith(KERNEL_LOG_SAYS)
                and (KERNEL_LOG_LOST in e or KERNEL_LOG_LATE not in e)), None)
    if log is not None and KERNEL_LOG_LOST in log:
        # It reads its log, but a stretch of it went unread: an XID 79 in it read as none
        # (docs/real-nodes.md); not "cannot read", whose step is to fix its access.
        out.append(Finding(BLIND_RULE, Severity.WARN, "kernel log",
                           f"{KERNEL_LOG_GAP}: XIDs logged in it were never read, a gap in "
                           f"what it saw (it says: {_short(log[len(KERNEL_LOG_SAYS):])})"))
    elif log is not None:
        out.append(Finding(BLIND_RULE, Severity.WARN, "kernel log",
                           f"the agent cannot read its kernel log: blind to XIDs on this node "
                           f"(it says: {_short(log[len(KERNEL_LOG_SAYS):])})"))
    ports: dict[str, tuple[list[str], str]] = {}
    for e in errors:
        m = _BLIND_COUNTER_RE.search(e)
        if m is None:
            continue
        name = m["file"]
        if name is not None and name not in _RULE_COUNTERS[m["dir"]]:
            continue
        if name is None and m["dir"] != "counters":
            continue  # hw_counters/ is the driver's extra: its rnr_nak_retry_err alone counts
        port = f"{m['dev']}:{m['port']}"
        names, why = ports.setdefault(port, ([], m["why"]))
        names.append(name or "counters/")
    for port, (names, why) in ports.items():
        which = ", ".join(dict.fromkeys(names))
        out.append(Finding(BLIND_RULE, Severity.WARN, port,
                           f"the agent cannot read {which}: blind to this port's error "
                           f"counters, N2-N4 (it says: {_short(why, 80)})"))
    return tuple(out)


def blind_step(findings: Sequence[Finding]) -> str:
    """A1's step: ``fix the agent's access: it is blind to XIDs on this node and to the error
    counters of mlx5_ib0:1``; '' without A1."""
    seen = [f.component for f in findings if f.rule == BLIND_RULE]
    if not seen:
        return ""
    gap = any(f.rule == BLIND_RULE and f.text.startswith(KERNEL_LOG_GAP) for f in findings)
    what = []
    if "kernel log" in seen and not gap:
        what.append("XIDs on this node (its kernel log)")
    ports = [c for c in seen if c != "kernel log"]
    if ports:
        names = ports[0] if len(ports) == 1 else f"{', '.join(ports[:-1])} and {ports[-1]}"
        what.append(f"the error counters of {names} (N2-N4)")
    steps = [f"{BLIND_STEP} {' and to '.join(what)}"] if what else []
    return "; ".join([*steps, LOST_STEP] if gap else steps)


NO_GPU_SOURCE = "sysfs"
"""The birth ``source`` of an agent that reads no GPUs (``agent --source sysfs``)."""


def gpus_expected(birth: Birth | None) -> int:
    """The GPUs a node should have: what its agent was told (``--expect-gpus``, its SKU), else
    as many as it found at start, else ``EXPECTED_GPUS``. A node that booted with 7 of its 8
    read "7/7" and ok when judged only against what it found (a newcomer's run)."""
    if birth is None:
        return EXPECTED_GPUS
    if birth.source == NO_GPU_SOURCE:
        # No GPU reader by design (InfiniBand only): every such node failed "0/8 GPUs
        # visible" with "RMA gpu0…gpu7" (a real-node audit). Told to expect some, it does.
        return birth.gpus_expected
    return birth.gpus_expected or len(birth.gpus) or EXPECTED_GPUS


def port_key(p: IbPortSample) -> str:
    """Where a port's history is kept: its device for port 1 (as the store's per-minute rows
    name it), ``dev:port`` for another port of a multi-port HCA. Keyed by the device alone, the
    two ports of a dual-port HCA were compared with each other at every sample, and a
    link_downed of 1 on one read as a flap on both (a newcomer's run on the sysfs fixtures)."""
    return p.dev if p.port == 1 else f"{p.dev}:{p.port}"


class KnownInventory(msgspec.Struct, frozen=True, gc=False):
    """The fullest inventory a node's births gave (``NodeHistory.known``)."""

    gpus: tuple[tuple[int, str], ...] = ()
    """(index, uuid) of each GPU."""
    ports: tuple[str, ...] = ()
    """``dev:port`` of each IB port."""


def birth_inventory(birth: Birth) -> KnownInventory:
    return KnownInventory(tuple((g.index, g.uuid) for g in birth.gpus),
                          tuple(f"{p.dev}:{p.port}" for p in birth.ib_ports))


GPU_GONE = "not enumerated since an earlier birth of the node"
"""G14's text: a GPU an earlier birth listed that this one does not."""
PORT_GONE_SINCE = "IB port not enumerated since an earlier birth of the node"
"""N8's text: a port an earlier birth listed that this one does not."""


def birth_ib_rate(birth: Birth) -> float:
    """The link rate a node's ports should run at: the highest its birth states (an agent told
    ``--expect-ib-rate``, an HDR cluster's 200), else NDR's 400. Fixed at 400, every port of
    an HDR cluster failed N1 "200 Gb/s, not 400" (a real-node audit)."""
    stated = [p.expected_rate_gbps for p in birth.ib_ports if p.expected_rate_gbps]
    return max(stated) if stated else IB_RATE_GBPS


def inventory_shrink(known: KnownInventory | None, birth: Birth
                     ) -> tuple[KnownInventory, tuple[Finding, ...]]:
    """The inventory to keep after ``birth``, and what the birth lacks of the one known (G14,
    N8; docs/architecture.md, "Health rules"). A GPU that fell off the bus (XID 79) is often
    not enumerated after the reboot: the agent restarted with 7 GPUs, its birth said 7, and
    the node read 7/7 and ok, though the console had heard it with 8 (a failure drill). The
    kept inventory is the fullest heard: one as full as it (the GPU back, or replaced under
    another uuid) takes its place and clears the finding. An agent told its counts
    (``--expect-gpus``, ``--expect-ib-ports``, or the driver's own count of a GPU that does not
    answer) is judged by G1 and N1 as before; a GPU-less agent (``--source sysfs``) and a
    birth with no GPUs (an inventory that hung: G1 says 0/8) say nothing of its GPUs."""
    now = birth_inventory(birth)
    if known is None:
        return now, ()
    out: list[Finding] = []
    gpus = known.gpus
    if birth.source == NO_GPU_SOURCE or not now.gpus:
        pass
    elif len(now.gpus) >= len(gpus):
        gpus = now.gpus
    elif not birth.gpus_expected:
        out.append(_gpus_gone(gpus, now.gpus))
    ports = known.ports
    if len(now.ports) >= len(ports):
        ports = now.ports
    elif not birth.ib_ports_expected:
        counts = f"{len(now.ports)} IB ports now, {len(ports)} before"
        out.extend(Finding("N8", Severity.DRAIN, p, f"{PORT_GONE_SINCE} ({counts})")
                   for p in ports if p not in now.ports)
    if gpus is known.gpus and ports is known.ports:
        return known, tuple(out)
    return KnownInventory(gpus, ports), tuple(out)


def _gpus_gone(known: tuple[tuple[int, str], ...], now: tuple[tuple[int, str], ...]
               ) -> Finding:
    """G14: named by the uuids gone (their index then in the text). Not by index: NVML
    renumbers the GPUs after the one missing (docs/real-nodes.md), so gpu3 now is the gpu4
    of before, and G1's index would name a sound GPU."""
    have = {u for _, u in now if u}
    gone = [(i, u) for i, u in known if u and u not in have]
    counts = f"{len(now)} GPUs now, {len(known)} before"
    if not gone:  # no uuids to tell which
        n = len(known) - len(now)
        return Finding("G14", Severity.DRAIN, "",
                       f"{n} GPU{'s' if n > 1 else ''} {GPU_GONE} ({counts})")
    uuids: list[str] = []
    for _, u in gone:  # a component is at most 256 characters (``DigestFinding``)
        if len(",".join([*uuids, u])) > 240:
            uuids.append(f"+{len(gone) - len(uuids)}")
            break
        uuids.append(u)
    names = ", ".join(f"gpu{i}" for i, _ in gone)
    return Finding("G14", Severity.DRAIN, ",".join(uuids),
                   f"{names} {GPU_GONE} ({counts})")


def reason_line(f: Finding) -> str:
    """``str(f)`` as a row's reasons read it: the rule, then the GPU or port by its name. A
    G14 is named by the uuids gone (``_gpus_gone``), which its text follows with their index:
    "G14 GPU-fabe…: gpu3 not enumerated" put 40 characters of uuid before the gpu3 a reader
    looks for, and a narrow column cut the rest (a UX pass). The uuids come after; the
    detail and ``--json`` keep ``str(f)``."""
    if f.rule == "G14" and f.component:
        return f"{f.rule} {f.text}, {f.component}"
    return str(f)


def evaluate(birth: Birth | None, t: Telemetry, hist: NodeHistory) -> list[Finding]:
    """Findings from the latest telemetry (and its history). Staleness/offline are not here:
    they depend on the clock, and the fleet state judges them at tick time."""
    out: list[Finding] = []
    expected = gpus_expected(birth)
    # Since when the agent's own windows (errors_1h, pcie_replay_1m) count: its start.
    agent_ms = t.agent.started_ts or 0
    present = sum(1 for g in t.gpus if g.present)
    if present < expected:
        missing = sorted({g.index for g in t.gpus if not g.present}
                         | (set(range(expected)) - {g.index for g in t.gpus}))
        comp = ",".join(f"gpu{i}" for i in missing)
        text = f"{present}/{expected} GPUs visible"
        why = reader_error(birth, t) if not present else ""
        if why:
            # None visible and the agent said why ("NVML: init failed: … (is the NVIDIA driver
            # loaded?)"): the advice was to RMA eight GPUs (a newcomer's run).
            text += f"; {GPU_READER_SAYS} {why}"
        out.append(Finding("G1", Severity.DRAIN, comp, text))
    for g in t.gpus:
        if g.present:
            out.extend(_gpu_findings(g, hist.gpus.get(g.index), t.ts, agent_ms))
        else:
            # A GPU that fell off the bus reports little, but its XIDs say why.
            out.extend(_xid_findings(g, t.ts))
            out.extend(_gone_thermal(g, hist.gpus.get(g.index)))
    if birth is not None and birth.ib_ports_expected > len(birth.ib_ports):
        # Short of its SKU's ports from the start (an HCA that did not come up after a
        # reboot): judged against what it found, the node read ok (a newcomer's run).
        out.append(Finding("N1", Severity.DRAIN, "ib",
                           f"{len(birth.ib_ports)}/{birth.ib_ports_expected} IB ports found "
                           "(an HCA missing?)"))
    if birth is not None and birth.ib_ports:
        seen = {p.dev for p in t.ib_ports}
        for inv in birth.ib_ports:
            if inv.dev not in seen:
                out.append(Finding("N1", Severity.DRAIN, f"{inv.dev}:{inv.port}",
                                   "port missing from telemetry (HCA vanished?)"))
    for p in t.ib_ports:
        out.extend(_port_findings(p, hist.ports.get(port_key(p)), t.ts, agent_ms,
                                  hist.ib_rate))
    out.extend(hist.shrunk)
    errors = t.agent.errors
    if errors:
        out.extend(blind_findings(errors))
    return out


GONE_HOT = "before it went missing"
"""Said by the G12 and G13 of a GPU that throttled or ran hot and then fell off the bus: they
vanished with its readings, and the incident lost why it went (XID 79 is often heat: a fault
audit). Kept while the held throttle of an idle GPU would be (THROTTLE_IDLE_HOLD_S), or until
it is back; fixed texts, so its findings do not change with every sample."""


def _gone_thermal(g: GpuSample, h: GpuHistory | None) -> list[Finding]:
    """G12/G13 of a GPU off the bus, from what its history held when it went (``GONE_HOT``),
    or the agent's holds (``throttled_last_ts``, ``hot_last_ts``), as ``_gpu_findings`` reads
    them: a one-shot ``status``, whose console saw only the GPU gone, said G1 alone where the
    TUI said G12 and G13 (a review)."""
    c = f"gpu{g.index}"
    out = []
    agent_last = g.throttled_last_ts
    if h is not None and h.throttled_ms is not None and (
            agent_last is None or h.throttled_ms >= agent_last):
        why: str | None = _throttle_why(h.throttled_reasons)
    elif agent_last is not None:
        why = _throttle_why(g.throttled_last_reasons or 0)
    else:
        why = None
    if why is not None:
        out.append(Finding("G12", Severity.WARN, c, f"clock throttled ({why}) {GONE_HOT}"))
    if h is not None and h.hot_ms is not None:
        out.append(Finding("G13", Severity.WARN, c, f"{int(h.hot_c)} °C {GONE_HOT}"))
    elif g.hot_last_ts is not None:
        # The agent sends when, not how hot: the line it crossed.
        out.append(Finding("G13", Severity.WARN, c,
                           f"at or above max operating ({TEMP_WARN_C:.0f} °C) {GONE_HOT}"))
    return out


def still_healthy(birth: Birth | None, t: Telemetry, hist: NodeHistory) -> bool:
    """True only when ``evaluate(birth, t, hist)`` would find nothing (call it after
    ``hist.update(t)``, as ``evaluate``).

    The cheap "still healthy?" check of issue 12: the negation of every rule's firing condition,
    read straight off the sample without building findings or per-component strings. It may
    answer False for a node that ``evaluate`` finds healthy (then the caller runs ``evaluate``:
    an absent GPU, routine XIDs), never True for one with a finding; tests/console/
    test_apply_precheck.py holds it to that on every fault the simulator can inject.
    """
    now = t.ts
    gpus = t.gpus
    if len(gpus) < gpus_expected(birth) or hist.shrunk:
        return False
    errors = t.agent.errors
    if errors and blind_findings(errors):  # nearly every sample says none
        return False
    if birth is not None and birth.ib_ports_expected > len(birth.ib_ports):
        return False
    hg = hist.gpus
    for g in gpus:
        if not g.present:
            return False  # G1, or the XIDs of a GPU that fell off the bus
        if g.xids or g.xid_last is not None:
            for x in g.xids:
                if ((x.code in XID_DRAIN or x.code in XID_WARN
                     or (x.code == xids.RECOVERY and (x.action in xids.RECOVERY_DRAIN
                                                      or xids.recovery_warns(x.action))))
                        and now - x.ts <= XID_WINDOW_MS):
                    return False
            last, ts = g.xid_last, g.xid_last_ts
            if (last is not None and ts is not None and (last in XID_DRAIN or last in XID_WARN)
                    and now - ts <= XID_WINDOW_MS):
                return False
        ecc = g.ecc
        if ecc.dbe_vol or ecc.sram_unc_agg or (ecc.sram_corr_agg or 0) > SRAM_CORR_LIMIT:
            return False
        rr = g.row_remap
        if rr.failure or rr.pending or (rr.uncorrectable or 0) >= ROW_REMAP_UNC_LIMIT:
            return False
        nv = g.nvlink
        if nv.links_up is not None and nv.links_up < (nv.links_total or NVLINKS):
            return False
        if (g.clock_event_reasons or 0) & THROTTLE_BITS:
            return False
        temp = g.temp_c
        if temp is not None and temp >= TEMP_WARN_C:
            return False
        if (g.pcie_replay_1m or 0) > PCIE_REPLAY_PER_MIN:
            return False
        # The agent's holds count beside this console's own, whatever it watched
        # (``_gpu_findings``).
        if g.throttled_last_ts is not None or (temp is not None and g.hot_last_ts is not None):
            return False
        h = hg.get(g.index)
        if h is not None and (h.crc_rate >= 1 or h.thermal_grew
                              or h.pcie_minute.total > PCIE_REPLAY_PER_MIN
                              or h.pcie_over_ms is not None
                              or (h.nvlink_err_last_ms is not None
                                  and now - h.nvlink_err_last_ms <= 60_000)
                              or h.hot_ms is not None
                              or h.throttled_ms is not None):
            return False
    hp = hist.ports
    ports = t.ib_ports
    for p in ports:
        state, phys, rate = p.state, p.phys_state, p.rate_gbps
        if state is None and phys is None and port_vanished(p):  # no call for a port with a state
            return False
        if ((state is not None and state != "ACTIVE")
                or (phys is not None and phys != "LinkUp")
                or (rate is not None and rate != hist.ib_rate)
                or (p.carrier_losses_24h or 0) >= CARRIER_LOSSES_24H
                or (p.errors_1h and _agent_hour_fails(p.errors_1h))):
            return False
        ph = hp.get(port_key(p))
        if ph is None:
            continue
        if (ph.symbol_hour.total > SYMBOL_ERR_PER_HOUR or ph.n4(now) or ph.escalated()
                or ph.symbol_held(now) or ph.saturated or ph.storm_hour):
            return False
        if ph.last_fatal_ms:
            for ts in ph.last_fatal_ms.values():
                if now - ts <= FATAL_WINDOW_S * 1000:
                    return False
    if birth is not None and birth.ib_ports:
        devs = hist.inventory_devs(birth)
        if len(ports) < len(devs) or not devs.issubset([p.dev for p in ports]):
            return False
    return True


def _agent_hour_fails(errors_1h: dict[str, int]) -> bool:
    """Whether an agent's ``errors_1h`` alone makes N2 or N3 fire."""
    return (any(errors_1h.get(n) for n in FATAL_IB_COUNTERS)
            or errors_1h.get("symbol_error", 0) > SYMBOL_ERR_PER_HOUR)


def still_quiet(t: wire2.Sample) -> bool:
    """A healthy node's new sample whose watched columns equal the previous sample's (only
    BENIGN and QUIET_CHECKED columns moved) is still healthy unless one of the checked columns
    crossed its threshold: the watched values are as before, and what depends on the clock
    (XID windows, counter windows, "in the last minute") only heals as time passes.

    A sample whose rows are not built (``wire2.Pending``) is checked on its columns. A delta
    carries its agent's errors where they differ from its keyframe's: one the agent cannot
    see by (``blind_findings``) is no quiet sample."""
    errors = t.agent.errors
    if errors and blind_findings(errors):  # nearly every sample says none
        return False
    if type(t) is wire2.Pending:
        temps, events = t.gpu_columns("temp_c", "clock_event_reasons")
        if temps and None not in temps and None not in events:
            # Every GPU reporting (nearly every sample): max and OR in C, not a Python loop
            # per GPU (16,384 samples a second).
            return max(temps) < TEMP_WARN_C and not reduce(or_, events, 0) & THROTTLE_BITS
        for temp, reasons in zip(temps, events, strict=True):
            if (temp is not None and temp >= TEMP_WARN_C) or (reasons or 0) & THROTTLE_BITS:
                return False
        return True
    assert isinstance(t, Telemetry)
    for g in t.gpus:
        temp = g.temp_c
        if ((temp is not None and temp >= TEMP_WARN_C)
                or (g.clock_event_reasons or 0) & THROTTLE_BITS):
            return False
    return True


def xids_in_window(g: GpuSample, now_ms: int) -> dict[int, int]:
    """``{code: unix ms it was logged last}`` for every XID of this GPU within the rule window:
    the agent's list (``xids``) and ``xid_last`` (all that agents older than the list send)."""
    seen: dict[int, int] = {}
    for x in g.xids:
        if now_ms - x.ts <= XID_WINDOW_MS and seen.get(x.code, -1) < x.ts:
            seen[x.code] = x.ts
    last, ts = g.xid_last, g.xid_last_ts
    if last is not None and ts is not None and now_ms - ts <= XID_WINDOW_MS and seen.get(
            last, -1) < ts:
        seen[last] = ts
    return seen


def _xid_findings(g: GpuSample, now_ms: int) -> list[Finding]:
    """G2/G3 judge every XID in the window, not the last one: a drain-class XID followed by a
    routine one (119, then 45 from the clean-up) still drains."""
    if not g.xids and g.xid_last is None:
        return []
    seen = xids_in_window(g, now_ms)
    if not seen:
        return []
    c = f"gpu{g.index}"
    in_order = sorted(seen, key=lambda code: (seen[code], code))
    out: list[Finding] = []
    action = recovery_action(g, now_ms) if xids.RECOVERY in seen else None
    drain = [f"XID {code}" for code in in_order if code in XID_DRAIN]
    warn = [f"XID {code}" for code in in_order if code in XID_WARN]
    if action is not None and (action in xids.RECOVERY_DRAIN or xids.recovery_warns(action)):
        # XID 154 is as grave as the action the driver states (docs/domain.md §4).
        said = f"XID 154 ({xids.recovery_name(action)})"
        (drain if action in xids.RECOVERY_DRAIN else warn).append(said)
    if drain:
        out.append(Finding("G2", Severity.DRAIN, c, ", ".join(drain)))
    if warn:
        out.append(Finding("G3", Severity.WARN, c, ", ".join(warn)))
    return out


def worst_xid(g: GpuSample, now_ms: int) -> tuple[int, Severity | None] | None:
    """The XID of this GPU to show in one cell, with its class (None: routine): the gravest
    of the rule window (G2, then G3, then routine; the latest among equals), else the last
    one logged. The last alone read 45, the driver's routine clean-up, beside a finding of
    ``G2 gpu3: XID 119``."""
    seen = xids_in_window(g, now_ms)
    if not seen:
        return None if g.xid_last is None else (g.xid_last, None)
    action = recovery_action(g, now_ms) if xids.RECOVERY in seen else None

    def grade(code: int) -> Severity | None:
        if code in XID_DRAIN or (code == xids.RECOVERY and action in xids.RECOVERY_DRAIN):
            return Severity.DRAIN
        if code in XID_WARN or (code == xids.RECOVERY and xids.recovery_warns(action)):
            return Severity.WARN
        return None

    rank = {Severity.DRAIN: 2, Severity.WARN: 1, None: 0}
    code = max(seen, key=lambda c: (rank[grade(c)], seen[c], c))
    return code, grade(code)


def recovery_action(g: GpuSample, now_ms: int) -> int | None:
    """The GPU recovery action its latest XID 154 within the rule window states (None: no
    such XID, or an agent that does not say the action)."""
    for x in g.xids:
        if x.code == xids.RECOVERY and now_ms - x.ts <= XID_WINDOW_MS:
            return x.action
    return None


def _gpu_findings(g: GpuSample, h: GpuHistory | None, now_ms: int,
                  agent_ms: int = 0) -> list[Finding]:
    out = _xid_findings(g, now_ms)
    c = f"gpu{g.index}"
    if g.ecc.dbe_vol:
        out.append(Finding("G4", Severity.DRAIN, c, f"{g.ecc.dbe_vol} volatile DBE"))
    if g.row_remap.failure:
        out.append(Finding("G5", Severity.DRAIN, c, "row-remap failure (RMA)"))
    if g.row_remap.pending:
        # NVIDIA: running work goes on and new work may start (error containment and page
        # blacklisting cover the bad row); the remap applies at the next GPU reset.
        out.append(Finding("G6", Severity.WARN, c,
                           "row remap pending (reset pending: drain when idle, reset, resume)"))
    if (g.row_remap.uncorrectable or 0) >= ROW_REMAP_UNC_LIMIT:
        out.append(Finding("G7", Severity.WARN, c,
                           f"{g.row_remap.uncorrectable} uncorrectable remapped rows "
                           f"(DCGM limit {ROW_REMAP_UNC_LIMIT})"))
    if g.ecc.sram_unc_agg:
        out.append(Finding("G8", Severity.DRAIN, c,
                           f"{g.ecc.sram_unc_agg} SRAM uncorrectable ECC errors"))
    elif (g.ecc.sram_corr_agg or 0) > SRAM_CORR_LIMIT:
        out.append(Finding("G8", Severity.DRAIN, c, f"{g.ecc.sram_corr_agg} SRAM correctable "
                                                    f"ECC errors (> {SRAM_CORR_LIMIT})"))
    nv = g.nvlink
    if nv.links_up is not None and nv.links_up < (nv.links_total or NVLINKS):
        out.append(Finding("G9", Severity.DRAIN, c,
                           f"NVLink {nv.links_up}/{nv.links_total or NVLINKS} links up"))
    elif h is not None and h.nvlink_err_last_ms is not None and (
            now_ms - h.nvlink_err_last_ms) <= 60_000:
        out.append(Finding("G9", Severity.DRAIN, c, "NVLink replay/recovery errors"))
    if h is not None and h.crc_rate >= NVLINK_CRC_DRAIN_PER_S:
        out.append(Finding("G10", Severity.DRAIN, c, f"NVLink CRC {h.crc_rate:.0f}/s "
                                                     f"(≥ {NVLINK_CRC_DRAIN_PER_S:.0f}/s)"))
    elif h is not None and h.crc_rate >= 1:
        out.append(Finding("G10", Severity.WARN, c, f"NVLink CRC {h.crc_rate:.0f}/s (≥ 1/s)"))
    # The agent's own minute (pcie_replay_1m) covers what a console that just started missed.
    agent_minute = g.pcie_replay_1m or 0
    if agent_minute > PCIE_REPLAY_PER_MIN and (h is None or agent_minute >= h.pcie_minute.total):
        seen = watched_text(agent_ms, now_ms, 60)
        count = f"{agent_minute} in {seen} watched" if seen else f"{agent_minute}/min"
        out.append(Finding("G11", Severity.WARN, c, f"PCIe replay {count} "
                                                    f"(> {PCIE_REPLAY_PER_MIN}/min)"))
    elif h is not None and h.pcie_minute.total > PCIE_REPLAY_PER_MIN:
        seen = watched_text(h.watched_ms, now_ms, 60)
        count = f"{h.pcie_minute.total} in {seen} watched" if seen else \
            f"{h.pcie_minute.total}/min"
        out.append(Finding("G11", Severity.WARN, c, f"PCIe replay {count} "
                                                    f"(> {PCIE_REPLAY_PER_MIN}/min)"))
    elif h is not None and h.pcie_over_ms is not None and now_ms - h.pcie_over_ms <= PCIE_HOLD_MS:
        # A fixed text while held, as G12's: a count of the minute that moves would change the
        # finding every sample for nothing an operator acts on. The peak is the hold's, over
        # as long as the storm ran: "up to 1200/min within the last minute" was said of a
        # minute of 32, the 1200 ten minutes old (a review).
        out.append(Finding("G11", Severity.WARN, c, f"PCIe replay over {PCIE_REPLAY_PER_MIN}"
                                                    f"/min within the last minute (peak "
                                                    f"{h.pcie_peak}/min)"))
    # G12 and G13 fire on the first sample over the line, and hold (THROTTLE_HOLD_S, the band
    # down to TEMP_CLEAR_C): a GPU at its thermal limit must read degraded once, not strobe.
    reasons = g.clock_event_reasons or 0
    # The agent's holds (``throttled_last_ts``, ``hot_last_ts``) count beside this console's own
    # (a GPU is held if either holds it): a one-shot ``status`` (3.5 s) said "ok ... do not
    # drain" of a GPU the TUI held for its failed cooling (a fault drill). They count for what
    # the console watched too: its telemetry is QoS 0 and its carry keeps the newest sample of a
    # node, so it can miss the throttled one (and NVML may not give the violation counter), and
    # the TUI read ok for up to the idle hour the GPU ``status`` held (a review). The agent
    # sends them only while its own hold lasts, by the same rule (fleetdeck/protocol/thermal.py).
    agent_last = g.throttled_last_ts
    if reasons & THROTTLE_BITS or (h is not None and h.thermal_grew):
        out.append(Finding("G12", Severity.WARN, c, f"clock throttled ({_throttle_why(reasons)})"))
    elif (h is not None and h.throttled_ms is not None) or agent_last is not None:
        # A fixed text while held: a countdown would change the finding (and the node's
        # digest, the store's row) every second for nothing an operator acts on. Of the two,
        # the later throttle (the other one's reasons are of an older sample).
        if h is not None and h.throttled_ms is not None and (
                agent_last is None or h.throttled_ms >= agent_last):
            last, why = h.throttled_ms, _throttle_why(h.throttled_reasons)
        else:
            assert agent_last is not None
            last, why = agent_last, _throttle_why(g.throttled_last_reasons or 0)
        if now_ms - last <= THROTTLE_HOLD_MS:
            text = f"clock throttled ({why}) within the last {_HOLD_TEXT}"
        else:
            text = f"clock throttled ({why}) earlier; {THROTTLE_UNPROVEN}"
        out.append(Finding("G12", Severity.WARN, c, text))
    temp = g.temp_c
    if temp is not None and temp >= TEMP_WARN_C:
        # "At or above": 89 °C read "89 °C above slowdown", which is 89 (a fault audit).
        what = ("at or above shutdown (92 °C): the GPU may power off" if temp >= TEMP_SHUTDOWN_C
                else "at or above slowdown (89 °C)" if temp >= TEMP_SLOWDOWN_C
                else "at or above max operating (87 °C)")
        # Floored too: 88.6 °C read "89 °C above max operating" and 89.0 "89 °C above
        # slowdown", one temperature in two words (a 3 a.m. drive).
        out.append(Finding("G13", Severity.WARN, c, f"{int(temp)} °C {what}"))
    elif temp is not None and ((h is not None and h.hot_ms is not None)
                               or g.hot_last_ts is not None):
        # Floored: 86.6 °C must not read "87 °C" beside "above max operating ... ago".
        out.append(Finding("G13", Severity.WARN, c,
                           f"{int(temp)} °C, was above max operating "
                           f"(clears below {TEMP_CLEAR_C:.0f} °C)"))
    return out


def _throttle_why(reasons: int) -> str:
    # Without a throttle bit it was the violation counter: "(idle)" or "(none)" read as no fault.
    if reasons & THROTTLE_BITS:
        return describe_clock_events(reasons)
    return "thermal violation time grew"


_HOLD_TEXT = "minute" if THROTTLE_HOLD_S == 60 else f"{THROTTLE_HOLD_S:g} s"


def port_vanished(p: IbPortSample) -> bool:
    """The agent reports a port it knew with nothing read: its HCA left sysfs (fell off the
    bus, driver unloaded). It read ok, 7 of 8 ports up, with the port's rules all skipping
    an unknown state (a real-node audit; NVSentinel fails a vanished HCA: docs/architecture.md,
    N7)."""
    return (p.state is None and p.phys_state is None and p.rate_gbps is None
            and p.xmit_bytes_total is None and p.rcv_bytes_total is None)


def _port_findings(p: IbPortSample, h: PortHistory | None, now_ms: int,
                   agent_ms: int = 0, rate_gbps: float = IB_RATE_GBPS) -> list[Finding]:
    out: list[Finding] = []
    c = f"{p.dev}:{p.port}"
    if port_vanished(p):
        # Its own rule, not N1's "check the cable": the HCA left the host, and three nodes'
        # HCAs gone on one rail are no switch's fault (a review; ``judgements.PORT_GONE``).
        out.append(Finding("N7", Severity.DRAIN, c, "gone from sysfs: nothing read of it "
                                                    "(HCA off the bus or its driver unloaded?)"))
        return out
    bad = []
    if p.state is not None and p.state != "ACTIVE":
        bad.append(p.state)
    if p.phys_state is not None and p.phys_state != "LinkUp":
        bad.append(p.phys_state)
    if p.rate_gbps is not None and p.rate_gbps != rate_gbps and not bad:
        bad.append(f"{p.rate_gbps:g} Gb/s, not {rate_gbps:g}")
    if bad:
        out.append(Finding("N1", Severity.DRAIN, c, "/".join(bad)))
    # The agent's own hour (errors_1h) covers what a console that just started missed: a
    # one-shot status, a collector restarted after the flap.
    agent_hour = p.errors_1h
    if agent_hour or (h is not None and h.last_fatal_ms):
        fatal = {n for n in FATAL_IB_COUNTERS if agent_hour.get(n)}
        if h is not None:
            fatal.update(n for n, ts in h.last_fatal_ms.items()
                         if now_ms - ts <= FATAL_WINDOW_S * 1000)
        if fatal:
            out.append(Finding("N2", Severity.DRAIN, c,
                               f"{', '.join(sorted(fatal))} increased"))
    agent_symbols = agent_hour.get("symbol_error", 0) if agent_hour else 0
    by_agent = agent_symbols > SYMBOL_ERR_PER_HOUR and (h is None
                                                         or agent_symbols >= h.symbol_hour.total)
    if by_agent:
        seen = watched_text(agent_ms, now_ms, 3600)
        # The agent counts what its counter moved: a saturated one stops it too (a fault
        # audit read "65535 symbol errors" of some 90,000 as exact).
        least = "≥ " if p.symbol_error == _SYMBOL_ALL_ONES else ""
        count = (f"{least}{agent_symbols} symbol errors in {seen} watched" if seen
                 else f"{least}{agent_symbols} symbol errors/h")
        out.append(Finding("N3", Severity.DRAIN, c, f"{count} (> {SYMBOL_ERR_PER_HOUR}/h)"))
    if h is None:
        return out
    if by_agent:
        pass  # N3 said above, from the agent's hour
    elif h.symbol_hour.total > SYMBOL_ERR_PER_HOUR:
        seen = watched_text(h.watched_ms, now_ms, 3600)
        # At least: errors past a saturated counter are not counted (N6); "65535 symbol
        # errors" of some 80,000 read as an exact figure (an SRE drill).
        least = "≥ " if "symbol_error" in h.saturated else ""
        count = (f"{least}{h.symbol_hour.total} symbol errors in {seen} watched" if seen
                 else f"{least}{h.symbol_hour.total} symbol errors/h")
        out.append(Finding("N3", Severity.DRAIN, c, f"{count} (> {SYMBOL_ERR_PER_HOUR}/h)"))
    elif h.storm_hour:
        out.append(Finding("N3", Severity.DRAIN, c, f"{h.storm_hour} symbol errors/h "
                                                    f"(> {SYMBOL_ERR_PER_HOUR}/h) until the "
                                                    f"counter saturated; later ones uncounted"))
    elif h.symbol_rate > SYMBOL_ERR_PER_S:
        out.append(Finding("N4", Severity.WARN, c, f"{h.symbol_rate:.0f} symbol errors/s "
                                                   f"(> {SYMBOL_ERR_PER_S:.0f}/s)"))
    elif h.symbol_held(now_ms):
        # Held a minute, with a fixed text (as G11, G12): a storm's rate about the line read
        # ok/degraded every other second until N3's hour took over (a fault audit).
        out.append(Finding("N4", Severity.WARN, c, f"symbol errors over "
                                                   f"{SYMBOL_ERR_PER_S:.0f}/s within the last "
                                                   "minute"))
    if h.ler_minute.total > LER_PER_MIN:
        out.append(Finding("N4", Severity.WARN, c, f"{h.ler_minute.total} link recoveries/min "
                                                   f"(> {LER_PER_MIN}/min)"))
    elif h.rcv_err_last_ms is not None and now_ms - h.rcv_err_last_ms <= N4_HOLD_MS:
        out.append(Finding("N4", Severity.WARN, c, "receive errors increasing"))
    if episodes := h.escalated():
        out.append(Finding("N4", Severity.DRAIN, c, f"{episodes} degradation episodes in the "
                                                    f"last hour (≥ {N4_ESCALATE}/h escalate)"))
    if (p.carrier_losses_24h or 0) >= CARRIER_LOSSES_24H:
        out.append(Finding("N5", Severity.DRAIN, c, f"{p.carrier_losses_24h} carrier losses/24h "
                                                    f"(≥ {CARRIER_LOSSES_24H})"))
    if h.saturated:
        out.append(Finding("N6", Severity.WARN, c, f"{', '.join(h.saturated)} saturated: "
                                                   "errors past it are not counted; clear the "
                                                   "port's counters (perfquery -R)"))
    return out


CLOCK_EVENT_NAMES = {
    0x1: "idle", 0x2: "app clocks", 0x4: "sw power cap", 0x8: "hw slowdown", 0x10: "sync boost",
    0x20: "sw thermal", 0x40: "hw thermal", 0x80: "power brake", 0x100: "display clocks",
}


SW_POWER_CAP = 0x4
"""DCGM's clock-event bit "SW power cap" (docs/domain.md §3): the driver holds the clocks down
to keep the GPU under its power limit. No health rule judges it (it is the GPU doing as its
limit says, often at full load), but of a slow rank it is why: a GPU whose limit was lowered
(``nvidia-smi -pl``, a power budget) read "no finding on that node" (a fault audit). Here, not
in judgements.py, because a collector's digest carries the GPUs that show it (console/digest.py)."""


def describe_clock_events(mask: int) -> str:
    names = [name for bit, name in CLOCK_EVENT_NAMES.items() if mask & bit]
    return ", ".join(names) if names else "none"
