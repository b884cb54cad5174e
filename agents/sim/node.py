"""One simulated ND96isr H100 v5 node: 8 × H100 SXM 80 GB and 8 × ConnectX-7 NDR ports.

Baselines come from ../shared/TELEMETRY.md §5 (real H100 captures): idle ~70 W / 41 °C / 345 MHz,
training 450-700 W / 55-80 °C / 1980 MHz, HBM 2619 MHz, 400 Gb/s NDR ports whose data counters
count 4-byte words and wrap at 2^64, error counters that saturate at their IBTA widths.
"""

import random
import uuid
import zlib
from dataclasses import dataclass, field

from agents.source import EventDraft, Inventory, Reading
from fleetdeck.protocol.messages import (
    DrainMode,
    DrainState,
    Ecc,
    GpuInventory,
    GpuSample,
    HostSample,
    IbPortInventory,
    IbPortSample,
    NvLink,
    RowRemap,
    Topology,
)

SKU = "ND96isr_H100_v5"
GPU_NAME = "NVIDIA H100 80GB HBM3"
GPU_MEM_MIB = 81559
N_GPUS = 8
N_PORTS = 8
POWER_LIMIT_W = 700.0
SM_CLOCK_MAX = 1980.0
SM_CLOCK_IDLE = 345.0
MEM_CLOCK = 2619.0
NVLINKS = 18
NDR_RATE_GBPS = 400.0
WORD = 4
U64_WRAP = 2**64
# GPU bus ids on ND H100 v5 (aznhc ndv5-topo.xml): GPU k shares a PCIe switch with mlx5_ibk.
GPU_BUS = ["0001", "0002", "0003", "0008", "0009", "000a", "000b", "000c"]

# IBTA PortCounters widths: error counters saturate at all-ones, they never wrap.
COUNTER_MAX = {
    "symbol_error": 0xFFFF,
    "link_error_recovery": 0xFF,
    "link_downed": 0xFF,
    "rcv_errors": 0xFFFF,
    "rcv_remote_phys_errors": 0xFFFF,
    "xmit_discards": 0xFFFF,
    "local_link_integrity_errors": 0xF,
    "excessive_buffer_overrun_errors": 0xF,
    "xmit_wait": 0xFFFFFFFF,
}


def stable_seed(*parts: object) -> int:
    """A seed that is the same in every process (``hash()`` of a str is not)."""
    return zlib.crc32("\x1f".join(str(p) for p in parts).encode())


@dataclass
class GpuState:
    index: int
    uuid: str
    temp_c: float = 41.0
    energy_j: float = 0.0
    ecc_sbe_agg: int = 0
    pcie_replay: int = 0
    present: bool = True


@dataclass
class PortState:
    dev: str
    gpu: int
    xmit_words: int = 0
    rcv_words: int = 0
    xmit_pkts: int = 0
    rcv_pkts: int = 0
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_MAX, 0))


class SimNode:
    """A plausible healthy node. ``load`` (0 idle … 1 training) is set by whoever runs work here."""

    name = "sim"
    mode = "sim"

    def __init__(self, node_id: str, seed: int = 0, topology: Topology | None = None) -> None:
        self.node_id = node_id
        self.rng = random.Random(stable_seed(seed, node_id))
        self.topology = topology or Topology()
        self.load = 0.0
        self.boot_id = str(uuid.UUID(int=self.rng.getrandbits(128)))
        self.gpus = [
            GpuState(i, f"GPU-{uuid.UUID(int=self.rng.getrandbits(128))}") for i in range(N_GPUS)
        ]
        self.ports = [PortState(f"mlx5_ib{i}", i) for i in range(N_PORTS)]
        self._last_read: float | None = None
        self._events: list[EventDraft] = []
        self.drain_state = DrainState.NONE

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
                    dev=p.dev, port=1, netdev=f"ib{p.gpu}", gpu_affinity=p.gpu,
                    expected_rate_gbps=NDR_RATE_GBPS,
                )
                for p in self.ports
            ],
            topology=self.topology,
            driver_version="590.48.01",
            cuda_version="13.1",
            boot_id=self.boot_id,
        )

    def read(self, now: float) -> Reading:
        dt = 1.0 if self._last_read is None else max(0.001, now - self._last_read)
        self._last_read = now
        gpus = [self._gpu_sample(g, dt) for g in self.gpus]
        ports = [self._port_sample(p, dt) for p in self.ports]
        host = HostSample(
            cpu_util_pct=round(3 + 20 * self.load + self.rng.uniform(0, 2), 1),
            mem_used_pct=round(8 + 30 * self.load, 1),
        )
        return Reading(gpus=gpus, ib_ports=ports, host=host)

    def take_events(self) -> list[EventDraft]:
        events, self._events = self._events, []
        return events

    def busy(self) -> bool:
        return self.load > 0

    def on_drain(self, state: DrainState, mode: DrainMode) -> None:
        self.drain_state = state

    # --- physics ---------------------------------------------------------------------------

    def _gpu_sample(self, g: GpuState, dt: float) -> GpuSample:
        rng = self.rng
        if not g.present:
            return GpuSample(index=g.index, present=False)
        training = self.load > 0
        util = rng.uniform(95, 100) if training else 0.0
        power = rng.uniform(450, 690) if training else rng.uniform(68, 74)
        target_temp = 41 + (power - 70) * 0.035
        g.temp_c += (target_temp - g.temp_c) * min(1.0, dt / 20)
        g.energy_j += power * dt
        if rng.random() < 0.002:
            g.ecc_sbe_agg += 1
        return GpuSample(
            index=g.index,
            util_pct=round(util, 1),
            mem_util_pct=round(util * 0.45, 1),
            fb_used_mib=int(rng.uniform(61440, 79872)) if training else 0,
            fb_total_mib=GPU_MEM_MIB,
            temp_c=round(g.temp_c + rng.uniform(-0.5, 0.5), 1),
            mem_temp_c=round(g.temp_c + 5 + rng.uniform(-1, 1), 1),
            power_w=round(power, 1),
            power_limit_w=POWER_LIMIT_W,
            energy_j=round(g.energy_j, 1),
            sm_clock_mhz=SM_CLOCK_MAX if training else SM_CLOCK_IDLE,
            mem_clock_mhz=MEM_CLOCK,
            sm_clock_max_mhz=SM_CLOCK_MAX,
            clock_event_reasons=0x0 if training else 0x1,
            thermal_violation_ns=0,
            power_violation_ns=0,
            pstate="P0",
            pcie_gen=5,
            pcie_width=16,
            pcie_replay_total=g.pcie_replay,
            ecc=Ecc(sbe_vol=0, dbe_vol=0, sbe_agg=g.ecc_sbe_agg, dbe_agg=0, sram_unc_agg=0),
            row_remap=RowRemap(correctable=0, uncorrectable=0, pending=False, failure=False),
            nvlink=NvLink(
                links_up=NVLINKS, links_total=NVLINKS, crc_flit=0, crc_data=0, replay=0,
                recovery=0,
            ),
        )

    def _port_sample(self, p: PortState, dt: float) -> IbPortSample:
        rng = self.rng
        training = self.load > 0
        bps = rng.uniform(5e9, 45e9) if training else rng.uniform(1e3, 5e4)
        words = int(bps * dt / WORD)
        p.xmit_words = (p.xmit_words + words) % U64_WRAP
        p.rcv_words = (p.rcv_words + int(words * rng.uniform(0.97, 1.03))) % U64_WRAP
        p.xmit_pkts += words // 1024
        p.rcv_pkts += words // 1024
        return IbPortSample(
            dev=p.dev,
            port=1,
            state="ACTIVE",
            state_id=4,
            phys_state="LinkUp",
            phys_state_id=5,
            rate_gbps=NDR_RATE_GBPS,
            width="4X NDR",
            xmit_bytes_total=(p.xmit_words * WORD) % U64_WRAP,
            rcv_bytes_total=(p.rcv_words * WORD) % U64_WRAP,
            xmit_Bps=round(bps, 0),
            rcv_Bps=round(bps, 0),
            xmit_pkts_total=p.xmit_pkts,
            rcv_pkts_total=p.rcv_pkts,
            **p.errors,
        )
