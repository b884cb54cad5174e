"""What an agent reads telemetry from: the contract between the agent runtime and a source.

A source knows the hardware (simulated or real); the agent knows MQTT. Sources never publish.
"""

from dataclasses import dataclass, field
from typing import Any, Protocol

from fleetdeck.protocol.fast import GpuSample, HostSample, IbPortSample, JobOnNode
from fleetdeck.protocol.messages import (
    DrainMode,
    DrainState,
    GpuInventory,
    IbPortInventory,
    Scalar,
    Severity,
    Topology,
)


@dataclass(frozen=True)
class Inventory:
    sku: str
    gpus: list[GpuInventory]
    ib_ports: list[IbPortInventory]
    topology: Topology = field(default_factory=Topology)
    driver_version: str | None = None
    cuda_version: str | None = None
    boot_id: str = ""
    errors: list[str] = field(default_factory=list)
    gpus_expected: int = 0
    """What the node should have (its SKU; 0: as many as found): ``Birth.gpus_expected``."""
    ib_ports_expected: int = 0


@dataclass
class Reading:
    gpus: list[GpuSample]
    ib_ports: list[IbPortSample]
    host: HostSample = field(default_factory=HostSample)
    job: JobOnNode | None = None
    errors: list[str] = field(default_factory=list)
    inventory_changed: bool = False
    """The hardware's names changed since the last inventory (an HCA back under a new name):
    the agent sends a new birth, whose inventory the console judges the samples against."""


@dataclass
class ColumnReading:
    """A :class:`Reading` whose GPUs and IB ports come as columns, one tuple per field of
    ``GpuSample``/``IbPortSample`` in field order (``wire2.Columns``): what a source that makes
    its samples' values itself hands the agent's v2 encoder without row Structs (the
    simulator's ``read_columns``)."""

    gpus: list[tuple[Any, ...]]
    ib_ports: list[tuple[Any, ...]]
    host: HostSample = field(default_factory=HostSample)
    job: JobOnNode | None = None
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class EventDraft:
    """An edge-triggered observation; the agent gives it an id and sequence number."""

    kind: str
    message: str
    severity: Severity = Severity.INFO
    component: str = ""
    data: dict[str, Scalar] = field(default_factory=dict)
    ts_ms: int | None = None


class Source(Protocol):
    name: str
    """Shown in the birth as ``source``: 'sim', 'sysfs', 'nvml', 'sysfs+nvml'…"""
    mode: str
    """'sim' or 'real'."""

    def inventory(self) -> Inventory: ...

    def read(self, now: float) -> Reading:
        """Sample the hardware at wall-clock time ``now`` (seconds)."""
        ...

    def take_events(self) -> list[EventDraft]:
        """Events observed since the last call, oldest first."""
        ...

    def busy(self) -> bool:
        """True while work (a job rank) runs here: a drain then waits (DRAINING)."""
        ...

    def on_drain(self, state: DrainState, mode: DrainMode) -> None:
        """Tell the work manager (simulated scheduler, or nothing on real nodes) about a drain."""
        ...
