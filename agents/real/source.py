"""``RealSource``: the Source protocol over real hardware, composed from the readers.

``--source`` names the readers joined by ``+``: ``sysfs`` (InfiniBand), ``nvml`` or ``nvsmi``
(GPUs), e.g. ``sysfs+nvml``. A reader that fails never takes the agent down: its fields are
absent, the reason goes into ``Reading.errors`` (and the log, once per change).
"""

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from fleetdeck.agents.offloop import Answer, Overdue, Pending, Watched, start_daemon
from fleetdeck.agents.real.common import (
    ChangeLogger,
    GpuInventoryResult,
    GpuReader,
    build_model,
    cap_errors,
    normalize_pci,
)
from fleetdeck.agents.real.kernel_log import KernelLogMonitor, LineFollower, make_follower
from fleetdeck.agents.real.nvml import NvmlReader
from fleetdeck.agents.real.nvsmi import NvsmiReader
from fleetdeck.agents.real.sysfs_ib import IbDeviceRead, IbReader, infiniband_only
from fleetdeck.agents.source import EventDraft, Inventory, Reading, Source
from fleetdeck.protocol.fast import GpuSample, HostSample, IbPortSample
from fleetdeck.protocol.messages import (
    DrainMode,
    DrainState,
    GpuInventory,
    IbPortInventory,
    Topology,
)

log = logging.getLogger("fleetdeck.agent.real")
T = TypeVar("T")

READERS = ("sysfs", "nvml", "nvsmi")
GPU_READERS = ("nvml", "nvsmi")
DEFAULT_SYSFS = Path("/sys")
DEFAULT_PROC = Path("/proc")


def parse_kind(kind: str) -> tuple[str, ...]:
    """``"sysfs+nvml"`` -> ``("sysfs", "nvml")``; ValueError on unknown or conflicting parts."""
    parts = tuple(p.strip() for p in kind.split("+") if p.strip())
    if not parts:
        raise ValueError("empty --source")
    unknown = [p for p in parts if p not in READERS]
    if unknown:
        # "sim" too: the README's agents run it, and it was left out of the choices (a
        # newcomer's run); it stands alone, not joined to real readers.
        raise ValueError(f"unknown reader(s) {', '.join(unknown)}; give sim (a simulated node), "
                         f"or real readers from {', '.join(READERS)} joined by '+'")
    if len(set(parts) & set(GPU_READERS)) > 1:
        raise ValueError("choose one GPU reader: nvml or nvsmi")
    if len(set(parts)) != len(parts):
        raise ValueError(f"reader listed twice in {kind!r}")
    return parts


def ib_class_dir(sysfs_root: Path) -> Path:
    """``sysfs_root`` is the sysfs mount (``/sys``, like node_exporter's ``--path.sysfs``); a path
    that already ends in ``infiniband`` is taken as the class directory itself."""
    return sysfs_root if sysfs_root.name == "infiniband" else sysfs_root / "class" / "infiniband"


def pair_by_bus_order(devices: list[IbDeviceRead], gpu_bus_ids: dict[int, str]) -> dict[str, int]:
    """HCA -> GPU index, pairing both sorted by PCI address.

    On ND H100 v5 each GPU shares a PCIe switch with one HCA and both enumerate in the same order
    (aznhc ndv5-topo.xml); mapping by bus order is an assumption (TELEMETRY.md §5), so it is only
    applied when the counts match. Ethernet-only devices (Azure's accelerated-networking
    ``mlx5_an0``) are left out of the pairing.
    """
    ib = [d for d in infiniband_only(devices) if d.pci_addr and d.ports]
    if not ib or len(ib) != len(gpu_bus_ids):
        return {}
    hcas = sorted(ib, key=lambda d: normalize_pci(d.pci_addr or ""))
    gpus = sorted(gpu_bus_ids, key=lambda i: normalize_pci(gpu_bus_ids[i]))
    return {d.name: g for d, g in zip(hcas, gpus, strict=True)}


@dataclass
class _CpuTimes:
    busy: int
    total: int


class HostReader:
    """cpu / memory / uptime from /proc; cheap enough for every interval."""

    def __init__(self, proc_root: Path = DEFAULT_PROC) -> None:
        self.proc = proc_root
        self._cpu: _CpuTimes | None = None

    def read(self, errors: list[str]) -> HostSample:
        values: dict[str, float] = {}
        try:
            fields = (self.proc / "stat").read_text().splitlines()[0].split()[1:]
            ticks = [int(x) for x in fields]
            idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
            cur = _CpuTimes(busy=sum(ticks) - idle, total=sum(ticks))
            prev, self._cpu = self._cpu, cur
            if prev is not None and cur.total > prev.total:
                pct = 100 * (cur.busy - prev.busy) / (cur.total - prev.total)
                values["cpu_util_pct"] = round(min(100.0, max(0.0, pct)), 1)
        except (OSError, ValueError, IndexError) as exc:
            errors.append(f"{self.proc}/stat: {exc}")
        try:
            mem = {}
            for line in (self.proc / "meminfo").read_text().splitlines():
                key, _, rest = line.partition(":")
                mem[key] = int(rest.split()[0])
            total, avail = mem["MemTotal"], mem["MemAvailable"]
            if total > 0:
                values["mem_used_pct"] = round(100 * (total - avail) / total, 1)
        except (OSError, ValueError, IndexError, KeyError) as exc:
            errors.append(f"{self.proc}/meminfo: {exc}")
        try:
            values["uptime_s"] = float((self.proc / "uptime").read_text().split()[0])
        except (OSError, ValueError, IndexError) as exc:
            errors.append(f"{self.proc}/uptime: {exc}")
        # Validated like a v1 console would (a fast Struct's constructor checks nothing).
        return build_model(HostSample, values, errors, "host")

    def boot_id(self) -> str:
        try:
            return (self.proc / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
        except OSError:
            return ""


GPU_HUNG_S = 5.0
"""How long a GPU reader's call may go unanswered before its GPUs are declared unread (hung),
whatever the interval (docs/reliability.md, "A slow GPU reader is not a hung one").
nvidia-smi on a loaded eight-GPU node commonly answers in 0.3-1.5 s (docs/real-nodes.md): this
is three times the slowest of those, so a slow reader is never called hung, and half
nvidia-smi's own 10 s timeout, so the console hears "hung" before the reader gives up and kills
it. A sample waits for the reader only ``gpu_deadline_s`` (0.75 of the interval); past that it
publishes the last figures that came in time, marked with their age, while their read answered
less than this ago (older, its GPUs are present without figures: a slow reader's GPUs are never
unread). A hung reader is said at the first sample once its call is this old: within this plus
one interval of the hang."""

CLOSE_WAIT_S = 5.0
"""How long ``close`` waits for the readers' own: ``nvmlShutdown`` on a wedged driver blocks
in the kernel for ever (as every NVML call then does), and systemd kills an agent that has
not exited 20 s after its stop (agents/systemd/fleetdeck-agent.service, ``TimeoutStopSec``)."""

GPU_HUNG = ("no answer for {s:.0f} s (GPU driver hung, or a GPU off the bus?); "
            "its GPUs are unread")
"""What a sample says while its GPU reader overruns (``RealSource(gpu_deadline_s=…)``): the
console quotes it in G1, "0/8 GPUs visible; the agent's GPU reader says: nvsmi: no answer for
42 s …" (console/health.py, ``reader_error``)."""

GPU_SLOW = "{what}; its GPUs count as unread only after {hung:g} s without an answer"
"""What a sample says when its GPU figures are not of this sample's read: the reader is slower
than a sample waits (``RealSource(gpu_deadline_s=…)``), not hung (``GPU_HUNG_S``)."""


class RealSource:
    """Source over real readers. ``busy()`` is always False and drains are not acted on: real
    scheduler (Slurm) integration is out of scope, so a drain completes at once.

    ``read`` and ``inventory`` block (nvidia-smi, NVML, sysfs): the agent calls them off its
    event loop (``blocking``). With ``gpu_deadline_s`` the GPU reader runs on a thread of its
    own and is waited for at most that long (agents/offloop.py): while it hangs the samples
    still carry the InfiniBand ports and the host, and say how long the GPU reader has hung."""

    mode = "real"
    blocking = True

    def __init__(
        self,
        name: str,
        *,
        ib: IbReader | None = None,
        gpu: GpuReader | None = None,
        kernel_log: LineFollower | None = None,
        host: HostReader | None = None,
        sku: str = "",
        topology: Topology | None = None,
        pair_gpus: bool = True,
        gpus_expected: int = 0,
        ib_ports_expected: int = 0,
        gpu_deadline_s: float | None = None,
        gpu_hung_s: float = GPU_HUNG_S,
    ) -> None:
        self.gpus_expected = gpus_expected
        self.ib_ports_expected = ib_ports_expected
        self.name = name
        self.ib = ib
        self.gpu = gpu
        self.follower = kernel_log
        self.monitor = KernelLogMonitor() if kernel_log is not None else None
        self.host = host or HostReader()
        self.sku = sku
        self.topology = topology or Topology()
        self.pair_gpus = pair_gpus
        self._inventory: Inventory | None = None
        self._gpu_inv = GpuInventoryResult(gpus=[])
        self._gpus_lost: dict[int, GpuInventory] = {}
        """GPUs an earlier inventory of this agent found that a later one did not: lost since
        (``_keep_lost``)."""
        self._reindex: dict[int, int] = {}
        """The GPU reader's index -> the agent's, where they differ (``_renumbered``)."""
        self._changes = ChangeLogger(log)
        self._gpu_calls = (Watched(gpu.name, gpu_deadline_s, hung_after_s=gpu_hung_s)
                           if gpu is not None and gpu_deadline_s is not None else None)
        self._gpu_last: Answer[tuple[list[GpuSample], list[str]]] | None = None
        """The GPU reader's last read that answered in time: a sample whose own read is
        slow (not hung) publishes it, with its age (``GPU_SLOW``), while it answered less than
        ``gpu_hung_s`` ago and neither an inventory nor a hang came since (``_fresh``)."""
        self._gpu_inv_answered = False
        """A GPU inventory answered (in time): until then an inventory waits for one up to
        ``gpu_hung_s``, not a sample's wait. A first birth without its GPUs left the kernel
        log's Xids unmapped, and at ``--interval 1`` nvidia-smi never answered in 0.75 s."""
        self._lock = threading.Lock()
        """``read`` and ``inventory`` one at a time: the agent runs them on threads, and a
        rebirth's inventory may come while a sample is read."""
        self._step: tuple[str, float] | None = None
        """The reader call in flight under ``_lock`` and since when (monotonic): ``stuck``."""

    def stuck(self) -> str:
        """The reader call in flight and for how long, e.g. ``sysfs read (12 s)``; '' when
        none. A call that hangs keeps ``_lock``, so a rebirth's inventory waits behind it: the
        agent gives up at its deadline and says in the birth which reader holds it up
        (agents/agent.py, ``_inventory``)."""
        step = self._step
        if step is None:
            return ""
        return f"{step[0]} ({time.monotonic() - step[1]:.0f} s)"

    # --- Source protocol ------------------------------------------------------------------

    def inventory(self) -> Inventory:
        with self._lock:
            return self._take_inventory()

    def _gpu_call(self, fn: Callable[[], T], key: str, wait_s: float | None = None) -> T:
        return fn() if self._gpu_calls is None else self._gpu_calls.ask(fn, key, wait_s).value

    def _gpu_slow(self, what: str) -> str:
        calls = self._gpu_calls
        assert calls is not None  # only a watched reader is slow
        return GPU_SLOW.format(what=what, hung=calls.hung_after_s)

    def _take_inventory(self) -> Inventory:
        errors: list[str] = []
        gpu_inv = GpuInventoryResult(gpus=[])
        # A read from before this inventory is not published after it: taken at a reconnect,
        # it follows an outage, and a GPU lost meanwhile read present with its old figures
        # (docs/reliability.md, "A slow GPU reader is not a hung one").
        self._gpu_last = None
        if self._gpu_calls is not None:
            self._gpu_calls.forget()  # nor what a read in flight now returns
        if self.gpu is not None:
            gpu = self.gpu
            calls = self._gpu_calls
            first = (calls.hung_after_s
                     if calls is not None and not self._gpu_inv_answered else None)
            try:
                gpu_inv = self._guard(errors, f"{gpu.name} inventory",
                                 lambda: self._gpu_call(gpu.inventory, "inventory", first),
                                 gpu_inv)
                self._gpu_inv_answered = True
            except Pending as slow:
                # Slow, not hung: the GPUs the last inventory found, as a hung one's are kept.
                errors.append(self._gpu_slow(f"{slow}; the GPUs of the last inventory"))
                gpu_inv = replace(self._gpu_inv, errors=[])
            except Overdue as hung:
                # The GPUs the last inventory found stay, under their indices: a birth taken
                # while the reader hangs (a reconnect) names them, and the samples say why
                # they are unread.
                errors.append(f"{gpu.name}: {GPU_HUNG.format(s=hung.waited_s)}")
                gpu_inv = replace(self._gpu_inv, errors=[])
            errors.extend(gpu_inv.errors)
            gpu_inv = self._keep_lost(gpu_inv)
        self._gpu_inv = gpu_inv
        ib_ports: list[IbPortInventory] = []
        if self.ib is not None:
            ib = self.ib

            def ib_inventory() -> tuple[list[IbPortInventory], list[str]]:
                devices, _ = ib.scan()
                if self.pair_gpus:
                    ib.gpu_affinity = pair_by_bus_order(
                        devices, {g.index: g.pci_bus_id for g in gpu_inv.gpus if g.pci_bus_id})
                ports, inv_errors = ib.inventory()
                return ports, inv_errors

            no_ports: tuple[list[IbPortInventory], list[str]] = ([], [])
            ib_ports, ib_errors = self._guard(errors, "sysfs inventory", ib_inventory, no_ports)
            errors.extend(ib_errors)
        if self.monitor is not None:
            self.monitor.set_maps(
                {g.pci_bus_id: g.index for g in gpu_inv.gpus if g.pci_bus_id},
                self.ib.netdev_components() if self.ib is not None else {},
                self.ib.ports_by_pci() if self.ib is not None else {},
            )
        inv = Inventory(
            sku=self.sku,
            gpus=gpu_inv.gpus,
            ib_ports=ib_ports,
            topology=self.topology,
            driver_version=gpu_inv.driver_version,
            cuda_version=gpu_inv.cuda_version,
            boot_id=self._guard(errors, "host boot_id", self.host.boot_id, ""),
            errors=cap_errors(errors),
            # Unless told (--expect-gpus), as many as the driver counts: a GPU lost before the
            # agent started was left out of the birth, and the node read "7/7" ok (a
            # real-node audit).
            gpus_expected=self.gpus_expected or (gpu_inv.devices
                                                 if gpu_inv.devices > len(gpu_inv.gpus) else 0),
            ib_ports_expected=self.ib_ports_expected,
        )
        self._inventory = inv
        self._changes.update(inv.errors)
        return inv

    def read(self, now: float) -> Reading:
        with self._lock:
            return self._read(now)

    def _read(self, now: float) -> Reading:
        if self._inventory is None:
            self._take_inventory()
        errors: list[str] = []
        hung = ""  # the GPU reader's overrun as the sample says it: first, for the console's G1
        slow = ""  # why the GPU figures are not this sample's read, and how old they are
        if self.follower is not None and self.monitor is not None:
            follower, monitor = self.follower, self.monitor
            self._guard(errors, "kernel log",
                   lambda: monitor.feed(follower.poll(), now, history=follower.history), 0)
            if follower.error:
                errors.append(f"kernel log: {follower.error}")
        gpus: list[GpuSample] = []
        if self.gpu is not None:
            gpu = self.gpu
            no_gpus: tuple[list[GpuSample], list[str]] = ([], [])
            calls = self._gpu_calls
            try:
                if calls is None:
                    gpus, gpu_errors = self._guard(errors, f"{gpu.name} read", gpu.read,
                                                   no_gpus)
                else:
                    got = self._guard(errors, f"{gpu.name} read",
                                      lambda: calls.ask(gpu.read, "read"), None)
                    if got is None:
                        gpus, gpu_errors = no_gpus
                    else:
                        self._gpu_last = got
                        slower = (f"{gpu.name}: answers slower than a sample waits "
                                  f"({calls.deadline_s:g} s)")
                        if self._fresh(got):
                            gpus, gpu_errors = got.value
                            if got.late:
                                slow = self._gpu_slow(f"{slower}: {self._age(got)}")
                        else:
                            # A late answer held while no sample was read (an outage): its
                            # figures are as old as that, not current; but it answered, so
                            # its GPUs are not unread (that is a hung reader's).
                            gpus, gpu_errors = self._unfigured_gpus(got), []
                            slow = self._gpu_slow(f"{slower}: {self._too_old(got)}")
            except Pending as pending:
                # Slow, not hung: the figures of the last read that answered, said to be that
                # old; "0/8 GPUs visible" here would have an operator drain a healthy node.
                # Only while its read answered less than a hung reader takes to be said ago;
                # older, the GPUs without figures, never unread: only a hung reader's are
                # (docs/reliability.md, "A slow GPU reader is not a hung one").
                assert calls is not None  # only a watched reader is slow
                last, gpu_errors = self._gpu_last, []
                if calls.hung_from is not None:
                    # Unread, as while the reader hung, until a read answers again: said
                    # present here, a hung reader's GPUs cleared G1 for a sample and its
                    # incident closed and opened again.
                    self._gpu_last = None  # nothing read before the hang is shown again
                    hung = self._unread_line(calls.clock() - calls.hung_from)
                    gpus = self._unread_gpus()
                elif last is not None and self._fresh(last):
                    gpus, gpu_errors = last.value
                    slow = self._gpu_slow(f"{pending} (a slow reader): {self._age(last)}")
                else:
                    # No read has answered yet (since the start, or since this inventory),
                    # or its figures are too old: the inventory's GPUs, without figures.
                    gpus = self._unfigured_gpus(last)
                    why = "no GPU figures yet" if last is None else self._too_old(last)
                    slow = self._gpu_slow(f"{pending} (a slow reader): {why}")
            except Overdue as late:
                # Not the last figures again as if fresh, and not silence: each GPU unread
                # (present false) and the reader named with how long it has hung.
                assert calls is not None  # only a watched reader is overdue
                hung = self._unread_line(late.waited_s)
                gpus, gpu_errors = self._unread_gpus(), []
                self._gpu_last = None  # nothing read before the hang is shown again
            errors.extend(gpu_errors)
            if self._reindex:
                gpus = [msgspec.structs.replace(g, index=self._reindex.get(g.index, g.index))
                        for g in gpus]
            read = {g.index for g in gpus}
            for idx, inv in sorted(self._gpus_lost.items()):
                if idx not in read:
                    errors.append(f"gpu{idx} ({inv.pci_bus_id}): lost since the agent started")
                    gpus.append(GpuSample(index=idx, present=False))
            gpus.sort(key=lambda g: g.index)
            gpus = [self._with_xid(g, now) for g in gpus]
        ports: list[IbPortSample] = []
        if self.ib is not None:
            ib = self.ib
            no_samples: tuple[list[IbPortSample], list[str]] = ([], [])
            ports, ib_errors = self._guard(errors, "sysfs read", lambda: ib.read(now), no_samples)
            errors.extend(ib_errors)
            ports = [self._with_flaps(p, now) for p in ports]
        host = self._guard(errors, "host read", lambda: self.host.read(errors), HostSample())
        said = hung or slow
        capped = cap_errors([said, *errors] if said else errors)
        # Logged once as it starts, not again at each sample as its seconds grow.
        name = self.gpu.name if self.gpu is not None else ""
        once = {hung: f"{name}: no answer past its deadline (hung?)",
                slow: f"{name}: slower than a sample waits: its GPU figures are an earlier "
                      "read's (not hung)"}
        self._changes.update([once[e] if e and e == said else e for e in capped])
        return Reading(gpus=gpus, ib_ports=ports, host=host, errors=capped,
                       inventory_changed=self.ib is not None and self.ib.renamed)

    def take_events(self) -> list[EventDraft]:
        events: list[EventDraft] = []
        if self.ib is not None:
            events.extend(self.ib.take_events())
        if self.monitor is not None:
            events.extend(self.monitor.take_events())
        return sorted(events, key=lambda e: e.ts_ms or 0)

    def busy(self) -> bool:
        return False

    def on_drain(self, state: DrainState, mode: DrainMode) -> None:
        return None

    def close(self) -> bool:
        """Close the readers, each on a daemon thread, waiting for them at most
        ``CLOSE_WAIT_S`` in all; False when one did not return: it is left (the agent exits
        all the same, and the kernel frees what it held). A wedged driver blocks
        ``nvmlShutdown`` for ever, and the agent did not exit until systemd killed it."""
        closing = [start_daemon(r.close, f"fleetdeck close {name}")
                   for name, r in (("gpu", self.gpu), ("kernel log", self.follower))
                   if r is not None]
        done, stuck = concurrent.futures.wait(closing, timeout=CLOSE_WAIT_S)
        for fut in done:
            if fut.exception() is not None:
                log.warning("closing a reader: %s", fut.exception())
        if stuck:
            log.warning("a reader did not close within %g s (a wedged GPU driver?): exiting "
                        "without it", CLOSE_WAIT_S)
        return not stuck

    # --- internals ------------------------------------------------------------------------

    def _fresh(self, answer: Answer[Any]) -> bool:
        """``answer``'s figures may still be published: its read answered less than a hung
        reader takes to be said (``gpu_hung_s``) ago. Measured from when it answered, not
        from when it started: a reader that answers in 3 s at ``--interval 4`` has its
        figures taken up by the next sample 7 s after its call started."""
        calls = self._gpu_calls
        assert calls is not None  # only a watched reader answers late
        return calls.clock() - answer.finished < calls.hung_after_s

    def _age(self, answer: Answer[Any]) -> str:
        """How old ``answer``'s figures are at most: read at the latest since its call
        started."""
        calls = self._gpu_calls
        assert calls is not None  # only a watched reader answers late
        return f"these GPU figures are {calls.clock() - answer.started:.0f} s old"

    def _too_old(self, answer: Answer[Any]) -> str:
        calls = self._gpu_calls
        assert calls is not None  # only a watched reader answers late
        return (f"its last GPU figures were read {calls.clock() - answer.finished:.1f} s ago, "
                f"over {calls.hung_after_s:g} s: not shown")

    def _unread_line(self, waited_s: float) -> str:
        """What a sample says first while the GPUs are unread: the reader hung."""
        assert self.gpu is not None
        return f"{self.gpu.name}: {GPU_HUNG.format(s=waited_s)}"

    def _unfigured_gpus(self, last: Answer[tuple[list[GpuSample], list[str]]] | None
                        ) -> list[GpuSample]:
        """The inventory's GPUs without figures, present as the last answer had them (the
        reader answers: not unread), or present before any answer. Said present from the
        inventory alone, a GPU that fell off the bus (XID 79) read present again at the first
        slow read after it, and its incident closed and opened again (a review)."""
        seen = {} if last is None else {g.index: g.present for g in last.value[0]}
        return [GpuSample(index=g.index, present=seen.get(g.index, last is None))
                for g in self._gpu_inv.gpus if g.index not in self._gpus_lost]

    def _unread_gpus(self) -> list[GpuSample]:
        return [GpuSample(index=g.index, present=False) for g in self._gpu_inv.gpus
                if g.index not in self._gpus_lost]

    def _guard(self, errors: list[str], what: str, fn: Callable[[], T], default: T) -> T:
        """Run ``fn``; a reader bug becomes an error line, never an exception out of read(). A
        reader past its deadline (``Overdue``), or slow (``Pending``), is the caller's to say.
        While it runs it is the step ``stuck`` names."""
        self._step = (what, time.monotonic())
        try:
            return fn()
        except (Overdue, Pending):
            raise
        except Exception as exc:
            log.debug("%s failed", what, exc_info=True)
            errors.append(f"{what}: {type(exc).__name__}: {exc}")
            return default
        finally:
            self._step = None


    def _keep_lost(self, inv: GpuInventoryResult) -> GpuInventoryResult:
        """``inv`` with the GPUs an earlier inventory found and this one did not.

        The agent takes the inventory again at every reconnect (its new birth). A GPU that fell
        off the bus since then was no longer in it: the readers stopped reporting it
        ``present: false``, the kernel log's map lost its bus, and its XID 79 went to
        ``pci:0000:5d:00`` while the console's G2 for it vanished after a broker restart (a
        real-node audit). Kept under its index (docs/real-nodes.md, "What happens when
        hardware is missing"); a reboot, the repair, starts a new agent."""
        if not inv.gpus and not self._gpu_inv.gpus and not self._gpus_lost:
            return inv
        # Tracked by PCI bus id, by index only for a GPU without one: nvidia-smi renumbers the
        # GPUs that remain, so with gpu3 gone (and no "Unable to determine the device handle"
        # line) index 3 named gpu4's bus and gpu7's bus sat at index 6; by index nothing was
        # lost and gpu3 silently left the birth (docs/real-nodes.md, "What happens when
        # hardware is missing"). Each bus keeps its earlier index, the lost one's included.
        inv = self._renumbered(inv)
        found = {g.index for g in inv.gpus}
        buses = {normalize_pci(g.pci_bus_id) for g in inv.gpus if g.pci_bus_id}

        def here(g: GpuInventory) -> bool:
            return normalize_pci(g.pci_bus_id) in buses if g.pci_bus_id else g.index in found

        for g in self._gpu_inv.gpus:
            if not here(g):
                self._gpus_lost[g.index] = g
        for idx in [i for i, g in self._gpus_lost.items() if here(g)]:
            del self._gpus_lost[idx]  # it answers again
        if not self._gpus_lost:
            return inv
        gpus = sorted([*inv.gpus, *self._gpus_lost.values()], key=lambda g: g.index)
        return replace(inv, gpus=gpus, devices=max(inv.devices, len(gpus)))

    def _renumbered(self, inv: GpuInventoryResult) -> GpuInventoryResult:
        """``inv`` under the indices the earlier inventory gave each PCI bus.

        A GPU this agent has not seen keeps the reader's index unless an earlier GPU (a lost
        one included) holds it. The reader's index -> this index is kept for ``read``; an
        inventory that found no GPU (a hung nvidia-smi) leaves it as it was, as the reader
        leaves its own mapping."""
        if not inv.gpus:
            return inv
        earlier = {normalize_pci(g.pci_bus_id): g.index
                   for g in self._gpu_inv.gpus if g.pci_bus_id}
        index: dict[int, int] = {}  # the reader's index -> the agent's
        for g in inv.gpus:
            idx = earlier.get(normalize_pci(g.pci_bus_id)) if g.pci_bus_id else None
            if idx is not None and idx not in index.values():
                index[g.index] = idx
        taken = {*earlier.values(), *index.values(), *self._gpus_lost}
        for g in inv.gpus:
            if g.index not in index:
                idx = g.index if g.index not in taken else max(taken) + 1
                index[g.index] = idx
                taken.add(idx)
        self._reindex = {r: i for r, i in index.items() if r != i}
        if not self._reindex:
            return inv
        gpus = sorted((g.model_copy(update={"index": index[g.index]}) for g in inv.gpus),
                      key=lambda g: g.index)
        return replace(inv, gpus=gpus)

    def _with_xid(self, g: GpuSample, now: float) -> GpuSample:
        last = self.monitor.xid_last(g.index) if self.monitor is not None else None
        if last is None or self.monitor is None:
            return g
        return msgspec.structs.replace(g, xid_last=last[0], xid_last_ts=last[1],
                                       xids=self.monitor.xids(g.index, now))

    def _with_flaps(self, p: IbPortSample, now: float) -> IbPortSample:
        if self.monitor is None:
            return p
        losses = self.monitor.carrier_losses_by_component(now).get(f"{p.dev}:{p.port}")
        if losses is None:
            return p
        # The kernel log's count and the netdev's carrier_down_count (IbReader) see the same
        # losses where both exist: the larger, never the sum.
        return msgspec.structs.replace(p, carrier_losses_24h=max(losses,
                                                                 p.carrier_losses_24h or 0))


def make_real_source(
    kind: str,
    sysfs_root: Path = DEFAULT_SYSFS,
    *,
    kernel_log: str | None = None,
    nvidia_smi: str = "nvidia-smi",
    nvsmi_timeout_s: float = 10.0,
    expected_rate_gbps: float | None = None,
    sku: str = "",
    topology: Topology | None = None,
    proc_root: Path = DEFAULT_PROC,
    nvml_lib: Any = None,
    gpus_expected: int = 0,
    ib_ports_expected: int = 0,
    gpu_deadline_s: float | None = None,
    gpu_hung_s: float = GPU_HUNG_S,
) -> RealSource:
    """Build the RealSource named by ``kind`` (``sysfs``, ``nvml``, ``nvsmi``, ``sysfs+nvml`` …).

    ``sysfs_root``: the sysfs mount (``/sys``) or directly a ``class/infiniband`` directory.
    ``kernel_log``: ``"journal"`` (follow the systemd journal), a log file path, or None (no Xid /
    flap events). ``gpu_deadline_s``: how long a sample waits for the GPU reader (the agent's
    interval; None: as long as it takes, as ``--once`` does); ``gpu_hung_s``: how long a GPU
    reader's call goes unanswered before its GPUs are unread (``GPU_HUNG_S``). Raises
    ValueError for a bad ``kind``; never for missing hardware.
    """
    parts = parse_kind(kind)
    ib = (IbReader(ib_class_dir(sysfs_root), expected_rate_gbps=expected_rate_gbps)
          if "sysfs" in parts else None)
    gpu: GpuReader | None = None
    if "nvml" in parts:
        gpu = NvmlReader(nvml_lib)
    elif "nvsmi" in parts:
        gpu = NvsmiReader(binary=nvidia_smi, timeout_s=nvsmi_timeout_s)
    follower = make_follower(kernel_log) if kernel_log else None
    return RealSource(
        "+".join(parts), ib=ib, gpu=gpu, kernel_log=follower, host=HostReader(proc_root),
        sku=sku, topology=topology, gpus_expected=gpus_expected,
        ib_ports_expected=ib_ports_expected, gpu_deadline_s=gpu_deadline_s,
        gpu_hung_s=gpu_hung_s,
    )




if TYPE_CHECKING:
    _protocol_check: Source = RealSource("sysfs")
