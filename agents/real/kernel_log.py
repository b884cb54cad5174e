"""Edge-triggered events from the host log: NVIDIA Xid errors and IPoIB carrier flaps.

Line shapes (TELEMETRY.md §3, §4; aznhc test data):

* ``NVRM: Xid (PCI:0000:2b:00): 79, pid=1234, name=python, GPU has fallen off the bus.``
  (kernel; ``pid``/``name`` are absent on older drivers);
* ``systemd-networkd[5398]: ib6: lost carrier`` / ``ib6: Gained carrier`` (a link flap seen from
  the host; aznhc fails a node at >= 5 carrier losses per device in 24 h, NHC2005).
* ``mlx5_core 0000:01:00.0 ib6: Link down`` / ``Link up`` (mlx5e's ``netdev_info`` at a carrier
  change) and ``mlx5_core 0000:01:00.0: Port module event: module 0, Cable unplugged`` (``…
  Port module event[error]: module 0, Cable error, <why>``; older kernels put
  ``mlx5_port_module_event:1142:(pid 0):`` before it): a port's link or cable, named by the
  HCA's PCI address (and its netdev). A flap between two samples, which sysfs' state never
  showed, is a port event from these.

Lines may carry a syslog/``journalctl -o short`` prefix (``Aug 17 06:18:01 host``), an
``-o short-iso`` prefix, or a ``dmesg`` prefix (``[ 12.345678]``, ``[Mon Aug 17 06:18:01 2025]``).
"""

import calendar
import os
import re
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from fleetdeck.agents.real.common import normalize_pci
from fleetdeck.agents.source import EventDraft
from fleetdeck.protocol import xids
from fleetdeck.protocol.fast import XidSeen, recent_xids
from fleetdeck.protocol.messages import Severity

DAY_S = 86_400.0
FLAP_THRESHOLD = 5  # aznhc check_ib_link_flapping default: >= 5 losses in 24 h fails the node

# The console's G2 ("drain") and G3 ("warn") classes, one definition for both sides.
DRAIN_XIDS = xids.DRAIN
WARN_XIDS = xids.WARN

# The journal, not just the kernel ring: carrier lines come from systemd-networkd, which
# `journalctl -k` would filter out. "+" ORs the two match groups.
JOURNAL_MATCHES: tuple[str, ...] = (
    "_TRANSPORT=kernel", "+", "_SYSTEMD_UNIT=systemd-networkd.service",
)


def journal_argv(journalctl: str, *options: str) -> list[str]:
    """``journalctl`` with ``options``, the output the parser reads and ``JOURNAL_MATCHES``."""
    return [journalctl, *options, "--output=short-iso-precise", "--no-pager", *JOURNAL_MATCHES]


JOURNAL_CMD: tuple[str, ...] = tuple(journal_argv("journalctl", "--follow", "--lines=0"))
"""The journal from its end on (``JournalFollower`` follows from after what it read back)."""
JOURNAL_BACK: tuple[str, ...] = ("--boot", "--since=-24h", "--show-cursor")
"""The journal's day within this boot, read once at the agent's start (``JournalFollower``)."""
_CURSOR = "-- cursor: "

_MONTHS = {m: i for i, m in enumerate(calendar.month_abbr) if m}
_SYSLOG_RE = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})\s+(?P<hms>\d{2}:\d{2}:\d{2})(?:\.\d+)?\s+"
    r"\S+\s+(?P<rest>.*)$"
)
_ISO_RE = re.compile(
    r"^(?P<iso>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+"
    r"\S+\s+(?P<rest>.*)$"
)
_DMESG_T_RE = re.compile(r"^\[(?P<when>[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} [\d:]{8} \d{4})\]\s*"
                         r"(?P<rest>.*)$")
_DMESG_RE = re.compile(r"^\[\s*\d+\.\d+\]\s*(?P<rest>.*)$")
_XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\): "
    r"(?P<xid>\d+),\s*(?P<rest>.*)$"
)
"""The driver prints ``Xid (%s): %d, %s``: a line that ends at the code is cut (a torn read,
a truncated log), and its code may be too (``79`` cut to ``7``), so it is no XID."""
_PID_RE = re.compile(r"^pid=(?P<pid>[^,]*),\s*")
_NAME_RE = re.compile(r"^name=(?P<name>[^,]*),\s*")
_CARRIER_RE = re.compile(
    r"(?:^|:\s)(?P<netdev>[A-Za-z0-9_.-]+): (?P<what>[Ll]ost|[Gg]ained) carrier\b"
)
_MLX5_RE = re.compile(
    r"\bmlx5_core (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"(?: (?P<netdev>[^\s:]+))?: (?:\w+:\d+:\(pid \d+\): )?"
    r"(?:Link (?P<link>up|down)\s*$"
    r"|Port module event(?P<err>\[error\])?: module (?P<module>\d+), (?P<status>\S.*?)\s*$)"
)
"""mlx5_core's link and cable lines; a ``Link`` line cut short is none (``Link dow``)."""


@dataclass(frozen=True)
class XidRecord:
    ts: float | None
    pci_bus_id: str
    """Normalised ``dddd:bb:dd`` (see ``normalize_pci``)."""
    xid: int
    pid: int | None
    process: str | None
    message: str


@dataclass(frozen=True)
class CarrierRecord:
    ts: float | None
    netdev: str
    lost: bool


@dataclass(frozen=True)
class Mlx5PortRecord:
    """An mlx5_core ``Link up``/``Link down`` or ``Port module event`` line."""

    ts: float | None
    pci: str
    """The HCA's PCI function, as ``pci_function`` spells it (``0101:00:00.0``)."""
    netdev: str | None
    down: bool
    """The link went down, or its cable was unplugged or failed."""
    what: str
    """What the line says: ``Link down``, ``Cable unplugged``, ``Cable error, <why>``."""
    module: int | None = None


def pci_function(bus_id: str) -> str:
    """``0000:01:00.1`` / ``00000101:00:00.0`` -> ``0000:01:00.1`` / ``0101:00:00.0``: the
    function kept (one mlx5 HCA per function; ``normalize_pci`` drops it, as Xid lines do)."""
    s = bus_id.strip().lower()
    head, _, fn = s.rpartition(".")
    return f"{normalize_pci(head)}.{fn}" if head and fn.isdigit() else normalize_pci(s)


def _syslog_ts(mon: str, day: int, hms: str, now: float) -> float | None:
    """Syslog prints local time without a year: take ``now``'s year, or the one before when that
    would put the line more than a day in the future (a December line read in January)."""
    month = _MONTHS.get(mon)
    if month is None:
        return None
    h, m, s = (int(x) for x in hms.split(":"))
    year = time.localtime(now).tm_year
    for y in (year, year - 1):
        try:
            ts = time.mktime((y, month, day, h, m, s, 0, 0, -1))
        except (OverflowError, ValueError):
            return None
        if ts <= now + DAY_S:
            return ts
    return None


def split_prefix(line: str, now: float) -> tuple[float | None, str]:
    """(timestamp or None, message without the log prefix)."""
    line = line.rstrip("\r\n")
    m = _ISO_RE.match(line)
    if m:
        iso = m.group("iso").replace(",", ".")
        if re.search(r"[+-]\d{4}$", iso):
            iso = f"{iso[:-2]}:{iso[-2:]}"
        try:
            dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
            return dt.timestamp(), m.group("rest")
        except ValueError:
            return None, m.group("rest")
    m = _SYSLOG_RE.match(line)
    if m:
        return _syslog_ts(m.group("mon"), int(m.group("day")), m.group("hms"), now), m.group("rest")
    m = _DMESG_T_RE.match(line)
    if m:
        try:
            dt = datetime.strptime(" ".join(m.group("when").split()), "%a %b %d %H:%M:%S %Y")
            return dt.timestamp(), m.group("rest")
        except ValueError:
            return None, m.group("rest")
    m = _DMESG_RE.match(line)
    if m:
        # Seconds since boot: no wall-clock time without the boot time; the caller uses "now".
        return None, m.group("rest")
    return None, line


def parse_line(line: str, now: float | None = None
               ) -> XidRecord | CarrierRecord | Mlx5PortRecord | None:
    """An Xid, carrier or mlx5 port record, or None for any other line."""
    if "NVRM: Xid" not in line and " carrier" not in line and "mlx5_core " not in line:
        # None of the three can match (each needs its words): a flood of other lines is
        # skipped at a substring test each, not a prefix parse and three searches (20 µs a
        # line: 100,000 lines held a sample 2 s, a real-node drill).
        return None
    ts, msg = split_prefix(line, time.time() if now is None else now)
    m = _XID_RE.search(msg)
    if m:
        rest = (m.group("rest") or "").strip()
        pid: int | None = None
        process: str | None = None
        pm = _PID_RE.match(rest)
        if pm:
            rest = rest[pm.end():]
            pid = int(pm.group("pid")) if pm.group("pid").isdigit() else None
        nm = _NAME_RE.match(rest)
        if nm:
            rest = rest[nm.end():]
            name = nm.group("name").strip()
            process = None if name in ("", "<unknown>", "'<unknown>'") else name
        return XidRecord(ts=ts, pci_bus_id=normalize_pci(m.group("bus")), xid=int(m.group("xid")),
                         pid=pid, process=process, message=rest)
    m = _CARRIER_RE.search(msg)
    if m:
        return CarrierRecord(ts=ts, netdev=m.group("netdev"), lost=m.group("what") in ("Lost",
                                                                                       "lost"))
    m = _MLX5_RE.search(msg)
    if m:
        pci, netdev = pci_function(m.group("bus")), m.group("netdev")
        if m.group("link"):
            return Mlx5PortRecord(ts=ts, pci=pci, netdev=netdev, down=m.group("link") == "down",
                                  what=f"Link {m.group('link')}")
        status = m.group("status")
        return Mlx5PortRecord(ts=ts, pci=pci, netdev=netdev, module=int(m.group("module")),
                              down=bool(m.group("err")) or status != "Cable plugged",
                              what=status)
    return None


_ACTION_RE = re.compile(r"\bto 0x(?P<action>[0-9A-Fa-f]+)(?=[^0-9A-Za-z])")
"""The driver prints ``… to 0x%x (%s)``: digits that end the line may be cut ("0x1" of a
"0x10"), as an XID code that does (``_XID_RE``)."""


def recovery_action(rec: XidRecord) -> int | None:
    """The action an XID 154 line states ("GPU recovery action changed from 0x0 (None) to 0x2
    (Node Reboot Required)" -> 2); None for other codes. A 154 line that states none was cut
    before its action: ``xids.ACTION_UNREAD``, G3 and said so, not a bare 154 judged by
    nothing (it may have asked for a reboot)."""
    if rec.xid != xids.RECOVERY:
        return None
    m = _ACTION_RE.search(rec.message)
    if m is None:
        return xids.ACTION_UNREAD
    return min(int(m.group("action"), 16), xids.ACTION_UNREAD - 1)


def xid_severity(xid: int, action: int | None = None) -> Severity:
    if action is not None:
        # XID 154 is as grave as the action it states (docs/domain.md §4).
        if action in xids.RECOVERY_DRAIN:
            return Severity.ERROR
        return Severity.WARN if xids.recovery_warns(action) else Severity.INFO
    if xid in DRAIN_XIDS:
        return Severity.ERROR
    if xid in WARN_XIDS:
        return Severity.WARN
    return Severity.INFO


class KernelLogMonitor:
    """Turns log lines into EventDrafts and keeps the state telemetry reports from them
    (``xid_last`` and every XID of the last 2 h per GPU, ``carrier_losses_24h`` per port)."""

    def __init__(
        self,
        *,
        gpu_by_pci: Mapping[str, int] | None = None,
        component_by_netdev: Mapping[str, str] | None = None,
        ports_by_pci: Mapping[str, Sequence[str]] | None = None,
        window_s: float = DAY_S,
        flap_threshold: int = FLAP_THRESHOLD,
    ) -> None:
        self.gpu_by_pci: dict[str, int] = {}
        self.component_by_netdev: dict[str, str] = {}
        self.ports_by_pci: dict[str, list[str]] = {}
        self.set_maps(gpu_by_pci or {}, component_by_netdev or {}, ports_by_pci)
        self.window_s = window_s
        self.flap_threshold = flap_threshold
        self._losses: dict[str, deque[float]] = {}
        self._xid_last: dict[int, tuple[int, int]] = {}
        self._xids: dict[int, dict[int, int]] = {}
        """Per GPU index: XID code -> unix ms of its latest line."""
        self._actions: dict[int, dict[int, int]] = {}
        """Per GPU index: XID 154 -> the recovery action its latest line stated."""
        self._events: list[EventDraft] = []

    def set_maps(
        self, gpu_by_pci: Mapping[str, int], component_by_netdev: Mapping[str, str],
        ports_by_pci: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        """``gpu_by_pci`` keys may be in any bus-id spelling; they are normalised here.
        ``ports_by_pci``: each InfiniBand HCA's PCI function -> its ports (``"<dev>:<port>"``),
        for mlx5_core's lines; an Ethernet NIC's (Azure's ``mlx5_an0``) is in none."""
        self.gpu_by_pci = {normalize_pci(k): v for k, v in gpu_by_pci.items()}
        self.component_by_netdev = dict(component_by_netdev)
        self.ports_by_pci = {pci_function(k): list(v) for k, v in (ports_by_pci or {}).items()}

    def feed(self, lines: Iterable[str], now: float, *, history: bool = False) -> int:
        """Consume log lines; returns how many were Xid, carrier or IB port lines.
        ``history``: lines logged before the agent started, read back from the journal
        (``JournalFollower``): they count in the windows and make no event, which the agent
        that saw them sent."""
        n = 0
        events = len(self._events)
        for line in lines:
            rec = parse_line(line, now)
            if isinstance(rec, XidRecord):
                self._xid(rec, now)
                n += 1
            elif isinstance(rec, CarrierRecord) and self._is_ib(rec.netdev):
                self._carrier(rec, now)
                n += 1
            elif isinstance(rec, Mlx5PortRecord) and self._mlx5(rec, now):
                n += 1
        if history:
            del self._events[events:]
        return n

    def take_events(self) -> list[EventDraft]:
        events, self._events = self._events, []
        return events

    def carrier_losses(self, netdev: str, now: float) -> int:
        q = self._losses.get(netdev)
        if not q:
            return 0
        while q and q[0] < now - self.window_s:
            q.popleft()
        return len(q)

    def carrier_losses_by_component(self, now: float) -> dict[str, int]:
        """``"<dev>:<port>"`` -> losses in the window, for every mapped netdev (0 included)."""
        return {comp: self.carrier_losses(net, now)
                for net, comp in self.component_by_netdev.items()}

    def xid_last(self, gpu: int) -> tuple[int, int] | None:
        """(xid, unix ms) of the last Xid seen for GPU index ``gpu``."""
        return self._xid_last.get(gpu)

    def xids(self, gpu: int, now: float) -> list[XidSeen]:
        """Every XID code logged for GPU index ``gpu`` in the last 2 h (``GpuSample.xids``): a
        drain-class XID stays reported when routine ones (45, 13, 43) follow it."""
        seen = self._xids.get(gpu)
        if not seen:
            return []
        return recent_xids(seen, int(now * 1000), actions=self._actions.get(gpu))

    def _is_ib(self, netdev: str) -> bool:
        return netdev in self.component_by_netdev or netdev.startswith("ib")

    def _xid(self, rec: XidRecord, now: float) -> None:
        ts = rec.ts if rec.ts is not None else now
        ts_ms = int(ts * 1000)
        gpu = self.gpu_by_pci.get(rec.pci_bus_id)
        action = stated = recovery_action(rec)
        if gpu is not None:
            prev = self._xid_last.get(gpu)
            if prev is None or prev[1] <= ts_ms:
                self._xid_last[gpu] = (rec.xid, ts_ms)
            seen = self._xids.setdefault(gpu, {})
            if seen.get(rec.xid, -1) <= ts_ms:
                seen[rec.xid] = ts_ms
                actions = self._actions.setdefault(gpu, {})
                if action == xids.ACTION_UNREAD and actions.get(rec.xid) in xids.RECOVERY_DRAIN:
                    # A cut line cannot say the reset or reboot was done (only that can lower
                    # the action), so it keeps the drain its GPU's last whole line asked for:
                    # read as G3, it let a node that must reboot take work (a review).
                    action = actions[rec.xid]
                elif action is not None:
                    actions[rec.xid] = action
                else:
                    actions.pop(rec.xid, None)  # the latest line states none: no stale one
        component = f"gpu{gpu}" if gpu is not None else f"pci:{rec.pci_bus_id}"
        data: dict[str, bool | int | float | str | None] = {
            "xid": rec.xid, "pci_bus_id": rec.pci_bus_id, "gpu": gpu, "pid": rec.pid,
            "process": rec.process}
        if action is not None:
            data["recovery_action"] = action
        message = f"Xid {rec.xid} on {component}: {rec.message}".rstrip(": ")
        if stated == xids.ACTION_UNREAD:
            message += f" [{xids.recovery_name(stated)}" + (
                f": the earlier '{xids.recovery_name(action)}' stands]"
                if action != stated and action is not None else "]")
        self._events.append(EventDraft(
            kind="xid",
            message=message,
            severity=xid_severity(rec.xid, action),
            component=component,
            data=data,
            ts_ms=ts_ms,
        ))

    def _mlx5_component(self, rec: Mlx5PortRecord) -> str | None:
        """The IB port a line names: its HCA's, by the PCI function (one port per mlx5
        function; the netdev, else ``module``, picks among several), else by its netdev (IPoIB)
        where the PCI address is in no map. The PCI address first: it is the HCA's for good,
        while a netdev name is the one of the last inventory, which a rename since (udev's, an
        operator's ``ip link set … name``) gave to another HCA. None: no InfiniBand port's (an
        Ethernet NIC's, such as Azure's accelerated networking: no fabric port)."""
        by_netdev = self.component_by_netdev.get(rec.netdev) if rec.netdev else None
        ports = self.ports_by_pci.get(rec.pci)
        if not ports:
            return by_netdev
        if by_netdev in ports:
            return by_netdev
        if len(ports) > 1 and rec.module is not None and rec.module < len(ports):
            return ports[rec.module]
        return ports[0]

    def _mlx5(self, rec: Mlx5PortRecord, now: float) -> bool:
        """A port event for a link or cable change the kernel logged: a flap between two
        samples never shows in sysfs' state (a real-node audit: mlx5_core said "Link down",
        the agent said nothing). Not a carrier loss for N5: the same flap's carrier line and
        ``carrier_down_count`` count it already."""
        component = self._mlx5_component(rec)
        if component is None:
            return False
        ts = rec.ts if rec.ts is not None else now
        via = f"mlx5_core {rec.pci}" + (f" {rec.netdev}" if rec.netdev else "")
        data: dict[str, bool | int | float | str | None] = {
            "source": "kernel log", "pci_bus_id": rec.pci, "netdev": rec.netdev,
            "down": rec.down, "what": rec.what}
        if rec.module is not None:
            data["module"] = rec.module
        self._events.append(EventDraft(
            kind="ib_port_state",
            message=f"{component}: {rec.what} (kernel log: {via})",
            severity=Severity.ERROR if rec.down else Severity.INFO,
            component=component,
            data=data,
            ts_ms=int(ts * 1000),
        ))
        return True

    def _carrier(self, rec: CarrierRecord, now: float) -> None:
        ts = rec.ts if rec.ts is not None else now
        if rec.lost:
            q = self._losses.setdefault(rec.netdev, deque())
            q.append(ts)
            # Lines from a file read from its start arrive out of wall-clock order with "now".
            if len(q) > 1 and q[-2] > ts:
                q = deque(sorted(q))
                self._losses[rec.netdev] = q
        losses = self.carrier_losses(rec.netdev, max(now, ts))
        component = self.component_by_netdev.get(rec.netdev, rec.netdev)
        if not rec.lost:
            severity = Severity.INFO
        elif losses >= self.flap_threshold:
            severity = Severity.ERROR
        else:
            severity = Severity.WARN
        what = "lost carrier" if rec.lost else "gained carrier"
        self._events.append(EventDraft(
            kind="ib_flap",
            message=f"{rec.netdev} ({component}) {what}; {losses} losses in "
                    f"{self.window_s / 3600:g} h",
            severity=severity,
            component=component,
            data={"netdev": rec.netdev, "carrier": "lost" if rec.lost else "gained",
                  "losses_24h": losses},
            ts_ms=int(ts * 1000),
        ))


# --- followers -------------------------------------------------------------------------------


class LineFollower(Protocol):
    error: str | None
    history: bool
    """The lines its last ``poll`` returned were logged before the agent started."""

    def poll(self) -> list[str]: ...

    def close(self) -> None: ...


LOSS_SAID_S = 7200.0
"""How long a file follower says the lines a truncation in place took unread: G2's window,
as long as a drain-class XID among them would have failed the node (docs/real-nodes.md)."""
LOST_AT_TRUNCATION = " MiB lost at a truncation in place"
"""How the follower says lines it will never read (console/health.py ``KERNEL_LOG_LOST``)."""


class FileFollower:
    """New complete lines of a log file (e.g. /var/log/syslog), surviving rotation."""

    history = False

    def __init__(self, path: Path, *, from_start: bool = False,
                 max_bytes: int = 1 << 20,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.from_start = from_start
        self.max_bytes = max_bytes
        """Read at most this much a poll, as ``CommandFollower``: a flood of 100,000 lines read
        at once held a sample 2 s (a real-node drill). The rest is read at the next polls from
        where this one stopped: late, never skipped, so no Xid line is lost to the cap; while
        some is left, ``error`` says how much (docs/real-nodes.md). A rotated file's rest
        too, before the new file's first line."""
        self.clock = clock
        self.behind = 0
        """Bytes left unread at the last poll (a rotated file's rest and the new file's)."""
        self.error: str | None = None
        self._fh: int | None = None
        self._ino: int | None = None
        self._pos = 0
        self._size = 0
        """The open file's size at the last poll: a truncation in place takes what was
        unread of it (``_size - _pos``) with it."""
        self._buf = b""
        self._lost: tuple[float, str] | None = None
        """When lines were lost, and what says so (``LOSS_SAID_S``)."""
        self._queued: list[list[int]] = []
        """Files put in the path's place while an older one's rest was still read, oldest
        first: [fd, inode, size last seen], each opened at its rotation and read from its
        start in turn. Opened only once the older rest was read, a file rotated again in
        the meantime (two rotations in a flood read a MiB a poll) was never read."""

    def poll(self) -> list[str]:
        try:
            st = os.stat(self.path)
        except OSError as exc:
            self.error = f"{self.path}: {exc.strerror or exc}"
            return []
        out: list[str] = []
        budget = self.max_bytes
        newest = self._queued[-1][1] if self._queued else self._ino
        if self._fh is not None and st.st_ino != newest:
            # Rotated (renamed, a new file in its place): the new file is held open now and
            # read once the older rest is, a rotation again meanwhile included.
            try:
                fd = os.open(self.path, os.O_RDONLY)
                ino = os.fstat(fd).st_ino
            except OSError as exc:
                self.error = f"{self.path}: {exc.strerror or exc}"
                return out
            if ino == newest:
                os.close(fd)  # rotated back between the stat and the open: nothing new
            else:
                self._queued.append([fd, ino, 0])
        promoted = False
        while self._queued:
            # The old file's rest first, what was written to it since the last poll (an Xid
            # logged in the second before a rotation was never seen: a real-node drill).
            # Capped as any read: at a rotation during a flood, hundreds of MiB were read in
            # one poll.
            lines, budget, ended = self._drain(budget)
            out += lines
            if not ended:
                self._say(self._unread() + self._queued_unread())
                return out
            if self._buf:
                out.append(self._buf.decode(errors="replace"))  # its cut last line
                self._buf = b""
            self.close_current()
            fd, ino, seen = self._queued.pop(0)
            self._fh, self._ino, self._pos, self._size = fd, ino, 0, seen
            self._note_lost(self._unread(), seen)
            promoted = True
        if promoted:
            # The stat above is older than the size of the file just promoted (read since): a
            # flood that wrote on in between read as a truncation in place, "lost" for
            # LOSS_SAID_S (a review). Rotated again since: queued at the next poll.
            try:
                st = os.stat(self.path)
                moved = st.st_ino != self._ino
            except OSError:
                moved = True
            if moved:
                lines, _left, _ended = self._drain(budget)
                self._say(self._unread())
                return out + lines
        # Smaller than it was: truncated in place, though refilled past where we read (a
        # flood, read late, refills it within a sample; a log only grows otherwise).
        truncated = st.st_size < max(self._pos, self._size)
        if self._fh is None or st.st_ino != self._ino or truncated:
            first_open = self._fh is None and self._ino is None
            if self._fh is not None and st.st_ino == self._ino and self._size > self._pos:
                # Truncated in place (logrotate's copytruncate) while behind: what was unread
                # is in the copy, never read here. Said, or the Xid lines in it read as none
                # logged (docs/real-nodes.md).
                self._note_lost(0, self._size - self._pos)
            if self._buf:
                # The old file's cut last line is a line of its own, rotated or truncated in
                # place (logrotate's copytruncate): kept, it was glued to the new file's first
                # line ('Xid parnew1') and an Xid line that began the new file was lost.
                out.append(self._buf.decode(errors="replace"))
                self._buf = b""
            self.close_current()
            try:
                self._fh = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                self.error = f"{self.path}: {exc.strerror or exc}"
                return out
            self._ino = st.st_ino
            # Start at the end on first open (history was before this agent); a rotated or
            # truncated file is new, read from its start.
            self._pos = st.st_size if first_open and not self.from_start else 0
        lines, _left, _ended = self._drain(budget)
        self._say(self._unread())
        return out + lines

    def _queued_unread(self) -> int:
        """Bytes of the files waiting their turn; one truncated in place since its last look
        (copytruncate before its first line was read) lost what it held then."""
        total = 0
        for q in self._queued:
            try:
                size = os.fstat(q[0]).st_size
            except OSError:
                size = q[2]
            self._note_lost(size, q[2])
            q[2] = size
            total += size
        return total

    def _note_lost(self, size: int, seen: int) -> None:
        """A file of ``seen`` unread bytes now ``size`` long lost them at a truncation in
        place: said for ``LOSS_SAID_S``."""
        if size >= seen:
            return
        self._lost = (self.clock(), (
            f"{self.path}: {seen / (1 << 20):.1f}"
            f"{LOST_AT_TRUNCATION} (logrotate's copytruncate while a flood was read "
            "late): its Xid lines were never read; look for them in the rotated copy"))

    def _unread(self) -> int:
        """Bytes of the open file past ``_pos`` (its size kept in ``_size``)."""
        assert self._fh is not None
        try:
            self._size = os.fstat(self._fh).st_size
        except OSError:
            self._size = self._pos
        return max(0, self._size - self._pos)

    def _say(self, behind: int) -> None:
        self.behind = behind
        late = (None if not behind else
                f"{self.path}: {behind / (1 << 20):.1f} MiB unread behind its end "
                f"(a flood: read {self.max_bytes / (1 << 20):g} MiB a sample); its Xid "
                "lines are read late, none is skipped")
        lost = self._lost
        if lost is not None and self.clock() - lost[0] >= LOSS_SAID_S:
            lost = self._lost = None
        self.error = late if lost is None else lost[1] if late is None else f"{lost[1]}; {late}"

    def _drain(self, max_bytes: int) -> tuple[list[str], int, bool]:
        """The complete lines of the open file from ``_pos`` on, ``max_bytes`` at most; with
        what is left of ``max_bytes`` and whether the file's end was reached."""
        assert self._fh is not None
        chunks = []
        left = max_bytes
        ended = False
        while left > 0:
            data = os.pread(self._fh, min(1 << 16, left), self._pos)
            if not data:
                ended = True
                break
            self._pos += len(data)
            left -= len(data)
            chunks.append(data)
        else:
            ended = not self._unread()
        return self._split(b"".join(chunks)), left, ended

    def _split(self, data: bytes) -> list[str]:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        return [ln.decode(errors="replace") for ln in lines]

    def close_current(self) -> None:
        if self._fh is not None:
            os.close(self._fh)
            self._fh = None

    def close(self) -> None:
        self.close_current()
        for q in self._queued:
            os.close(q[0])
        self._queued.clear()


STDERR_KEPT = 4096

JOURNAL_HINTS = ("not seeing messages from other users",
                 "No journal files were opened due to insufficient permissions")
"""What journalctl says on stderr (unless ``--quiet``) when its user may not read the system
journal: it shows that user's own entries only, and exits 0 (systemd's journalctl.c,
``access_check``)."""
JOURNAL_GROUPS = frozenset({"systemd-journal", "adm", "wheel"})
"""The groups whose members read the whole journal (besides root)."""


def journal_access() -> str:
    """'' where this process may read the whole journal (root, or one of ``JOURNAL_GROUPS``);
    else its user, as the error names it."""
    import grp
    import pwd

    if os.geteuid() == 0:
        return ""
    names = set()
    for gid in {os.getegid(), *os.getgroups()}:
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    if names & JOURNAL_GROUPS:
        return ""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


class CommandFollower:
    """Lines of a long-running command (``journalctl --follow``) without a thread: the pipe is
    non-blocking and drained on every poll. Restarted (at most every ``restart_s``) if it exits."""

    history = False

    def __init__(self, argv: Sequence[str] = JOURNAL_CMD, *, restart_s: float = 30.0,
                 max_bytes: int = 1 << 20, keep_stderr: bool = False) -> None:
        self.argv = list(argv)
        self.restart_s = restart_s
        self.keep_stderr = keep_stderr
        self.stderr = ""
        """What the command said on stderr, its first ``STDERR_KEPT`` characters (with
        ``keep_stderr``: a finite command's, as journalctl's hint that it shows only the
        user's own entries; a follower's is not read, and goes nowhere)."""
        self.max_bytes = max_bytes
        """Read at most this much a poll: a day of a busy journal read back at once held the
        agent's sample loop for seconds (a review: 1.5 s for 200k lines). The rest waits in
        the pipe, and the command with it."""
        self.error: str | None = None
        self.exited: int | None = None
        """The exit status of the command's last run, once it has exited."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = 0.0
        self._buf = b""

    def _start(self) -> None:
        self._started = time.monotonic()
        try:
            self._proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE if self.keep_stderr else subprocess.DEVNULL,
            )
        except OSError as exc:
            self.error = f"{self.argv[0]}: {exc.strerror or exc}"
            self._proc = None
            return
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdout.fileno(), False)
        if self._proc.stderr is not None:
            os.set_blocking(self._proc.stderr.fileno(), False)
        self.error = None
        self.exited = None

    def poll(self) -> list[str]:
        if self._proc is None:
            if self._started and time.monotonic() - self._started < self.restart_s:
                return []
            self._start()
            if self._proc is None:
                return []
        stdout = self._proc.stdout
        assert stdout is not None
        chunks = []
        fd = stdout.fileno()
        left = self.max_bytes
        while left > 0:
            try:
                data = os.read(fd, min(1 << 16, left))
            except BlockingIOError:
                break
            if not data:
                self._read_stderr()
                rc = self.exited = self._proc.wait()
                self.error = f"{self.argv[0]} exited with status {rc}"
                stdout.close()
                if self._proc.stderr is not None:
                    self._proc.stderr.close()
                self._proc = None
                break
            chunks.append(data)
            left -= len(data)
        if self._proc is not None:
            self._read_stderr()
        self._buf += b"".join(chunks)
        *lines, self._buf = self._buf.split(b"\n")
        return [ln.decode(errors="replace") for ln in lines]

    def _read_stderr(self) -> None:
        """What stderr holds now, kept to ``STDERR_KEPT`` characters (read past them, so
        the command never blocks on a full pipe)."""
        err = self._proc.stderr if self._proc is not None else None
        if err is None:
            return
        while True:
            try:
                data = os.read(err.fileno(), 1 << 16)
            except BlockingIOError:
                return
            if not data:
                return
            if len(self.stderr) < STDERR_KEPT:
                self.stderr = (self.stderr + data.decode(errors="replace"))[:STDERR_KEPT]

    def close(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            for pipe in (self._proc.stdout, self._proc.stderr):
                if pipe is not None:
                    pipe.close()
            self._proc = None


class JournalFollower:
    """The systemd journal: read back a day within this boot (``JOURNAL_BACK``), then
    followed from right after what was read (``--after-cursor``), so a restarted agent counts
    the carrier losses (N5's 24 h) and XIDs (G2/G3's 2 h) logged before it started (a restart
    forgot a flapping link's day) and nothing from before a reboot, the repair an XID 79 asks
    for. What is read back is ``history``: it changes the windows and makes no event again.
    Told apart by where the journal's end was when the agent started, not by the lines'
    stamps, which a clock stepped back by NTP at boot would put before the agent's start."""

    def __init__(self, journalctl: str = "journalctl", *, restart_s: float = 30.0,
                 max_bytes: int = 1 << 20) -> None:
        self.journalctl = journalctl
        self.restart_s = restart_s
        self.error: str | None = None
        self.history = True
        self._back: CommandFollower | None = CommandFollower(
            journal_argv(journalctl, *JOURNAL_BACK), restart_s=restart_s, max_bytes=max_bytes,
            keep_stderr=True)
        self._live: CommandFollower | None = None
        self._max_bytes = max_bytes
        self._cursor = ""
        self._read_back = 0
        """Lines the read-back gave (``_partial``)."""
        self.partial = ""
        """Why journalctl shows this agent only its user's own entries ('' where it shows
        all): said in ``error`` for as long as the agent runs."""
        self.access: Callable[[], str] = journal_access
        """The user that may not read the whole journal, '' where it may (tests replace it)."""

    def _say(self, error: str | None) -> None:
        self.error = "; ".join(e for e in (self.partial, error) if e) or None

    def _partial(self, back: CommandFollower) -> str:
        """Why the read-back showed only the user's own entries, from journalctl's own hint
        or, where it gave none (``--quiet`` in a wrapper, a version without it), from an
        empty read-back by a user outside ``JOURNAL_GROUPS``: journalctl exits 0 and says
        nothing else, and the agent read no XID for as long as it ran (a review)."""
        hint = next((h for h in JOURNAL_HINTS if h in back.stderr), "")
        user = self.access() if hint or not self._read_back else ""
        if not hint and not user:
            return ""
        said = f"; journalctl says: {hint}" if hint else ""
        if not user:
            # Root or in a journal group, and still its own entries only: the journal's files
            # are not readable here as the host sets them (a container, whose groups' ids are
            # not the host's; root in a user namespace, which owns none of them). Said as it
            # is: "not root nor in systemd-journal, add it" sent the operator to a group the
            # agent was in already (a review).
            return (f"{self.journalctl}: shows the agent only its own user's entries, not "
                    f"the kernel's, though its user is root or in group systemd-journal or "
                    f"adm{said}: blind to XIDs and carrier losses; check that it may read the "
                    "journal's files (/var/log/journal: a container or a user namespace maps "
                    "their owner and group otherwise)")
        return (f"{self.journalctl}: shows the agent only its own user's entries, not the "
                f"kernel's (its user, {user}, is not root nor in group systemd-journal or "
                f"adm{said}): blind to XIDs and carrier losses; add the user to systemd-journal")

    def poll(self) -> list[str]:
        back = self._back
        if back is None:
            live = self._live
            assert live is not None
            self.history = False
            lines = live.poll()
            self._say(live.error)
            if live.exited is not None:
                # Started again, from its end then: after the cursor, it would send again
                # every line since the agent's start.
                live.argv = journal_argv(self.journalctl, "--follow", "--lines=0")
            return lines
        out = []
        for line in back.poll():
            if line.startswith(_CURSOR):
                self._cursor = line[len(_CURSOR):].strip()
            elif not line.startswith("-- "):  # "-- No entries --"
                out.append(line)
        self._read_back += len(out)
        self.history = True
        if back.exited == 0 and not self.partial:
            self.partial = self._partial(back)
        self._say(back.error if back.exited != 0 else None)
        if back.exited is not None or (back.error and back.exited is None):
            # Read to its end (or it could not run: following says why again).
            back.close()
            self._back = None
            after = f"--after-cursor={self._cursor}" if self._cursor else "--lines=0"
            self._live = CommandFollower(journal_argv(self.journalctl, "--follow", after),
                                         restart_s=self.restart_s, max_bytes=self._max_bytes)
        return out

    def close(self) -> None:
        for f in (self._back, self._live):
            if f is not None:
                f.close()


def make_follower(spec: str) -> LineFollower:
    """``"journal"`` follows the systemd journal; anything else is a log file path."""
    if spec == "journal":
        return JournalFollower()
    return FileFollower(Path(spec))
