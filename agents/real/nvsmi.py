"""GPUs via ``nvidia-smi --query-gpu=<fields> --format=csv`` (fallback when NVML is unusable).

Output shape (real captures in TELEMETRY.md §9): a header naming each field with its unit in
brackets (``power.draw [W]``), then one row per GPU whose values repeat the unit (``631.95 W``).
Unavailable values come back as ``[N/A]``, ``N/A``, ``[Not Supported]`` or
``[Requested functionality has been deprecated]``: those are absent, never zero.
"""

import contextlib
import csv
import io
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetdeck.agents.real.common import GpuInventoryResult, build_model, normalize_pci
from fleetdeck.protocol.fast import Ecc, GpuSample, RowRemap
from fleetdeck.protocol.messages import GpuInventory

log = logging.getLogger("fleetdeck.agent.real")

Row = dict[str, str | None]
Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]

# Only what GpuSample/GpuInventory carry: a full query costs ~200 fields per GPU per interval.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "utilization.memory",
    "temperature.gpu",
    "temperature.memory",
    "power.draw",
    "power.limit",
    "clocks.current.sm",
    "clocks.current.memory",
    "clocks.max.sm",
    "clocks_event_reasons.active",
    "clocks_event_reasons_counters.sw_thermal_slowdown",
    "clocks_event_reasons_counters.hw_thermal_slowdown",
    "clocks_event_reasons_counters.sw_power_cap",
    "clocks_event_reasons_counters.hw_power_brake_slowdown",
    "pstate",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "ecc.errors.corrected.volatile.total",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.aggregate.total",
    "ecc.errors.uncorrected.aggregate.total",
    "ecc.errors.corrected.aggregate.sram",
    "ecc.errors.uncorrected.aggregate.sram",
    "remapped_rows.correctable",
    "remapped_rows.uncorrectable",
    "remapped_rows.pending",
    "remapped_rows.failure",
)

# Older drivers name the clock-event fields "clocks_throttle_reasons"; nvidia-smi accepts both
# spellings as aliases, but prints the one it was asked for in the header.
ALIASES: dict[str, str] = {
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "gpu_bus_id": "pci.bus_id",
}

_ABSENT = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown", "[unknown]"}
_HEADER_RE = re.compile(r"^\s*(?P<name>[^\[]+?)\s*(?:\[(?P<unit>[^\]]*)\])?\s*$")
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:[A-Za-z%/]+)?\s*$")
_INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query')
_CUDA_RE = re.compile(r"CUDA Version\s*:?\s*(\d+(?:\.\d+)*)")


class NvsmiError(Exception):
    """nvidia-smi could not be run or said nothing usable; the message is one line."""


class NvsmiHung(NvsmiError):
    """nvidia-smi did not answer within its timeout."""


REAP_WAIT_S = 2.0
"""After killing an nvidia-smi past its timeout, how long to wait for it to be gone: one stuck
in the driver (state D) dies only once the driver lets it go, and until then no other starts
(``NvsmiReader``)."""

HUNG_RETRY_S = 60.0
"""After an nvidia-smi that did not answer, it is asked again this much later, not at every
sample: each sample waited out the whole timeout (10 s) and the agent, sampling every 1-2 s,
published every 10 s, so the console read the node stale, then failed, then stale again (a
real-node audit)."""


@dataclass
class CsvTable:
    rows: list[Row]
    units: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    """Problem values seen (``[GPU is lost]``, ``[Unknown Error]``), and unparsable lines."""


def _value(raw: str, where: str, errors: list[str]) -> str | None:
    v = raw.strip()
    low = v.lower()
    if low in _ABSENT or "deprecated" in low:
        return None
    if v.startswith("[") and v.endswith("]"):
        # Anything else in brackets is nvidia-smi reporting a failure for that value.
        errors.append(f"{where}: {v}")
        return None
    return v


_LOST_RE = re.compile(r"Unable to determine the device handle for GPU\s*([0-9A-Fa-f:.]+)")
"""nvidia-smi's line for a GPU that does not answer (on its own, among the CSV rows)."""


FAILED_KEY = "(failed)"
"""A row's key for the columns nvidia-smi answered with a failure (``[Unknown Error]``),
comma-joined: no column of its has that name."""
CORE_COLUMNS: tuple[str, ...] = ("utilization.gpu", "memory.used", "temperature.gpu",
                                 "power.draw")
"""A GPU whose every one of these failed is lost, as NVML's reader judges it (docs/real-nodes.md,
"What happens when hardware is missing")."""


def parse_csv(text: str) -> CsvTable:
    """Parse ``--format=csv`` (with header; with or without units) into one dict per GPU."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    table = CsvTable(rows=[])
    if not lines:
        table.errors.append("nvidia-smi printed nothing")
        return table
    reader = csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True)
    header = next(reader)
    names: list[str] = []
    for col in header:
        m = _HEADER_RE.match(col)
        name = m.group("name") if m else col.strip()
        name = ALIASES.get(name, name)
        names.append(name)
        if m and m.group("unit"):
            table.units[name] = m.group("unit")
    for lineno, values in enumerate(reader, start=2):
        if len(values) != len(names):
            # nvidia-smi interleaves per-GPU failures ("Unable to determine the device handle
            # for GPU0000:2B:00.0: Unknown Error") with the rows of healthy GPUs.
            table.errors.append(f"nvidia-smi line {lineno}: {','.join(values)[:200]}")
            continue
        raw = dict(zip(names, values, strict=True))
        where = _row_name(raw, lineno - 1)
        said = len(table.errors)
        row = {n: _value(v, f"{where} {n}", table.errors)
               for n, v in zip(names, values, strict=True)}
        failed = [e.split(": ", 1)[0].removeprefix(f"{where} ") for e in table.errors[said:]]
        if failed:
            row[FAILED_KEY] = ",".join(failed)
        table.rows.append(row)
    return table


def _row_name(raw: Mapping[str, str], n: int) -> str:
    """A row's GPU as its failures name it: ``gpu3 (00000008:00:00.0)``, nvidia-smi's index
    (``NvsmiReader.read`` puts the agent's in its place where nvidia-smi renumbered); ``row N``
    only without either. Named ``row 4`` (the CSV row, 1-based), a ``[GPU requires reset]``
    of gpu3 read as one of gpu4, the GPU an operator would have reset (a real-node audit)."""
    idx, bus = raw.get("index", "").strip(), raw.get("pci.bus_id", "").strip()
    if idx.isdigit() and bus:
        return f"gpu{idx} ({bus})"
    return f"gpu{idx}" if idx.isdigit() else f"row {n}"


def _num(v: str | None) -> float | None:
    if v is None:
        return None
    m = _NUMBER_RE.match(v)
    if not m:
        raise ValueError(f"not a number: {v!r}")
    return float(m.group(1))


def _int(v: str | None) -> int | None:
    f = _num(v)
    return None if f is None else int(f)


def _hex(v: str | None) -> int | None:
    return None if v is None else int(v, 16)


def _bool(v: str | None) -> bool | None:
    if v is None:
        return None
    low = v.strip().lower()
    if low in ("yes", "true", "1", "active"):
        return True
    if low in ("no", "false", "0", "not active"):
        return False
    raise ValueError(f"not a yes/no: {v!r}")


_SAMPLE_FIELDS: dict[str, tuple[str, Callable[[str | None], Any]]] = {
    "util_pct": ("utilization.gpu", _num),
    "mem_util_pct": ("utilization.memory", _num),
    "fb_used_mib": ("memory.used", _int),
    "fb_total_mib": ("memory.total", _int),
    "temp_c": ("temperature.gpu", _num),
    "mem_temp_c": ("temperature.memory", _num),
    "power_w": ("power.draw", _num),
    "power_limit_w": ("power.limit", _num),
    "sm_clock_mhz": ("clocks.current.sm", _num),
    "mem_clock_mhz": ("clocks.current.memory", _num),
    "sm_clock_max_mhz": ("clocks.max.sm", _num),
    "clock_event_reasons": ("clocks_event_reasons.active", _hex),
    "pstate": ("pstate", lambda v: v),
    "pcie_gen": ("pcie.link.gen.current", _int),
    "pcie_width": ("pcie.link.width.current", _int),
}
_ECC_FIELDS: dict[str, str] = {
    "sbe_vol": "ecc.errors.corrected.volatile.total",
    "dbe_vol": "ecc.errors.uncorrected.volatile.total",
    "sbe_agg": "ecc.errors.corrected.aggregate.total",
    "dbe_agg": "ecc.errors.uncorrected.aggregate.total",
    "sram_corr_agg": "ecc.errors.corrected.aggregate.sram",
    "sram_unc_agg": "ecc.errors.uncorrected.aggregate.sram",
}
_REMAP_FIELDS: dict[str, tuple[str, Callable[[str | None], Any]]] = {
    "correctable": ("remapped_rows.correctable", _int),
    "uncorrectable": ("remapped_rows.uncorrectable", _int),
    "pending": ("remapped_rows.pending", _bool),
    "failure": ("remapped_rows.failure", _bool),
}


def _convert(row: Row, spec: Mapping[str, tuple[str, Callable[[str | None], Any]]],
             where: str, errors: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, (col, conv) in spec.items():
        if col not in row:
            continue
        try:
            value = conv(row[col])
        except ValueError as exc:
            errors.append(f"{where} {col}: {exc}")
            continue
        if value is not None:
            out[attr] = value
    return out


def row_index(row: Row) -> int | None:
    try:
        return _int(row.get("index"))
    except ValueError:
        return None


def gpu_sample(row: Row, errors: list[str], index: int | None = None) -> GpuSample | None:
    """One ``--query-gpu`` row as a GpuSample; ``index`` overrides the row's own index."""
    idx = row_index(row) if index is None else index
    if idx is None:
        errors.append(f"nvidia-smi row without an index: {row.get('pci.bus_id')}")
        return None
    where = f"gpu{idx}"
    failed = set((row.get(FAILED_KEY) or "").split(","))
    if all(c in failed for c in CORE_COLUMNS):
        # Every core value a failure ("[GPU requires reset]", "[Unknown Error]"): a lost GPU,
        # which read present and ok with no figures at all (a real-node audit).
        errors.append(f"{where} ({row.get('pci.bus_id')}): every core value failed: lost")
        return GpuSample(index=idx, present=False)
    values = _convert(row, _SAMPLE_FIELDS, where, errors)
    values["index"] = idx
    thermal = _convert(row, {
        "t": ("clocks_event_reasons_counters.sw_thermal_slowdown", _int),
        "h": ("clocks_event_reasons_counters.hw_thermal_slowdown", _int),
        "p": ("clocks_event_reasons_counters.sw_power_cap", _int),
        "b": ("clocks_event_reasons_counters.hw_power_brake_slowdown", _int),
    }, where, errors)
    # nvidia-smi counts these in microseconds; the protocol (like DCGM) uses nanoseconds.
    # Thermal = SW + HW thermal slowdown; power = SW power cap + HW power brake.
    if "t" in thermal or "h" in thermal:
        values["thermal_violation_ns"] = (thermal.get("t", 0) + thermal.get("h", 0)) * 1000
    if "p" in thermal or "b" in thermal:
        values["power_violation_ns"] = (thermal.get("p", 0) + thermal.get("b", 0)) * 1000
    ecc = _convert(row, {k: (c, _int) for k, c in _ECC_FIELDS.items()}, where, errors)
    values["ecc"] = build_model(Ecc, ecc, errors, f"{where} ecc")
    remap = _convert(row, _REMAP_FIELDS, where, errors)
    values["row_remap"] = build_model(RowRemap, remap, errors, f"{where} row_remap")
    try:
        return build_model(GpuSample, values, errors, where)
    except ValueError as exc:
        errors.append(f"{where}: not reportable: {exc}")
        return None


def gpu_inventory(row: Row, errors: list[str]) -> GpuInventory | None:
    idx = row_index(row)
    if idx is None:
        errors.append(f"nvidia-smi row without an index: {row.get('pci.bus_id')}")
        return None
    values: dict[str, Any] = {
        "index": idx,
        "uuid": row.get("uuid") or "",
        "name": row.get("name") or "",
        "pci_bus_id": row.get("pci.bus_id") or "",
    }
    try:
        mem = _int(row.get("memory.total"))
    except ValueError as exc:
        errors.append(f"gpu{idx} memory.total: {exc}")
        mem = None
    if mem is not None:
        values["memory_mib"] = mem
    try:
        return build_model(GpuInventory, values, errors, f"gpu{idx}")
    except ValueError as exc:
        errors.append(f"gpu{idx}: not reportable: {exc}")
        return None


def parse_cuda_version(text: str) -> str | None:
    """From plain ``nvidia-smi`` (``CUDA Version: 13.1``) or ``nvidia-smi -q`` output."""
    m = _CUDA_RE.search(text)
    return m.group(1) if m else None


def _default_runner(argv: Sequence[str], timeout_s: float) -> "subprocess.CompletedProcess[str]":
    return subprocess.run(
        list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
        stdin=subprocess.DEVNULL,
    )


def run_nvidia_smi(
    args: Sequence[str], *, binary: str = "nvidia-smi", timeout_s: float = 10.0,
    runner: Runner | None = None,
) -> "subprocess.CompletedProcess[str]":
    """Run nvidia-smi; raise NvsmiError (one line) when it cannot run at all.

    A non-zero exit is returned, not raised: with one GPU off the bus nvidia-smi still prints
    the others' rows and exits non-zero.
    """
    run = runner or _default_runner
    try:
        return run([binary, *args], timeout_s)
    except FileNotFoundError:
        raise NvsmiError(f"{binary}: not found (NVIDIA driver utilities not installed?)") from None
    except PermissionError:
        raise NvsmiError(f"{binary}: permission denied") from None
    except subprocess.TimeoutExpired:
        raise NvsmiHung(f"{binary}: no answer within {timeout_s:g} s (driver hung?)") from None
    except OSError as exc:
        raise NvsmiError(f"{binary}: {exc.strerror or exc}") from None


def group_left(proc: "subprocess.Popen[str]") -> bool:
    """Whether anything of ``proc``'s process group (it leads one: ``start_new_session``) is
    still there once ``proc`` itself is reaped: a wrapper's nvidia-smi outlives the wrapper.

    Linux frees a process group's id, its leader's pid, only with the group's last member, so
    while one is left the id is still this group's. A process that has the pid now is another's
    (the group emptied and the pid went to a new process): False."""
    try:
        os.kill(proc.pid, 0)
    except ProcessLookupError:
        pass
    except PermissionError:
        return False
    else:
        return False
    try:
        procs = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        procs = []
    pgid = str(proc.pid).encode()
    for pid in procs:
        try:
            # Bytes: a process name is cut at 15 bytes, maybe inside a UTF-8 character, and a
            # decode error here stopped every later GPU read (a review).
            stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # Not a member already dead, waiting for init to reap it: a kill has nothing to do.
        if len(stat) > 2 and stat[2] == pgid and stat[0] not in (b"Z", b"X"):
            return True
    if procs:
        return False
    try:  # no /proc: zombies count as left
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(proc: "subprocess.Popen[str]") -> None:
    """SIGKILL ``proc``'s process group (it leads one: ``start_new_session``), while it is
    ``proc``'s: ``proc`` not reaped yet (exited, it still holds its pid), or reaped with
    members of its group left (``group_left``: a wrapper's nvidia-smi, as after
    ``communicate`` raised having reaped the wrapper). Not once the group is gone: its id may
    then be another process's.

    Checked and killed under ``Popen``'s own lock on waitpid, which each of its reaps takes
    (``poll``, ``wait``, ``communicate``; never held long here, as each has a timeout), so no
    thread reaps it in between."""
    lock = getattr(proc, "_waitpid_lock", None) or contextlib.nullcontext()
    with lock:
        if proc.returncode is not None and not group_left(proc):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


class NvsmiStillRunning(NvsmiHung):
    """The nvidia-smi killed past its timeout has not gone yet: no other is started."""


class NvsmiReader:
    """GpuReader over nvidia-smi. Rows are matched to the inventory by UUID/PCI bus id, because
    nvidia-smi renumbers the GPUs that remain when one falls off the bus.

    At most one nvidia-smi of this reader runs at a time, and one past its timeout is killed
    with everything it started (its process group) and reaped: ``subprocess.run`` killed only
    the process it started, so a wrapper's nvidia-smi (a site script, a container shim) was
    left running at each timeout, one more a minute on a wedged driver; and one still running
    when the agent stopped outlived it (docs/reliability.md, "A slow GPU reader is not a hung
    one"). One that survives its kill (stuck in the driver) holds the next back until it is
    gone."""

    name = "nvsmi"

    def __init__(
        self, *, binary: str = "nvidia-smi", timeout_s: float = 10.0,
        fields: Sequence[str] = QUERY_FIELDS, runner: Runner | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.binary = binary
        self.timeout_s = timeout_s
        self.fields = list(fields)
        self.runner = runner
        self.clock = clock
        self._hung: tuple[float, str] | None = None
        """(monotonic time to ask again, what to say until then) after a query timed out."""
        self._child: subprocess.Popen[str] | None = None
        """The nvidia-smi running, or killed and not yet gone (it, or a process of its group:
        a wrapper's nvidia-smi); None once one has answered."""
        self._killed_at = 0.0
        self._closed = False
        self._spawn = threading.Lock()
        self._by_key: dict[str, int] = {}
        self._expected: dict[int, str] = {}

    def query(self) -> tuple[list[Row], list[str]]:
        errors: list[str] = []
        if self._hung is not None and self.clock() < self._hung[0]:
            return [], [self._hung[1]]
        self._hung = None
        # Drop fields this driver does not know (renamed across releases) and ask again.
        for _ in range(len(self.fields)):
            try:
                proc = run_nvidia_smi(
                    [f"--query-gpu={','.join(self.fields)}", "--format=csv"],
                    binary=self.binary, timeout_s=self.timeout_s,
                    runner=self.runner or self._run,
                )
            except NvsmiHung as exc:
                hung = f"{exc}; asked again every {HUNG_RETRY_S:g} s"
                self._hung = (self.clock() + HUNG_RETRY_S, hung)
                return [], [hung]
            except NvsmiError as exc:
                return [], [str(exc)]
            out = proc.stdout or ""
            bad = _INVALID_FIELD_RE.findall(out + (proc.stderr or ""))
            if proc.returncode != 0 and bad and set(bad) & set(self.fields):
                errors.append(f"{self.binary}: dropped unsupported fields {', '.join(bad)}")
                self.fields = [f for f in self.fields if f not in bad]
                continue
            table = parse_csv(out)
            if proc.returncode != 0 and not any("index" in r for r in table.rows):
                # Its words in place of the CSV (exit 18, "Failed to initialize NVML:
                # Driver/library version mismatch" then "NVML library version: 590.48"): read
                # as a header and a row, they added "nvidia-smi row without an index: None"
                # beside the exit line that says it all (a real-node drill).
                table.rows = []
            errors.extend(table.errors if table.rows else table.errors[:1])
            if proc.returncode != 0:
                # Its own words, not the CSV header it printed before them (a real-node audit:
                # "exited 15: index, uuid, …").
                said = [ln.strip() for ln in (proc.stderr or "").splitlines() if ln.strip()] or [
                    ln.strip() for ln in out.splitlines() if ln.strip() and ", " not in ln]
                first = said[:1] or out.strip().splitlines()[:1]
                errors.append(
                    f"{self.binary} exited {proc.returncode}: {first[0][:200] if first else ''}"
                )
            return table.rows, errors
        return [], [*errors, f"{self.binary}: no queryable fields left"]

    def inventory(self) -> GpuInventoryResult:
        rows, errors = self.query()
        gpus = [g for g in (gpu_inventory(r, errors) for r in rows) if g is not None]
        # A set: the exit line quotes the first of them again.
        lost = sorted({normalize_pci(m.group(1).rstrip(":.")) for e in errors
                       if (m := _LOST_RE.search(e)) is not None})
        if lost and all(g.pci_bus_id for g in gpus):
            # nvidia-smi renumbers the GPUs that answer: with gpu3 lost at start the rest read
            # 0-6 and the console named gpu7 missing, "RMA gpu7" (a real-node drill). Indexed
            # by PCI bus order over the lost ones too (nvidia-smi's own order), the lost GPU's
            # index is the one missing.
            order = sorted([*lost, *(normalize_pci(g.pci_bus_id) for g in gpus)])
            gpus = [g.model_copy(update={"index": order.index(normalize_pci(g.pci_bus_id))})
                    for g in gpus]
        if not rows:
            # A query that failed, timed out or was skipped by the hung back-off says nothing of
            # the GPUs: the earlier mapping stands. Cleared, the rows after it fell back to
            # nvidia-smi's own, perhaps renumbered, indices and a lost GPU's slot went to its
            # neighbour (docs/real-nodes.md, "What happens when hardware is missing").
            return GpuInventoryResult(gpus=[], errors=errors, devices=len(lost))
        gpus = self._stable(gpus)
        by_key: dict[str, int] = {}
        for g in gpus:
            if g.uuid:
                by_key[g.uuid] = g.index
            if g.pci_bus_id:
                by_key[normalize_pci(g.pci_bus_id)] = g.index
        # The GPUs not in this inventory keep their keys (and so their indices): one lost since
        # the last answers under its own index again after a reset.
        used = set(by_key.values())
        self._by_key = {**{k: i for k, i in self._by_key.items() if i not in used}, **by_key}
        self._expected = {g.index: g.pci_bus_id for g in gpus}
        driver = next((r["driver_version"] for r in rows if r.get("driver_version")), None)
        cuda: str | None = None
        if rows:
            try:
                proc = run_nvidia_smi([], binary=self.binary, timeout_s=self.timeout_s,
                                      runner=self.runner or self._run)
                cuda = parse_cuda_version(proc.stdout or "")
            except NvsmiError as exc:
                errors.append(str(exc))
        return GpuInventoryResult(gpus=gpus, driver_version=driver, cuda_version=cuda,
                                  errors=errors, devices=len(gpus) + len(lost))

    def read(self) -> tuple[list[GpuSample], list[str]]:
        rows, errors = self.query()
        samples: dict[int, GpuSample] = {}
        for r in rows:
            idx = self._index_of(r)
            said, bus = row_index(r), r.get("pci.bus_id")
            if idx is not None and said is not None and said != idx and bus:
                # nvidia-smi renumbered: its failures name the GPU by the agent's index.
                errors = [e.replace(f"gpu{said} ({bus}) ", f"gpu{idx} ({bus}) ", 1)
                          for e in errors]
            s = gpu_sample(r, errors, index=idx)
            if s is not None:
                samples[s.index] = s
        for idx, bus in self._expected.items():
            if idx not in samples:
                errors.append(f"gpu{idx} ({bus}) missing from {self.binary} output")
                samples[idx] = GpuSample(index=idx, present=False)
        return [samples[i] for i in sorted(samples)], errors

    def close(self) -> None:
        """Kill the nvidia-smi still running, if any: it would outlive the agent. None starts
        after: a sample read while the agent stops started one more, left behind."""
        with self._spawn:
            self._closed = True
            child = self._child
        if child is not None:
            # Killed before any reap here: a wrapper that has exited while its nvidia-smi
            # runs on was reaped by a poll first, and the kill then skipped its group.
            kill_group(child)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(REAP_WAIT_S)

    def _run(self, argv: Sequence[str], timeout_s: float) -> "subprocess.CompletedProcess[str]":
        """nvidia-smi as ``subprocess.run`` would, in a process group of its own, killed whole
        past ``timeout_s``; never while the last one is still there."""
        with self._spawn:
            if self._closed:
                raise NvsmiError(f"{self.binary}: not run, the agent is stopping")
            last = self._child
            if last is not None and (last.poll() is None or group_left(last)):
                # A wrapper killed, its nvidia-smi stuck in the driver: the wrapper is reaped,
                # and one more started beside its nvidia-smi.
                raise NvsmiStillRunning(
                    f"{self.binary}: the one killed {self.clock() - self._killed_at:.0f} s ago "
                    f"(pid {last.pid}) has not gone (stuck in the driver?); no other is started")
            proc = self._child = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._killed_at = self.clock()
            kill_group(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=REAP_WAIT_S)  # reaps it, and closes its pipes
            if proc.poll() is None:
                log.warning("%s (pid %d) killed past its %g s timeout has not gone (stuck in "
                            "the driver?)", self.binary, proc.pid, timeout_s)
            raise
        except BaseException:
            kill_group(proc)
            raise
        with self._spawn:
            if self._child is proc:
                self._child = None  # answered: what its group left (a wrapper's) is not ours
        return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)

    def _stable(self, gpus: list[GpuInventory]) -> list[GpuInventory]:
        """``gpus`` under the indices an earlier inventory gave them (by UUID or bus id).

        A GPU can vanish without nvidia-smi's "Unable to determine the device handle" line:
        nvidia-smi then numbers the rest 0-6, gpu3's index goes to the GPU at gpu4's bus, and
        taken again at a reconnect the inventory renamed every GPU after it and hid the lost
        one (docs/real-nodes.md, "What happens when hardware is missing"). A GPU this reader
        never saw keeps its own index unless an earlier GPU holds it."""
        if not self._by_key:
            return gpus
        known: dict[int, int] = {}  # position in gpus -> earlier index
        for pos, g in enumerate(gpus):
            for key in (g.uuid, normalize_pci(g.pci_bus_id)):
                if key and key in self._by_key and self._by_key[key] not in known.values():
                    known[pos] = self._by_key[key]
                    break
        taken = {*self._by_key.values(), *known.values()}
        out: list[GpuInventory] = []
        for pos, g in enumerate(gpus):
            idx = known.get(pos)
            if idx is None:
                idx = g.index
                if idx in taken:
                    idx = max(taken) + 1
                taken.add(idx)
            out.append(g if idx == g.index else g.model_copy(update={"index": idx}))
        return sorted(out, key=lambda g: g.index)

    def _index_of(self, row: Row) -> int | None:
        for key in (row.get("uuid"), normalize_pci(row.get("pci.bus_id") or "")):
            if key and key in self._by_key:
                return self._by_key[key]
        return None
