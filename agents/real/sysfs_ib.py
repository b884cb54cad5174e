"""InfiniBand ports from ``/sys/class/infiniband`` (kernel ABI: sysfs-class-infiniband).

Layout (TELEMETRY.md §4): ``<root>/<dev>/{board_id,fw_ver,hca_type,node_guid,sys_image_guid}`` and
``<root>/<dev>/ports/<n>/{state,phys_state,rate,link_layer,lid,sm_lid}`` with ``counters/``
(IBTA PortCounters), ``counters_ext/`` (older mlx4 64-bit copies) and ``hw_counters/`` (mlx5).

Unit traps: ``port_{xmit,rcv}_data`` count 4-byte words (bytes = value x 4) and are 64-bit, so they
wrap at 2^64; error counters are narrow and saturate at all-ones instead. So do the data counters
of an HCA or kernel without the extended PortCounters: 32 bits, stuck at 2^32-1 once full, which
``counters_ext/`` (mlx4's 64-bit copies) is preferred to when present. A counter that reads
``N/A (no PMA)`` (iWARP devices) is unsupported, not zero.
"""

import os
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from msgspec.structs import replace as replace_struct

from fleetdeck.agents.real.common import U64_MOD, build_model
from fleetdeck.agents.source import EventDraft
from fleetdeck.protocol.fast import IbPortSample
from fleetdeck.protocol.messages import IbPortInventory, Severity

DEFAULT_ROOT = Path("/sys/class/infiniband")
WORD_BYTES = 4
GBPS_TO_BYTES_PER_S = 125_000_000

# sysfs counter file -> IbPortSample field.
COUNTER_FIELDS: dict[str, str] = {
    "symbol_error": "symbol_error",
    "link_error_recovery": "link_error_recovery",
    "link_downed": "link_downed",
    "port_rcv_errors": "rcv_errors",
    "port_rcv_remote_physical_errors": "rcv_remote_phys_errors",
    "port_xmit_discards": "xmit_discards",
    "local_link_integrity_errors": "local_link_integrity_errors",
    "excessive_buffer_overrun_errors": "excessive_buffer_overrun_errors",
    "port_xmit_wait": "xmit_wait",
}
HW_COUNTER_FIELDS: dict[str, str] = {
    "rnr_nak_retry_err": "rnr_nak_retry_err",
    "local_ack_timeout_err": "local_ack_timeout_err",
}
# Packet and data counters: the counters_ext/ 64-bit copy where the driver has one (mlx4), else
# counters/ (mlx4 port 2 in node_exporter's fixture has only the former for packets). Where
# counters_ext/ exists, counters/ is the 32-bit PortCounters that saturates (docs/real-nodes.md).
PACKET_FIELDS: dict[str, tuple[str, str]] = {
    "xmit_pkts_total": ("port_xmit_packets", "port_xmit_packets_64"),
    "rcv_pkts_total": ("port_rcv_packets", "port_rcv_packets_64"),
}
DATA_COUNTERS: dict[str, tuple[str, str]] = {
    "xmit": ("port_xmit_data", "port_xmit_data_64"),
    "rcv": ("port_rcv_data", "port_rcv_data_64"),
}
WIDE_COPIES: dict[str, str] = {
    "xmit_bytes_total": DATA_COUNTERS["xmit"][1], "rcv_bytes_total": DATA_COUNTERS["rcv"][1],
    **{fld: ext for fld, (_name, ext) in PACKET_FIELDS.items()}}
"""Each total that has a 64-bit counters_ext/ copy -> that copy's file."""
DELTA_FIELDS: tuple[str, ...] = (*COUNTER_FIELDS.values(), *HW_COUNTER_FIELDS.values())
SATURATED_32 = 2**32 - 1
"""A 32-bit PortCounters data counter that is full: the IBTA's counters stop there, not wrap."""

_STATE_RE = re.compile(r"^\s*(\d+)\s*:\s*(\S.*?)\s*$")
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\(([^)]*)\))?")


class Unsupported(Exception):
    """The file exists but the hardware has no such counter (``N/A (no PMA)``)."""


def parse_state(text: str) -> tuple[str, int]:
    """``"4: ACTIVE"`` -> ``("ACTIVE", 4)``; ``"5: LinkUp"`` -> ``("LinkUp", 5)``."""
    m = _STATE_RE.match(text)
    if not m:
        raise ValueError(f"unparsable state {text!r}")
    return m.group(2), int(m.group(1))


def parse_rate(text: str) -> tuple[float, str | None]:
    """``"400 Gb/sec (4X NDR)"`` -> ``(400.0, "4X NDR")``; ``"10 Gb/sec (4X)"`` -> (10.0, "4X")."""
    m = _RATE_RE.match(text)
    if not m:
        raise ValueError(f"unparsable rate {text!r}")
    width = m.group(2).strip() if m.group(2) else None
    return float(m.group(1)), width or None


def parse_hex(text: str) -> int:
    """``lid``/``sm_lid`` are printed ``0x%x``."""
    return int(text.strip(), 16)


def parse_counter(text: str) -> int:
    s = text.strip()
    if s.startswith("N/A"):
        raise Unsupported(s)
    return int(s, 10)


@dataclass
class IbPortRead:
    """Everything one port's directory said, raw (data counters still in 4-byte words)."""

    dev: str
    port: int
    state: str | None = None
    state_id: int | None = None
    phys_state: str | None = None
    phys_state_id: int | None = None
    rate_gbps: float | None = None
    width: str | None = None
    link_layer: str | None = None
    lid: int | None = None
    sm_lid: int | None = None
    counters: dict[str, int] = field(default_factory=dict)
    counters_ext: dict[str, int] = field(default_factory=dict)
    hw_counters: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.dev}:{self.port}"

    def counter(self, name: str, ext_name: str | None = None) -> int | None:
        if ext_name is not None and ext_name in self.counters_ext:
            return self.counters_ext[ext_name]
        return self.counters.get(name)

    def data_saturated(self, direction: str) -> bool:
        """A 32-bit data counter stuck full: ``counters/`` without a 64-bit copy, at 2^32-1.
        Its rate reads 0 however much moves (a real-node audit: an old HCA's busy port charted
        idle). A 64-bit one passing through that exact value costs one sample's rate."""
        name, ext = DATA_COUNTERS[direction]
        return ext not in self.counters_ext and self.counters.get(name) == SATURATED_32

    def data_words(self, direction: str) -> int | None:
        """``direction`` is ``"xmit"`` or ``"rcv"``."""
        name, ext = DATA_COUNTERS[direction]
        return self.counter(name, ext)

    def data_bytes(self, direction: str) -> int | None:
        words = self.data_words(direction)
        return None if words is None else (words * WORD_BYTES) % U64_MOD

    @property
    def rate_bytes_per_s(self) -> float | None:
        return None if self.rate_gbps is None else self.rate_gbps * GBPS_TO_BYTES_PER_S

    def totals(self) -> dict[str, int | None]:
        """Cumulative values keyed by IbPortSample field name."""
        out: dict[str, int | None] = {
            "xmit_bytes_total": self.data_bytes("xmit"),
            "rcv_bytes_total": self.data_bytes("rcv"),
        }
        for fld, (name, ext) in PACKET_FIELDS.items():
            out[fld] = self.counter(name, ext)
        for name, fld in COUNTER_FIELDS.items():
            out[fld] = self.counters.get(name)
        for name, fld in HW_COUNTER_FIELDS.items():
            out[fld] = self.hw_counters.get(name)
        return out


@dataclass
class IbDeviceRead:
    name: str
    board_id: str | None = None
    fw_ver: str | None = None
    hca_type: str | None = None
    node_guid: str | None = None
    sys_image_guid: str | None = None
    pci_addr: str | None = None
    """Basename of the ``device`` link, e.g. ``0101:00:00.0`` (None when absent)."""
    netdevs: dict[int, str] = field(default_factory=dict)
    """IPoIB netdev per port number, from ``device/net/<netdev>/dev_port``."""
    carrier_downs: dict[int, int] = field(default_factory=dict)
    """Per port number, its netdev's ``carrier_down_count`` (since boot; absent when unread)."""
    ports: list[IbPortRead] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _read_text(path: Path, errors: list[str], required: bool = True) -> str | None:
    try:
        # Some attributes (mlx4 link_layer) carry a trailing blank line.
        return path.read_text(errors="replace").strip()
    except FileNotFoundError:
        if required:
            errors.append(f"{path}: missing")
        return None
    except OSError as exc:
        # Reading a counter of a port that is going away can return EINVAL/ENODEV.
        errors.append(f"{path}: {exc.strerror or exc}")
        return None


def _read_counter_dir(path: Path, errors: list[str], required: bool = False) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        names = sorted(p.name for p in path.iterdir())
    except FileNotFoundError:
        if required:
            errors.append(f"{path}: missing")
        return out
    except OSError as exc:
        errors.append(f"{path}: {exc.strerror or exc}")
        return out
    for name in names:
        text = _read_text(path / name, errors)
        if text is None:
            continue
        try:
            out[name] = parse_counter(text)
        except Unsupported:
            continue
        except ValueError:
            errors.append(f"{path / name}: not a counter: {text[:40]!r}")
    return out


def read_port(dev: str, port_dir: Path) -> IbPortRead:
    port = IbPortRead(dev=dev, port=int(port_dir.name))
    errs = port.errors
    text = _read_text(port_dir / "state", errs)
    if text is not None:
        try:
            port.state, port.state_id = parse_state(text)
        except ValueError as exc:
            errs.append(f"{port_dir / 'state'}: {exc}")
    text = _read_text(port_dir / "phys_state", errs)
    if text is not None:
        try:
            port.phys_state, port.phys_state_id = parse_state(text)
        except ValueError as exc:
            errs.append(f"{port_dir / 'phys_state'}: {exc}")
    text = _read_text(port_dir / "rate", errs)
    if text is not None:
        try:
            port.rate_gbps, port.width = parse_rate(text)
        except ValueError as exc:
            errs.append(f"{port_dir / 'rate'}: {exc}")
    port.link_layer = _read_text(port_dir / "link_layer", errs) or None
    # lid/sm_lid do not exist on Ethernet (RoCE) ports: absent is normal there.
    for attr in ("lid", "sm_lid"):
        text = _read_text(port_dir / attr, errs, required=False)
        if text is not None:
            try:
                setattr(port, attr, parse_hex(text))
            except ValueError:
                errs.append(f"{port_dir / attr}: not hex: {text[:40]!r}")
    # counters/ (IBTA PortCounters) is every IB port's: without it the error counters
    # (N2-N4) read nothing, which was said nowhere (docs/real-nodes.md: a missing file is an
    # error). counters_ext/ and hw_counters/ are the driver's extras.
    port.counters = _read_counter_dir(port_dir / "counters", errs, required=True)
    port.counters_ext = _read_counter_dir(port_dir / "counters_ext", errs)
    port.hw_counters = _read_counter_dir(port_dir / "hw_counters", errs)
    return port


def _netdevs(dev_dir: Path, errors: list[str]) -> dict[int, str]:
    net = dev_dir / "device" / "net"
    out: dict[int, str] = {}
    try:
        names = sorted(p.name for p in net.iterdir())
    except OSError:
        return out
    for name in names:
        # dev_port is 0-based; a single-port HCA may lack it.
        text = _read_text(net / name / "dev_port", errors, required=False)
        try:
            port = int(text) + 1 if text else 1
        except ValueError:
            continue
        out.setdefault(port, name)
    return out


def read_device(dev_dir: Path) -> IbDeviceRead:
    dev = IbDeviceRead(name=dev_dir.name)
    for attr in ("board_id", "fw_ver", "hca_type", "node_guid", "sys_image_guid"):
        setattr(dev, attr, _read_text(dev_dir / attr, dev.errors, required=False))
    link = dev_dir / "device"
    if link.is_symlink() or link.is_dir():
        dev.pci_addr = os.path.basename(os.path.realpath(link))
    dev.netdevs = _netdevs(dev_dir, dev.errors)
    for port, name in dev.netdevs.items():
        count = _read_text(dev_dir / "device" / "net" / name / "carrier_down_count", dev.errors,
                           required=False)
        if count and count.isdigit():
            dev.carrier_downs[port] = int(count)
    ports_dir = dev_dir / "ports"
    try:
        port_dirs = sorted(
            (p for p in ports_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)
        )
    except OSError as exc:
        dev.errors.append(f"{ports_dir}: {exc.strerror or exc}")
        port_dirs = []
    dev.ports = [read_port(dev.name, p) for p in port_dirs]
    return dev


def read_devices(root: Path = DEFAULT_ROOT) -> tuple[list[IbDeviceRead], list[str]]:
    """Every HCA under ``root``, sorted by name; a missing root is an error, not an exception."""
    try:
        dev_dirs = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    except FileNotFoundError:
        return [], [f"{root}: missing (no InfiniBand driver loaded?)"]
    except OSError as exc:
        return [], [f"{root}: {exc.strerror or exc}"]
    return [read_device(d) for d in dev_dirs], []


def counter_delta(prev: int, cur: int, wraps_at: int | None = None) -> int:
    """Growth of a cumulative counter between two reads.

    Data counters are 64-bit and wrap; everything else saturates, so a smaller value means the
    counter was cleared (``perfquery -R``, driver reload) and the growth since then is ``cur``.
    A 64-bit wrap is only believed when the previous value was in the top half of the range:
    a reset is far likelier than 2^63 words moving in one interval.
    """
    if cur >= prev:
        return cur - prev
    if wraps_at is not None and prev >= wraps_at // 2:
        return cur + wraps_at - prev
    return cur


@dataclass
class _PortMemory:
    ts: float
    words: dict[str, int | None]
    totals: dict[str, int | None]
    state: tuple[str | None, str | None]
    wide: dict[str, bool] = field(default_factory=dict)
    """Per ``WIDE_COPIES`` total, whether it was read from the 64-bit copy."""


def infiniband_only(devices: list[IbDeviceRead]) -> list[IbDeviceRead]:
    """``devices`` with their InfiniBand ports only (a port that does not say its link layer
    counts as one). An Ethernet port of an RDMA device, such as Azure's accelerated-networking
    ``mlx5_an0`` on every ND H100 v5 node (40 Gb/s), is no port of the fabric: judged as one,
    it failed the node ("40 Gb/s, not 400") and made 7 HCAs and itself read as the 8 expected
    (a real-node audit; docs/real-nodes.md)."""
    out: list[IbDeviceRead] = []
    for d in devices:
        ports = [p for p in d.ports if (p.link_layer or "InfiniBand") == "InfiniBand"]
        if ports or not d.ports:
            out.append(d if len(ports) == len(d.ports) else replace(d, ports=ports))
    return out


CARRIER_WINDOW_S = 86_400.0
"""N5's window (aznhc ``check_ib_link_flapping``: losses in 24 h)."""
CARRIER_LOSSES_KEPT = 1024
"""At most this many losses remembered per port (a port bouncing every second all day)."""


class IbReader:
    """Reads ``root`` each interval; turns cumulative counters into rates and deltas. Only
    InfiniBand ports (``infiniband_only``)."""

    def __init__(
        self,
        root: Path = DEFAULT_ROOT,
        *,
        expected_rate_gbps: float | None = None,
        gpu_affinity: Mapping[str, int] | None = None,
    ) -> None:
        self.root = root
        self.expected_rate_gbps = expected_rate_gbps
        self.gpu_affinity: dict[str, int] = dict(gpu_affinity or {})
        self.devices: list[IbDeviceRead] = []
        self._memory: dict[str, _PortMemory] = {}
        self._known: dict[str, tuple[str, int]] = {}
        self._pci: dict[str, str] = {}
        """Per port ever seen, its HCA's PCI address: a port gone whose HCA is back under
        another name is that one, renamed (``_renamed``)."""
        self.renamed = False
        """A port was found renamed since the last inventory (``scan``): the birth names it
        by its old name."""
        self._events: list[EventDraft] = []
        self._carrier: dict[str, tuple[int, deque[float]]] = {}
        """Per port: its netdev's last ``carrier_down_count`` and when it grew (one entry per
        loss) within ``CARRIER_WINDOW_S``."""

    # --- inventory ------------------------------------------------------------------------

    def scan(self) -> tuple[list[IbDeviceRead], list[str]]:
        devices, errors = read_devices(self.root)
        devices = infiniband_only(devices)
        self.devices = devices
        self.renamed = False
        for d in devices:
            errors.extend(d.errors)
            for p in d.ports:
                self._known.setdefault(p.key, (p.dev, p.port))
                if d.pci_addr:
                    # Known from the inventory on: an HCA renamed before the agent's first
                    # read was never found renamed, and its old name stayed absent for good.
                    # Not overwritten: ``read`` compares it, an HCA now under another's name.
                    self._pci.setdefault(p.key, d.pci_addr)
        return devices, errors

    def inventory(self) -> tuple[list[IbPortInventory], list[str]]:
        devices, errors = self.scan()
        out: list[IbPortInventory] = []
        for d in devices:
            for p in d.ports:
                values = {
                    "dev": d.name,
                    "port": p.port,
                    "netdev": d.netdevs.get(p.port, ""),
                    "gpu_affinity": self.gpu_affinity.get(d.name),
                    "link_layer": p.link_layer or "",
                    "expected_rate_gbps": self.expected_rate_gbps,
                }
                try:
                    out.append(build_model(IbPortInventory, values, errors, p.key))
                except ValueError as exc:
                    errors.append(f"{p.key}: not reportable: {exc}")
        return out, errors

    def netdev_components(self) -> dict[str, str]:
        """IPoIB netdev -> ``"<dev>:<port>"`` (for kernel-log carrier events)."""
        return {
            net: f"{d.name}:{port}" for d in self.devices for port, net in d.netdevs.items()
        }

    def ports_by_pci(self) -> dict[str, list[str]]:
        """Each InfiniBand HCA's PCI address -> its ports (``"<dev>:<port>"``), for
        mlx5_core's kernel-log lines, which name the HCA by it."""
        return {d.pci_addr: [p.key for p in d.ports] for d in self.devices
                if d.pci_addr and d.ports}

    # --- samples --------------------------------------------------------------------------

    def read(self, now: float) -> tuple[list[IbPortSample], list[str]]:
        devices, errors = read_devices(self.root)
        devices = infiniband_only(devices)
        self.devices = devices or self.devices
        samples: list[IbPortSample] = []
        seen: set[str] = set()
        for d in devices:
            errors.extend(d.errors)
            for p in d.ports:
                seen.add(p.key)
                self._known.setdefault(p.key, (p.dev, p.port))
                if d.pci_addr:
                    was = self._pci.get(p.key)
                    if was is not None and was != d.pci_addr:
                        self._other_hca(p.key, was, d.pci_addr, now)
                    self._pci[p.key] = d.pci_addr
                errors.extend(p.errors)
                sample = self._sample(p, now, errors)
                count = d.carrier_downs.get(p.port)
                if sample is not None and count is not None:
                    sample = replace_struct(
                        sample, carrier_losses_24h=self._carrier_losses(p.key, count, now))
                if sample is not None:
                    samples.append(sample)
        renamed = self._renamed(devices, seen, now)
        for key, (dev, port) in sorted(self._known.items()):
            if key in seen or key in renamed:
                continue
            # A port that vanished from sysfs (HCA fell off the bus, driver unloaded) is
            # reported with every field absent rather than silently dropped.
            errors.append(f"{key}: no longer present under {self.root}")
            self._note_state(key, (None, None), now)
            # Remembered as absent (no counters) so its return is an event and the first
            # interval after it does not difference against pre-outage counters.
            self._memory[key] = _PortMemory(now, {}, {}, (None, None))
            samples.append(IbPortSample(dev=dev, port=port))
        return samples, errors

    def _renamed(self, devices: list[IbDeviceRead], seen: set[str], now: float) -> set[str]:
        """The ports gone whose HCA (its PCI address) is back under another name, forgotten
        under the old one. An HCA reset (devlink reload, a PCIe reset, a driver rebind)
        registers its device again, and the kernel may name it anew (``mlx5_3`` back as
        ``mlx5_8`` where another took the name meanwhile): reported absent under the old name
        for as long as the agent ran, it failed the node by N7 ("reseat or replace the HCA")
        with all its ports up (a real-node drill; docs/real-nodes.md)."""
        by_pci = {(d.pci_addr, p.port): p.key for d in devices if d.pci_addr for p in d.ports}
        out: set[str] = set()
        for key, (_dev, port) in list(self._known.items()):
            new = by_pci.get((self._pci.get(key, ""), port))
            if key in seen or new is None or new == key:
                continue
            out.add(key)
            del self._known[key]
            self._pci.pop(key, None)
            self._say_renamed(
                key, new, f"{key}: back as {new} (the same HCA, {self._pci[new]}, named anew "
                "by the kernel: an HCA reset?)", {"renamed_from": key, "pci_addr": self._pci[new]},
                now)
        return out

    def _other_hca(self, key: str, was: str, pci: str, now: float) -> None:
        """``key``'s name now belongs to another HCA (at ``pci``, not ``was``): two HCAs
        reset at once come back under each other's names (the kernel gives the lowest free
        index to whichever registers first). Its counters are the other HCA's: differenced
        against this one's last read, the other's symbol errors read as a burst in one
        interval; and the birth's netdev and GPU pairing of the name are the other's."""
        self._say_renamed(
            key, key, f"{key}: now the HCA at {pci}, not {was} (HCAs named anew by the kernel: "
            "an HCA reset?)", {"pci_addr": pci, "was_pci_addr": was}, now)

    def _say_renamed(self, key: str, component: str, message: str,
                     data: dict[str, bool | int | float | str | None], now: float) -> None:
        """``key``'s counters and carrier history forgotten (they were another name's, or
        another HCA's), the rename said as a WARN event on ``component``, and a birth owed."""
        self.renamed = True
        self._memory.pop(key, None)
        self._carrier.pop(key, None)
        self._events.append(EventDraft(
            kind="ib_port_state", message=message, severity=Severity.WARN,
            component=component, data=data, ts_ms=int(now * 1000)))

    def take_events(self) -> list[EventDraft]:
        events, self._events = self._events, []
        return events

    def _carrier_losses(self, key: str, count: int, now: float) -> int:
        """Carrier losses of the port's netdev in the last 24 h, from the growth of its
        ``carrier_down_count``: the kernel counts them whoever logs them (NetworkManager
        images never log "ibN: lost carrier", and N5 never fired there: a real-node audit).
        Counted from the agent's start: the count since boot includes the driver's own
        carrier-off at probe."""
        last = self._carrier.get(key)
        if last is None or count < last[0]:  # first read, or the driver reloaded
            times: deque[float] = last[1] if last is not None else deque()
        else:
            times = last[1]
            times.extend([now] * min(count - last[0], CARRIER_LOSSES_KEPT))
        while times and (times[0] < now - CARRIER_WINDOW_S or len(times) > CARRIER_LOSSES_KEPT):
            times.popleft()
        self._carrier[key] = (count, times)
        return len(times)

    def _sample(self, p: IbPortRead, now: float, errors: list[str]) -> IbPortSample | None:
        totals = p.totals()
        words = {d: p.data_words(d) for d in DATA_COUNTERS}
        wide = {fld: ext in p.counters_ext for fld, ext in WIDE_COPIES.items()}
        prev = self._memory.get(p.key)
        values: dict[str, object] = {
            "dev": p.dev,
            "port": p.port,
            "state": p.state,
            "state_id": p.state_id,
            "phys_state": p.phys_state,
            "phys_state_id": p.phys_state_id,
            "rate_gbps": p.rate_gbps,
            "width": p.width,
            "lid": p.lid,
            "sm_lid": p.sm_lid,
            **totals,
        }
        if prev is not None:
            for fld, was_wide in prev.wide.items():
                if was_wide and not wide.get(fld):
                    # The 64-bit copy unread this once (an mlx4 PMA query can fail): the 32-bit
                    # counter instead dropped the exported total by terabytes, and back up the
                    # next read, which Prometheus' rate() reads as a reset and a spike.
                    values[fld] = None
        saturated = [DATA_COUNTERS[d][0] for d in DATA_COUNTERS if p.data_saturated(d)]
        if saturated:
            # Said, and its rate left out: a rate of 0 read as an idle port in the charts.
            errors.append(f"{p.key}: counter saturated: {' and '.join(saturated)} stuck at "
                          "2^32-1 (32-bit, no 64-bit counters_ext/): its traffic is not "
                          "measured, not zero")
        if prev is not None and now > prev.ts:
            dt = now - prev.ts
            for direction, w in words.items():
                pw = prev.words.get(direction)
                # Two reads of different counters (a counters_ext/ file unread once, or come
                # with a driver reload) are no interval: 64-bit minus 32-bit read terabytes a
                # second, 32-bit after 64-bit a reset.
                if (w is not None and pw is not None and not p.data_saturated(direction)
                        and prev.wide.get(f"{direction}_bytes_total")
                        == wide[f"{direction}_bytes_total"]):
                    moved = counter_delta(pw, w, U64_MOD)
                    values[f"{direction}_Bps"] = round(moved * WORD_BYTES / dt, 1)
            deltas: dict[str, int] = {}
            for fld in DELTA_FIELDS:
                cur, old = totals.get(fld), prev.totals.get(fld)
                if cur is not None and old is not None:
                    deltas[fld] = counter_delta(old, cur)
            values["d"] = deltas
        self._note_state(p.key, (p.state, p.phys_state), now)
        self._memory[p.key] = _PortMemory(now, words, totals, (p.state, p.phys_state), wide)
        clean = {k: v for k, v in values.items() if v is not None}
        try:
            return build_model(IbPortSample, clean, errors, p.key)
        except ValueError as exc:
            errors.append(f"{p.key}: not reportable: {exc}")
            return None

    def _note_state(self, key: str, state: tuple[str | None, str | None], now: float) -> None:
        prev = self._memory.get(key)
        if prev is None or prev.state == state:
            return
        healthy = state == ("ACTIVE", "LinkUp")
        self._events.append(
            EventDraft(
                kind="ib_port_state",
                message=f"{key}: {_fmt_state(prev.state)} -> {_fmt_state(state)}",
                severity=Severity.INFO if healthy else Severity.ERROR,
                component=key,
                data={
                    "state": state[0],
                    "phys_state": state[1],
                    "prev_state": prev.state[0],
                    "prev_phys_state": prev.state[1],
                },
                ts_ms=int(now * 1000),
            )
        )


def _fmt_state(state: tuple[str | None, str | None]) -> str:
    if state == (None, None):
        return "absent"
    return f"{state[0] or '?'}/{state[1] or '?'}"
