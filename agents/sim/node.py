"""One simulated ND96isr H100 v5 node: 8 x H100 SXM 80 GB and 8 x ConnectX-7 NDR ports.

Baselines come from docs/domain.md §1 (real H100 captures): idle ~70 W / 41 °C / 345 MHz,
training 450-700 W / 55-80 °C / 1980 MHz, HBM 2619 MHz; 400 Gb/s NDR ports whose data counters
count 4-byte words and wrap at 2^64, error counters that saturate at their IBTA widths (§2). Fault
signatures: docs/scenarios.md ("Fault kinds").

Values are driven by *simulated* time, never by the wall clock: inside a :class:`~agents.sim.world.
SimWorld` a read samples the node at ``world.t + offset`` and advances by exactly one interval, so
one seed and one scenario give one telemetry sequence. Standalone (``fleetdeck agent --source sim``)
the node keeps its own clock and advances by the wall time between reads.

Hot path: a 4,096-node fleet reads 4,096 nodes a second in one process, so samples are built with
``model_construct`` (no re-validation: the values are made here, in range by construction; the
tests decode every payload strictly) and the per-GPU/per-port code avoids needless calls.
"""

from __future__ import annotations

import math
import random
import uuid
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from msgspec.structs import astuple
from pydantic import BaseModel

from fleetdeck.agents.sim.spec import POWER_LIMIT_W
from fleetdeck.agents.source import ColumnReading, EventDraft, Inventory, Reading
from fleetdeck.protocol import fast, ib_counters, wire2, xids
from fleetdeck.protocol.messages import (
    XIDS_MAX,
    XIDS_WINDOW_S,
    DrainMode,
    DrainState,
    Ecc,
    GpuInventory,
    GpuSample,
    HostSample,
    IbPortInventory,
    IbPortSample,
    JobOnNode,
    NvLink,
    RowRemap,
    Severity,
    Topology,
    XidSeen,
)

M = TypeVar("M", bound=BaseModel)

if TYPE_CHECKING:
    from fleetdeck.agents.sim.scheduler import Binding
    from fleetdeck.agents.sim.world import SimWorld

SKU = "ND96isr_H100_v5"
GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_MEM_MIB = 81559
N_GPUS = 8
N_PORTS = 8
SM_CLOCK_MAX = 1980.0
SM_CLOCK_IDLE = 345.0
MEM_CLOCK = 2619.0
NVLINKS = 18
NDR_RATE_GBPS = 400.0
DOWN_RATE_GBPS = 10.0
"""What sysfs ``rate`` prints for a port without a link: the SDR fallback, 10 Gb/sec (4X SDR)."""
WORD = 4
U64 = 2**64
# GPU bus ids on ND H100 v5 (aznhc ndv5-topo.xml): GPU k shares a PCIe switch with mlx5_ibk.
GPU_BUS = ["0001", "0002", "0003", "0008", "0009", "000a", "000b", "000c"]

# Clock-event reason bits (dcgm_structs.h DCGM_CLOCKS_EVENT_REASON_*).
CE_IDLE = 0x1
CE_SW_POWER_CAP = 0x4
CE_SW_THERMAL = 0x20
CE_HW_THERMAL = 0x40

THROTTLE_START_C = 85.0
"""SW thermal slowdown starts a few degrees below the 87 °C max operating temperature."""
THROTTLE_CLEAR_C = 82.0
"""SW thermal slowdown, once engaged, holds until the GPU cooled this far: the driver keeps a hot
GPU at its limit by lowering the clock, so the throttle reason stays set while the cooling fault
lasts instead of blinking with every compute/all-reduce phase (a 3 s ``fleetdeck status`` would
see a throttling GPU as healthy between blinks)."""
COOLING_LOAD_C = 6.0
"""How much cooler than its fault's temperature a GPU with failed cooling settles at light work
(a collective, a stall) than at full compute."""
HW_THERMAL_C = 89.0
POWER_CAP_CLOCK_MIN = 600.0
"""The lowest SM clock a power-capped GPU at work is driven to: the clock scales with limit/
demand, which at ``power_cap limit=100`` would read 300 MHz, below the idle clock."""
CAP_COMPUTE_W = 645.0
"""What a GPU draws in its compute phase (600-690 W, ``_gpu``): the power a capped rank's
compute is slowed against in the straggler model (``gpu_slowdown``)."""
THERMAL_TAU_S = 15.0
"""Thermal time constant of an H100 SXM under a heat sink: minutes to settle, not seconds."""

# sysfs ``state`` / ``phys_state`` names (kernel drivers/infiniband/core/sysfs.c).
STATE_NAMES = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
PHYS_NAMES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
              5: "LinkUp", 6: "LinkErrorRecovery", 7: "Phy Test"}

# IBTA PortCounters widths: error counters saturate at all-ones, they never wrap.
COUNTER_MAX = ib_counters.ALL_ONES

COMM_PEAK_BPS = 40e9
"""Bytes/s one NDR port moves during the gradient all-reduce (5-45 GB/s, never > 50)."""
IDLE_BPS = (2e3, 4e4)
"""Management traffic of an idle port (SM MADs, IPoIB chatter)."""
SBE_PER_S = 2e-5
PCIE_REPLAY_PER_S = 5e-4
SYMBOL_PER_S = 1e-4
"""Healthy background error rates: rare enough never to trip a rule (docs/architecture.md)."""


@dataclass(frozen=True)
class XidKind:
    """What one XID code does in the simulator (docs/scenarios.md, "XID codes")."""

    text: str
    """What the driver logs after ``pid=…, name=…,``."""
    effect: str
    """NVIDIA's XID catalog, as NVSentinel's xiderrorsmapping.csv sums it up: ``app`` (RESTART_APP:
    the application on the GPU dies, the GPU is fine), ``fatal`` (RESET_GPU and the other FATAL
    actions: the application dies and the GPU needs a reset), ``bus`` (79, RESTART_BM: the GPU
    is gone), ``none`` (IGNORE, or the driver's clean-up after another error)."""
    cuda: str = "unspecified launch failure"
    """The CUDA error the rank on that GPU dies with (``app`` and ``fatal``)."""


XID_KINDS: dict[int, XidKind] = {
    13: XidKind("Graphics SM Warp Exception on (GPC 2, TPC 1, SM 0): Out Of Range Address",
                "app", "an illegal memory access was encountered"),
    31: XidKind("MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_2 faulted @ 0x7f3a_c0000000. Fault is "
                "of type FAULT_PDE ACCESS_TYPE_VIRT_READ", "app",
                "an illegal memory access was encountered"),
    43: XidKind("Ch 00000010", "app", "unspecified launch failure"),
    45: XidKind("Ch 00000010", "none"),
    48: XidKind("An uncorrectable double bit error (DBE) has been detected on GPU in the "
                "framebuffer", "fatal", "uncorrectable ECC error encountered"),
    62: XidKind("Internal micro-controller halt", "fatal"),
    63: XidKind("Row Remapper: New row marked for remapping, reset gpu to activate", "none"),
    64: XidKind("Row Remapper: Failed to remap a row", "fatal",
                "uncorrectable ECC error encountered"),
    74: XidKind("NVLink: fatal error detected on link 3", "fatal",
                "unspecified launch failure"),
    79: XidKind("GPU has fallen off the bus.", "bus"),
    92: XidKind("High single-bit ECC error rate", "none"),
    94: XidKind("Contained: SM (0x1). RST: No, D-RST: No", "app",
                "uncorrectable ECC error encountered"),
    95: XidKind("Uncontained: FBHUB. RST: Yes, D-RST: No", "fatal",
                "uncorrectable ECC error encountered"),
    119: XidKind("Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function "
                 "76 (GSP_RM_CONTROL)", "fatal"),
    120: XidKind("GSP Error: Task 1 raised error code 0x5 for reason 0x0", "fatal"),
    136: XidKind("Link training failed", "fatal"),
    140: XidKind("An unrecoverable ECC error was found in the GPU memory", "fatal",
                 "uncorrectable ECC error encountered"),
}
"""Codes not listed here are logged with no effect on work or state."""

_RECOVERY_LOGGED = {0: "None", 1: "GPU Reset Required", 2: "Node Reboot Required",
                    3: "Drain P2P", 4: "Drain and Reset", 5: "Recover IMEX Domain",
                    6: "Bus Reset Required", 7: "System Reboot Required"}
"""How the driver names each recovery action in an XID 154 line."""

DRAIN_XIDS = xids.DRAIN
"""The console's G2 codes (fleetdeck/protocol/xids.py): the scheduler's node health check
refuses a node with one of them in the last 2 h."""
WARN_XIDS = xids.WARN
"""The console's G3 codes: the node is usable."""
UNCORRECTABLE_XIDS = frozenset({48, 94, 95, 140})
"""An XID 63 after one of these records a row remapped for an uncorrectable error."""


_set = object.__setattr__


def trusted(cls: type[M]) -> Callable[..., M]:
    """A constructor for values this module made itself: like ``model_construct`` without its
    per-field alias bookkeeping, which was two thirds of a node's sampling time (measured:
    ~180 µs -> ~70 µs per node). Nothing is validated here; the tests decode every payload
    strictly, and the console validates on receipt anyway."""
    defaults = {name: f.get_default(call_default_factory=True)
                for name, f in cls.__pydantic_fields__.items() if not f.is_required()}
    names = tuple(cls.__pydantic_fields__)

    def make(*args: Any, **values: Any) -> M:
        # Positional arguments in field order, as the msgspec Structs take them (the sample
        # builders below call positionally: a keyword call costs ~9x as much, see _gpu).
        if args:
            values = {**dict(zip(names, args, strict=False)), **values}
        m = cls.__new__(cls)
        data = defaults.copy()
        data.update(values)
        _set(m, "__dict__", data)
        _set(m, "__pydantic_fields_set__", set(values))
        _set(m, "__pydantic_extra__", None)
        _set(m, "__pydantic_private__", None)
        return m

    return make


def stable_seed(*parts: object) -> int:
    """A seed that is the same in every process (``hash()`` of a str is not)."""
    return zlib.crc32("\x1f".join(str(p) for p in parts).encode())


def comm_amount(p: float, c: float) -> float:
    """Cumulative all-reduce time (in step units) up to progress ``p``; comm is the last ``c``
    of every step, after the compute phase."""
    whole = math.floor(p)
    return whole * c + max(0.0, (p - whole) - (1.0 - c))


def agent_sends_structs() -> bool:
    """Whether the node agent builds its telemetry from msgspec Structs (protocol/fast.py,
    issue 12) rather than the pydantic models: the samples must be of the kind it encodes."""
    from fleetdeck.agents import agent

    return (getattr(agent, "Telemetry", None) is fast.Telemetry
            or getattr(agent, "fast", None) is fast)


SAMPLE_STRUCTS = agent_sends_structs()
"""Samples are msgspec Structs (~0.5 µs each, gc=False) where the agent encodes Structs, else
pydantic models made without validation (:func:`trusted`)."""

_gpu_sample: Callable[..., Any]
_port_sample: Callable[..., Any]
_ecc: Callable[..., Any]
_remap: Callable[..., Any]
_nvlink: Callable[..., Any]
_host: Callable[..., Any]
_job: Callable[..., Any]
_xid_seen: Callable[..., Any]
if SAMPLE_STRUCTS:
    _gpu_sample, _port_sample = fast.GpuSample, fast.IbPortSample
    _ecc, _remap, _nvlink = fast.Ecc, fast.RowRemap, fast.NvLink
    _host, _job, _xid_seen = fast.HostSample, fast.JobOnNode, fast.XidSeen
else:
    _gpu_sample, _port_sample = trusted(GpuSample), trusted(IbPortSample)
    _ecc, _remap, _nvlink = trusted(Ecc), trusted(RowRemap), trusted(NvLink)
    _host, _job, _xid_seen = trusted(HostSample), trusted(JobOnNode), trusted(XidSeen)


@dataclass(slots=True)
class GpuState:
    index: int
    uuid: str
    bias_c: float
    temp_c: float = 41.0
    energy_j: float = 0.0
    present: bool = True
    sbe_vol: int = 0
    sbe_agg: int = 0
    dbe_vol: int = 0
    dbe_agg: int = 0
    remap_corr: int = 0
    remap_unc: int = 0
    remap_pending: bool = False
    remap_failure: bool = False
    pcie_replay: int = 0
    pcie_replay_per_min: float = 0.0
    pcie_carry: float = 0.0
    nvlink_down: int = 0
    nvlink_replay: int = 0
    nvlink_recovery: int = 0
    xid_last: int | None = None
    xid_last_ts: int | None = None
    xids: dict[int, tuple[int, float]] = field(default_factory=dict)
    """Every XID code of the last 2 h: (wall ms, sim time) it was logged last."""
    xids_wire: list[XidSeen] = field(default_factory=list)
    """The ``xids`` telemetry list, rebuilt only when ``xids`` changes."""
    xids_dirty: bool = False
    recovery_action: int | None = None
    """The GPU recovery action its latest XID 154 stated (``xids.RECOVERY_ACTIONS``)."""
    crash: tuple[str, str] | None = None
    """(job id, why): an XID killed the rank of that job on this GPU; the scheduler fails it."""
    cooling_fault_c: float | None = None
    throttle_clock: float = SM_CLOCK_MAX
    thermal_violation_ns: int = 0
    power_limit_w: float = POWER_LIMIT_W
    """Lowered by ``power_cap`` until a repair or its duration's end."""
    power_violation_ns: int = 0
    sm_clock: float = SM_CLOCK_IDLE
    throttling: bool = False
    blocks: tuple[tuple[object, ...], Ecc, RowRemap, NvLink] | None = None
    """Last ECC/row-remap/NVLink sample objects and the counters they were made from."""


@dataclass
class Flap:
    start: float
    count: int
    down_s: float
    every_s: float

    def link_at(self, t: float) -> tuple[int, int] | None:
        """(state, phys_state) while this flap plan holds the link, else None."""
        if t < self.start:
            return None
        i = int((t - self.start) // self.every_s)
        if i >= self.count:
            return None
        into = t - self.start - i * self.every_s
        if into < self.down_s:
            return (1, 2)  # DOWN / Polling: carrier lost, the PHY hunts for a peer
        if into < self.down_s + 1.0:
            return (2, 5)  # INIT / LinkUp: link trained, waiting for the subnet manager
        if into < self.down_s + 1.5:
            return (3, 5)  # ARMED / LinkUp
        return None

    def transitions(self, t0: float, t1: float) -> list[tuple[float, bool]]:
        """Carrier changes in ``(t0, t1]``: (time, up?)."""
        out: list[tuple[float, bool]] = []
        for i in range(self.count):
            down = self.start + i * self.every_s
            for when, up in ((down, False), (down + self.down_s, True)):
                if t0 < when <= t1:
                    out.append((when, up))
        return out

    def end(self) -> float:
        return self.start + (self.count - 1) * self.every_s + self.down_s + 1.5


@dataclass(slots=True)
class PortState:
    index: int
    dev: str
    lid: int
    xmit_words: int = 0
    rcv_words: int = 0
    xmit_pkts: int = 0
    rcv_pkts: int = 0
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_MAX, 0))
    hard_down: str | None = None
    """'Polling' or 'Disabled' while the link is hard down (cable, optic, HCA)."""
    switch_down: bool = False
    """The leaf (rail) switch at the other end is dead: the PHY polls for a peer."""
    flap: Flap | None = None
    storm_rate: float = 0.0
    storm_bw: float = 1.0
    carrier_losses: deque[float] = field(default_factory=deque)
    last_link: tuple[int, int] = (4, 5)
    last_loss_t: float | None = None
    """Sim time of the last link_downed increment (the scheduler's 1 h health window)."""

    delta: dict[str, int] = field(default_factory=dict)
    """What the counters moved by during the sample being built (the sample's ``d``)."""

    def bump(self, name: str, n: int) -> None:
        if n > 0:
            old = self.errors[name]
            new = min(COUNTER_MAX[name], old + n)
            if new != old:
                self.errors[name] = new
                self.delta[name] = self.delta.get(name, 0) + new - old

    def link_at(self, t: float) -> tuple[int, int]:
        if self.hard_down is not None:
            return (1, 3 if self.hard_down == "Disabled" else 2)
        if self.switch_down:
            return (1, 2)
        if self.flap is not None:
            state = self.flap.link_at(t)
            if state is not None:
                return state
        return (4, 5)

    def up_at(self, t: float) -> bool:
        return self.link_at(t) == (4, 5)


class SimNode:
    """A simulated node: a :class:`~agents.source.Source` for one :class:`NodeAgent`."""

    name = "sim"
    mode = "sim"
    columns = SAMPLE_STRUCTS
    """Whether :meth:`read_columns` may be used: its nested columns (ECC, row remap, NVLink)
    are the v2 encoder's msgspec Structs only where the samples are."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "read_columns" not in cls.__dict__ and (cls.read is not SimNode.read
                                                   or cls.sample is not SimNode.sample):
            # A node that reads its own way (a test's that logs an event at each read, a mixin's
            # ``read``, its own ``sample``) is read that way: its columns would pass it by (a
            # review: only a ``read`` of the class itself was seen).
            cls.columns = False

    def __init__(
        self,
        node_id: str,
        seed: int = 0,
        topology: Topology | None = None,
        *,
        index: int = 0,
        world: SimWorld | None = None,
        offset_s: float = 0.0,
    ) -> None:
        self.node_id = node_id
        self.index = index
        self.world = world
        self.offset_s = offset_s
        """Where in each interval this node is sampled (its agent's phase)."""
        self.rng = random.Random(stable_seed(seed, node_id))
        self.topology = topology or Topology()
        self.boot_id = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.uptime0_s = self.rng.uniform(2 * 86400, 40 * 86400)
        self.gpus = [
            GpuState(i, f"GPU-{uuid.UUID(int=self.rng.getrandbits(128))}",
                     bias_c=self.rng.uniform(-2.5, 2.5))
            for i in range(N_GPUS)
        ]
        for g in self.gpus:
            g.temp_c = 41.0 + g.bias_c
        # Counters start where weeks of uptime left them, not at zero.
        self.ports = [PortState(i, f"mlx5_ib{i}", lid=index * N_PORTS + i + 1)
                      for i in range(N_PORTS)]
        for p in self.ports:
            p.xmit_words = self.rng.randrange(10**12, 10**15)
            p.rcv_words = p.xmit_words + self.rng.randrange(0, 10**10)
            p.xmit_pkts = p.xmit_words // 1024
            p.rcv_pkts = p.rcv_words // 1024
            p.errors["xmit_wait"] = self.rng.randrange(0, 10**8)
        self.up = True
        """False after node death: no telemetry, no ranks."""
        self.agent_alive = True
        self.binding: Binding | None = None
        """The job rank set placed here by the simulated scheduler."""
        self.drain_state = DrainState.NONE
        self._t_own = 0.0
        self._last_wall: float | None = None
        self._last_t: float | None = None
        self._events: deque[EventDraft] = deque(maxlen=1000)

    # --- Source protocol -------------------------------------------------------------------

    def inventory(self) -> Inventory:
        return Inventory(
            sku=SKU,
            gpus=[
                GpuInventory(
                    index=g.index,
                    uuid=g.uuid,
                    name=GPU_NAME,
                    pci_bus_id=f"{GPU_BUS[g.index]}:00:00.0",
                    memory_mib=GPU_MEM_MIB,
                )
                for g in self.gpus
            ],
            ib_ports=[
                IbPortInventory(
                    dev=p.dev, port=1, netdev=f"ib{p.index}", gpu_affinity=p.index,
                    expected_rate_gbps=NDR_RATE_GBPS,
                )
                for p in self.ports
            ],
            topology=self.topology,
            driver_version="590.48.01",
            cuda_version="13.1",
            boot_id=self.boot_id,
            # An ND H100 v5's own count, as a real agent on one is told (--expect-gpus 8).
            gpus_expected=len(self.gpus),
            ib_ports_expected=len(self.ports),
        )

    def read(self, now: float) -> Reading:
        return self.sample(*self._when(now))

    def read_columns(self, now: float) -> ColumnReading:
        """:meth:`read` with the GPUs and ports as columns (``wire2.Columns``), for the agent's
        v2 encoder: the same values and the same draws of the node's random numbers, without a
        row Struct per GPU and port (docs/performance.md, "Simulator capacity")."""
        return self.sample_columns(*self._when(now))

    def _when(self, now: float) -> tuple[float, float, float, int]:
        """(t, dt, t0, wall_ms) of the read at wall-clock ``now`` (``sample``'s arguments)."""
        if self.world is not None:
            t = self.world.t + self.offset_s
            dt = self.world.interval_s
            wall_ms = self.world.wall_ms(t)
        else:
            dt = 1.0 if self._last_wall is None else max(0.001, now - self._last_wall)
            self._last_wall = now
            self._t_own += dt
            t = self._t_own
            wall_ms = int(now * 1000)
        t0 = t - dt if self._last_t is None else self._last_t
        self._last_t = t
        return t, dt, t0, wall_ms

    def take_events(self) -> list[EventDraft]:
        events = list(self._events)
        self._events.clear()
        return events

    def busy(self) -> bool:
        return self.binding is not None

    def on_drain(self, state: DrainState, mode: DrainMode) -> None:
        if self.world is not None:
            # The world decides when: at once in one process, at a tick every process of a
            # spread fleet agrees on under ``sim --procs`` (agents/fleet.py).
            self.world.node_drain(self, state, mode)
        else:
            self.drain_state = state

    def needs_shadow(self) -> bool:
        """Whether reading this node changes what the scheduler sees (a thermal throttle, a
        flapping port's lost carrier): a process of a spread fleet that does not own the node
        reads it anyway while this holds, so its copy of the scheduler keeps up."""
        return (any(g.cooling_fault_c is not None or g.throttling for g in self.gpus)
                or any(p.flap is not None for p in self.ports))

    # --- health as the simulated scheduler sees it ----------------------------------------

    def fatal_reasons(self, t: float) -> list[str]:
        """Why the scheduler must not place work here (a node-health-check view of the model,
        close to the console's drain rules: missing GPU, DBE, remap, fatal XID in 2 h, NVLink
        down, IB port not ACTIVE or lost carrier in the last hour)."""
        out: list[str] = []
        if not self.up:
            return ["node down"]
        for g in self.gpus:
            if not g.present:
                out.append(f"gpu{g.index} missing")
            elif g.dbe_vol or g.remap_failure:
                # A pending row remap is no reason: work goes on until a reset (G6 warns).
                out.append(f"gpu{g.index} ECC/row remap")
            elif g.nvlink_down:
                out.append(f"gpu{g.index} NVLink down")
            else:
                fatal = sorted(c for c, (_, when) in g.xids.items()
                               if c in DRAIN_XIDS and t - when < XIDS_WINDOW_S)
                if fatal:
                    out.append(f"gpu{g.index} XID {', '.join(map(str, fatal))}")
                if (g.recovery_action in xids.RECOVERY_DRAIN and xids.RECOVERY in g.xids
                      and t - g.xids[xids.RECOVERY][1] < XIDS_WINDOW_S):
                    out.append(f"gpu{g.index} {xids.RECOVERY_ACTIONS[g.recovery_action]}")
        for p in self.ports:
            if not p.up_at(t):
                out.append(f"{p.dev} down")
            elif p.last_loss_t is not None and t - p.last_loss_t < 3600:
                out.append(f"{p.dev} lost carrier")
            elif p.storm_rate > 0:
                out.append(f"{p.dev} symbol errors")
        return out

    def gpu_slowdown(self, g: int) -> float:
        """Compute-time multiplier of the rank on GPU ``g`` (1.0 at full clock): its thermal
        throttle's clock, and its power cap's at the compute phase's draw."""
        gs = self.gpus[g]
        clock = gs.throttle_clock if gs.throttling else SM_CLOCK_MAX
        if gs.power_limit_w < CAP_COMPUTE_W:
            # As _gpu caps a compute phase's power: a throttled GPU draws less to begin with.
            power = (CAP_COMPUTE_W * (0.35 + 0.65 * clock / SM_CLOCK_MAX) if gs.throttling
                     else CAP_COMPUTE_W)
            if power > gs.power_limit_w:
                clock = max(min(clock, POWER_CAP_CLOCK_MIN), clock * gs.power_limit_w / power)
        return SM_CLOCK_MAX / clock

    def comm_slowdown(self, port: int, ib: bool = True) -> float:
        """All-reduce-time multiplier of the rank whose rail is ``port``; ``ib``: the job's
        collectives cross InfiniBand (it spans nodes), so the port's errors slow them."""
        p = self.ports[port]
        factor = 1.0 / p.storm_bw if ib and p.storm_rate > 0 else 1.0
        # A GPU with NVLinks down reduces inside the node over fewer links (or PCIe).
        if any(g.nvlink_down for g in self.gpus):
            factor *= 2.5
        return factor

    # --- faults ----------------------------------------------------------------------------

    def event(self, kind: str, message: str, severity: Severity, component: str, ts_ms: int,
              **data: bool | int | float | str | None) -> None:
        self._events.append(EventDraft(kind, message, severity, component, dict(data), ts_ms))

    def _xid(self, g: GpuState, code: int, t: float, wall_ms: int) -> None:
        g.xid_last, g.xid_last_ts = code, wall_ms
        g.xids[code] = (wall_ms, t)
        g.xids_dirty = True
        pid = self.rng.randint(2000, 400000)
        kind = XID_KINDS.get(code)
        severity = (Severity.ERROR if code in DRAIN_XIDS
                    else Severity.WARN if code in WARN_XIDS else Severity.INFO)
        text = kind.text if kind is not None else "error"
        if code == xids.RECOVERY and g.recovery_action is not None:
            # As R555+ drivers log it, and the real agent reads it (agents/real/kernel_log.py).
            severity = (Severity.ERROR if g.recovery_action in xids.RECOVERY_DRAIN
                        else Severity.WARN if g.recovery_action in xids.RECOVERY_WARN
                        else Severity.INFO)
            text = (f"GPU recovery action changed from 0x0 (None) to 0x{g.recovery_action:x} "
                    f"({_RECOVERY_LOGGED[g.recovery_action]})")
        self.event(
            "xid",
            f"NVRM: Xid (PCI:0000:{GPU_BUS[g.index][2:]}:00): {code}, pid={pid}, "
            f"name=python, {text}",
            severity, f"gpu{g.index}", wall_ms, xid=code, gpu=g.index,
        )

    def _xids_wire(self, g: GpuState, t: float) -> list[XidSeen]:
        """``GpuSample.xids``: every code of the last 2 h (the objects are reused until the
        codes change or one ages out)."""
        if g.xids and min(when for _, when in g.xids.values()) < t - XIDS_WINDOW_S:
            g.xids = {c: v for c, v in g.xids.items() if v[1] >= t - XIDS_WINDOW_S}
            g.xids_dirty = True
        if g.xids_dirty:
            g.xids_dirty = False
            newest = sorted((ms, c) for c, (ms, _) in g.xids.items())[-XIDS_MAX:]
            g.xids_wire = [_xid_seen(code=c, ts=ms) if c != xids.RECOVERY
                           else _xid_seen(code=c, ts=ms, action=g.recovery_action)
                           for ms, c in newest]
        return g.xids_wire

    def xid(self, gpu: int, codes: list[int], t: float, wall_ms: int,
            recovery_action: int | None = None) -> list[str]:
        """XIDs ``codes`` on GPU ``gpu``, in that order (1 ms apart), each with what it does
        (``XID_KINDS``): the rank there dies (``app``, ``fatal``), the GPU falls off the bus
        (79), a DBE is counted (48), a row remap is pending (63) or failed (64), an XID 154
        states ``recovery_action``. Returns one phrase per code for the sim log."""
        g = self.gpus[gpu]
        b = self.binding
        out: list[str] = []
        unc = False
        for i, code in enumerate(codes):
            kind = XID_KINDS.get(code)
            if not g.present:
                out.append(f"{code} (gpu gone)")
                continue
            if code == xids.RECOVERY:
                g.recovery_action = recovery_action
            self._xid(g, code, t, wall_ms + i)
            effect = kind.effect if kind is not None else "none"
            unc |= code in UNCORRECTABLE_XIDS
            if code == 48:
                g.dbe_vol += 1
                g.dbe_agg += 1
                self.event("ecc", f"gpu{gpu}: volatile DBE {g.dbe_vol}", Severity.ERROR,
                           f"gpu{gpu}", wall_ms + i, dbe_vol=g.dbe_vol)
            elif code == 63:
                g.remap_pending = True
                if unc:
                    g.remap_unc += 1
                else:
                    g.remap_corr += 1
            elif code == 64:
                g.remap_failure = True
            if effect == "bus":
                g.present = False
                out.append(f"{code} (fell off the bus)")
            elif code == xids.RECOVERY and recovery_action is not None:
                said = xids.RECOVERY_ACTIONS[recovery_action]
                # A GPU the driver wants reset or rebooted cannot run its rank on (NVIDIA:
                # "terminate all GPU processes"): alone (no XID 95 before it to kill the rank)
                # the console failed the node while its job stepped on (a fault audit). After
                # a fatal XID the rank is dead already.
                if (recovery_action in xids.RECOVERY_DRAIN and b is not None and b.job.running
                        and g.crash is None):
                    g.crash = (b.job.job_id, f"CUDA error: unspecified launch failure "
                                             f"(Xid {code}: {said})")
                    said += ", rank killed"
                out.append(f"{code} ({said})")
            elif effect in ("app", "fatal") and kind is not None:
                running = b is not None and b.job.running
                if b is not None and running and g.crash is None:
                    g.crash = (b.job.job_id, f"CUDA error: {kind.cuda} (Xid {code})")
                out.append(f"{code} ({'rank killed' if running else 'no job'}"
                           f"{', GPU needs a reset' if effect == 'fatal' else ''})")
            else:
                out.append(str(code))
        return out

    def flap(self, port: int, count: int, down_s: float, every_s: float, t: float) -> None:
        self.ports[port].flap = Flap(t, count, down_s, max(every_s, down_s + 2.0))

    def link_down(self, port: int, phys: str, t: float, wall_ms: int, *,
                  switch: bool = False) -> None:
        p = self.ports[port]
        was_up = p.up_at(t)
        if switch:
            p.switch_down = True
        else:
            p.hard_down = phys
        if was_up:
            self._carrier_lost(p, t, wall_ms, own=not switch)

    def link_restore(self, port: int, t: float, wall_ms: int, *, switch: bool = False) -> None:
        p = self.ports[port]
        if switch:
            p.switch_down = False
        else:
            p.hard_down = None
        if p.up_at(t):
            self.event("ib_port_state", f"ib{port}: Gained carrier", Severity.INFO,
                       f"{p.dev}:1", wall_ms, state="ACTIVE", phys_state="LinkUp")

    def _carrier_lost(self, p: PortState, t: float, wall_ms: int, *, own: bool = True) -> None:
        # The HCA first tries to retrain (link_error_recovery), fails, and downs the link.
        p.bump("link_error_recovery", 1)
        p.bump("link_downed", 1)
        p.carrier_losses.append(t)
        if own:
            # A loss the switch caused does not keep the node from work once the switch is
            # back: the console calls such nodes fine ("switch recovered; do not drain") and
            # counts them free, while this scheduler left a requeued job pending on them for
            # the hour (a 3 a.m. drive).
            p.last_loss_t = t
        self.event("ib_port_state", f"ib{p.index}: lost carrier", Severity.ERROR, f"{p.dev}:1",
                   wall_ms, state="DOWN", phys_state="Polling")

    def symbol_storm(self, port: int, rate: float, bandwidth: float) -> None:
        p = self.ports[port]
        p.storm_rate, p.storm_bw = rate, bandwidth

    def xid79(self, gpu: int, t: float, wall_ms: int) -> None:
        self.xid(gpu, [79], t, wall_ms)

    def ecc_dbe(self, gpu: int, remap_failure: bool, t: float, wall_ms: int) -> None:
        g = self.gpus[gpu]
        g.dbe_vol += 1
        g.dbe_agg += 1
        g.remap_unc += 1
        self._xid(g, 48, t, wall_ms)
        self.event("ecc", f"gpu{gpu}: volatile DBE {g.dbe_vol}", Severity.ERROR, f"gpu{gpu}",
                   wall_ms, dbe_vol=g.dbe_vol)
        if remap_failure:
            g.remap_failure = True
            self._xid(g, 64, t, wall_ms + 1)
        else:
            g.remap_pending = True
            self._xid(g, 63, t, wall_ms + 1)

    def thermal(self, gpu: int, temp_c: float, clock_mhz: float) -> None:
        g = self.gpus[gpu]
        g.cooling_fault_c, g.throttle_clock = temp_c, clock_mhz

    def nvlink(self, gpu: int, links: int, t: float, wall_ms: int) -> None:
        g = self.gpus[gpu]
        g.nvlink_down = min(NVLINKS, links)
        g.nvlink_replay += self.rng.randint(5, 40)
        g.nvlink_recovery += self.rng.randint(1, 3)
        self._xid(g, 74, t, wall_ms)
        # The GPU at the other end of the NVSwitch path often logs 74 too (NVIDIA Xid catalog).
        peer = self.gpus[(gpu + 1) % N_GPUS]
        if peer.present:
            peer.nvlink_replay += self.rng.randint(1, 5)
            self._xid(peer, 74, t, wall_ms + 1)

    def pcie_replay(self, gpu: int, per_min: float) -> None:
        self.gpus[gpu].pcie_replay_per_min = per_min

    def power_cap(self, gpu: int, limit_w: float) -> None:
        self.gpus[gpu].power_limit_w = limit_w

    def clear(self, kind: str, gpu: int | None = None, port: int | None = None) -> None:
        """End a timed fault (``duration = …`` in a scenario)."""
        if kind == "thermal" and gpu is not None:
            self.gpus[gpu].cooling_fault_c = None
        elif kind == "symbol_storm" and port is not None:
            self.ports[port].storm_rate, self.ports[port].storm_bw = 0.0, 1.0
        elif kind == "pcie_replay" and gpu is not None:
            self.gpus[gpu].pcie_replay_per_min = 0.0
        elif kind == "power_cap" and gpu is not None:
            self.gpus[gpu].power_limit_w = POWER_LIMIT_W

    def die(self) -> None:
        self.up = False
        self.agent_alive = False

    def repair(self, t: float, wall_ms: int) -> None:
        """Field service + reboot: parts replaced, links reseated, volatile counters cleared."""
        rebooted = not self.up or any(not g.present or g.dbe_vol or g.remap_pending
                                      or g.remap_failure or g.nvlink_down
                                      or g.recovery_action in xids.RECOVERY_DRAIN
                                      for g in self.gpus)
        for g in self.gpus:
            g.present = True
            g.dbe_vol = 0
            g.remap_pending = g.remap_failure = False
            g.nvlink_down = 0
            g.cooling_fault_c = None
            g.pcie_replay_per_min = 0.0
            g.power_limit_w = POWER_LIMIT_W
            g.throttling = False
            g.xid_last = g.xid_last_ts = g.crash = g.recovery_action = None
            g.xids.clear()
            g.xids_dirty = True
            if rebooted:
                g.sbe_vol = 0
        for p in self.ports:
            p.hard_down = None
            p.flap = None
            p.storm_rate, p.storm_bw = 0.0, 1.0
            p.last_loss_t = None
            p.carrier_losses.clear()
            # Reseated links get their counters cleared (perfquery -R): one saturated by a
            # storm would otherwise count nothing ever again (rule N6).
            for name, value in p.errors.items():
                if value:
                    p.errors[name] = 0
        if rebooted:
            self.boot_id = str(uuid.UUID(int=self.rng.getrandbits(128)))
            self.uptime0_s = -t
        self.up = True
        self.event("repair", "node repaired" + (" and rebooted" if rebooted else ""),
                   Severity.INFO, "", wall_ms)

    # --- physics ---------------------------------------------------------------------------

    def sample(self, t: float, dt: float, t0: float, wall_ms: int) -> Reading:
        """The node as the collectors see it at sim time ``t``, ``dt`` after the last sample."""
        gpus, ports, host, job = self._values(t, dt, t0, wall_ms, True)
        return Reading(gpus=gpus, ib_ports=ports, host=host, job=job)

    def sample_columns(self, t: float, dt: float, t0: float, wall_ms: int) -> ColumnReading:
        """:meth:`sample` as columns: the rows' values transposed in C, the fields the
        builders leave at their defaults (the agent's windows) appended as shared columns."""
        gpus, ports, host, job = self._values(t, dt, t0, wall_ms, False)
        return ColumnReading(
            gpus=(list(zip(*gpus, strict=True))
                  + wire2.default_columns(fast.GpuSample, _GPU_GIVEN, len(gpus))) if gpus else [],
            ib_ports=(list(zip(*ports, strict=True))
                      + wire2.default_columns(fast.IbPortSample, _PORT_GIVEN, len(ports))
                      ) if ports else [],
            host=host, job=job)

    def _values(self, t: float, dt: float, t0: float, wall_ms: int,
                rows: bool) -> tuple[list[Any], list[Any], Any, Any]:
        """(GPUs, ports, host, job) of :meth:`sample`: the GPUs and ports as row Structs
        (``rows``), else as tuples of their leading fields' values (``_GPU_GIVEN``,
        ``_PORT_GIVEN``; :meth:`sample_columns`)."""
        rnd = self.rng.random
        b = self.binding
        job = b.job if b is not None else None
        running = job is not None and job.running
        stalled = running and job is not None and job.stalled
        if job is not None and running and not stalled:
            period = job.step_time_s
            p1 = job.progress + (t - job.t) / period
            p0 = max(job.progress_start, p1 - dt / period)
            phase = p1 - math.floor(p1)
            comm_frac = job.comm_frac
            comm_steps = (comm_amount(p1, comm_frac) - comm_amount(p0, comm_frac)) / comm_frac
        else:
            phase = comm_frac = comm_steps = 0.0
        gpus: list[Any] = []
        # The thermal step's decay is the same for every GPU of the sample.
        decay = 1.0 - math.exp(-dt / THERMAL_TAU_S)
        for g in self.gpus:
            # Most GPUs have logged no XID in 2 h: their (empty) list needs no look.
            xids = (g.xids_wire if not g.xids and not g.xids_dirty
                    else self._xids_wire(g, t))
            if not g.present:
                gone = _gpu_sample(index=g.index, present=False, xid_last=g.xid_last,
                                   xid_last_ts=g.xid_last_ts, xids=xids)
                gpus.append(gone if rows else astuple(gone)[:_GPU_GIVEN])
                continue
            if not running:
                activity = 0
            elif stalled:
                activity = 3  # NCCL spins in a collective waiting for a peer that never comes
            elif b is not None and job is not None and phase < job.compute_frac[b.slot][g.index]:
                activity = 1  # compute (forward/backward)
            else:
                activity = 2  # gradient all-reduce (or waiting at the barrier for a straggler)
            values = self._gpu(g, activity, dt, job.fb_mib[g.index] if job else 0, xids, decay)
            gpus.append(_gpu_sample(*values) if rows else values)
        # The same for every port: worked out once, not in each port's call.
        job_bytes = job.bytes_per_step * comm_steps if job else 0.0
        port_comm = comm_frac if running and not stalled else 0.0
        port = self._port
        ports = ([_port_sample(*port(p, t, t0, dt, job_bytes, port_comm, wall_ms))
                  for p in self.ports] if rows
                 else [port(p, t, t0, dt, job_bytes, port_comm, wall_ms) for p in self.ports])
        busy = running and not stalled
        host = _host(  # cpu_util_pct, mem_used_pct, uptime_s (field order, see _gpu)
            round(((16 if busy else 1.5) + 6 * rnd()) * 10) / 10,
            round(((38 if b is not None else 7) + 2 * rnd()) * 10) / 10,
            round((self.uptime0_s + t) * 10) / 10,
        )
        on_node = None
        if b is not None and job is not None:
            rank_ms = max(job.rank_time_s[b.slot]) * 1000 if job.rank_time_s else None
            on_node = _job(
                id=job.job_id, ranks_on_node=N_GPUS,
                step_time_ms=round(rank_ms, 1) if rank_ms is not None else None)
        return gpus, ports, host, on_node

    def _gpu(self, g: GpuState, activity: int, dt: float, fb_mib: int,
             xids: list[XidSeen], decay: float) -> tuple[Any, ...]:
        rnd = self.rng.random
        if activity == 0:
            util, mem_util, nominal = 0.0, 0.0, 68.0 + 6 * rnd()
        elif activity == 1:
            util, mem_util, nominal = 98.0 + 2 * rnd(), 35 + 20 * rnd(), 600 + 90 * rnd()
        elif activity == 2:
            util, mem_util, nominal = 92.0 + 8 * rnd(), 18 + 14 * rnd(), 430 + 90 * rnd()
        else:
            util, mem_util, nominal = 100.0, 1 + 3 * rnd(), 180 + 50 * rnd()
        # min(1.0, max(0.0, x)) without two builtin calls (the same value, -0.0 included).
        load = (nominal - 70.0) / 560.0
        if not 0.0 < load < 1.0:
            load = 1.0 if load > 0.0 else 0.0
        target = 41.0 + g.bias_c + (nominal - 70.0) * 0.035
        if g.cooling_fault_c is not None:
            # A failed fan/cold plate: the heat goes nowhere. Under any work (compute, or a
            # collective waiting for a straggler) the GPU settles near the fault's temperature;
            # idle, it stays warm. Scaling the heat by power instead let a node that waits for
            # another node's straggler peak at 84 °C under temp=91 and never throttle.
            if activity:
                hot = g.cooling_fault_c + 0.4 * g.bias_c - COOLING_LOAD_C * (1.0 - load)
                target = max(target, hot)
            else:
                target += (g.cooling_fault_c - 62.0) * 0.35
        g.temp_c += (target - g.temp_c) * decay
        reasons = CE_IDLE if activity == 0 else 0
        clock = SM_CLOCK_IDLE if activity == 0 else SM_CLOCK_MAX
        power = nominal
        g.throttling = activity != 0 and g.temp_c >= (THROTTLE_CLEAR_C if g.throttling
                                                       else THROTTLE_START_C)
        if g.throttling:
            reasons |= CE_SW_THERMAL
            clock = g.throttle_clock
            if g.temp_c >= HW_THERMAL_C:
                reasons |= CE_HW_THERMAL
                clock = max(300.0, g.throttle_clock - 150.0)
            power = nominal * (0.35 + 0.65 * clock / SM_CLOCK_MAX)
            g.thermal_violation_ns += int(dt * 1e9)
        limit = g.power_limit_w
        if not power < limit:  # min(limit, power), as cheap as a comparison
            if limit < POWER_LIMIT_W:
                # A limit lowered by software (``power_cap``): the driver lowers the SM clock
                # until the board draws its limit, and says so (DCGM's SW power cap, 0x4).
                reasons |= CE_SW_POWER_CAP
                # Whole MHz, as NVML reports it; the floor never raises a clock HW thermal
                # slowdown holds lower.
                clock = max(min(clock, POWER_CAP_CLOCK_MIN), float(round(clock * limit / power)))
                g.power_violation_ns += int(dt * 1e9)
            power = limit
        g.sm_clock = clock
        g.energy_j += power * dt
        if rnd() < SBE_PER_S * dt:
            g.sbe_vol += 1
            g.sbe_agg += 1
        if g.pcie_replay_per_min:
            g.pcie_carry += g.pcie_replay_per_min / 60.0 * dt * (0.6 + 0.8 * rnd())
            whole = int(g.pcie_carry)
            g.pcie_replay += whole
            g.pcie_carry -= whole
        elif rnd() < PCIE_REPLAY_PER_S * dt:
            g.pcie_replay += 1
        temp = g.temp_c + (rnd() - 0.5)
        # The error blocks rarely change: reuse the (immutable) objects until they do.
        key = (g.sbe_vol, g.dbe_vol, g.sbe_agg, g.dbe_agg, g.remap_corr, g.remap_unc,
               g.remap_pending, g.remap_failure, g.nvlink_down, g.nvlink_replay,
               g.nvlink_recovery)
        if g.blocks is None or g.blocks[0] != key:
            g.blocks = (key, _ecc(sbe_vol=g.sbe_vol, dbe_vol=g.dbe_vol, sbe_agg=g.sbe_agg,
                                  dbe_agg=g.dbe_agg, sram_unc_agg=0, sram_corr_agg=0),
                        _remap(correctable=g.remap_corr, uncorrectable=g.remap_unc,
                               pending=g.remap_pending, failure=g.remap_failure),
                        _nvlink(links_up=NVLINKS - g.nvlink_down, links_total=NVLINKS,
                                crc_flit=0, crc_data=0, replay=g.nvlink_replay,
                                recovery=g.nvlink_recovery))
        _, ecc, remap, nvlink = g.blocks
        # GpuSample's leading fields in order (checked at import, _check_field_order), made
        # into a row positionally (a 27-keyword call costs ~1.4 µs, a positional one ~0.16 µs)
        # or columns (sample_columns). round(x * 10) / 10 is round(x, 1) but for exact ties,
        # at a fifth of the cost.
        return (
            g.index,  # index
            True,  # present
            round(util * 10) / 10,  # util_pct
            round(mem_util * 10) / 10,  # mem_util_pct
            fb_mib,  # fb_used_mib
            GPU_MEM_MIB,  # fb_total_mib
            round(temp * 10) / 10,  # temp_c
            # HBM runs warmer than the die when idle (48 vs 41 °C) and cooler under load.
            round((temp + 7.0 - 12.0 * load + (rnd() - 0.5)) * 10) / 10,  # mem_temp_c
            round(power * 10) / 10,  # power_w
            limit,  # power_limit_w
            round(g.energy_j * 10) / 10,  # energy_j
            clock,  # sm_clock_mhz
            MEM_CLOCK,  # mem_clock_mhz
            SM_CLOCK_MAX,  # sm_clock_max_mhz
            reasons,  # clock_event_reasons
            g.thermal_violation_ns,  # thermal_violation_ns
            g.power_violation_ns,  # power_violation_ns
            "P0",  # pstate
            5,  # pcie_gen
            16,  # pcie_width
            g.pcie_replay,  # pcie_replay_total
            ecc,
            remap,  # row_remap
            nvlink,
            g.xid_last,
            g.xid_last_ts,
            xids,
        )

    def _port(self, p: PortState, t: float, t0: float, dt: float, job_bytes: float,
              comm_frac: float, wall_ms: int) -> tuple[Any, ...]:
        r = self.rng.random
        # Only moves made while this sample is built count in its ``d`` (as a diff of the
        # counters before and after would); recording them in bump() spares a copy and a
        # comparison of eleven counters per port per second.
        p.delta = {}
        if p.flap is not None:
            for when, up in p.flap.transitions(t0, t):
                if p.hard_down is not None or p.switch_down:
                    # Held down by its cable or its dead switch, the PHY polls for a peer: a
                    # flapping cable gains no carrier and loses none (each said so, and
                    # counted, gave a port behind a dead switch its own N4 and N5).
                    continue
                ms = wall_ms - int((t - when) * 1000)
                if up:
                    self.event("ib_port_state", f"ib{p.index}: Gained carrier", Severity.INFO,
                               f"{p.dev}:1", ms, state="INIT", phys_state="LinkUp")
                else:
                    self._carrier_lost(p, when, ms)
            if t > p.flap.end():
                p.flap = None
        while p.carrier_losses and p.carrier_losses[0] < t - 86400:
            p.carrier_losses.popleft()
        if p.hard_down is None and not p.switch_down and p.flap is None:
            state, phys = 4, 5  # link_at's answer for a healthy port, without the call
        else:
            state, phys = p.link_at(t)
        up = state == 4
        if up and job_bytes > 0:
            nbytes = job_bytes * (0.97 + 0.06 * r())
        elif phys == 5:
            nbytes = (IDLE_BPS[0] + (IDLE_BPS[1] - IDLE_BPS[0]) * r()) * dt
        else:
            nbytes = 0.0  # no link, counters freeze
        xw = int(nbytes / WORD)
        rw = int(xw * (0.98 + 0.04 * r())) if xw else 0
        p.xmit_words = (p.xmit_words + xw) % U64
        p.rcv_words = (p.rcv_words + rw) % U64
        p.xmit_pkts = (p.xmit_pkts + xw // 1024) % U64
        p.rcv_pkts = (p.rcv_pkts + rw // 1024) % U64
        if comm_frac and up:
            # Credits run out now and then in a collective: xmit_wait ticks (saturates in hours).
            p.bump("xmit_wait", int(comm_frac * dt * (5e4 + 2e5 * r())))
        if p.storm_rate > 0 and phys == 5:
            p.bump("symbol_error", int(p.storm_rate * dt * (0.7 + 0.6 * r())))
            p.bump("rcv_errors", int(p.storm_rate / 40.0 * dt * (0.5 + r())))
            p.bump("xmit_wait", int(2e6 * dt * r()))
            if r() < 0.04 * dt:
                p.bump("link_error_recovery", 1)
        elif phys == 5 and r() < SYMBOL_PER_S * dt:
            p.bump("symbol_error", 1)
        d = p.delta
        # IbPortSample's leading fields in order (as in _gpu); the error counters are
        # COUNTER_MAX's names in that order (_check_field_order), unpacked into names: a call
        # with ``*p.errors.values()`` in it took ~0.3 µs more per port.
        (e_sym, e_rec, e_down, e_rcv, e_phys, e_disc, e_integ, e_overrun, e_wait, e_rnr,
         e_ack) = p.errors.values()
        linked = phys == 5
        return (
            p.dev,
            1,  # port
            STATE_NAMES[state],  # state
            state,  # state_id
            PHYS_NAMES[phys],  # phys_state
            phys,  # phys_state_id
            NDR_RATE_GBPS if linked else DOWN_RATE_GBPS,  # rate_gbps
            "4X NDR" if linked else "4X SDR",  # width
            p.lid if state >= 2 else 0,  # lid
            1,  # sm_lid
            (p.xmit_words * WORD) % U64,  # xmit_bytes_total
            (p.rcv_words * WORD) % U64,  # rcv_bytes_total
            float(round(xw * WORD / dt)),  # xmit_Bps: round(x, 0), exactly, and cheaper
            float(round(rw * WORD / dt)),  # rcv_Bps
            p.xmit_pkts,  # xmit_pkts_total
            p.rcv_pkts,  # rcv_pkts_total
            e_sym, e_rec, e_down, e_rcv, e_phys, e_disc, e_integ, e_overrun, e_wait, e_rnr,
            e_ack,
            len(p.carrier_losses),  # carrier_losses_24h
            d,
        )


GPU_FIELDS = (
    "index", "present", "util_pct", "mem_util_pct", "fb_used_mib", "fb_total_mib", "temp_c",
    "mem_temp_c", "power_w", "power_limit_w", "energy_j", "sm_clock_mhz", "mem_clock_mhz",
    "sm_clock_max_mhz", "clock_event_reasons", "thermal_violation_ns", "power_violation_ns",
    "pstate", "pcie_gen", "pcie_width", "pcie_replay_total", "ecc", "row_remap", "nvlink",
    "xid_last", "xid_last_ts", "xids", "pcie_replay_1m", "throttled_last_ts",
    "throttled_last_reasons", "hot_last_ts",
)
PORT_FIELDS = (
    "dev", "port", "state", "state_id", "phys_state", "phys_state_id", "rate_gbps", "width",
    "lid", "sm_lid", "xmit_bytes_total", "rcv_bytes_total", "xmit_Bps", "rcv_Bps",
    "xmit_pkts_total", "rcv_pkts_total", *COUNTER_MAX, "carrier_losses_24h", "d", "errors_1h",
)
"""The field order :meth:`SimNode._gpu` and :meth:`SimNode._port` pass their values in."""
PORT_ERROR_COUNTERS = 11
"""How many error counters :meth:`SimNode._port` unpacks into names (COUNTER_MAX's)."""


def _check_field_order() -> None:
    """The positional sample builders depend on the samples' field order: fail at import, not
    with shifted values on the wire, if protocol/fast.py or messages.py ever reorders them."""
    from msgspec.structs import fields

    if len(COUNTER_MAX) != PORT_ERROR_COUNTERS:
        raise AssertionError(f"{len(COUNTER_MAX)} IB error counters, SimNode._port unpacks "
                             f"{PORT_ERROR_COUNTERS}")
    for cls, want in ((fast.GpuSample, GPU_FIELDS), (fast.IbPortSample, PORT_FIELDS),
                      (fast.HostSample, ("cpu_util_pct", "mem_used_pct", "uptime_s"))):
        have = tuple(f.name for f in fields(cls))
        if have != want:
            raise AssertionError(f"{cls.__name__} fields are {have}, agents/sim/node.py "
                                 f"builds {want}")
    for model, want in ((GpuSample, GPU_FIELDS), (IbPortSample, PORT_FIELDS),
                        (HostSample, ("cpu_util_pct", "mem_used_pct", "uptime_s"))):
        if tuple(model.model_fields) != want:
            raise AssertionError(f"{model.__name__} fields moved: agents/sim/node.py")


_check_field_order()

_GPU_GIVEN = wire2.GPU_FIELDS.index("xids") + 1
"""How many of GpuSample's leading fields :meth:`SimNode._gpu` gives (the rest are the agent's
windows, at their defaults here)."""
_PORT_GIVEN = wire2.PORT_FIELDS.index("d") + 1
"""How many of IbPortSample's leading fields :meth:`SimNode._port` gives."""
